/*
 * prof_typename - the names of the types that allocation samples carry, in clrscope's form
 * ("System.Collections.Generic.Dictionary<K,V>.Entry[]"), cached per TypeID for prof_alloc's
 * tables and prof_live's type rows, which name a type the same way and by the same pointer.
 *
 * The runtime's event names a type by its runtime name ("List`1[System.Int32]"), a nested type
 * by its own name only: a name without a namespace is asked of prof_symbols (the TypeID is the
 * ClassID, alive when the sample was taken). Each name is kept once (4 MiB at most) for the
 * process's life, so callers keep the pointers. The cache forgets its TypeIDs when a module
 * unload starts (one may then come back as another type) and when it is 3/4 full.
 *
 * ctx: clrscope-agg only (the consumers of allocation records), inside the prof_unload_enter of
 * the record whose TypeID it is given.
 */
#ifndef PROF_TYPENAME_H
#define PROF_TYPENAME_H

#include <stdint.h>

/* The name of type `type_id`, whose event called it `raw_name` (UTF-8; NULL or "" when it had
 * none). A stable pointer; "[unknown type]" when out of memory. */
const char *prof_typename_of(uint64_t type_id, const char *raw_name);

#endif
