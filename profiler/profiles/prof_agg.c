/* prof_agg.c - see prof_agg.h. */
#include "prof_agg.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_log.h"
#include "prof_ring.h"
#include "prof_unload.h"
#include "prof_walk.h"

#define RING_SLOTS 4096u
#define SELF_WINDOW 10
#define DRAIN_MIN_NS 2000000LL  /* the event ring is drained at most this often */
#define DRAIN_MAX_NS 50000000LL /* and at least (4096 slots: drops only above 80 k events/s) */
/* While nothing comes, it naps longer, woken by the ring's doorbell once events come again (a
 * few: a lone event waits for the nap's end; a burst is named soon, as the allocation walk
 * learns from the first records it names): to its next one-second tick, or, for POLL_OFTEN_NS
 * after the dashboard last took a connection (prof_agg_poll_often), IDLE_NAP_NS, so that the
 * pollers (the dashboard's descriptor guard and shedding) are looked at this often while it is
 * used. (A connection the app's lack of descriptors keeps from being accepted is found by the
 * guard within a second.) */
#define IDLE_NAP_NS 250000000LL
#define POLL_OFTEN_NS 10000000000LL
#define IDLE_WAKE_RECORDS 32
/* Our own threads (clrscope-*, and civetweb's before it names them), found by their names in
 * /proc/self/task every SELF_RESCAN_S seconds (or when one of them ended), their CPU clocks read
 * every second in between: a scan opens a file per thread of the process, which adds up in an app
 * with hundreds of threads. The CPU of threads that ended is kept, so the total never goes back. */
#define SELF_MAX_THREADS 64
#define SELF_RESCAN_S 10

/* The module's state, in parts that different threads write: */
static struct agg_state {
    /* Written by Initialize (prof_agg_start) before clrscope-agg starts, read by Shutdown. */
    pthread_t thread;
    int running;
    int stop; /* atomic: Shutdown asks the loop to end */
    int64_t poll_until; /* atomic: pollers looked at every IDLE_NAP_NS until then */
    /* The callback ring: made by prof_agg_start before the thread starts and never freed;
     * runtime callbacks (any thread) reserve and commit records in it, clrscope-agg alone
     * drains it. A plain pointer, written once: a producer that still reads NULL drops its
     * record (prof_ring_reserve takes NULL). */
    struct prof_ring *ring;
    /* The kind table: appended under its lock by any thread, read without it (a row is written
     * before the count that shows it is published). */
    struct {
        pthread_mutex_t lock;
        const struct prof_kind *rows[PROF_AGG_MAX_KINDS];
        size_t n; /* atomic */
    } kinds;
    /* clrscope's own cost: written by clrscope-agg once a second, read by any thread
     * (prof_agg_self_stats), both under its lock. */
    struct {
        pthread_mutex_t lock;
        struct prof_self_stats stats;
        double hist_self[SELF_WINDOW], hist_proc[SELF_WINDOW];
        int hist_pos;
    } cost;
    /* clrscope's own threads and the CPU each used so far: clrscope-agg only. */
    struct {
        pid_t tid[SELF_MAX_THREADS];
        int64_t last_ns[SELF_MAX_THREADS];
        int n, ticks_to_rescan;
        uint32_t named_seen; /* prof_own_threads_named at the last rescan */
        int64_t gone_ns;
    } own;
} agg = {.kinds.lock = PTHREAD_MUTEX_INITIALIZER, .cost.lock = PTHREAD_MUTEX_INITIALIZER};

void prof_agg_poll_often(void)
{
    int64_t now = prof_now_ns(), until = __atomic_load_n(&agg.poll_until, __ATOMIC_RELAXED);
    if (until - now > POLL_OFTEN_NS / 2)
        return;
    __atomic_store_n(&agg.poll_until, now + POLL_OFTEN_NS, __ATOMIC_RELAXED);
    if (until < now)
        prof_core_nudge(); /* it may be in a nap of up to a second */
}

struct prof_ring *prof_agg_ring(void)
{
    return agg.ring;
}

void prof_agg_use_ring(struct prof_ring *r)
{
    agg.ring = r;
}

