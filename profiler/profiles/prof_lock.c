/*
 * prof_lock.c - see prof_lock.h.
 *
 * Event half (app threads, inside the runtime's contention events; atomics only):
 *   ContentionStart (81) v2 carries LockID, AssociatedObjectID and LockOwnerThreadID (.NET 8+);
 *   they are parked in a per-thread slot (direct-mapped by OS tid) until the same thread's
 *   ContentionStop (91), whose v1 carries DurationNs (v0: measured from the start here).
 *   At the stop every contention is counted exactly (count, wait ns, histogram, and per lock in
 *   a prof_esamp slot); when the sampler says so the thread's stack is walked (it is still inside
 *   Monitor.Enter) and handed to clrscope-agg through the ring (prof_agg_ring).
 * Aggregator half (clrscope-agg): each sample becomes a PK_LOCK store row (label = lock name)
 *   and a (lock, owner thread) table row, weighted by the count and wait its lock accumulated
 *   since that lock's previous sample (upscaling by duration, as Datadog's profiler does, but with
 *   exact per-lock sums). Once a second the exact totals go into a per-second series and the
 *   waits counted after a lock's last sample are attributed to that sample's stack.
 */
#include "prof_agg.h"
#include "prof_lock.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_esamp.h"
#include "prof_log.h"
#include "prof_store.h"
#include "prof_threads.h"
#include "prof_utf8.h"
#include "prof_walk.h"

#define LOCK_SLOTS 1024 /* distinct locks counted on their own (power of two) */
#define THR_SLOTS 4096  /* in-flight contentions, by OS tid (power of two) */
#define THR_PROBE 16    /* slots a tid may use, from its hash on */
#define WTAB_KEYS 8192  /* distinct (lock, owner) pairs */
#define WTAB_PER_S 1024
#define NAME_LEN 48

const double prof_lock_hist_le_ms[PROF_LOCK_NHIST - 1] = {
    0.01, 0.1, 0.5, 1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 5000, 30000};

/* What a sample carries in rec->text (the ring record has no other room for it). */
struct lock_meta {
    uint32_t slot;
    uint32_t epoch;               /* lock_events.epoch when the contention was counted */
    uint64_t cum_count, cum_wait; /* the lock slot's totals after this contention */
    uint64_t assoc;               /* AssociatedObjectID (informational) */
};

/* ---- event half (app threads) ---- */

/* A thread's contention in flight. `ver` is a sequence count: odd while a writer (a thread's
 * ContentionStart or ContentionStop) owns the slot, so readers (prof_lock_waiting, and on_stop
 * for its own wait) accept what they read only when it was even and unchanged around the reads.
 * A writer that finds it odd (another thread hashed onto the slot, writing at that instant)
 * gives up: that wait goes unrecorded, as a collision always made it. */
struct thr_slot {
    uint32_t ver;
    uint32_t tid; /* 0 = free */
    uint64_t lock_id, assoc, owner;
    int64_t start_ns;
};

/* Written by the app's threads in ContentionStart/Stop (the runtime's events), with atomics and
 * the slots' sequence counts only; read by clrscope-agg, the stats and prof_lock_waiting. */
static struct lock_events_state {
    struct esamp_slot slots[LOCK_SLOTS + 1]; /* [LOCK_SLOTS] = locks past the table */
    struct esamp_global g;
    struct thr_slot thr[THR_SLOTS];
    uint64_t count, wait_ns, hist[PROF_LOCK_NHIST]; /* every contention, ever */
    uint64_t sampled, dropped, overflow, unmatched;
    uint64_t slots_full; /* ContentionStarts not remembered: THR_PROBE slots held by others */
    /* Bumped each time clrscope-agg empties the lock table (reset_lock_table), after it did:
     * a contention counted under an older epoch carries counts of a slot that is gone. */
    uint32_t epoch;
} lock_events;

static struct thr_slot *probe(uint32_t tid, int k)
{
    return &lock_events.thr[(esamp_mix(tid) + (uint32_t)k) & (THR_SLOTS - 1)];
}

static int hist_bucket(uint64_t ns)
{
    double ms = (double)ns / 1e6;
    int b = 0;
    while (b < PROF_LOCK_NHIST - 1 && ms > prof_lock_hist_le_ms[b])
        b++;
    return b;
}

/* Makes the slot's count odd (ours); 0 when another writer has it. Then the stores that follow
 * cannot be seen before the odd count (the release fence). */
