/* prof_counters.c - see prof_counters.h. */
#include "prof_counters.h"

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uchar.h>

#include "prof_agg.h"
#include "evcounter.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_log.h"

/* Per-second allocated bytes: (second & 0xffffff) << 40 | bytes, like prof_alloc's counters. */
#define TAG_BITS 24
#define VALUE_BITS 40
#define VALUE_MASK ((1ull << VALUE_BITS) - 1)
#define TAG_MASK ((1ull << TAG_BITS) - 1)

/* Values on their way from the poller to the series (clrscope-agg), each counter's own: the
 * poller writes slot head % ENTRY_QUEUE and then publishes head, clrscope-agg reads up to it and
 * publishes tail; a value that finds the queue full is counted as dropped. */
#define ENTRY_QUEUE 8
struct queued {
    double t, v, interval_s;
};

struct entry {
    int state;          /* 0 free, 1 being claimed, 2 named */
    uint32_t seq;       /* odd while the value is being written */
    struct prof_counter v;
    struct queued q[ENTRY_QUEUE];
    uint32_t head, tail; /* atomic: head the poller's, tail clrscope-agg's */
};

/* The guard: the runtime wakes its finalizer thread after every GC while these counters are on
 * (~100 us of the app's CPU per GC, all told, measured on a 2-core VM); above
 * CLRSCOPE_RUNTIME_COUNTERS_MAX_GC_RATE GCs a second, averaged over GUARD_WINDOW_S, their
 * session is stopped. */
#define GUARD_WINDOW_S 10.0
/* No counter event this long after start: the runtime will send none (an app built with
 * EventSourceSupport=false has no managed EventSources, System.Runtime's included). */
#define SILENT_AFTER_S 10.0
/* The newest alloc-rate intervals kept whole (a power of two): 256 s at the default 1 s. */
#define IV_RING 256

/* One alloc-rate interval, (t0_us, t1_us] in unix microseconds, as the poller delivered it. */
struct alloc_iv {
    int64_t t0_us, t1_us;
    uint64_t bytes;
};

/* The module's state. The subscription (session, max_gc_rate, the per-second array) is set at
 * Initialize; then the poller thread writes the values and the alloc-rate seconds, the
 * GC-finished callback counts GCs, clrscope-agg runs the guard, and any thread reads, each field
 * as noted (atomics or per-entry sequence counters; no lock). */
static struct counters_state {
    EVENTPIPE_SESSION session; /* atomic: their own EventPipe session; 0 once stopped */
    int enabled;         /* atomic: the counters' session runs */
    long max_gc_rate;    /* CLRSCOPE_RUNTIME_COUNTERS_MAX_GC_RATE; 0 = never stop them */
    uint64_t gcs;        /* atomic: GCs finished (the GC-finished callback) */
    double guard_t;      /* clrscope-agg: the guard's window start (unix s), 0 = not yet */
    uint64_t guard_gcs;  /* clrscope-agg */
    int stopped;         /* atomic: the guard stopped them (the two below are set before) */
    int silent;          /* atomic: none came in the first SILENT_AFTER_S (logged once) */
    double stopped_rate, stopped_t;
    uint64_t *alloc_sec; /* nsec slots (atomic each) */
    uint32_t nsec;
    /* alloc-rate intervals: (t_prev, t]; written by the poller thread only */
    double alloc_t_prev;
    long interval_s;     /* CLRSCOPE_RUNTIME_COUNTERS (set at Initialize) */
    /* the newest intervals whole: slot n % IV_RING is written, then iv_n (atomic) published */
    struct alloc_iv iv[IV_RING];
    uint64_t iv_n;
    int64_t first_full_s, last_full_s; /* atomic; 0 = none yet */
    uint64_t events, malformed, dropped; /* atomic */
    uint64_t series_dropped; /* atomic: values the series missed (clrscope-agg 8 s behind) */
    struct entry e[PROF_COUNTERS_MAX];   /* claimed by CAS, values under their `seq` */
} counters;

/* The series: each counter's values as they came, the newest `cap` of each in a ring, filled by
 * clrscope-agg's tick from the entries' queues (the poller's thread is the runtime's: no malloc,
 * no lock there); read under `lock`. */