int prof_agg_add(const struct prof_kind *k)
{
    pthread_mutex_lock(&agg.kinds.lock);
    size_t n = agg.kinds.n;
    if (n == PROF_AGG_MAX_KINDS) {
        pthread_mutex_unlock(&agg.kinds.lock);
        prof_log(LOG_ERROR, "the aggregator's kind table is full; %s is not driven", k->name);
        return -1;
    }
    agg.kinds.rows[n] = k;
    __atomic_store_n(&agg.kinds.n, n + 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&agg.kinds.lock);
    return 0;
}

const struct prof_kind *const *prof_agg_kinds(size_t *n)
{
    *n = __atomic_load_n(&agg.kinds.n, __ATOMIC_ACQUIRE);
    return agg.kinds.rows;
}

/* The row that consumes records of `kind`; *bare: without their frames named. */
static const struct prof_kind *consumer_of(uint32_t kind, int *bare)
{
    size_t n;
    const struct prof_kind *const *rows = prof_agg_kinds(&n);
    unsigned bit = kind < 32 ? 1u << kind : 0;
    for (size_t i = 0; i < n; i++) {
        if (!rows[i]->consume)
            continue;
        if (rows[i]->records & bit) {
            *bare = 0;
            return rows[i];
        }
        if (rows[i]->bare & bit) {
            *bare = 1;
            return rows[i];
        }
    }
    return NULL;
}

/* Consumes what the ring holds; returns how many records. */
#define DRAIN_BUDGET 100000

static int drain(void)
{
    const char *names[REC_MAX_FRAMES + 2];
    int done = 0;
    if (!agg.ring) /* no memory for it at start: nothing was produced */
        return 0;
    prof_walk_begin();
    for (int budget = DRAIN_BUDGET; budget > 0; budget--, done++) {
        struct prof_rec *r = prof_ring_peek(agg.ring);
        if (!r)
            break;
        /* its IDs are asked about only while no module unload has started since it was taken */
        int asking = prof_unload_enter(r->epoch);
        int bare = 0;
        const struct prof_kind *k = consumer_of(r->kind, &bare);
        if (k && bare) {
            k->consume(r, NULL, 0);
        } else if (k) {
            prof_walk_resolve(r);
            int n = prof_walk_names(r->frames,
                                    (int)(r->nframes > REC_MAX_FRAMES ? REC_MAX_FRAMES
                                                                       : r->nframes),
                                    (int)r->truncated, names, REC_MAX_FRAMES + 2);
            k->consume(r, names, n);
        }
        if (asking)
            prof_unload_leave();
        prof_ring_release(agg.ring);
    }
    prof_walk_end();
    return done;
}

static void rescan_own_threads(void)
{
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    pid_t found[SELF_MAX_THREADS];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < SELF_MAX_THREADS) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[64], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", e->d_name);
        FILE *f = fopen(path, "re");
        if (!f)
            continue;
        if (fgets(comm, sizeof comm, f) &&
            (!strncmp(comm, "clrscope-", 9) || !strncmp(comm, "civetweb-", 9)))
            found[n++] = (pid_t)atoi(e->d_name);
        fclose(f);
    }
    closedir(d);
    /* keep what we knew of threads still there; the new ones start at 0 */
    int64_t last[SELF_MAX_THREADS];
    for (int i = 0; i < n; i++) {
        last[i] = 0;
        for (int j = 0; j < agg.own.n; j++)
            if (agg.own.tid[j] == found[i])
                last[i] = agg.own.last_ns[j];
    }
    memcpy(agg.own.tid, found, (size_t)n * sizeof *found);
    memcpy(agg.own.last_ns, last, (size_t)n * sizeof *last);
    agg.own.n = n;
}

