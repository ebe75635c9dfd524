/*
 * test_tdump - the thread dump's data (prof_tdump): identical stacks are grouped by their names,
 * not by the pointers that carry them, a truncated stack is not the same as a whole one, groups
 * come largest first and their threads by tid; lock waits that close a cycle are deadlocks, and
 * a thread waiting for a deadlocked one, or for a thread outside the dump, or for itself, is not;
 * pool workers are idle, busy or blocked by their stack and state, and starvation is called only
 * when none is idle and three quarters are blocked;
 * the request/publish handshake hands one dump to every waiter and reuses it for a while.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prof_tdump.h"
#include "unit_check.h"

static struct prof_tdump *new_dump(uint32_t n, const uint32_t *tids)
{
    struct prof_tdump *d = calloc(1, sizeof *d);
    d->threads = calloc(n, sizeof *d->threads);
    d->nthreads = n;
    for (uint32_t i = 0; i < n; i++) {
        d->threads[i].tid = tids[i];
        d->threads[i].cpu_ns = -1;
        d->threads[i].state = 'S';
    }
    return d;
}

static void test_grouping(void)
{
    /* the same names in separate buffers (two FunctionIDs can name alike) */
    char a1[] = "App.Orders.Wait", a2[] = "App.Orders.Wait";
    const char *frames[] = {
        a1, "App.Main",                  /* tid 30 */
        "X.Spin", "App.Main",            /* tid 10 */
        a2, "App.Main",                  /* tid 20: same stack as tid 30 */
        a1, "App.Main",                  /* tid 5: same again, but truncated */
        "App.Orders.Wait", "App.Main",   /* tid 7: same as 30 and 20 */
    };
    uint32_t off[] = {0, 2, 4, 6, 8}, len[] = {2, 2, 2, 2, 2};
    int trunc[] = {0, 0, 0, 1, 0};
    uint32_t tids[] = {30, 10, 20, 5, 7};
    struct prof_tdump *d = new_dump(5, tids);
    CHECK(prof_tdump_group(d, frames, off, len, trunc) == 0, "grouped");
    CHECK(d->ngroups == 3, "three distinct stacks (%u)", d->ngroups);
    CHECK(d->groups[0].nthreads == 3 && !d->groups[0].truncated, "largest group first (%u)",
          d->groups[0].nthreads);
    CHECK(!strcmp(d->frames[d->groups[0].first_frame], "App.Orders.Wait") &&
              d->groups[0].nframes == 2,
          "its frames, leaf first");
    CHECK(d->threads[0].tid == 7 && d->threads[1].tid == 20 && d->threads[2].tid == 30,
          "its threads together, by tid (%u %u %u)", d->threads[0].tid, d->threads[1].tid,
          d->threads[2].tid);
    CHECK(d->threads[0].group == 0 && d->threads[2].group == 0, "and numbered group 0");
    /* the two single-thread groups: by their lowest tid */
    CHECK(d->groups[1].truncated && d->threads[3].tid == 5, "a truncated stack is its own group");
    CHECK(d->threads[4].tid == 10 && d->threads[4].group == 2 &&
              !strcmp(d->frames[d->groups[2].first_frame], "X.Spin"),
          "the spinning thread's group last");
    prof_tdump_free(d);

    struct prof_tdump *e = new_dump(0, NULL);
    CHECK(prof_tdump_group(e, NULL, NULL, NULL, NULL) == 0 && e->ngroups == 0, "no threads");
    prof_tdump_free(e);
}

static void waits(struct prof_tdump *d, uint32_t tid, uint64_t owner)
{
    for (uint32_t i = 0; i < d->nthreads; i++)
        if (d->threads[i].tid == tid) {
            d->threads[i].lock_id = 0x1000 + owner;
            d->threads[i].lock_owner = owner;
            d->threads[i].wait_ns = 2 * TDUMP_DEADLOCK_MIN_NS;
        }
}

static uint32_t cycle_of(const struct prof_tdump *d, uint32_t tid)
{
    for (uint32_t i = 0; i < d->nthreads; i++)
        if (d->threads[i].tid == tid)
            return d->threads[i].deadlock;
    return 999;
}