struct series_point {
    double t, v;
};
static struct series_state {
    pthread_mutex_t lock;
    uint32_t cap;                              /* points per counter: the memory's seconds */
    struct series_point *pts[PROF_COUNTERS_MAX]; /* rings, made when a counter first comes */
    float *iv[PROF_COUNTERS_MAX];              /* each point's polling interval, beside it */
    uint64_t n[PROF_COUNTERS_MAX];             /* points written to each ring */
    double last_t[PROF_COUNTERS_MAX];          /* the newest point's time */
    char units[PROF_COUNTERS_MAX][16];         /* written once, with the ring */
    int incrementing[PROF_COUNTERS_MAX];
    size_t bytes;
    int oom;                                   /* a ring could not be made (logged once) */
} series = {.lock = PTHREAD_MUTEX_INITIALIZER};

/* Fills *cfg with the System.Runtime provider (Informational, EventCounterIntervalSec=N) and
 * returns 1, or returns 0 when the subscription is off. Prepares the per-second history. */
static int provider(COR_PRF_EVENTPIPE_PROVIDER_CONFIG *cfg)
{
    long interval = prof_env_long("CLRSCOPE_RUNTIME_COUNTERS", 1, 0, 60); /* seconds; 0 = off */
    if (!interval)
        return 0;
    counters.interval_s = interval;
    if (!counters.alloc_sec) {
        counters.nsec = (uint32_t)g_cfg.history_s + 16;
        /* NULL: no self-check, the values stay */
        counters.alloc_sec = calloc(counters.nsec, sizeof *counters.alloc_sec);
    }
    static const char16_t name[] = u"System.Runtime";
    static char16_t filter[40];
    char ascii[40];
    int n = snprintf(ascii, sizeof ascii, "EventCounterIntervalSec=%ld", interval);
    for (int i = 0; i <= n && i < (int)(sizeof filter / sizeof filter[0]); i++)
        filter[i] = (char16_t)ascii[i];
    cfg->providerName = (const WCHAR *)name;
    cfg->keywords = 0;
    cfg->loggingLevel = EP_LEVEL_INFORMATIONAL;
    cfg->filterData = (const WCHAR *)filter;
    counters.max_gc_rate = prof_env_long("CLRSCOPE_RUNTIME_COUNTERS_MAX_GC_RATE", 50, 0, 1000000);
    counters.enabled = 1;
    return 1;
}

int prof_counters_start(void)
{
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg;
    if (!provider(&cfg))
        return 0;
    ICorProfilerInfo15 *info = g_core.info;
    HRESULT hr = info->vt->EventPipeStartSession(info, 1, &cfg, 0, &counters.session);
    if (hr < 0) {
        counters.session = 0;
        __atomic_store_n(&counters.enabled, 0, __ATOMIC_RELAXED);
        prof_log(LOG_WARN, "the runtime refused the System.Runtime counters (0x%08x): no exact "
                 "allocated total, no /api/v1/counters; the rest goes on", (unsigned)hr);
        return 0;
    }
    return 1;
}

static void *stop_thread(void *arg)
{
    prof_name_thread("ctl");
    EVENTPIPE_SESSION s = (EVENTPIPE_SESSION)(uintptr_t)arg;
    HRESULT hr = g_core.info->vt->EventPipeStopSession(g_core.info, s);
    return (void *)(uintptr_t)(hr < 0);
}

/* Stops the counters' session (the guard, clrscope-agg): 0 when stopped, -1 when none was
 * running or the runtime refused. Stopping it disables System.Runtime, a managed EventSource
 * whose callback the runtime runs on the calling thread: the thread it ran on becomes a managed
 * thread for good (it shows in thread dumps, and the runtime refuses some of the profiling API's
 * calls from it while GCs run: CORPROF_E_UNSUPPORTED_CALL_SEQUENCE), so the call is made on a
 * thread of its own that ends with it, never on clrscope-agg. */
static int stop_session(void)
{
    EVENTPIPE_SESSION s = __atomic_exchange_n(&counters.session, 0, __ATOMIC_ACQ_REL);
    if (!s)
        return -1;
    pthread_t th;
    void *failed = (void *)1;
    if (pthread_create(&th, NULL, stop_thread, (void *)(uintptr_t)s) != 0 ||
        pthread_join(th, &failed) != 0) {
        __atomic_store_n(&counters.session, s, __ATOMIC_RELEASE); /* still running: kept */
        return -1;
    }
    return failed ? -1 : 0;
}