static double self_cpu_seconds(void)
{
    /* a thread of clrscope's named since the last look: found now, not up to SELF_RESCAN_S
     * later with all it has used since it started counted in one second */
    uint32_t named = prof_own_threads_named();
    if (named != agg.own.named_seen) {
        agg.own.named_seen = named;
        agg.own.ticks_to_rescan = 0;
    }
    if (agg.own.ticks_to_rescan-- <= 0) {
        rescan_own_threads();
        agg.own.ticks_to_rescan = SELF_RESCAN_S - 1;
    }
    int64_t total = agg.own.gone_ns;
    for (int i = 0; i < agg.own.n; i++) {
        int64_t ns = prof_thread_cpu_ns(agg.own.tid[i]);
        if (ns < 0) { /* it ended: keep what it used, look again next second */
            agg.own.gone_ns += agg.own.last_ns[i];
            total += agg.own.last_ns[i];
            agg.own.tid[i] = agg.own.tid[agg.own.n - 1];
            agg.own.last_ns[i] = agg.own.last_ns[agg.own.n - 1];
            agg.own.n--;
            i--;
            agg.own.ticks_to_rescan = 0;
            continue;
        }
        agg.own.last_ns[i] = ns;
        total += ns;
    }
    return (double)total / 1e9;
}

static int64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    long pages = 0, rss = 0;
    if (f) {
        if (fscanf(f, "%ld %ld", &pages, &rss) != 2)
            rss = 0;
        fclose(f);
    }
    return (int64_t)rss * sysconf(_SC_PAGESIZE);
}

/* Adds `bytes` to the entry named `name` of out->mem (a new one at the end when none has it). */
static void mem_add(struct prof_self_stats *out, const char *name, int64_t bytes)
{
    for (int i = 0; i < out->nmem; i++)
        if (!strcmp(out->mem[i].name, name)) {
            out->mem[i].bytes += bytes;
            return;
        }
    if (out->nmem < PROF_AGG_MAX_MEM)
        out->mem[out->nmem++] = (struct prof_mem_use){name, bytes};
}

static void self_tick(void)
{
    /* module memory first: the getters take their modules' own locks, not agg.cost.lock */
    struct prof_self_stats now = {0};
    mem_add(&now, "event_ring", (int64_t)prof_ring_mem_bytes(agg.ring));
    size_t nk;
    const struct prof_kind *const *rows = prof_agg_kinds(&nk);
    for (size_t i = 0; i < nk; i++)
        if (rows[i]->mem_bytes && rows[i]->mem_name)
            mem_add(&now, rows[i]->mem_name, (int64_t)rows[i]->mem_bytes());
    for (int i = 0; i < now.nmem; i++)
        now.mem_bytes += now.mem[i].bytes;
    double self = self_cpu_seconds();
    double proc = (double)prof_process_cpu_ns() / 1e9;
    pthread_mutex_lock(&agg.cost.lock);
    int oldest = (agg.cost.hist_pos + 1) % SELF_WINDOW;
    agg.cost.hist_self[agg.cost.hist_pos] = self;
    agg.cost.hist_proc[agg.cost.hist_pos] = proc;
    double dp = proc - agg.cost.hist_proc[oldest], ds = self - agg.cost.hist_self[oldest];
    agg.cost.hist_pos = oldest;
    agg.cost.stats.cpu_s = self;
    agg.cost.stats.cpu_share = dp > 0 && agg.cost.hist_proc[oldest] > 0 ? ds / dp : 0;
    agg.cost.stats.rss_bytes = rss_bytes();
    memcpy(agg.cost.stats.mem, now.mem, sizeof now.mem);
    agg.cost.stats.nmem = now.nmem;
    agg.cost.stats.mem_bytes = now.mem_bytes;
    agg.cost.stats.ring_dropped = prof_ring_dropped(agg.ring);
    agg.cost.stats.ring_pushed = prof_ring_pushed(agg.ring);
    pthread_mutex_unlock(&agg.cost.lock);
}

