/*
 * prof_store - every windowed profile (cpu, wall, alloc, exceptions, lock) in bounded memory.
 *
 * Stacks live in one call-path trie (node = parent + frame name); samples are summed per second
 * into a ring of CLRSCOPE_HISTORY_S buckets keyed by (kind, leaf node, thread, label). One mutex
 * guards it all.
 *
 * ctx: prof_store_init at Initialize, prof_store_free by tests and fuzz targets; prof_store_add on clrscope's
 * sampler and aggregator threads (never a runtime callback, never while the runtime is
 * suspended); the views, stats and totals on any thread (API handlers), which copy out (a view
 * into scratch memory of its own, struct prof_view.mem).
 *
 * Caps: CLRSCOPE_MAX_STACK_NODES trie nodes, CLRSCOPE_MAX_NAME_BYTES of names (16 MiB), 32768
 * entries per bucket; what does not fit is counted in prof_store_stats. A trie 7/8 full drops the
 * paths no bucket within the history uses (every 10 s at most, less often while that frees
 * little); a stack that finds no room is cut where the trie ends. Names 7/8 full are copied, those
 * still in use only, into a new generation (paced alike); a view keeps the generation its names
 * point into until prof_view_free, so the old one lives until its last view is freed.
 */
#ifndef PROF_STORE_H
#define PROF_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "prof_scratch.h"

enum prof_store_kind { PK_CPU, PK_WALL, PK_ALLOC, PK_EXC, PK_LOCK, PK_ALLOC_TYPE, PK_COUNT };

/* Value slots per kind:
 *   PK_CPU   v0 samples, v1 cpu ns
 *   PK_WALL  v0 samples, v1 wall ns
 *   PK_ALLOC v0 estimated count, v1 estimated bytes, v2 samples  (label = type name)
 *   PK_EXC   v0 estimated count, v1 samples                      (label = exception type)
 *   PK_LOCK  v0 estimated count, v1 estimated wait ns, v2 samples
 *   PK_ALLOC_TYPE  as PK_ALLOC, but every allocation sample, walked or not, at its own weight
 *            and without a stack (node 0, no thread): the table by type. PK_ALLOC holds only the
 *            samples whose stack was walked, upscaled by the stack budget (prof_alloc.c) */
#define PROF_NVALUES 3
/* Each value added is clamped to 0..PROF_VALUE_MAX (2^44: 4.9 hours in ns, 17.6 TB in bytes, far
 * above any one sample), and a row's sums saturate at INT64_MAX: garbage in an event payload can
 * distort a profile but never overflow it. */
#define PROF_VALUE_MAX ((int64_t)1 << 44)

struct prof_row {
    uint32_t node;      /* index into prof_view.parent/name */
    uint32_t tid;       /* OS thread id, 0 = none */
    const char *label;  /* "" when none */
    int64_t v[PROF_NVALUES];
};

struct names_gen;

struct prof_view {
    int kind;
    double t_from, t_to;   /* unix seconds covered */
    size_t nnodes;         /* node 0 is the root ("all") */
    uint32_t *parent;      /* parent[i] < i for i > 0 */
    const char **name;     /* frame names; valid until prof_view_free */
    size_t nrows;
    struct prof_row *rows; /* their labels too */
    struct names_gen *names; /* the store's names the pointers above point into (NULL: none) */
    struct prof_scratch mem; /* parent, name and rows (a view is made for a moment: its memory
                              * goes back to the system at prof_view_free) */
};

struct prof_store_stats {
    uint64_t nodes, node_cap, strings, string_bytes, entries;
    uint64_t dropped_nodes, dropped_entries, dropped_strings, samples_added;
    uint64_t compactions, compacted_nodes; /* trie compactions, nodes they freed */
    uint64_t string_cap;                   /* bytes (CLRSCOPE_MAX_NAME_BYTES) */
    uint64_t name_compactions, freed_names; /* names compactions, names they freed */
    uint64_t nodes_peak, string_bytes_peak; /* the most either held at any time */
};

int prof_store_init(int history_s, int max_nodes, size_t max_name_bytes);
void prof_store_free(void);
/* frames[0] is the outermost (root-side) frame. `label` may be NULL. */
void prof_store_add(int kind, double t_unix, const char *const *frames, int nframes, uint32_t tid,
                    const char *label, const int64_t v[PROF_NVALUES]);
/* Copies the last `seconds` of `kind` (only rows whose label equals `filter` when non-NULL). */
int prof_store_view(int kind, double seconds, const char *filter, struct prof_view *out);
/* Same over whole unix seconds from_s..to_s (inclusive), clipped to the history; t_from/t_to
 * give the span covered. Successive calls with adjacent ranges never count a sample twice. */
int prof_store_view_range(int kind, int64_t from_s, int64_t to_s, const char *filter,
                          struct prof_view *out);
void prof_view_free(struct prof_view *v);
/* A kind whose samples' weight is known only once their second has ended (the allocation
 * events, which the overhead governor switches: prof_alloc_second_factor): views and totals
 * multiply the values of each second's rows picked by `mask` (bit k: v[k]) by fn(second).
 * Called once at Initialize; fn runs under the store's lock and must take none. */
typedef double (*prof_store_scale_fn)(int64_t sec);
void prof_store_set_scale(int kind, unsigned mask, prof_store_scale_fn fn);
void prof_store_get_stats(struct prof_store_stats *s);
/* Bytes the store holds (call-path nodes, their index, per-second buckets, interned names). */
size_t prof_store_mem_bytes(void);
/* Sums v[] of `kind` over the window without building a view (cheap totals for status/metrics). */
void prof_store_totals(int kind, double seconds, int64_t out[PROF_NVALUES]);

struct prof_kind;
/* The aggregator's row: the store's memory. */
extern const struct prof_kind prof_store_kind;

#endif
