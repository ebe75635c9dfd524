/*
 * prof_intern - an append-only table of interned, immutable, NUL-terminated strings.
 * Ids are dense (0 = ""); pointers returned stay valid until prof_intern_free. Capped by bytes;
 * past the cap prof_intern returns the id of "[overflow]" and counts the drop.
 *
 * ctx: not thread-safe: each table's owner serialises access (prof_store and prof_symbols under
 * their locks, prof_typename on clrscope-agg alone). prof_intern allocates only to add a string.
 */
#ifndef PROF_INTERN_H
#define PROF_INTERN_H

#include <stddef.h>
#include <stdint.h>

struct prof_intern {
    char **strs;        /* id -> string */
    uint32_t n, cap;    /* ids used / allocated */
    uint32_t *slots;    /* open addressing: id+1, 0 = empty */
    uint32_t nslots;
    size_t bytes, max_bytes;
    uint64_t dropped;
    uint32_t overflow_id;
};

int prof_intern_init(struct prof_intern *t, size_t max_bytes);
void prof_intern_free(struct prof_intern *t);
uint32_t prof_intern(struct prof_intern *t, const char *s);
/* What string `id` costs the table (its copy, its pointer, its hash slots), as counted in bytes. */
size_t prof_intern_cost(const struct prof_intern *t, uint32_t id);
/* Returns UINT32_MAX when s was never interned. */
uint32_t prof_intern_find(const struct prof_intern *t, const char *s);
static inline const char *prof_intern_str(const struct prof_intern *t, uint32_t id)
{
    return id < t->n ? t->strs[id] : "";
}

#endif
