/*
 * prof_codemap - turns the raw addresses of a signal sample (prof_sigsample) into frame names.
 *
 * For each address it finds the managed method (ICorProfilerInfo::GetFunctionFromIP2, then the
 * method's native code range via GetNativeCodeStartAddresses + GetCodeInfo4, cached by range) or
 * the native module ("[native libcoreclr.so]", from the maps snapshot), and decodes the method's
 * x86-64 prologue to learn its frame shape:
 *   - frameless methods (the JIT omits rbp frames for methods without loops, with at most one
 *     call and at most three basic blocks) are published to the signal handler, which then
 *     recovers the caller that the frame-pointer chain skips;
 *   - when the sampled pc is in a prologue, an epilogue or a frameless body, or in glibc (built
 *     without frame pointers), the caller's return address is read from the stack words the
 *     handler copied at sp (the "leaf fix"), accepted only if it follows a call instruction.
 * It also folds runs of native frames of one module, merges an OSR method with the Tier0 frame
 * that hosts it (same method, different code), and cuts the thread-start plumbing below the
 * outermost managed frame down to one native frame, as DoStackSnapshot reports it.
 *
 * Caches are bounded (CODEMAP_MAX_CODES ranges) and flushed every 10 minutes so that code freed
 * by an unloaded collectible assembly cannot keep a stale name for long.
 *
 * ctx: the lookups (prof_codemap_name_stack on the clrscope-sampler thread, prof_codemap_returns,
 * prof_codemap_inlinee and prof_codemap_function on clrscope-agg) and prof_codemap_tick (the
 * sampler thread), each
 * thread holding prof_codemap_lock() around every such call and around the signal sampler's
 * drains and the maps upkeep (prof_sigsample, prof_maps), whose snapshots these functions read;
 * they call ICorProfilerInfo SYNC methods only, never from a runtime callback. prof_codemap_init from
 * prof_sampler_start. prof_codemap_dynamic_compiled, prof_codemap_dynamic_unloaded and
 * prof_codemap_inlining on any thread, in a runtime callback, without the lock. prof_frame_*,
 * prof_codemap_il_calls and prof_codemap_read_code on any
 * clrscope thread; prof_codemap_get_stats and prof_codemap_mem_bytes on any thread but a runtime
 * callback (counters read without the lock).
 */
#ifndef PROF_CODEMAP_H
#define PROF_CODEMAP_H

#include <stddef.h>
#include <stdint.h>

#include "prof_sigsample.h"

#define PROF_FRAME_MAX_STEPS 12

/* The x86-64 frame of one method as its prologue builds it. */
struct prof_frame_shape {
    uint8_t known;    /* the prologue decoded as one of the JIT's forms */
    uint8_t framed;   /* pushes rbp and makes it the frame pointer */
    uint8_t nsteps;
    uint8_t pad;
    uint16_t prolog;   /* bytes of prologue (frameless), or up to rbp being set (framed) */
    uint16_t fp_ready; /* framed: offset right after the instruction that sets rbp */
    uint32_t frame;    /* bytes from sp (in the body) to the return address */
    struct {
        uint16_t off;   /* offset of a prologue instruction */
        uint16_t alloc; /* stack bytes pushed or reserved before it runs */
    } step[PROF_FRAME_MAX_STEPS];
};

/* Decodes the prologue at code[0..len). Returns 0 and fills *out (out->known = 0 when the
 * bytes are not a prologue the JIT writes). Pure; exposed for unit tests. */
int prof_frame_decode(const uint8_t *code, size_t len, struct prof_frame_shape *out);
/* Offset from sp of the return address when the pc is `off` bytes into a method of shape `sh`
 * and at[0..len) are the bytes at the pc; -1 when rbp already frames it (or unknown). */
long prof_frame_ra_offset(const struct prof_frame_shape *sh, uint32_t off, const uint8_t *at,
                          size_t len);
/* 1 when the bytes b[0..n) that end at a return address end with a call instruction. */
int prof_frame_is_call_site(const uint8_t *b, size_t n);
/* Copies code bytes at addr without trusting that they are mapped (process_vm_readv): the count
 * read, 0 on failure. Any clrscope thread. */
size_t prof_codemap_read_code(uintptr_t addr, uint8_t *buf, size_t len);

struct prof_codemap_stats {
    uint64_t methods;      /* code ranges known now */
    uint64_t frameless;    /* of which frameless (published to the handler) */
    uint64_t leaf_fixes;   /* leaf frames whose caller came from the stack window */
    uint64_t clr_lookups;  /* GetFunctionFromIP2 calls (cache misses) */
    uint64_t clr_lookup_failures; /* of those, not answered (asked again a second later) */
    uint64_t gap_kept;     /* prof_codemap_returns: candidate frames kept (off-chain records) */
    uint64_t gap_dropped;  /* and dropped */
    uint64_t unload_flushes; /* tables dropped because a module unload started (prof_unload.h) */
    uint64_t osr_returns;  /* return addresses of OSR frames told to the signal walk */
    uint64_t osr_window_fixes; /* callers of OSR frames found in the leaf's copied words */
    uint64_t dynamic_methods;  /* dynamic methods' code ranges known now */
    uint64_t dynamic_compiled; /* notes applied: compiled, collected */
    uint64_t dynamic_unloaded;
    uint64_t dynamic_dropped;  /* ranges not kept (DYN_MAX full) */
    uint64_t dynamic_dropped_notes; /* notes lost (the queue was full) */
    uint64_t dynamic_flushes;  /* tables dropped because new dynamic code reused a range */
    /* signal samples named: all of them, those whose leaf's first frames were unwound by their
     * CFI, those whose walk stopped before the thread's first frame (neither reached it nor hit
     * CLRSCOPE_MAX_FRAMES), and of those the ones with no managed frame at all: CPU the profile
     * cannot give to the app's code */
    uint64_t named, cfi_leaf, link_register, unrooted, unrooted_native;
    uint64_t jit; /* samples labelled with the method the JIT was compiling */
    /* return addresses the walk went on through in no mapping its snapshot knew: named as the
     * JIT's code, or not code at all (the stack cut there) */
    uint64_t new_code_named, new_code_cut;
    /* inlining: (caller, callee) pairs the JIT reported and kept, notes or pairs lost (a full
     * queue or table), frames added for code the JIT inlined, addresses left to their method
     * because more than one inlinee could hold them */
    uint64_t inline_pairs, inline_dropped, inline_frames, inline_ambiguous;
};