static int slot_claim(struct thr_slot *t, uint32_t *v)
{
    *v = __atomic_load_n(&t->ver, __ATOMIC_RELAXED);
    if ((*v & 1) || !__atomic_compare_exchange_n(&t->ver, v, *v + 1, 0, __ATOMIC_ACQUIRE,
                                                 __ATOMIC_RELAXED))
        return 0;
    __atomic_thread_fence(__ATOMIC_RELEASE);
    return 1;
}

/* The slot of `tid`'s wait, claimed (*v its count), or NULL: the one holding tid, else (when
 * `take_free`) a free one among the THR_PROBE from its hash on. Only a thread writes its own
 * tid into a slot, so a slot seen holding it before the claim still holds it after, unless the
 * thread's end (prof_lock_thread_gone) freed it meanwhile: checked under the claim. */
static struct thr_slot *claim_for(uint32_t tid, int take_free, uint32_t *v)
{
    for (int pass = 0; pass < 1 + take_free; pass++) {
        uint32_t want = pass == 0 ? tid : 0;
        for (int k = 0; k < THR_PROBE; k++) {
            struct thr_slot *t = probe(tid, k);
            if (__atomic_load_n(&t->tid, __ATOMIC_RELAXED) != want || !slot_claim(t, v))
                continue;
            if (__atomic_load_n(&t->tid, __ATOMIC_RELAXED) == want)
                return t;
            __atomic_store_n(&t->ver, *v + 2, __ATOMIC_RELEASE); /* taken meanwhile */
        }
    }
    return NULL;
}

void prof_lock_thread_gone(uint32_t tid)
{
    uint32_t v;
    struct thr_slot *t = tid ? claim_for(tid, 0, &v) : NULL;
    if (t) {
        __atomic_store_n(&t->tid, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&t->ver, v + 2, __ATOMIC_RELEASE);
    }
}

