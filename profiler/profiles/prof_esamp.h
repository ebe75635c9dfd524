/*
 * prof_esamp - the lock-free sampler shared by the exception and lock-contention profiles.
 *
 * Runs inside runtime event callbacks on app threads: atomics only, no allocation, no locks.
 * Every event is counted exactly in its group slot (an exception type, a lock); only some events
 * are sampled (stack walk + hand-off to the aggregator), and the aggregator upscales each sample
 * by what its group counted since that group's previous sample, so totals stay exact.
 *
 * The decision per event, per one-second period:
 *   1. the first event of each group in a period is always sampled (rare groups are never lost);
 *   2. past the global budget `rate` samples in the period, nothing else is sampled;
 *   3. otherwise the event is sampled with probability min(1, share * w / prev), where w is the
 *      event's weight (1 per exception, wait ns per contention), prev the group's total weight
 *      in its previous active period, and share = rate / (groups active last period): each
 *      group gets about `share` samples a second, spread over the period, and heavier events
 *      (long waits) are likelier to be kept.
 * Groups live in a fixed open-addressing table keyed by a non-zero 64-bit hash; slots are never
 * released. When the table is full, events go to the extra slot `nslots` (counted).
 */
#ifndef PROF_ESAMP_H
#define PROF_ESAMP_H

#include <stdint.h>

struct esamp_slot {
    uint64_t key;       /* 0 = free; claimed once by CAS */
    uint64_t count;     /* events ever */
    uint64_t wsum;      /* weight ever (exceptions: = count; locks: wait ns) */
    int64_t period;     /* the last period that had an event */
    uint64_t wstart;    /* wsum when `period` began */
    uint64_t prev;      /* weight of the previous active period */
    uint32_t retry;     /* the period's first sample was lost: take the next event */
};

struct esamp_global {
    int64_t period;
    uint32_t used;                   /* samples taken this period */
    uint32_t active_cur, active_prev; /* groups seen this / last period */
    uint64_t rng;
};

#define ESAMP_NO 0
#define ESAMP_YES 1
#define ESAMP_FIRST 2

