/* prof_tdump.c - see prof_tdump.h. */
#include "prof_tdump.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prof_agg.h"
#include "prof_core.h"

struct grp;

/* The thread dumps' state: written under `lock` (requests from any clrscope or HTTP thread, the
 * sampler thread's answers), `requested` and `served` with atomic stores, which the sampler
 * thread reads without the lock (prof_tdump_wanted); the sorting context under `sort_lock`. */
struct tdump_state {
    pthread_mutex_t lock;
    pthread_cond_t done; /* CLOCK_MONOTONIC */
    int cond_ready;
    int enabled;
    uint64_t requested; /* the newest request's number; the sampler serves it (atomic reads) */
    uint64_t served;    /* the newest request answered, by a dump or a failure */
    const char *failure; /* why `served` failed, or NULL */
    struct prof_tdump *last;
    size_t last_bytes; /* what `last` holds */
    int64_t published_ns, cost_ns; /* when the last dump was published; what it took */
    uint64_t seq;
    struct prof_tdump_stats st;
    /* prof_tdump_group's sort (any thread that groups: the sampler thread, tests) */
    pthread_mutex_t sort_lock;
    const struct grp *sort_groups; /* qsort has no context argument in C11 */
};

static struct tdump_state tdump = {.lock = PTHREAD_MUTEX_INITIALIZER,
                                   .sort_lock = PTHREAD_MUTEX_INITIALIZER};

static void init_cond_locked(void)
{
    if (tdump.cond_ready)
        return;
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&tdump.done, &a);
    pthread_condattr_destroy(&a);
    tdump.cond_ready = 1;
}

void prof_tdump_enable(int on)
{
    pthread_mutex_lock(&tdump.lock);
    init_cond_locked();
    tdump.enabled = on;
    if (!on && tdump.requested != tdump.served) { /* nobody will serve what waits: wake it */
        tdump.served = tdump.requested;
        tdump.failure = "the sampler thread stopped";
        pthread_cond_broadcast(&tdump.done);
    }
    pthread_mutex_unlock(&tdump.lock);
}

void prof_tdump_free(struct prof_tdump *d)
{
    if (!d)
        return;
    free(d->threads);
    free(d->groups);
    free(d->frames);
    free(d);
}

void prof_tdump_release(struct prof_tdump *d)
{
    if (d && __atomic_sub_fetch(&d->refs, 1, __ATOMIC_ACQ_REL) == 0)
        prof_tdump_free(d);
}

int prof_tdump_take(int timeout_ms, int any_age, struct prof_tdump **out, const char **why)
{
    *out = NULL;
    *why = NULL;
    int64_t deadline = prof_now_ns() + (int64_t)timeout_ms * 1000000;
    pthread_mutex_lock(&tdump.lock);
    init_cond_locked();
    struct prof_tdump *d = tdump.last;
    /* at least TDUMP_REUSE_MS after the last one was published, and ten times what it cost: a
     * dump of thousands of threads that takes 100 ms is taken at most once a second */
    int64_t reuse = (int64_t)TDUMP_REUSE_MS * 1000000;
    if (reuse < 10 * tdump.cost_ns)
        reuse = 10 * tdump.cost_ns;
    if (d && (any_age || prof_now_ns() - tdump.published_ns < reuse)) {
        __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
        tdump.st.reused++;
        pthread_mutex_unlock(&tdump.lock);
        *out = d;
        return TDUMP_OK;
    }
    if (!tdump.enabled) {
        pthread_mutex_unlock(&tdump.lock);
        *why = "thread dumps need clrscope's sampler thread, which runs with the cpu, wall, "
               "alloc or live profile (CLRSCOPE_PROFILES)";
        return TDUMP_UNAVAILABLE;
    }
    /* one dump serves every request waiting for it */
    uint64_t want = tdump.requested == tdump.served ? tdump.requested + 1 : tdump.requested;
    __atomic_store_n(&tdump.requested, want, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&tdump.lock);
    prof_core_nudge(); /* the sampler thread naps in prof_core_nap_nudged */
    pthread_mutex_lock(&tdump.lock);
    int rc = TDUMP_OK;
    while (tdump.served < want) {
        if (prof_core_stopping()) {
            rc = TDUMP_UNAVAILABLE;
            *why = "the process is shutting down";
            break;
        }
        int64_t left = deadline - prof_now_ns();
        if (left <= 0) {
            rc = TDUMP_TIMEOUT;
            *why = "the runtime did not stop for the dump in time (a long GC, or a thread "
                   "that cannot reach a safe point)";
            tdump.st.timeouts++;
            break;
        }
        if (left > 100000000)
            left = 100000000; /* look at prof_core_stopping now and then */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_sec += (time_t)(left / 1000000000);
        ts.tv_nsec += (long)(left % 1000000000);
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&tdump.done, &tdump.lock, &ts);
    }
    if (rc == TDUMP_OK) {
        if (tdump.failure || !tdump.last) {
            rc = TDUMP_FAILED;
            *why = tdump.failure ? tdump.failure : "no dump was taken";
        } else {
            d = tdump.last;
            __atomic_add_fetch(&d->refs, 1, __ATOMIC_RELAXED);
            *out = d;
        }
    }
    pthread_mutex_unlock(&tdump.lock);
    return rc;
}