static void test_deadlocks(void)
{
    uint32_t tids[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
    struct prof_tdump *d = new_dump(10, tids);
    waits(d, 1, 2); /* 1 -> 2 -> 1: a deadlock */
    waits(d, 2, 1);
    waits(d, 3, 1); /* 3 waits for a deadlocked thread: stuck, but not in the cycle */
    waits(d, 4, 5); /* 4 -> 5 -> 6 -> 4: a second, of three */
    waits(d, 5, 6);
    waits(d, 6, 4);
    waits(d, 7, 8); /* 7 -> 8: 8 runs (holds the lock, waits for nothing) */
    waits(d, 9, 9); /* a thread said to own what it waits for: no edge */
    waits(d, 10, 4242); /* the owner is not in the dump */
    CHECK(prof_tdump_find_deadlocks(d) == 0, "searched");
    CHECK(d->ndeadlocks == 2, "two deadlocks (%u)", d->ndeadlocks);
    uint32_t c1 = cycle_of(d, 1), c4 = cycle_of(d, 4);
    CHECK(c1 && c1 == cycle_of(d, 2), "1 and 2 in one cycle (%u, %u)", c1, cycle_of(d, 2));
    CHECK(c4 && c4 != c1 && c4 == cycle_of(d, 5) && c4 == cycle_of(d, 6),
          "4, 5 and 6 in another");
    CHECK(!cycle_of(d, 3) && !cycle_of(d, 7) && !cycle_of(d, 8) && !cycle_of(d, 9) &&
              !cycle_of(d, 10),
          "the others in none");
    /* a wait shorter than TDUMP_DEADLOCK_MIN_NS (an owner letting go as we look) is no edge */
    d->threads[4].wait_ns = TDUMP_DEADLOCK_MIN_NS / 2; /* tid 5 */
    CHECK(prof_tdump_find_deadlocks(d) == 0 && d->ndeadlocks == 1 && !cycle_of(d, 4),
          "a fresh wait closes no cycle (%u)", d->ndeadlocks);
    d->threads[4].wait_ns = 2 * TDUMP_DEADLOCK_MIN_NS;
    /* a wait that ended (wait_ns 0) breaks the cycle */
    d->threads[5].wait_ns = 0; /* tid 6 */
    CHECK(prof_tdump_find_deadlocks(d) == 0 && d->ndeadlocks == 1 && !cycle_of(d, 4),
          "without 6's wait, one deadlock (%u)", d->ndeadlocks);
    prof_tdump_free(d);
}

static void test_pool(void)
{
#define START "System.Threading.PortableThreadPool.WorkerThread.WorkerThreadStart"
#define DISPATCH "System.Threading.ThreadPoolWorkQueue.Dispatch"
    const char *frames[] = {
        /* 0: idle worker */
        "System.Threading.LowLevelLifoSemaphore.WaitForSignal", START,
        /* 2: blocked in the app's code */
        "System.Threading.Monitor.Wait", "App.Orders.Get", DISPATCH, START,
        /* 6: blocked in the framework only: the leaf is the site */
        "System.Threading.Thread.Sleep", DISPATCH, START,
        /* 9: not a pool thread */
        "App.Main",
    };
    uint32_t off[] = {0, 2, 2, 2, 6, 9, 2}, len[] = {2, 4, 4, 4, 3, 1, 4};
    int trunc[7] = {0};
    uint32_t tids[] = {1, 2, 3, 4, 5, 6, 7};
    struct prof_tdump *d = new_dump(7, tids);
    d->threads[3].state = 'R'; /* tid 4 runs its work item: busy, not blocked */
    d->threads[6].state = 'D'; /* tid 7 waits on a disk: blocked */
    CHECK(prof_tdump_group(d, frames, off, len, trunc) == 0, "grouped");
    struct prof_tdump_pool p;
    prof_tdump_pool(d, &p);
    CHECK(p.workers == 6 && p.idle == 1 && p.busy == 5 && p.blocked == 4,
          "6 workers, 1 idle, 5 busy, 4 blocked (%u %u %u %u)", p.workers, p.idle, p.busy,
          p.blocked);
    CHECK(p.nsites == 2 && !strcmp(p.site[0], "App.Orders.Get") && p.site_count[0] == 3 &&
              !strcmp(p.site[1], "System.Threading.Thread.Sleep") && p.site_count[1] == 1,
          "sites: the app's frame (3), else the leaf (1), most first");
    CHECK(!p.starvation_likely, "an idle worker: no starvation");
    prof_tdump_free(d);

    /* all busy, 3 of 4 blocked: likely; 2 of 4: not */
    uint32_t off2[] = {2, 2, 2, 2}, len2[] = {4, 4, 4, 4};
    int trunc2[4] = {0};
    for (int running = 1; running <= 2; running++) {
        struct prof_tdump *e = new_dump(4, tids);
        for (int i = 0; i < running; i++)
            e->threads[i].state = 'R';
        prof_tdump_group(e, frames, off2, len2, trunc2);
        prof_tdump_pool(e, &p);
        CHECK(p.starvation_likely == (running == 1), "%d of 4 running: likely %d", running,
              p.starvation_likely);
        prof_tdump_free(e);
    }
    /* a pool thread deeper than the frame cap lost WorkerThreadStart: known by its name */
    const char *deep[] = {"System.Threading.Monitor.Wait", "App.Deep.Recurse", "App.Deep.Recurse"};
    uint32_t off3[] = {0, 0}, len3[] = {3, 3};
    int trunc3[] = {1, 1};
    struct prof_tdump *f = new_dump(2, tids);
    snprintf(f->threads[0].name, sizeof f->threads[0].name, ".NET TP Worker");
    snprintf(f->threads[1].name, sizeof f->threads[1].name, "my-thread");
    prof_tdump_group(f, deep, off3, len3, trunc3);
    prof_tdump_pool(f, &p);
    CHECK(p.workers == 1 && p.busy == 1 && p.blocked == 1 && !strcmp(p.site[0], "App.Deep.Recurse"),
          "a truncated pool thread: a blocked worker (%u %u %u)", p.workers, p.busy, p.blocked);
    prof_tdump_free(f);
    CHECK(prof_tdump_app_frame("App.X") && !prof_tdump_app_frame("System.X") &&
              !prof_tdump_app_frame("Microsoft.X") && !prof_tdump_app_frame("[native libc.so.6]"),
          "app frames");
#undef START
#undef DISPATCH
}

/* ---- the handshake: a stand-in sampler thread serving requests ---- */

static int g_serve_stop;
static int g_served;

static void *sampler(void *arg)
{
    (void)arg;
    while (!__atomic_load_n(&g_serve_stop, __ATOMIC_ACQUIRE)) {
        uint64_t want = prof_tdump_wanted();
        if (want) {
            uint32_t tid = 77;
            struct prof_tdump *d = new_dump(1, &tid);
            const char *fr[] = {"A.B"};
            uint32_t off = 0, len = 1;
            int tr = 0;
            prof_tdump_group(d, fr, &off, &len, &tr);
            d->t_mono_ns = 0; /* set below by the clock */
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            d->t_mono_ns = (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
            __atomic_add_fetch(&g_served, 1, __ATOMIC_RELAXED);
            prof_tdump_publish(want, d);
        }
        struct timespec nap = {0, 1000000L};
        nanosleep(&nap, NULL);
    }
    return NULL;
}

static void *taker(void *arg)
{
    struct prof_tdump **out = arg;
    const char *why;
    if (prof_tdump_take(2000, 0, out, &why) != TDUMP_OK)
        *out = NULL;
    return NULL;
}

static void test_handshake(void)
{
    struct prof_tdump *d = NULL;
    const char *why = NULL;
    CHECK(prof_tdump_take(100, 0, &d, &why) == TDUMP_UNAVAILABLE && why && !d,
          "no sampler thread: unavailable, with a reason");
    prof_tdump_enable(1);
    pthread_t s;
    pthread_create(&s, NULL, sampler, NULL);
    pthread_t t[4];
    struct prof_tdump *got[4] = {0};
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, taker, &got[i]);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
    int all = 1;
    for (int i = 0; i < 4; i++)
        all &= got[i] && got[i]->nthreads == 1 && got[i]->threads[0].tid == 77;
    CHECK(all, "every waiter got a dump");
    CHECK(g_served >= 1 && g_served <= 4, "at most one dump per waiter (%d)", g_served);
    int before = g_served;
    CHECK(prof_tdump_take(2000, 0, &d, &why) == TDUMP_OK && d, "a request right after");
    CHECK(g_served == before, "is served the same dump (%d dumps)", g_served);
    for (int i = 0; i < 4; i++)
        prof_tdump_release(got[i]);
    prof_tdump_release(d);
    struct timespec wait = {0, (TDUMP_REUSE_MS + 100) * 1000000L};
    nanosleep(&wait, NULL);
    struct prof_tdump *old = NULL;
    CHECK(prof_tdump_take(2000, 1, &old, &why) == TDUMP_OK && old && g_served == before,
          "any age (HEAD): the newest dump past TDUMP_REUSE_MS, none taken (%d)", g_served);
    CHECK(prof_tdump_take(2000, 0, &d, &why) == TDUMP_OK && d && g_served == before + 1,
          "after TDUMP_REUSE_MS a new one is taken (%d)", g_served);
    CHECK(d != old, "a dump of its own");
    prof_tdump_release(old);
    prof_tdump_release(d);
    __atomic_store_n(&g_serve_stop, 1, __ATOMIC_RELEASE);
    pthread_join(s, NULL);
    /* nobody serves now: a request times out, then the module is turned off */
    nanosleep(&wait, NULL);
    CHECK(prof_tdump_take(50, 0, &d, &why) == TDUMP_TIMEOUT && why, "unserved: a timeout");
    prof_tdump_enable(0);
    CHECK(prof_tdump_take(50, 0, &d, &why) == TDUMP_UNAVAILABLE, "off: unavailable");
    struct prof_tdump_stats st;
    prof_tdump_get_stats(&st);
    CHECK(st.taken == (uint64_t)g_served && st.timeouts == 1 && st.reused >= 1,
          "stats: %llu taken, %llu reused, %llu timeouts", (unsigned long long)st.taken,
          (unsigned long long)st.reused, (unsigned long long)st.timeouts);
}

int main(void)
{
    test_grouping();
    test_deadlocks();
    test_pool();
    test_handshake();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