static void *agg_main(void *arg)
{
    (void)arg;
    prof_name_thread("agg");
    g_core.info->vt->InitializeCurrentThread(g_core.info);
    int64_t next_tick = prof_now_ns(), sleep_ns = DRAIN_MAX_NS;
    int idle_drains = 0;
    prof_unload_consumer(PROF_UNLOAD_AGG, 1);
    while (!__atomic_load_n(&agg.stop, __ATOMIC_ACQUIRE) && !prof_core_stopping()) {
        /* wake often enough that the ring fills to a quarter at the rate just seen, and when
         * nothing comes, 4 times a second, the ring's doorbell waking it sooner (each wake-up
         * takes a core from the app for a context switch); a module unload wakes it at once
         * (prof_unload.h) */
        uint32_t nudges = prof_core_nudges();
        uint64_t unload_wanted = prof_unload_drain_wanted();
        size_t nk;
        const struct prof_kind *const *rows = prof_agg_kinds(&nk);
        for (size_t i = 0; i < nk; i++)
            if (rows[i]->poll)
                rows[i]->poll(prof_now_ns());
        int got = drain();
        if (got < DRAIN_BUDGET)
            prof_unload_drained(PROF_UNLOAD_AGG, unload_wanted);
        if (got > 0) {
            int64_t quarter = (int64_t)RING_SLOTS / 4;
            sleep_ns = got >= quarter ? DRAIN_MIN_NS : sleep_ns * quarter / got;
        } else {
            sleep_ns *= 2;
        }
        if (sleep_ns < DRAIN_MIN_NS)
            sleep_ns = DRAIN_MIN_NS;
        if (sleep_ns > DRAIN_MAX_NS)
            sleep_ns = DRAIN_MAX_NS;
        int64_t now = prof_now_ns();
        if (now >= next_tick) {
            double u = prof_unix_now();
            for (size_t i = 0; i < nk; i++)
                if (rows[i]->tick)
                    rows[i]->tick(u);
            self_tick();
            next_tick = now + 1000000000LL;
        }
        /* idle: the longest adaptive nap found nothing twice in a row */
        int idle = got == 0 && sleep_ns == DRAIN_MAX_NS && idle_drains++ > 0 && agg.ring;
        if (got)
            idle_drains = 0;
        int64_t nap = !idle ? sleep_ns
                      : prof_now_ns() < __atomic_load_n(&agg.poll_until, __ATOMIC_RELAXED)
                          ? IDLE_NAP_NS
                          : next_tick - prof_now_ns();
        if (next_tick - prof_now_ns() < nap)
            nap = next_tick - prof_now_ns();
        if (nap < 1000000)
            nap = 1000000;
        if (idle) {
            uint32_t *bell = prof_ring_bell(agg.ring), seen = __atomic_load_n(bell, __ATOMIC_SEQ_CST);
            prof_ring_arm_bell(agg.ring, IDLE_WAKE_RECORDS);
            prof_core_nap_word(bell, seen, prof_now_ns() + nap, nudges);
            prof_ring_arm_bell(agg.ring, 0);
        } else {
            prof_core_nap_nudged(prof_now_ns() + nap, nudges);
        }
    }
    prof_unload_consumer(PROF_UNLOAD_AGG, 0);
    drain();
    return NULL;
}

int prof_agg_start(void)
{
    agg.ring = prof_ring_new(RING_SLOTS);
    if (!agg.ring) {
        prof_log(LOG_ERROR, "out of memory for the event ring; event-based profiles are off");
        prof_core_disable(PROFILE_ALLOC | PROFILE_LIVE | PROFILE_EXCEPTIONS | PROFILE_LOCK);
    }
    if (pthread_create(&agg.thread, NULL, agg_main, NULL)) {
        prof_log(LOG_ERROR, "cannot start the aggregator thread; event-based profiles are off");
        prof_core_disable(PROFILE_ALLOC | PROFILE_LIVE | PROFILE_EXCEPTIONS | PROFILE_LOCK |
                          PROFILE_GC);
        return -1;
    }
    agg.running = 1;
    return 0;
}

void prof_agg_stop(void)
{
    if (!agg.running)
        return;
    __atomic_store_n(&agg.stop, 1, __ATOMIC_RELEASE);
    pthread_join(agg.thread, NULL);
    agg.running = 0;
}

void prof_agg_self_stats(struct prof_self_stats *out)
{
    pthread_mutex_lock(&agg.cost.lock);
    *out = agg.cost.stats;
    pthread_mutex_unlock(&agg.cost.lock);
    if (out->nmem)
        return;
    /* before the first tick: every field, at 0 */
    mem_add(out, "event_ring", 0);
    size_t nk;
    const struct prof_kind *const *rows = prof_agg_kinds(&nk);
    for (size_t i = 0; i < nk; i++)
        if (rows[i]->mem_bytes && rows[i]->mem_name)
            mem_add(out, rows[i]->mem_name, 0);
}