static inline uint64_t esamp_mix(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* The slot of `key` (non-zero) in slots[0..nslots) (nslots a power of two), claiming a free one;
 * &slots[nslots] when the table is full. */
static inline struct esamp_slot *esamp_slot_for(struct esamp_slot *slots, uint32_t nslots,
                                                uint64_t key, int *overflow)
{
    uint32_t mask = nslots - 1;
    uint32_t i = (uint32_t)esamp_mix(key) & mask;
    for (uint32_t probe = 0; probe < nslots; probe++, i = (i + 1) & mask) {
        uint64_t k = __atomic_load_n(&slots[i].key, __ATOMIC_ACQUIRE);
        if (k == key)
            return &slots[i];
        if (k == 0) {
            uint64_t zero = 0;
            if (__atomic_compare_exchange_n(&slots[i].key, &zero, key, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_ACQUIRE))
                return &slots[i];
            if (zero == key)
                return &slots[i];
        }
    }
    *overflow = 1;
    return &slots[nslots];
}

/* Counts one event of weight w in slot s; returns ESAMP_NO, ESAMP_YES or ESAMP_FIRST and the
 * slot's totals (after this event) in *count and *wsum. `now_s` is a monotonic second (> 0). */
static inline int esamp_decide(struct esamp_global *g, struct esamp_slot *s, uint64_t w,
                               uint32_t rate, int64_t now_s, uint64_t *count, uint64_t *wsum)
{
    *count = __atomic_add_fetch(&s->count, 1, __ATOMIC_RELAXED);
    *wsum = __atomic_add_fetch(&s->wsum, w, __ATOMIC_RELAXED);

    int64_t gp = __atomic_load_n(&g->period, __ATOMIC_RELAXED);
    if (gp != now_s &&
        __atomic_compare_exchange_n(&g->period, &gp, now_s, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
        __atomic_store_n(&g->used, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&g->active_prev, __atomic_exchange_n(&g->active_cur, 0, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
    }

    int64_t sp = __atomic_load_n(&s->period, __ATOMIC_RELAXED);
    if (sp != now_s &&
        __atomic_compare_exchange_n(&s->period, &sp, now_s, 0, __ATOMIC_RELAXED,
                                    __ATOMIC_RELAXED)) {
        uint64_t before = *wsum - w;
        uint64_t start = __atomic_load_n(&s->wstart, __ATOMIC_RELAXED);
        __atomic_store_n(&s->prev, before > start ? before - start : 0, __ATOMIC_RELAXED);
        __atomic_store_n(&s->wstart, before, __ATOMIC_RELAXED);
        __atomic_add_fetch(&g->active_cur, 1, __ATOMIC_RELAXED);
        __atomic_add_fetch(&g->used, 1, __ATOMIC_RELAXED);
        __atomic_store_n(&s->retry, 0, __ATOMIC_RELAXED);
        return ESAMP_FIRST;
    }
    uint32_t one = 1;
    if (__atomic_load_n(&s->retry, __ATOMIC_RELAXED) &&
        __atomic_compare_exchange_n(&s->retry, &one, 0, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED)) {
        __atomic_add_fetch(&g->used, 1, __ATOMIC_RELAXED);
        return ESAMP_FIRST;
    }
    if (__atomic_load_n(&g->used, __ATOMIC_RELAXED) >= rate)
        return ESAMP_NO;
    uint32_t groups = __atomic_load_n(&g->active_prev, __ATOMIC_RELAXED);
    double share = (double)rate / (groups ? groups : 1);
    uint64_t prev = __atomic_load_n(&s->prev, __ATOMIC_RELAXED);
    if (prev) {
        double q = share * (double)(w ? w : 1) / (double)prev;
        if (q < 1) {
            uint64_t r = esamp_mix(__atomic_add_fetch(&g->rng, 0x9E3779B97F4A7C15ull,
                                                      __ATOMIC_RELAXED));
            if ((double)(r >> 11) * 0x1.0p-53 >= q)
                return ESAMP_NO;
        }
    }
    __atomic_add_fetch(&g->used, 1, __ATOMIC_RELAXED);
    return ESAMP_YES;
}

/* Empties slot s, when clrscope-agg resets a full table: an event counted in it meanwhile may
 * stay in the count of the slot's next key (its total is never lost). */
static inline void esamp_slot_clear(struct esamp_slot *s)
{
    __atomic_store_n(&s->key, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->wsum, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->period, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->wstart, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->prev, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&s->retry, 0, __ATOMIC_RELAXED);
}

/* A full table is emptied by clrscope-agg at its tick when groups overflowed it since the last
 * time, and at most once a minute (the groups seen now get slots of their own again). */
#define ESAMP_RESET_GAP_NS 60000000000LL
struct esamp_reset {
    uint64_t overflow_seen; /* the overflow count at the last reset (or start) */
    int64_t at_ns;          /* CLOCK_MONOTONIC of the last reset (0 = none yet) */
    uint64_t resets;
};

/* Whether to empty the table now, given its overflow count; if so, counts the reset. */
static inline int esamp_reset_due(struct esamp_reset *r, uint64_t overflow, int64_t now_ns)
{
    if (overflow == r->overflow_seen || (r->at_ns && now_ns - r->at_ns < ESAMP_RESET_GAP_NS))
        return 0;
    r->overflow_seen = overflow;
    r->at_ns = now_ns;
    r->resets++;
    return 1;
}

/* When a full table is emptied, the events of a slot whose samples were all still on their way
 * to clrscope-agg (none consumed yet, so nothing to charge them to) are kept here for the first
 * of those samples, which arrives stale: otherwise they would be lost to the totals. (The events
 * are the slot's, one type or lock; only their split between the samples' stacks is lost.)
 * clrscope-agg only. */
struct esamp_orphan {
    uint64_t count, wsum; /* not attributed when the table was emptied */
};

/* At the reset, before s is cleared: `sampled` says whether the slot has a sample to charge its
 * events to (then the tick just did); att_*: what was attributed of s so far. */
static inline void esamp_orphan_keep(struct esamp_orphan *o, const struct esamp_slot *s,
                                     int sampled, uint64_t att_count, uint64_t att_wsum)
{
    uint64_t c = __atomic_load_n(&s->count, __ATOMIC_RELAXED);
    uint64_t w = __atomic_load_n(&s->wsum, __ATOMIC_RELAXED);
    o->count = !sampled && c > att_count ? c - att_count : 0;
    o->wsum = !sampled && w > att_wsum ? w - att_wsum : 0;
}

/* A stale sample of the slot: the events kept for it (then none are left). */
static inline void esamp_orphan_take(struct esamp_orphan *o, uint64_t *count, uint64_t *wsum)
{
    *count = o->count;
    *wsum = o->wsum;
    o->count = o->wsum = 0;
}

/* The sample of an ESAMP_FIRST decision could not be handed off: sample the group's next event. */
static inline void esamp_retry(struct esamp_slot *s)
{
    __atomic_store_n(&s->retry, 1, __ATOMIC_RELAXED);
}

#endif