static void on_start(DWORD version, const BYTE *data, ULONG len)
{
    uint64_t lock_id = 0, assoc = 0, owner = 0;
    /* v2: ContentionFlags u8, ClrInstanceID u16, LockID ptr, AssociatedObjectID ptr,
     * LockOwnerThreadID u64 */
    if (version >= 2 && len >= 27) {
        memcpy(&lock_id, data + 3, 8);
        memcpy(&assoc, data + 11, 8);
        memcpy(&owner, data + 19, 8);
    }
    uint32_t tid = prof_self_tid();
    uint32_t v;
    struct thr_slot *t = claim_for(tid, 1, &v);
    if (!t) { /* THR_PROBE slots busy with other threads' waits: this one is not remembered */
        __atomic_add_fetch(&lock_events.slots_full, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_store_n(&t->lock_id, lock_id, __ATOMIC_RELAXED);
    __atomic_store_n(&t->assoc, assoc, __ATOMIC_RELAXED);
    __atomic_store_n(&t->owner, owner, __ATOMIC_RELAXED);
    __atomic_store_n(&t->start_ns, prof_now_ns(), __ATOMIC_RELAXED);
    __atomic_store_n(&t->tid, tid, __ATOMIC_RELAXED);
    __atomic_store_n(&t->ver, v + 2, __ATOMIC_RELEASE);
}

int prof_lock_waiting(uint32_t tid, uint64_t *lock_id, uint64_t *owner, int64_t *since_ns)
{
    if (!tid)
        return 0;
    for (int k = 0; k < THR_PROBE; k++) {
        struct thr_slot *t = probe(tid, k);
        uint32_t v = __atomic_load_n(&t->ver, __ATOMIC_ACQUIRE);
        if (v & 1)
            continue;
        uint32_t who = __atomic_load_n(&t->tid, __ATOMIC_RELAXED);
        *lock_id = __atomic_load_n(&t->lock_id, __ATOMIC_RELAXED);
        *owner = __atomic_load_n(&t->owner, __ATOMIC_RELAXED);
        *since_ns = __atomic_load_n(&t->start_ns, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        /* one wait, read whole: no writer came between the two reads of the count */
        if (__atomic_load_n(&t->ver, __ATOMIC_RELAXED) == v && who == tid && *since_ns > 0)
            return 1;
    }
    return 0;
}

static void on_stop(DWORD version, const BYTE *data, ULONG len)
{
    uint32_t tid = prof_self_tid();
    uint64_t lock_id = 0, assoc = 0, owner = 0;
    int64_t start = 0;
    int matched = 0;
    uint32_t v;
    struct thr_slot *t = claim_for(tid, 0, &v);
    if (t) { /* the slot is ours while we read and free it */
        lock_id = __atomic_load_n(&t->lock_id, __ATOMIC_RELAXED);
        assoc = __atomic_load_n(&t->assoc, __ATOMIC_RELAXED);
        owner = __atomic_load_n(&t->owner, __ATOMIC_RELAXED);
        start = __atomic_load_n(&t->start_ns, __ATOMIC_RELAXED);
        __atomic_store_n(&t->tid, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&t->ver, v + 2, __ATOMIC_RELEASE);
        matched = 1;
    }
    if (!matched) {
        lock_id = assoc = owner = 0;
        start = 0;
        __atomic_add_fetch(&lock_events.unmatched, 1, __ATOMIC_RELAXED);
    }
    /* v1: ContentionFlags u8, ClrInstanceID u16, DurationNs double */
    double dur = -1;
    if (version >= 1 && len >= 11)
        memcpy(&dur, data + 3, 8);
    if (!(dur >= 0)) /* v0, or NaN */
        dur = start ? (double)(prof_now_ns() - start) : 0;
    if (dur > 1e15)
        dur = 1e15;
    uint64_t wait = (uint64_t)dur;

    __atomic_add_fetch(&lock_events.count, 1, __ATOMIC_RELAXED);
    __atomic_add_fetch(&lock_events.wait_ns, wait, __ATOMIC_RELAXED);
    __atomic_add_fetch(&lock_events.hist[hist_bucket(wait)], 1, __ATOMIC_RELAXED);

    /* read before the slot: see above */
    uint32_t epoch = __atomic_load_n(&lock_events.epoch, __ATOMIC_ACQUIRE);
    int overflow = 0;
    uint64_t key = lock_id ? (esamp_mix(lock_id) | 2) : 1; /* 1 = locks of unknown id */
    struct esamp_slot *s = esamp_slot_for(lock_events.slots, LOCK_SLOTS, key, &overflow);
    if (overflow)
        __atomic_add_fetch(&lock_events.overflow, 1, __ATOMIC_RELAXED);
    uint64_t count, wsum;
    int64_t now_s = prof_now_ns() / 1000000000LL + 1;
    int d = esamp_decide(&lock_events.g, s, wait, (uint32_t)g_cfg.lock_rate, now_s, &count, &wsum);
    if (d == ESAMP_NO)
        return;
    struct prof_rec *r = prof_ring_reserve(prof_agg_ring());
    if (!r) {
        __atomic_add_fetch(&lock_events.dropped, 1, __ATOMIC_RELAXED);
        if (d == ESAMP_FIRST)
            esamp_retry(s);
        return;
    }
    r->kind = REC_LOCK;
    r->a = wait;
    r->b = lock_id;
    r->c = owner;
    r->d = 0;
    r->x = dur;
    r->t_unix = prof_unix_now();
    r->os_tid = tid;
    struct lock_meta m = {.slot = (uint32_t)(s - lock_events.slots),
                          .epoch = epoch,
                          .cum_count = count,
                          .cum_wait = wsum,
                          .assoc = assoc};
    memcpy(r->text, &m, sizeof m);
    int max = g_cfg.max_frames < REC_MAX_FRAMES ? g_cfg.max_frames : REC_MAX_FRAMES;
    r->nframes = (uint32_t)prof_walk_current(r->frames, max, &r->truncated,
                                             r->frames + REC_CHECK_AT);
    r->rt_ips = 1;
    prof_ring_commit(prof_agg_ring(), r);
    __atomic_add_fetch(&lock_events.sampled, 1, __ATOMIC_RELAXED);
}

void prof_lock_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len)
{
    if (!data || !(__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_LOCK))
        return;
    if (id == 81)
        on_start(version, data, len);
    else if (id == 91)
        on_stop(version, data, len);
}

/* ---- aggregator half (clrscope-agg; the window readers are API handlers) ---- */

struct last_sample {
    int n;
    uint32_t tid;
    uint64_t owner;
    const char *site;
    const char *names[REC_MAX_FRAMES + 2];
    char lock[NAME_LEN];
    char owner_name[NAME_LEN];
};

struct sec_row {
    int64_t sec;
    uint64_t count, wait_ns, hist[PROF_LOCK_NHIST];
};

struct owner_name {
    uint64_t tid;
    double at;
    char name[NAME_LEN];
};

/* clrscope-agg's: the table, the per-second series, what it attributed, under `lock`, which the
 * API's readers take too; never taken by a runtime callback. */
static struct lock_agg_state {
    pthread_once_t once;
    struct prof_wtab *tab;
    pthread_mutex_t lock; /* guards everything below: agg thread and API handlers */
    struct sec_row *series;
    int nsec;
    uint64_t snap_count, snap_wait, snap_hist[PROF_LOCK_NHIST]; /* lock_events.* at the last tick */
    uint64_t att_count[LOCK_SLOTS + 1], att_wait[LOCK_SLOTS + 1];
    struct esamp_orphan orphan[LOCK_SLOTS + 1]; /* left by the last reset (reset_lock_table) */
    struct last_sample *last[LOCK_SLOTS + 1];
    struct esamp_reset reset;
    struct owner_name names[256];
} lock_agg = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static void init_tables(void)
{
    lock_agg.tab = prof_wtab_new(g_cfg.history_s, WTAB_KEYS, WTAB_PER_S);
    lock_agg.series = calloc((size_t)g_cfg.history_s, sizeof *lock_agg.series);
    if (lock_agg.series)
        lock_agg.nsec = g_cfg.history_s;
    if (!lock_agg.tab || !lock_agg.series)
        prof_log(LOG_WARN, "out of memory for the lock-contention tables; /api/v1/locks stays "
                 "empty (flame graphs and pprof still work)");
}

struct prof_wtab *prof_lock_table(void)
{
    pthread_once(&lock_agg.once, init_tables);
    return lock_agg.tab;
}

/* The waiting method: the leaf-most frame outside System.Threading's lock machinery and the
 * event plumbing that reports the wait (a System.Threading.Lock's contention events are raised
 * by managed code: NativeRuntimeEventSource.ContentionStop is the stack's leaf). Other code of
 * System.Diagnostics.Tracing that waits for a lock (the counters' CounterGroup) is a site. */
static const char *wait_site(const char **names, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        const char *f = names[i];
        if (f[0] == '[' || !strncmp(f, "System.Threading.Monitor.", 25) ||
            !strncmp(f, "System.Threading.Lock.", 22) ||
            !strncmp(f, "System.Threading.ObjectHeader.", 30) ||
            !strncmp(f, "System.Diagnostics.Tracing.NativeRuntimeEventSource.", 52) ||
            !strncmp(f, "System.Diagnostics.Tracing.EventSource.", 39))
            continue;
        return f;
    }
    return n > 0 ? names[n - 1] : "";
}

/* Thread names of lock owners, cached for 10 s (the lookup may read /proc). */
static const char *owner_name(uint64_t owner, double now)
{
    if (!owner)
        return "";
    if (owner > UINT32_MAX)
        return "";
    struct owner_name *c = &lock_agg.names[esamp_mix(owner) & 255];
    if (c->tid != owner || now - c->at > 10) {
        c->tid = owner;
        c->at = now;
        prof_threads_name_of((uint32_t)owner, c->name, sizeof c->name);
    }
    return c->name;
}

static void lock_name(uint64_t lock_id, char *out, size_t cap)
{
    if (lock_id)
        snprintf(out, cap, "lock 0x%llx", (unsigned long long)lock_id);
    else
        snprintf(out, cap, "[unknown lock]");
}

void prof_lock_consume(const struct prof_rec *rec, const char **names, int n)
{
    struct prof_wtab *tab = prof_lock_table();
    struct lock_meta m;
    memcpy(&m, rec->text, sizeof m);
    uint32_t slot = m.slot <= LOCK_SLOTS ? m.slot : LOCK_SLOTS;
    pthread_mutex_lock(&lock_agg.lock);
    /* counted before the table was emptied: its slot's counts were attributed then (to the
     * slot's previous sample; when it had none, they were kept for this one) */
    uint32_t now_epoch = __atomic_load_n(&lock_events.epoch, __ATOMIC_ACQUIRE);
    int stale = m.epoch != now_epoch;
    uint64_t wc = 0, ww = 0;
    if (stale && m.epoch + 1 == now_epoch)
        esamp_orphan_take(&lock_agg.orphan[slot], &wc, &ww);
    if (!stale) {
        wc = m.cum_count > lock_agg.att_count[slot] ? m.cum_count - lock_agg.att_count[slot] : 0;
        ww = m.cum_wait > lock_agg.att_wait[slot] ? m.cum_wait - lock_agg.att_wait[slot] : 0;
        if (m.cum_count > lock_agg.att_count[slot])
            lock_agg.att_count[slot] = m.cum_count;
        if (m.cum_wait > lock_agg.att_wait[slot])
            lock_agg.att_wait[slot] = m.cum_wait;
    }

    char lname[NAME_LEN];
    lock_name(rec->b, lname, sizeof lname);
    const char *oname = owner_name(rec->c, rec->t_unix);
    const char *site = wait_site(names, n);
    int64_t v[PROF_NVALUES] = {(int64_t)wc, (int64_t)ww, 1};
    prof_store_add(PK_LOCK, rec->t_unix, names, n, rec->os_tid, lname, v);
    prof_wtab_add(tab, rec->t_unix, lname, oname, rec->c, site, v);

    struct last_sample *l = stale ? NULL : lock_agg.last[slot];
    if (!l && !stale)
        l = lock_agg.last[slot] = malloc(sizeof *l);
    if (l) {
        l->n = n < REC_MAX_FRAMES + 2 ? n : REC_MAX_FRAMES + 2;
        memcpy(l->names, names, (size_t)l->n * sizeof *names);
        l->tid = rec->os_tid;
        l->owner = rec->c;
        l->site = site;
        memcpy(l->lock, lname, sizeof l->lock);
        snprintf(l->owner_name, sizeof l->owner_name, "%s", oname);
    }
    pthread_mutex_unlock(&lock_agg.lock);
}

/* The totals counted since the last snapshot; lock held. */
static void pending(uint64_t *count, uint64_t *wait, uint64_t hist[PROF_LOCK_NHIST])
{
    *count = __atomic_load_n(&lock_events.count, __ATOMIC_RELAXED) - lock_agg.snap_count;
    *wait = __atomic_load_n(&lock_events.wait_ns, __ATOMIC_RELAXED) - lock_agg.snap_wait;
    for (int i = 0; i < PROF_LOCK_NHIST; i++)
        hist[i] = __atomic_load_n(&lock_events.hist[i], __ATOMIC_RELAXED) - lock_agg.snap_hist[i];
}

/* The lock table keeps a slot per lock ever contended: in a server with per-object locks
 * (connections, sessions, cache entries) it fills within hours or days, after which every later
 * lock would share the extra slot, the waits of all of them charged to whichever was sampled
 * last. So when locks overflow it, at most once a minute, clrscope-agg empties it, after the
 * tick has attributed every slot's counts: the locks contended from then on get slots of their
 * own again. A contention counted while the table is emptied may go to the next lock that
 * takes its slot (a few events, once a minute at most); the totals stay exact. Called with
 * lock_agg.lock held. */
static void reset_lock_table(void)
{
    if (!esamp_reset_due(&lock_agg.reset, __atomic_load_n(&lock_events.overflow, __ATOMIC_RELAXED),
                         prof_now_ns()))
        return;
    for (uint32_t i = 0; i <= LOCK_SLOTS; i++) {
        esamp_orphan_keep(&lock_agg.orphan[i], &lock_events.slots[i], lock_agg.last[i] != NULL,
                          lock_agg.att_count[i], lock_agg.att_wait[i]);
        esamp_slot_clear(&lock_events.slots[i]);
        lock_agg.att_count[i] = lock_agg.att_wait[i] = 0;
        free(lock_agg.last[i]);
        lock_agg.last[i] = NULL;
    }
    __atomic_add_fetch(&lock_events.epoch, 1, __ATOMIC_RELEASE);
}

void prof_lock_tick(double now_unix)
{
    struct prof_wtab *tab = prof_lock_table();
    pthread_mutex_lock(&lock_agg.lock);
    if (lock_agg.nsec) {
        uint64_t c, w, h[PROF_LOCK_NHIST];
        pending(&c, &w, h);
        int64_t sec = (int64_t)floor(now_unix);
        struct sec_row *row = &lock_agg.series[sec % lock_agg.nsec];
        if (row->sec != sec)
            memset(row, 0, sizeof *row);
        row->sec = sec;
        row->count += c;
        row->wait_ns += w;
        lock_agg.snap_count += c;
        lock_agg.snap_wait += w;
        for (int i = 0; i < PROF_LOCK_NHIST; i++) {
            row->hist[i] += h[i];
            lock_agg.snap_hist[i] += h[i];
        }
    }
    for (uint32_t slot = 0; slot <= LOCK_SLOTS; slot++) {
        struct last_sample *l = lock_agg.last[slot];
        if (!l)
            continue;
        uint64_t count = __atomic_load_n(&lock_events.slots[slot].count, __ATOMIC_RELAXED);
        uint64_t wait = __atomic_load_n(&lock_events.slots[slot].wsum, __ATOMIC_RELAXED);
        if (count <= lock_agg.att_count[slot] && wait <= lock_agg.att_wait[slot])
            continue;
        int64_t wc =
            count > lock_agg.att_count[slot] ? (int64_t)(count - lock_agg.att_count[slot]) : 0;
        int64_t ww = wait > lock_agg.att_wait[slot] ? (int64_t)(wait - lock_agg.att_wait[slot]) : 0;
        lock_agg.att_count[slot] =
            count > lock_agg.att_count[slot] ? count : lock_agg.att_count[slot];
        lock_agg.att_wait[slot] = wait > lock_agg.att_wait[slot] ? wait : lock_agg.att_wait[slot];
        int64_t v[PROF_NVALUES] = {wc, ww, 0};
        prof_store_add(PK_LOCK, now_unix, l->names, l->n, l->tid, l->lock, v);
        prof_wtab_add(tab, now_unix, l->lock, l->owner_name, l->owner, l->site, v);
    }
    reset_lock_table();
    pthread_mutex_unlock(&lock_agg.lock);
}

/* A copy of s into the block at *p, cleaned as the table cleans its keys. */
static const char *copy_out(char **p, const char *s)
{
    char *c = *p;
    size_t n = strlen(s) + 1;
    memcpy(c, s, n);
    prof_utf8_clean(c);
    *p += n;
    return c;
}

/* Whether the slot has counts no sample carries (the tick's test); lock_agg.lock held. */
static int has_unattributed(uint32_t slot)
{
    return __atomic_load_n(&lock_events.slots[slot].count, __ATOMIC_RELAXED) >
               lock_agg.att_count[slot] ||
           __atomic_load_n(&lock_events.slots[slot].wsum, __ATOMIC_RELAXED) >
               lock_agg.att_wait[slot];
}

static int unattributed(const char *filter, struct prof_lock_unattributed **out, size_t *nout)
{
    uint32_t *sel = malloc((LOCK_SLOTS + 1) * sizeof *sel);
    if (!sel)
        return -1;
    size_t n = 0, nframes = 0, bytes = 0;
    for (uint32_t slot = 0; slot <= LOCK_SLOTS; slot++) {
        const struct last_sample *l = lock_agg.last[slot];
        if (!l || !has_unattributed(slot) || (filter && strcmp(l->lock, filter)))
            continue;
        sel[n++] = slot;
        nframes += (size_t)l->n;
        bytes += strlen(l->lock) + strlen(l->owner_name) + strlen(l->site) + 3;
        for (int f = 0; f < l->n; f++)
            bytes += strlen(l->names[f] ? l->names[f] : "[unknown]") + 1;
    }
    /* one block: the entries, their frame arrays, the strings */
    struct prof_lock_unattributed *u = malloc(n * sizeof *u + nframes * sizeof(char *) + bytes + 1);
    if (!u) {
        free(sel);
        return -1;
    }
    const char **fp = (const char **)(void *)(u + n);
    char *p = (char *)(fp + nframes);
    for (size_t i = 0; i < n; i++) {
        uint32_t slot = sel[i];
        const struct last_sample *l = lock_agg.last[slot];
        /* as prof_lock_tick computes them, without moving att_count and att_wait */
        uint64_t count = __atomic_load_n(&lock_events.slots[slot].count, __ATOMIC_RELAXED);
        uint64_t wait = __atomic_load_n(&lock_events.slots[slot].wsum, __ATOMIC_RELAXED);
        u[i].count =
            count > lock_agg.att_count[slot] ? (int64_t)(count - lock_agg.att_count[slot]) : 0;
        u[i].wait_ns =
            wait > lock_agg.att_wait[slot] ? (int64_t)(wait - lock_agg.att_wait[slot]) : 0;
        u[i].owner = l->owner;
        u[i].frames = fp;
        u[i].nframes = l->n;
        for (int f = 0; f < l->n; f++) {
            const char *name = l->names[f] ? l->names[f] : "[unknown]"; /* as the store */
            size_t len = strlen(name) + 1;
            memcpy(p, name, len);
            *fp++ = p;
            p += len;
        }
        u[i].lock = copy_out(&p, l->lock);
        u[i].owner_name = copy_out(&p, l->owner_name);
        u[i].site = copy_out(&p, l->site);
    }
    free(sel);
    *out = u;
    *nout = n;
    return 0;
}

int prof_lock_read(double seconds, const char *filter, struct prof_wtab_row **rows,
                   size_t *nrows, struct prof_lock_unattributed **pending, size_t *npending)
{
    struct prof_wtab *tab = prof_lock_table();
    *pending = NULL;
    *npending = 0;
    /* under the lock the aggregator attributes with: no sample moves contentions from the one
     * to the other between the two reads */
    pthread_mutex_lock(&lock_agg.lock);
    int rc = prof_wtab_sum(tab, seconds, filter, rows, nrows);
    if (!rc && unattributed(filter, pending, npending)) {
        free(*rows);
        *rows = NULL;
        *nrows = 0;
        rc = -1;
    }
    pthread_mutex_unlock(&lock_agg.lock);
    return rc;
}

void prof_lock_window(double seconds, struct prof_lock_window *out)
{
    memset(out, 0, sizeof *out);
    pthread_once(&lock_agg.once, init_tables);
    if (!(seconds > 0))
        seconds = 60;
    pthread_mutex_lock(&lock_agg.lock);
    if (seconds > lock_agg.nsec)
        seconds = lock_agg.nsec;
    int64_t to = (int64_t)floor(prof_unix_now());
    int64_t from = to - (int64_t)ceil(seconds) + 1;
    for (int i = 0; i < lock_agg.nsec; i++) {
        const struct sec_row *row = &lock_agg.series[i];
        if (row->sec < from || row->sec > to)
            continue;
        out->count += row->count;
        out->wait_ns += row->wait_ns;
        for (int k = 0; k < PROF_LOCK_NHIST; k++)
            out->hist[k] += row->hist[k];
    }
    /* what ended since the last tick belongs to the current second */
    uint64_t c, w, h[PROF_LOCK_NHIST];
    pending(&c, &w, h);
    out->count += c;
    out->wait_ns += w;
    for (int k = 0; k < PROF_LOCK_NHIST; k++)
        out->hist[k] += h[k];
    pthread_mutex_unlock(&lock_agg.lock);
}

void prof_lock_get_stats(struct prof_lock_stats *out)
{
    memset(out, 0, sizeof *out);
    out->events = __atomic_load_n(&lock_events.count, __ATOMIC_RELAXED);
    out->sampled = __atomic_load_n(&lock_events.sampled, __ATOMIC_RELAXED);
    out->dropped = __atomic_load_n(&lock_events.dropped, __ATOMIC_RELAXED);
    out->overflow = __atomic_load_n(&lock_events.overflow, __ATOMIC_RELAXED);
    out->unmatched = __atomic_load_n(&lock_events.unmatched, __ATOMIC_RELAXED);
    out->slots_full = __atomic_load_n(&lock_events.slots_full, __ATOMIC_RELAXED);
    pthread_mutex_lock(&lock_agg.lock);
    out->table_resets = lock_agg.reset.resets;
    pthread_mutex_unlock(&lock_agg.lock);
    for (uint32_t i = 0; i < LOCK_SLOTS; i++)
        if (__atomic_load_n(&lock_events.slots[i].key, __ATOMIC_RELAXED))
            out->locks++;
    uint64_t keys;
    prof_wtab_stats(prof_lock_table(), &keys, &out->table_dropped);
}

static size_t lock_mem_bytes(void)
{
    return prof_wtab_mem_bytes(prof_lock_table());
}

const struct prof_kind prof_lock_kind = {
    .name = "lock",
    .profile = PROFILE_LOCK,
    .records = 1u << REC_LOCK,
    .consume = prof_lock_consume,
    .tick = prof_lock_tick,
    .mem_bytes = lock_mem_bytes,
    .mem_name = "exception_lock_tables",
};