uint64_t prof_tdump_wanted(void)
{
    uint64_t want = __atomic_load_n(&tdump.requested, __ATOMIC_ACQUIRE);
    uint64_t served = __atomic_load_n(&tdump.served, __ATOMIC_ACQUIRE);
    return want != served ? want : 0;
}

/* Request `want` is answered (tdump.last, or tdump.failure): its waiters go. Lock held. */
static void answered_locked(uint64_t want)
{
    if (want > tdump.served)
        __atomic_store_n(&tdump.served, want, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&tdump.done);
}

/* The bytes a dump holds: itself, its threads, groups and frame pointers (the names are
 * prof_symbols'). */
static size_t dump_bytes(const struct prof_tdump *d)
{
    size_t frames = 0;
    for (uint32_t g = 0; g < d->ngroups; g++)
        if (d->groups[g].first_frame + d->groups[g].nframes > frames)
            frames = d->groups[g].first_frame + d->groups[g].nframes;
    return sizeof *d + d->nthreads * sizeof *d->threads + d->ngroups * sizeof *d->groups +
           frames * sizeof *d->frames;
}

void prof_tdump_publish(uint64_t want, struct prof_tdump *d)
{
    size_t bytes = dump_bytes(d);
    pthread_mutex_lock(&tdump.lock);
    init_cond_locked();
    d->refs = 1; /* the module's */
    d->seq = ++tdump.seq;
    struct prof_tdump *old = tdump.last;
    tdump.last = d;
    tdump.last_bytes = bytes;
    tdump.published_ns = prof_now_ns();
    tdump.cost_ns = tdump.published_ns - d->t_mono_ns;
    tdump.failure = NULL;
    tdump.st.taken++;
    answered_locked(want);
    pthread_mutex_unlock(&tdump.lock);
    prof_tdump_release(old);
}

void prof_tdump_fail(uint64_t want, const char *why)
{
    pthread_mutex_lock(&tdump.lock);
    init_cond_locked();
    tdump.failure = why;
    tdump.st.failed++;
    answered_locked(want);
    pthread_mutex_unlock(&tdump.lock);
}

void prof_tdump_get_stats(struct prof_tdump_stats *out)
{
    pthread_mutex_lock(&tdump.lock);
    *out = tdump.st;
    pthread_mutex_unlock(&tdump.lock);
}

size_t prof_tdump_mem_bytes(void)
{
    pthread_mutex_lock(&tdump.lock);
    size_t n = tdump.last ? tdump.last_bytes : 0;
    pthread_mutex_unlock(&tdump.lock);
    return n;
}

/* ---- grouping ---- */

static uint64_t hash_stack(const char *const *f, uint32_t n, int truncated)
{
    uint64_t h = 1469598103934665603ull ^ (uint64_t)truncated;
    for (uint32_t i = 0; i < n; i++) {
        for (const unsigned char *p = (const unsigned char *)f[i]; *p; p++)
            h = (h ^ *p) * 1099511628211ull;
        h = (h ^ 0xff) * 1099511628211ull; /* frame boundary */
    }
    return h;
}

static int same_stack(const char *const *a, const char *const *b, uint32_t n)
{
    for (uint32_t i = 0; i < n; i++)
        if (a[i] != b[i] && strcmp(a[i], b[i]))
            return 0;
    return 1;
}

struct grp {
    uint64_t hash;
    uint32_t rep;     /* a thread with this stack (index into the input) */
    uint32_t count;
    uint32_t min_tid;
    uint32_t rank;    /* position after sorting */
};

static int cmp_group(const void *a, const void *b)
{
    const struct grp *x = &tdump.sort_groups[*(const uint32_t *)a];
    const struct grp *y = &tdump.sort_groups[*(const uint32_t *)b];
    if (x->count != y->count)
        return x->count > y->count ? -1 : 1;
    return x->min_tid < y->min_tid ? -1 : x->min_tid > y->min_tid;
}

