/*
 * prof_wtab - a small windowed table of per-second sums keyed by (string a, string b, number n),
 * for event tables the call-path store cannot key: exceptions by type and message, lock waits by
 * lock and owner thread.
 *
 * ctx: prof_wtab_new/free by the table's owner (Initialize); prof_wtab_add on the one writer
 * (clrscope-agg); the rest on any number of readers (API handlers). A mutex inside guards it.
 *
 * Bounded: at most `max_keys` keys and `max_per_s` entries per second. When the keys run out,
 * those that aged out of the history are dropped (at most every 10 s); what still does not fit
 * is summed into key 0, ("[other]", "", 0), and counted in `dropped`. Key strings are copied.
 */
#ifndef PROF_WTAB_H
#define PROF_WTAB_H

#include <stddef.h>
#include <stdint.h>

#define WTAB_NV 3

struct prof_wtab;

struct prof_wtab_row {
    const char *a, *b, *extra; /* extra: the first non-NULL `extra` given for the key, or "" */
    uint64_t n;
    int64_t v[WTAB_NV];
};

struct prof_wtab *prof_wtab_new(int history_s, uint32_t max_keys, uint32_t max_per_s);
void prof_wtab_free(struct prof_wtab *t);
/* Adds v[] to the key's sum for the unix second of `t_unix`. a, b: NUL-terminated (NULL = "");
 * extra is remembered on the key's first use. */
void prof_wtab_add(struct prof_wtab *t, double t_unix, const char *a, const char *b, uint64_t n,
                   const char *extra, const int64_t v[WTAB_NV]);
/* Sums the last `seconds` per key (only keys whose a equals `filter_a` when non-NULL) into a
 * malloc'd array that also holds copies of the strings (one free()). Returns 0, or -1 when out
 * of memory. */
int prof_wtab_sum(struct prof_wtab *t, double seconds, const char *filter_a,
                  struct prof_wtab_row **rows, size_t *nrows);
/* The span (unix seconds) that prof_wtab_sum's last `seconds` cover now: the window, starting no
 * earlier than the table was made, up to now. */
void prof_wtab_span(struct prof_wtab *t, double seconds, double *t_from, double *t_to);
/* Keys in use, entries refused (folded into the overflow key). */
void prof_wtab_stats(struct prof_wtab *t, uint64_t *keys, uint64_t *dropped);
/* Bytes the table holds (keys and their text, index, per-second buckets); 0 for NULL. */
size_t prof_wtab_mem_bytes(struct prof_wtab *t);

#endif