void prof_counters_gc_finished(void)
{
    __atomic_fetch_add(&counters.gcs, 1, __ATOMIC_RELAXED);
}

/* Reads entry i's value consistently (its sequence counter): 1, or 0 when not named yet or the
 * poller kept writing it. */
static int read_entry(int i, struct prof_counter *out)
{
    struct entry *e = &counters.e[i];
    if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != 2)
        return 0;
    for (int tries = 0; tries < 4; tries++) {
        uint32_t s1 = __atomic_load_n(&e->seq, __ATOMIC_ACQUIRE);
        if (s1 & 1)
            continue;
        memcpy(out, &e->v, sizeof *out);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&e->seq, __ATOMIC_RELAXED) == s1) {
            out->name[sizeof out->name - 1] = 0;
            out->units[sizeof out->units - 1] = 0;
            return 1;
        }
    }
    return 0;
}

/* Appends value v of counter i to its series (its ring made at its first value). */
static void series_add(int i, const struct prof_counter *vp)
{
    struct prof_counter v = *vp;
    if (!(v.t_unix > series.last_t[i]))
        return;
    pthread_mutex_lock(&series.lock);
    if (!series.pts[i] && !series.oom) {
        series.pts[i] = calloc(series.cap, sizeof *series.pts[i]);
        series.iv[i] = calloc(series.cap, sizeof *series.iv[i]);
        if (!series.pts[i] || !series.iv[i]) {
            free(series.pts[i]);
            free(series.iv[i]);
            series.pts[i] = NULL;
            series.iv[i] = NULL;
        }
        if (series.pts[i]) {
            series.bytes += series.cap * (sizeof *series.pts[i] + sizeof *series.iv[i]);
            memcpy(series.units[i], v.units, sizeof series.units[i]);
            series.incrementing[i] = v.incrementing;
        } else {
            series.oom = 1;
            prof_log(LOG_WARN, "runtime counters: out of memory for their series; the "
                     "latest values go on");
        }
    }
    if (series.pts[i]) {
        struct series_point *p = &series.pts[i][series.n[i] % series.cap];
        p->t = v.t_unix;
        p->v = v.value;
        series.iv[i][series.n[i] % series.cap] = (float)v.interval_s;
        series.n[i]++;
        series.last_t[i] = v.t_unix;
    }
    pthread_mutex_unlock(&series.lock);
}

/* clrscope-agg: appends the values each counter's queue holds to its series. */
static void series_record(void)
{
    if (!series.cap)
        series.cap = (uint32_t)g_cfg.history_s + 2; /* at most a value a second */
    for (int i = 0; i < PROF_COUNTERS_MAX; i++) {
        struct entry *e = &counters.e[i];
        struct prof_counter v;
        if (!read_entry(i, &v))
            continue;
        uint32_t tail = e->tail, head = __atomic_load_n(&e->head, __ATOMIC_ACQUIRE);
        for (; tail != head; tail++) {
            const struct queued *q = &e->q[tail % ENTRY_QUEUE];
            v.t_unix = q->t;
            v.value = q->v;
            v.interval_s = q->interval_s;
            series_add(i, &v);
        }
        __atomic_store_n(&e->tail, tail, __ATOMIC_RELEASE);
    }
}

int prof_counters_series(double from_unix, double to_unix, struct prof_counter_point **out,
                         size_t *n)
{
    *out = NULL;
    *n = 0;
    pthread_mutex_lock(&series.lock);
    size_t total = 0;
    for (int i = 0; i < PROF_COUNTERS_MAX; i++)
        total += series.pts[i] ? (series.n[i] < series.cap ? series.n[i] : series.cap) : 0;
    struct prof_counter_point *p = total ? malloc(total * sizeof *p) : NULL;
    if (total && !p) {
        pthread_mutex_unlock(&series.lock);
        return -1;
    }
    size_t k = 0;
    for (int i = 0; i < PROF_COUNTERS_MAX; i++) {
        if (!series.pts[i])
            continue;
        uint64_t end = series.n[i], begin = end > series.cap ? end - series.cap : 0;
        for (uint64_t j = begin; j < end; j++) {
            const struct series_point *s = &series.pts[i][j % series.cap];
            if (s->t < from_unix || s->t >= to_unix)
                continue;
            p[k++] = (struct prof_counter_point){
                .name = counters.e[i].v.name, /* written before the entry was named, never after */
                .units = series.units[i],
                .incrementing = series.incrementing[i],
                .t_unix = s->t, .value = s->v, .interval_s = series.iv[i][j % series.cap]};
        }
    }
    pthread_mutex_unlock(&series.lock);
    if (!k) {
        free(p);
        p = NULL;
    }
    *out = p;
    *n = k;
    return 0;
}

