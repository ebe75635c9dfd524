/*
 * prof_live_int.h - what the files of prof_live share, and no other module uses: the slot table,
 * the type rows and the module's state (g_live), whose design prof_live.c describes.
 *
 *   prof_live.c        the slot table and the runtime's callbacks that write it: the allocation
 *                      callback (app threads) and the GC callbacks (runtime threads)
 *   prof_live_types.c  clrscope-agg: each slot's type, thread and stack, the type rows, their
 *                      history and the leak verdicts (g_live.agg.lock held)
 *   prof_live_read.c   the readers (API threads): the table, the views, pprof samples
 *
 * ctx: the functions below are clrscope-agg's and the readers', with g_live.agg.lock held
 * (live_types_start: Initialize, before the module is enabled).
 */
#ifndef PROF_LIVE_INT_H
#define PROF_LIVE_INT_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "clr_abi.h"
#include "prof_live.h"

enum { S_FREE = 0, S_BUSY = 1, S_LIVE = 2 };
enum { END_NONE = 0, END_COLLECTED = 1, END_EVICTED = 2 };

#define GEN_UOH 3
#define HIST_N 90          /* 15 minutes of 10-second points */
#define MAX_TYPES 512      /* distinct live types with history; the rest share "[other types]" */
#define TYPE_HASH 1024u

struct live_slot {
    uint32_t state;
    uint32_t seq;
    uint32_t gen;          /* estimated generation: 0, 1, 2, or GEN_UOH */
    uint32_t shift;        /* inclusion probability 2^-shift */
    uint32_t gcs;          /* GCs that condemned its generation and found it alive */
    uint32_t ended_seq, ended_reason;
    ObjectHandleID handle;
    int64_t t_alloc_ms;
    int64_t t_seen_ms;     /* end of the last such GC (0 = none yet) */
    uint64_t size;
    double count_w, bytes_w;
};

struct live_meta {
    uint32_t seq;          /* the slot sequence this describes; 0 = none */
    uint32_t tid;
    uint32_t type;         /* index into g_live.agg.types */
    uint32_t nframes;
    const char **frames;   /* root first */
    double factor;         /* its allocation second's planned / on, once settled (0: not yet;
                            * prof_live_set_factor) */
};

struct hist_point {
    double t;
    double count;
    float p50, maxage;
    uint32_t tracked;
    uint64_t births, deaths;
};

struct live_type {
    const char *name;
    uint64_t births, deaths;   /* tracked objects attached / found collected (cumulative) */
    struct hist_point hist[HIST_N];
    int head, n;               /* ring: next write position, points held */
    int leak;
    char reason[160];
};

/* The module's state. What Initialize sets is read-only after it; the rest is in two parts that
 * different threads write (see OWNERSHIP in prof_live.c):
 *   tab  the slot table: app threads claim slots in the allocation callback, the GC callbacks
 *        check and free them; every field is read and written with atomics, any thread;
 *   agg  what clrscope-agg derives from the records (each slot's type, thread and stack, the
 *        type rows and their history), under agg.lock, which the readers (API threads) take. */
struct live_state {
    /* prof_live_init (Initialize), then read-only */
    int enabled;
    const char *why_off;
    uint32_t cap;
    double leak_window_s, leak_min_s;
    struct {
        struct live_slot *slots;
        uint64_t *live_bits;   /* atomic words: bit i set while slot i is LIVE (the GC scan's
                                * index) */
        uint32_t shift;        /* atomic: admission probability 2^-shift */
        uint64_t rng;          /* atomic */
        /* The deepest generation each GC in progress condemned. GCs run one at a time except a
         * background GC, inside which ephemeral GCs start and finish: [0] is the outer GC's, [1]
         * the one inside it, `in_gc` how many have started and not finished (0..2). With a
         * single variable a background GC's end would look like its last nested GC's
         * (gen0/gen1), and it would never prove a generation 2 object alive. */
        int condemned[2];      /* atomic */
        int in_gc;             /* atomic */
        int gc_busy;           /* atomic flag: a GC-finished callback is checking the table */
        uint64_t untracked, overflow, handle_failures, gcs, evicted, full_events; /* atomic */
        uint64_t bumped_at;    /* atomic: GC epoch of the last overflow-driven halving */
        uint64_t overflow_at_gc; /* the GC-finished callback only (under gc_busy) */
        uint32_t live_now;     /* atomic: live slots at the last GC */
    } tab;
    struct {
        pthread_mutex_t lock;  /* meta, types and everything below */
        struct live_meta *meta;
        struct live_type *types;
        uint32_t ntypes;
        uint32_t type_hash[TYPE_HASH]; /* index + 1 */
        uint64_t types_recycled;       /* rows given back by recycle_types */
        uint64_t deaths;
        double next_hist;
        int types_full_logged;
    } agg;
};
extern struct live_state g_live;

#define LD(p) __atomic_load_n((p), __ATOMIC_RELAXED)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELAXED)

static inline double ld_d(const double *p)
{
    double v;
    __atomic_load(p, &v, __ATOMIC_RELAXED);
    return v;
}

/* One tracked object, copied out under g_live.agg.lock. */
struct live_obj {
    uint32_t slot, type;
    double age, seen, cw, bw;
    uint32_t gcs;
};

void live_types_start(void);
/* Whether slot i's meta describes the object the slot holds now. */
int live_meta_current(uint32_t i);
/* Collects the current live objects (optionally of one type name) into out, which has room
 * for g_live.cap. */
size_t live_collect(struct live_obj *out, double now, const char *filter);
/* What slot i's weights are multiplied by: 2^shift, times the factor of its allocation second
 * (kept in its meta once settled). */
double live_mult(uint32_t i);
/* qsort order: by type, then by age. */
int live_cmp_obj(const void *a, const void *b);
/* Aggregates one type's run objs[0..n) (sorted by age) into t; scratch holds 3n doubles. */
void live_summarize(const struct live_obj *objs, size_t n, double *scratch,
                    struct prof_live_type *t);

#endif