int prof_codemap_init(int max_frames);
/* Writes the names of sample `s` leaf first into names[0..cap); returns how many. `managed[i]`
 * tells whether names[i] is a managed frame. Names are valid until the next
 * prof_maps_maintain() (prof_store_add copies them). */
int prof_codemap_name_stack(const struct prof_sigsample *s, const char **names,
                            unsigned char *managed, int cap);
/* Return addresses (leaf first, e.g. prof_sig_walk_self's, at most PROF_CODEMAP_MAX_RETURNS) to
 * FunctionIDs in fns[0..n) (fns may be ra): 0 for a run of frames in native libraries (folded;
 * leading ones dropped), none for runtime-generated code (stubs, dynamic methods:
 * DoStackSnapshot reports none either), an OSR frame merged with its Tier0 frame. Bit i of
 * `found`: ra[i] was read from a frame record off the chain (kept only if it is managed code
 * after a call instruction), of `hops`: reached from such a record (kept with it). src (may be
 * NULL) gets, for each FunctionID, the index of the address it came from. Methods met are
 * learned like the sampler's (frameless ones are published to the walks at the next tick).
 * inl (may be NULL) gets, for each FunctionID, the method the JIT inlined there that the address
 * belongs to (0: none; see prof_codemap_inlining), for the caller to add as a frame above it.
 * Returns how many. */
#define PROF_CODEMAP_MAX_RETURNS 128
int prof_codemap_returns(const uintptr_t *ra, int n, uint64_t found, uint64_t hops,
                         uintptr_t *fns, int *src, uintptr_t *inl);
/* The method a return address returns into (0: not managed code). */
uintptr_t prof_codemap_function(uintptr_t ra);
/* The lock described at the top. */
void prof_codemap_lock(void);
void prof_codemap_unlock(void);
/* Once a tick: publishes newly learned frameless methods to the handler; periodic flush. */
void prof_codemap_tick(int64_t now_ns);
void prof_codemap_get_stats(struct prof_codemap_stats *out);
/* From the runtime's DynamicMethodJITCompilationFinished / DynamicMethodUnloaded callbacks (any
 * app thread; no locks, no allocation): queue where a dynamic method's code is, or that it was
 * collected, for the code map's owner to apply at its next lookup. Samples in that code are then
 * named "[dynamic] <name>" (frame-pointer walks of allocation samples leave such frames out, as
 * the runtime's own walk does). */
void prof_codemap_dynamic_compiled(uintptr_t fn);
void prof_codemap_dynamic_unloaded(uintptr_t fn);
/* From the runtime's JITInlining callback (any app thread; no locks, no allocation): the JIT may
 * inline `callee` into `caller`. The pairs let a sample's address in the caller's code be given
 * to the inlinee it belongs to (its own frame, right above the caller's): the IL-to-native map
 * gives the address's IL offset in the caller (inlined code carries its call site's), the IL
 * there the calls it makes; the one inlinee those calls name (or, at a virtual or delegate call
 * with no such match, the one inlinee no call of the caller names: the target guarded
 * devirtualization inlined) is the frame. An address that more than one inlinee could hold is
 * left to the caller. A return address whose frame above is native code is given only to a
 * devirtualized inlinee (the call may be the runtime's helper's, made by the caller itself). */
void prof_codemap_inlining(uintptr_t caller, uintptr_t callee);
/* The method the JIT inlined into `fn` that the return address `ra` (in fn's code) returns into,
 * or 0; `above` is the frame fn called (0: native code). For the runtime's own walks. */
uintptr_t prof_codemap_inlinee(uintptr_t fn, uintptr_t ra, uintptr_t above);
/* The call instructions (call, callvirt, calli, newobj) of an IL body il[0..n): their offsets and
 * operand tokens into offsets/tokens[0..cap), how many, or -1 when the IL does not decode. Pure;
 * exposed for unit tests. */
int prof_codemap_il_calls(const uint8_t *il, uint32_t n, uint32_t *offsets, uint32_t *tokens,
                          int cap);
/* Bytes the code map holds (method ranges, their order, the ip cache, walk scratch). */
size_t prof_codemap_mem_bytes(void);

struct prof_kind;
/* The aggregator's row: the code map's memory. */
extern const struct prof_kind prof_codemap_kind;

#endif