size_t prof_counters_mem_bytes(void)
{
    pthread_mutex_lock(&series.lock);
    size_t b = series.bytes;
    pthread_mutex_unlock(&series.lock);
    return b;
}

void prof_counters_tick(double now)
{
    series_record();
    if (!__atomic_load_n(&counters.enabled, __ATOMIC_RELAXED))
        return;
    if (!counters.silent && !__atomic_load_n(&counters.events, __ATOMIC_RELAXED) &&
        now - g_core.start_unix >= SILENT_AFTER_S) {
        __atomic_store_n(&counters.silent, 1, __ATOMIC_RELAXED);
        prof_log(LOG_INFO, "runtime counters: none in the %.0f s since start; an app built with "
                 "EventSourceSupport=false (trimmed apps often are) has none: no exact allocated "
                 "total, /api/v1/counters stays empty", SILENT_AFTER_S);
    }
    if (!counters.max_gc_rate)
        return;
    uint64_t gcs = __atomic_load_n(&counters.gcs, __ATOMIC_RELAXED);
    if (counters.guard_t <= 0 || now < counters.guard_t) {
        counters.guard_t = now;
        counters.guard_gcs = gcs;
        return;
    }
    double dt = now - counters.guard_t;
    if (dt < GUARD_WINDOW_S)
        return;
    double rate = (double)(gcs - counters.guard_gcs) / dt;
    counters.guard_t = now;
    counters.guard_gcs = gcs;
    if (rate <= (double)counters.max_gc_rate)
        return;
    if (stop_session() != 0)
        return;
    counters.stopped_t = now;
    counters.stopped_rate = rate;
    __atomic_store_n(&counters.stopped, 1, __ATOMIC_RELEASE);
    __atomic_store_n(&counters.enabled, 0, __ATOMIC_RELAXED);
    prof_log(LOG_WARN, "runtime counters stopped: %.0f GCs/s (over %ld/s, "
             "CLRSCOPE_RUNTIME_COUNTERS_MAX_GC_RATE) and the runtime wakes its finalizer after "
             "each GC while they are on; no exact allocated total, /api/v1/counters keeps the "
             "last values", rate, counters.max_gc_rate);
}

static void sec_add(int64_t sec, uint64_t value)
{
    uint64_t *slot = &counters.alloc_sec[(uint64_t)sec % counters.nsec];
    uint64_t tag = ((uint64_t)sec & TAG_MASK) << VALUE_BITS;
    uint64_t old = __atomic_load_n(slot, __ATOMIC_RELAXED), want;
    do {
        uint64_t have = (old & ~VALUE_MASK) == tag ? old & VALUE_MASK : 0;
        uint64_t sum = have + value;
        want = tag | (sum > VALUE_MASK ? VALUE_MASK : sum);
    } while (!__atomic_compare_exchange_n(slot, &old, want, 1, __ATOMIC_RELAXED,
                                          __ATOMIC_RELAXED));
}

static void iv_add(double t_prev, double t, double bytes);

/* Spreads the bytes counted over (t_prev, t] across the seconds it overlaps, in proportion. */
static void alloc_interval(double t_prev, double t, double bytes)
{
    if (!counters.alloc_sec || !(t > t_prev) || !(bytes >= 0) || t - t_prev > (double)counters.nsec)
        return;
    double span = t - t_prev;
    for (int64_t s = (int64_t)floor(t_prev); s <= (int64_t)floor(t); s++) {
        double lo = t_prev > (double)s ? t_prev : (double)s;
        double hi = t < (double)(s + 1) ? t : (double)(s + 1);
        if (hi > lo)
            sec_add(s, (uint64_t)llround(bytes * (hi - lo) / span));
    }
    if (!__atomic_load_n(&counters.first_full_s, __ATOMIC_RELAXED))
        __atomic_store_n(&counters.first_full_s, (int64_t)ceil(t_prev), __ATOMIC_RELEASE);
    __atomic_store_n(&counters.last_full_s, (int64_t)floor(t) - 1, __ATOMIC_RELEASE);
}