static int cmp_thread(const void *a, const void *b)
{
    const struct prof_tdump_thread *x = a, *y = b;
    if (x->group != y->group)
        return x->group < y->group ? -1 : 1;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

int prof_tdump_group(struct prof_tdump *d, const char *const *frames, const uint32_t *off,
                     const uint32_t *len, const int *truncated)
{
    uint32_t n = d->nthreads;
    uint32_t cap = 16;
    while (cap < 2 * n)
        cap *= 2;
    uint32_t *slot = malloc(cap * sizeof *slot); /* group index + 1, 0 = empty */
    struct grp *g = malloc((n ? n : 1) * sizeof *g);
    uint32_t *of = malloc((n ? n : 1) * sizeof *of); /* thread -> group (before sorting) */
    uint32_t *order = malloc((n ? n : 1) * sizeof *order);
    if (!slot || !g || !of || !order)
        goto oom;
    memset(slot, 0, cap * sizeof *slot);
    uint32_t ng = 0;
    size_t nframes = 0;
    for (uint32_t i = 0; i < n; i++) {
        const char *const *f = frames + off[i];
        uint64_t h = hash_stack(f, len[i], truncated[i]);
        uint32_t k = (uint32_t)h & (cap - 1);
        for (;; k = (k + 1) & (cap - 1)) {
            if (!slot[k]) {
                g[ng] = (struct grp){.hash = h, .rep = i, .count = 0, .min_tid = UINT32_MAX};
                slot[k] = ++ng;
                nframes += len[i];
                break;
            }
            struct grp *c = &g[slot[k] - 1];
            if (c->hash == h && len[c->rep] == len[i] && truncated[c->rep] == truncated[i] &&
                same_stack(frames + off[c->rep], f, len[i]))
                break;
        }
        struct grp *c = &g[slot[k] - 1];
        c->count++;
        if (d->threads[i].tid < c->min_tid)
            c->min_tid = d->threads[i].tid;
        of[i] = slot[k] - 1;
    }
    for (uint32_t i = 0; i < ng; i++)
        order[i] = i;
    pthread_mutex_lock(&tdump.sort_lock);
    tdump.sort_groups = g;
    qsort(order, ng, sizeof *order, cmp_group);
    pthread_mutex_unlock(&tdump.sort_lock);
    struct prof_tdump_group *groups = malloc((ng ? ng : 1) * sizeof *groups);
    const char **fr = malloc((nframes ? nframes : 1) * sizeof *fr);
    if (!groups || !fr) {
        free(groups);
        free(fr);
        goto oom;
    }
    uint32_t at = 0;
    for (uint32_t r = 0; r < ng; r++) {
        struct grp *c = &g[order[r]];
        c->rank = r;
        groups[r].nthreads = c->count;
        groups[r].first_frame = at;
        groups[r].nframes = len[c->rep];
        groups[r].truncated = truncated[c->rep];
        memcpy(fr + at, frames + off[c->rep], len[c->rep] * sizeof *fr);
        at += len[c->rep];
    }
    for (uint32_t i = 0; i < n; i++)
        d->threads[i].group = g[of[i]].rank;
    qsort(d->threads, n, sizeof *d->threads, cmp_thread);
    free(d->groups);
    free(d->frames);
    d->groups = groups;
    d->ngroups = ng;
    d->frames = fr;
    free(slot);
    free(g);
    free(of);
    free(order);
    return 0;
oom:
    free(slot);
    free(g);
    free(of);
    free(order);
    return -1;
}

/* ---- deadlocks ---- */

static int cmp_tid_index(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int prof_tdump_find_deadlocks(struct prof_tdump *d)
{
    uint32_t n = d->nthreads;
    d->ndeadlocks = 0;
    if (!n)
        return 0;
    /* (tid << 32 | index), sorted: the owner's index by binary search */
    uint64_t *by_tid = malloc(n * sizeof *by_tid);
    uint32_t *next = malloc(n * sizeof *next);  /* index of the owner waited for, or UINT32_MAX */
    uint32_t *walk = calloc(n, sizeof *walk);   /* which walk first reached it (1-based) */
    if (!by_tid || !next || !walk) {
        free(by_tid), free(next), free(walk);
        return -1;
    }
    for (uint32_t i = 0; i < n; i++) {
        by_tid[i] = (uint64_t)d->threads[i].tid << 32 | i;
        d->threads[i].deadlock = 0;
    }
    qsort(by_tid, n, sizeof *by_tid, cmp_tid_index);
    for (uint32_t i = 0; i < n; i++) {
        next[i] = UINT32_MAX;
        const struct prof_tdump_thread *th = &d->threads[i];
        if (th->wait_ns < TDUMP_DEADLOCK_MIN_NS || !th->lock_owner ||
            th->lock_owner > UINT32_MAX || th->lock_owner == th->tid)
            continue;
        uint32_t lo = 0, hi = n;
        while (lo < hi) {
            uint32_t mid = lo + (hi - lo) / 2;
            if ((by_tid[mid] >> 32) < th->lock_owner)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < n && (by_tid[lo] >> 32) == th->lock_owner)
            next[i] = (uint32_t)by_tid[lo];
    }
    /* every thread has at most one way out: follow it until a thread seen before; a thread
     * seen in this same walk closes a cycle */
    for (uint32_t s = 0; s < n; s++) {
        uint32_t id = s + 1, i = s;
        while (i != UINT32_MAX && !walk[i]) {
            walk[i] = id;
            i = next[i];
        }
        if (i == UINT32_MAX || walk[i] != id || d->threads[i].deadlock)
            continue;
        uint32_t cycle = ++d->ndeadlocks;
        uint32_t j = i;
        do {
            d->threads[j].deadlock = cycle;
            j = next[j];
        } while (j != i);
    }
    free(by_tid), free(next), free(walk);
    return 0;
}

/* ---- the thread pool ---- */

static int has_frame(const struct prof_tdump *d, const struct prof_tdump_group *g, const char *f)
{
    for (uint32_t i = 0; i < g->nframes; i++)
        if (!strcmp(d->frames[g->first_frame + i], f))
            return 1;
    return 0;
}

int prof_tdump_app_frame(const char *f)
{
    static const char *const runtime[] = {"System.", "Microsoft.", "Interop.", "Internal.", "["};
    for (size_t i = 0; i < sizeof runtime / sizeof runtime[0]; i++)
        if (!strncmp(f, runtime[i], strlen(runtime[i])))
            return 0;
    return 1;
}

/* Keeps `site` among the most frequent TDUMP_POOL_SITES, most first. */
static void add_site(struct prof_tdump_pool *out, const char *site, uint32_t n)
{
    uint32_t k = 0;
    while (k < out->nsites && strcmp(out->site[k], site))
        k++;
    if (k < out->nsites) {
        out->site_count[k] += n;
    } else if (out->nsites < TDUMP_POOL_SITES) {
        k = out->nsites++;
        out->site[k] = site;
        out->site_count[k] = n;
    } else if (n > out->site_count[TDUMP_POOL_SITES - 1]) {
        k = TDUMP_POOL_SITES - 1;
        out->site[k] = site;
        out->site_count[k] = n;
    } else {
        return;
    }
    for (; k > 0 && out->site_count[k] > out->site_count[k - 1]; k--) {
        const char *ts = out->site[k];
        uint32_t tc = out->site_count[k];
        out->site[k] = out->site[k - 1];
        out->site_count[k] = out->site_count[k - 1];
        out->site[k - 1] = ts;
        out->site_count[k - 1] = tc;
    }
}

void prof_tdump_pool(const struct prof_tdump *d, struct prof_tdump_pool *out)
{
    memset(out, 0, sizeof *out);
    /* d->threads are in group order: one group at a time */
    for (uint32_t i = 0, g = UINT32_MAX; i < d->nthreads;) {
        g = d->threads[i].group;
        const struct prof_tdump_group *gr = &d->groups[g];
        int worker = has_frame(d, gr, "System.Threading.PortableThreadPool.WorkerThread.WorkerThreadStart");
        int busy = has_frame(d, gr, "System.Threading.ThreadPoolWorkQueue.Dispatch");
        uint32_t blocked = 0;
        for (; i < d->nthreads && d->threads[i].group == g; i++) {
            const struct prof_tdump_thread *th = &d->threads[i];
            /* a stack deeper than CLRSCOPE_MAX_FRAMES lost its root side: a pool thread (by its
             * name) that deep runs a work item */
            int w = worker || (gr->truncated && !strcmp(th->name, ".NET TP Worker"));
            if (!w)
                continue;
            out->workers++;
            if (!busy && !gr->truncated) {
                out->idle++;
                continue;
            }
            out->busy++;
            if (th->state == 'S' || th->state == 'D')
                blocked++;
        }
        if (!blocked)
            continue;
        out->blocked += blocked;
        const char *site = gr->nframes ? d->frames[gr->first_frame] : "[unknown]";
        for (uint32_t f = 0; f < gr->nframes; f++)
            if (prof_tdump_app_frame(d->frames[gr->first_frame + f])) {
                site = d->frames[gr->first_frame + f];
                break;
            }
        add_site(out, site, blocked);
    }
    out->starvation_likely = out->workers >= 2 && out->idle == 0 &&
                             (uint64_t)out->blocked * 4 >= (uint64_t)out->workers * 3;
}

const struct prof_kind prof_tdump_kind = {
    .name = "thread-dumps",
    .mem_bytes = prof_tdump_mem_bytes,
    .mem_name = "thread_dumps",
};
