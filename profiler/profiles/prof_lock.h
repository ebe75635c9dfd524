/* prof_lock - lock contention: wait time and count by stack and lock, upscaled by duration. */
#ifndef PROF_LOCK_H
#define PROF_LOCK_H

#include <stdint.h>

#include "clr_abi.h"
#include "prof_ring.h"
#include "prof_wtab.h"

#define PROF_LOCK_NHIST 16

/* Upper bounds (ms) of the wait-duration histogram buckets; the last bucket is unbounded. */
extern const double prof_lock_hist_le_ms[PROF_LOCK_NHIST - 1];

struct prof_lock_window {
    uint64_t count, wait_ns;         /* every contention that ended in the window (exact) */
    uint64_t hist[PROF_LOCK_NHIST];  /* of those, by wait duration */
};

struct prof_lock_stats {
    uint64_t events;        /* contentions since the session started */
    uint64_t sampled;       /* samples handed to the aggregator */
    uint64_t dropped;       /* samples lost (event ring full); still upscaled into the others */
    uint64_t overflow;      /* contentions on locks past the lock table (counted together) */
    uint64_t unmatched;     /* stops without their start (no lock id / owner known) */
    uint64_t slots_full;    /* starts not remembered (too many waits at once on nearby slots) */
    uint64_t locks;         /* distinct locks in the table */
    uint64_t table_resets;  /* times the full table was emptied (locks past it: at most 1/min) */
    uint64_t table_dropped; /* (lock, owner) table entries folded into "[other]" */
};

/* EventPipe callback (app thread): ContentionStart (81) and ContentionStop (91). */
void prof_lock_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len);
/* clrscope-agg: one sample (REC_LOCK: a = wait ns, b = lock id, c = owner thread id). */
void prof_lock_consume(const struct prof_rec *rec, const char **names, int n);
/* The per-second series, and the tails of unsampled waits attributed to their lock's last
 * sample: 1 Hz on clrscope-agg only. */
void prof_lock_tick(double now_unix);

/* The contentions of one lock counted since its last sample: what the next prof_lock_tick adds
 * to that sample's table row (lock, owner thread name, owner tid; method `site`) and to its
 * stack in the store (PK_LOCK, label = lock). */
struct prof_lock_unattributed {
    const char *lock, *owner_name, *site; /* as the table keeps them (valid UTF-8) */
    uint64_t owner;
    const char **frames;                  /* root first, as the store has them */
    int nframes;
    int64_t count, wait_ns;
};
/* The table's sums over the last `seconds` (lock `filter` only, when not NULL), as
 * prof_wtab_sum gives them, and the contentions no sample carries yet, read together under the
 * module's lock: the two add up to what the table holds once the next tick has run, the figures
 * as of now. Changes nothing. Each array is one malloc'd block with its strings (free() each);
 * 0, or -1 when out of memory (both NULL). Any clrscope thread (API handlers). */
int prof_lock_read(double seconds, const char *filter, struct prof_wtab_row **rows,
                   size_t *nrows, struct prof_lock_unattributed **pending, size_t *npending);
/* Totals and histogram of the last `seconds`, the contentions since the last tick included
 * (any thread; changes nothing). */
void prof_lock_window(double seconds, struct prof_lock_window *out);
void prof_lock_get_stats(struct prof_lock_stats *out);
/* The contention OS thread `tid` is in now (its ContentionStart seen, its ContentionStop not
 * yet): the lock's id, the OS thread id of its owner (0 unknown: .NET 8's first events name none)
 * and since when (CLOCK_MONOTONIC ns). Returns 1 when known; 0 when the thread waits for no lock
 * clrscope knows of (the lock profile off, or the thread's slot taken by another thread's wait).
 * Any thread; a racing ContentionStop makes it 0. */
int prof_lock_waiting(uint32_t tid, uint64_t *lock_id, uint64_t *owner, int64_t *since_ns);
/* A managed thread ended (the ThreadDestroyed callback): a wait it left without its
 * ContentionStop (a timed-out TryEnter, an interrupted Enter) is forgotten with it. */
void prof_lock_thread_gone(uint32_t tid);
/* (lock name, owner thread name, owner tid) -> v0 est count, v1 est wait ns, v2 samples;
 * extra = the waiting method. NULL when out of memory. */
struct prof_wtab *prof_lock_table(void);

struct prof_kind;
/* The aggregator's row: consumes REC_LOCK records, ticks the totals and estimates. */
extern const struct prof_kind prof_lock_kind;

#endif