/* Keeps (t_prev, t] whole in the ring of the newest intervals. */
static void iv_add(double t_prev, double t, double bytes)
{
    uint64_t n = __atomic_load_n(&counters.iv_n, __ATOMIC_RELAXED);
    struct alloc_iv *iv = &counters.iv[n % IV_RING];
    __atomic_store_n(&iv->t0_us, llround(t_prev * 1e6), __ATOMIC_RELAXED);
    __atomic_store_n(&iv->t1_us, llround(t * 1e6), __ATOMIC_RELAXED);
    __atomic_store_n(&iv->bytes, (uint64_t)llround(bytes), __ATOMIC_RELAXED);
    __atomic_store_n(&counters.iv_n, n + 1, __ATOMIC_RELEASE);
}

static struct entry *entry_for(const char *name)
{
    for (int i = 0; i < PROF_COUNTERS_MAX; i++) {
        struct entry *e = &counters.e[i];
        int st = __atomic_load_n(&e->state, __ATOMIC_ACQUIRE);
        if (st == 2 && !strcmp(e->v.name, name))
            return e;
        if (st == 0) {
            int zero = 0;
            if (!__atomic_compare_exchange_n(&e->state, &zero, 1, 0, __ATOMIC_ACQ_REL,
                                             __ATOMIC_ACQUIRE))
                continue; /* another writer took it: look at the next ones */
            memcpy(e->v.name, name, sizeof e->v.name);
            __atomic_store_n(&e->state, 2, __ATOMIC_RELEASE);
            return e;
        }
    }
    return NULL;
}

