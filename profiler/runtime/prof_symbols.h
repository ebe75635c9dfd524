/*
 * prof_symbols - names for FunctionIDs, ClassIDs and native IPs, cached for the process lifetime.
 *
 * Frame names read as C# developers write them: `Namespace.Type.Method`, nested types joined with
 * '.', generic arguments in angle brackets, compiler-generated lambdas, local functions and async
 * or iterator state machines folded back into the method that wrote them. Native frames are shown
 * by module: `[native libcoreclr.so]`.
 *
 * Calls ICorProfilerInfo SYNC methods, so only clrscope's own threads (which never run managed
 * code) may call in; a mutex serialises callers. Returned strings stay valid until exit.
 *
 * ctx: prof_symbols_init at Initialize; the ID and IP lookups, prof_symbols_field_offset,
 * prof_symbols_corelib_class, prof_symbols_forget_dynamic and prof_symbols_count on clrscope's
 * own threads only (never a runtime callback); the prof_symbols_clean_* functions, pure, on any
 * thread.
 *
 * Code can be unloaded (prof_unload.h): the runtime is asked only while the caller is inside a
 * successful prof_unload_enter, else a name the caches lack comes back as "[… not named: a
 * module was unloaded]". Names of collectible code are cached apart and forgotten at each unload
 * (their IDs may come back as other types'); collectible modules' metadata is never kept.
 */
#ifndef PROF_SYMBOLS_H
#define PROF_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "clr_abi.h"

void prof_symbols_init(void);
const char *prof_symbols_function(FunctionID fn);
/* A dynamic method was collected: its FunctionID may name another one next (the names of
 * collectible and dynamic methods are asked again). */
void prof_symbols_forget_dynamic(void);
const char *prof_symbols_native(uintptr_t ip);
/* "[JIT] compiling <the method's name>" for a FunctionID the JIT was compiling, or for 1 (a
 * dynamic method, unnamed: it may be collected by the time its sample is named) "[JIT] compiling
 * a dynamic method". The same thread rules as prof_symbols_function. */
const char *prof_symbols_jit(uintptr_t fn);
/* The metadata name of the method that `tok` (a call instruction's operand) names in module
 * `mod`: a MethodDef, a MemberRef, or a MethodSpec over either ("Enter", "<Reserve>b__1_0").
 * 0 with out filled, -1 when the runtime does not say. The same thread rules as
 * prof_symbols_function. */
int prof_symbols_method_token_name(ModuleID mod, mdToken tok, char *out, size_t cap);
const char *prof_symbols_class(ClassID cls);
/* The file of the module that defines the class (of an array: of its element type), as the
 * runtime names it, or NULL (dynamic module, unknown class). */
const char *prof_symbols_class_module(ClassID cls);
/* Turns a runtime type name ("List`1[System.Int32]", "Ns.Outer+Inner") into clrscope's form
 * ("List<System.Int32>", "Ns.Outer.Inner") for frame names: compiler-generated nested types are
 * dropped or folded into the method they implement. Exposed for the event parsers and tests. */
void prof_symbols_clean_type(const char *in, char *out, size_t cap);
/* The same for the types of objects (allocations, live objects, heap snapshots): compiler-
 * generated nested types are kept as the runtime names them ("Ns.Widget.<>c__DisplayClass1_0"). */
void prof_symbols_clean_typename(const char *in, char *out, size_t cap);
/* Joins a metadata type name and method name, folding compiler-generated names. */
void prof_symbols_clean_method(const char *type, const char *method, char *out, size_t cap);
/* The same with type arguments as C# writes them: `targs` are the arguments of the type's whole
 * nested chain (outermost first), `margs` the method's own: "Ns.Cruncher`1+Nested" and "Spin"
 * with <T> and <TKey> read "Ns.Cruncher<T>.Nested.Spin<TKey>". */
void prof_symbols_clean_frame(const char *type, const char *const *targs, unsigned ntargs,
                              const char *method, const char *const *margs, unsigned nmargs,
                              char *out, size_t cap);
/* Offset from an object's start (its ObjectID) of the instance string field `field` that the
 * class named `declaring` (metadata name, "System.Exception") declares, on cls or one of its base
 * classes; 0 when there is no such class or string field or the runtime does not say. */
ULONG prof_symbols_field_offset(ClassID cls, const char *declaring, const char *field);
/* The ClassID of one of the classes the runtime loads from System.Private.CoreLib while it
 * starts ("System.Exception"), or 0 until it has. Only for those: asked for a class not loaded
 * yet, the runtime would load it on the calling thread, which it does not support on clrscope's
 * threads. */
ClassID prof_symbols_corelib_class(const char *name);
size_t prof_symbols_count(void);

#endif