void prof_counters_on_event(const BYTE *meta, ULONG meta_len, const BYTE *data, ULONG len)
{
    struct evc_value v;
    if (evc_parse(meta, meta_len, data, len, &v)) {
        __atomic_fetch_add(&counters.malformed, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(&counters.events, 1, __ATOMIC_RELAXED);
    double now = prof_unix_now();
    if (!strcmp(v.name, "alloc-rate") && v.incrementing) {
        /* The first value is the total since the process started (the counter's previous
         * value starts at 0): the per-second records cannot place it, the ring keeps it whole. */
        double from = counters.alloc_t_prev > 0 ? counters.alloc_t_prev
                                                 : (double)g_core.start_unix;
        if (counters.alloc_t_prev > 0)
            alloc_interval(counters.alloc_t_prev, now, v.value);
        /* the ring takes every interval, whatever its length (the per-second records leave
         * out those longer than they keep): a gap there would lose bytes for the heap guard */
        if (now > from && v.value >= 0)
            iv_add(from, now, v.value);
        counters.alloc_t_prev = now;
    }
    struct entry *e = entry_for(v.name);
    if (!e) {
        __atomic_fetch_add(&counters.dropped, 1, __ATOMIC_RELAXED);
        return;
    }
    __atomic_fetch_add(&e->seq, 1, __ATOMIC_ACQ_REL);
    memcpy(e->v.units, v.units, sizeof e->v.units);
    e->v.value = v.value;
    e->v.interval_s = v.interval_s;
    e->v.incrementing = v.incrementing;
    e->v.t_unix = now;
    __atomic_fetch_add(&e->seq, 1, __ATOMIC_RELEASE);
    /* to the series: the runtime's one poller thread is the queue's only writer (after the
     * entry's units, which the series takes from it) */
    uint32_t head = __atomic_load_n(&e->head, __ATOMIC_RELAXED);
    if (head - __atomic_load_n(&e->tail, __ATOMIC_ACQUIRE) < ENTRY_QUEUE) {
        e->q[head % ENTRY_QUEUE] = (struct queued){now, v.value, v.interval_s};
        __atomic_store_n(&e->head, head + 1, __ATOMIC_RELEASE);
    } else {
        __atomic_fetch_add(&counters.series_dropped, 1, __ATOMIC_RELAXED);
    }
}

int prof_counters_allocated(int64_t *from_s, int64_t *to_s, int64_t *bytes)
{
    int64_t first = __atomic_load_n(&counters.first_full_s, __ATOMIC_ACQUIRE);
    int64_t last = __atomic_load_n(&counters.last_full_s, __ATOMIC_ACQUIRE);
    if (!counters.alloc_sec || !first)
        return -1;
    int64_t a = *from_s > first ? *from_s : first, b = *to_s < last ? *to_s : last;
    if (b - a >= (int64_t)counters.nsec)
        a = b - (int64_t)counters.nsec + 1;
    if (a > b)
        return -1;
    uint64_t sum = 0;
    for (int64_t s = a; s <= b; s++) {
        uint64_t v = __atomic_load_n(&counters.alloc_sec[(uint64_t)s % counters.nsec],
                                     __ATOMIC_RELAXED);
        if ((v >> VALUE_BITS) == ((uint64_t)s & TAG_MASK))
            sum += v & VALUE_MASK;
    }
    *from_s = a;
    *to_s = b;
    *bytes = (int64_t)sum;
    return 0;
}

int prof_counters_allocated_after(double since_unix, int64_t *bytes, double *covered_to,
                                  double *oldest_from)
{
    uint64_t n = __atomic_load_n(&counters.iv_n, __ATOMIC_ACQUIRE);
    if (!n)
        return -1;
    int64_t since_us = llround(since_unix * 1e6), newest = 0, oldest = 0;
    uint64_t sum = 0, i = n;
    while (i > 0 && n - i < IV_RING - 1) {
        i--;
        const struct alloc_iv *iv = &counters.iv[i % IV_RING];
        int64_t t0 = __atomic_load_n(&iv->t0_us, __ATOMIC_RELAXED);
        int64_t t1 = __atomic_load_n(&iv->t1_us, __ATOMIC_RELAXED);
        uint64_t b = __atomic_load_n(&iv->bytes, __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        /* the writer may have moved on while this slot was read: a slot it could be
         * rewriting now is not trusted, and the walk stops there */
        if (__atomic_load_n(&counters.iv_n, __ATOMIC_RELAXED) - i >= IV_RING - 1)
            break;
        if (!newest)
            newest = t1;
        oldest = t0;
        if (t1 <= since_us)
            break;
        sum += b;
    }
    if (!newest)
        return -1;
    *bytes = (int64_t)sum;
    *covered_to = (double)newest / 1e6;
    *oldest_from = (double)oldest / 1e6;
    return 0;
}

double prof_counters_alloc_interval_s(void)
{
    if (!__atomic_load_n(&counters.enabled, __ATOMIC_RELAXED) ||
        __atomic_load_n(&counters.silent, __ATOMIC_RELAXED))
        return 0;
    return (double)counters.interval_s;
}

int prof_counters_snapshot(struct prof_counter *out, int max)
{
    int n = 0;
    for (int i = 0; i < PROF_COUNTERS_MAX && n < max; i++)
        n += read_entry(i, &out[n]);
    return n;
}

void prof_counters_get_stats(struct prof_counters_stats *out)
{
    out->enabled = __atomic_load_n(&counters.enabled, __ATOMIC_RELAXED);
    int stopped = __atomic_load_n(&counters.stopped, __ATOMIC_ACQUIRE);
    out->stopped_gc_rate = stopped ? counters.stopped_rate : 0;
    out->stopped_t = stopped ? counters.stopped_t : 0;
    out->max_gc_rate = counters.max_gc_rate;
    out->events = __atomic_load_n(&counters.events, __ATOMIC_RELAXED);
    out->silent = out->events == 0 && __atomic_load_n(&counters.silent, __ATOMIC_RELAXED);
    out->malformed = __atomic_load_n(&counters.malformed, __ATOMIC_RELAXED);
    out->dropped = __atomic_load_n(&counters.dropped, __ATOMIC_RELAXED);
    out->series_dropped = __atomic_load_n(&counters.series_dropped, __ATOMIC_RELAXED);
}

const struct prof_kind prof_counters_kind = {
    .name = "counters",
    .tick = prof_counters_tick,
    .mem_bytes = prof_counters_mem_bytes,
    .mem_name = "runtime_counters",
};
