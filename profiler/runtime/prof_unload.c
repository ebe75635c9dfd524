/* prof_unload.c - see prof_unload.h. */
#include "prof_unload.h"

#include <sched.h>
#include <time.h>

#include "prof_core.h"
#include "prof_log.h"
#include "prof_sighandler.h"

#define WAIT_LIMIT_NS 1000000000LL
#define DRAIN_LIMIT_NS 200000000LL

/* The module's state: the unloading runtime thread, clrscope's naming threads and the readers
 * of the stats share it, every field with atomics (no lock). */
static struct unload_state {
    uint32_t epoch;     /* atomic: bumped by the unloading thread */
    int64_t inside[2];  /* atomic: threads entered with an epoch of that parity */
    struct prof_unload_stats st; /* atomic counters */
    uint64_t drain_ns;  /* atomic */
    uint64_t wanted;    /* atomic: drains asked for */
    uint64_t done[PROF_UNLOAD_CONSUMERS]; /* atomic: the last request each consumer met */
    int active[PROF_UNLOAD_CONSUMERS];    /* atomic */
    int timeout_logged; /* the unloading thread (prof_log_once) */
} unload;

/* Each thread's own entries (prof_unload_enter/leave), in its static TLS (PROF_TLS). */
struct unload_nesting {
    int depth;           /* successful enters not yet left */
    uint32_t parity[8];  /* their parities, innermost last */
};
static PROF_TLS struct unload_nesting nesting;

uint32_t prof_unload_epoch(void)
{
    return __atomic_load_n(&unload.epoch, __ATOMIC_ACQUIRE);
}

int prof_unload_enter(uint32_t epoch)
{
    if (nesting.depth >= 8)
        return 0; /* deeper than any caller nests: refused rather than miscounted */
    uint32_t p = epoch & 1;
    __atomic_add_fetch(&unload.inside[p], 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&unload.epoch, __ATOMIC_SEQ_CST) != epoch) {
        __atomic_sub_fetch(&unload.inside[p], 1, __ATOMIC_RELEASE);
        __atomic_add_fetch(&unload.st.refused, 1, __ATOMIC_RELAXED);
        return 0;
    }
    nesting.parity[nesting.depth++] = p;
    return 1;
}

void prof_unload_leave(void)
{
    if (nesting.depth <= 0)
        return;
    uint32_t p = nesting.parity[--nesting.depth];
    __atomic_sub_fetch(&unload.inside[p], 1, __ATOMIC_RELEASE);
}

int prof_unload_may_query(void)
{
    return nesting.depth > 0;
}

void prof_unload_consumer(int consumer, int active)
{
    if (consumer < 0 || consumer >= PROF_UNLOAD_CONSUMERS)
        return;
    if (active)
        __atomic_store_n(&unload.done[consumer], 0, __ATOMIC_RELEASE);
    __atomic_store_n(&unload.active[consumer], active, __ATOMIC_SEQ_CST);
}

uint64_t prof_unload_drain_wanted(void)
{
    return __atomic_load_n(&unload.wanted, __ATOMIC_SEQ_CST);
}

void prof_unload_drained(int consumer, uint64_t wanted)
{
    if (consumer >= 0 && consumer < PROF_UNLOAD_CONSUMERS)
        __atomic_store_n(&unload.done[consumer], wanted, __ATOMIC_RELEASE);
}

static int drains_pending(uint64_t want)
{
    for (int c = 0; c < PROF_UNLOAD_CONSUMERS; c++)
        if (__atomic_load_n(&unload.active[c], __ATOMIC_SEQ_CST) &&
            __atomic_load_n(&unload.done[c], __ATOMIC_ACQUIRE) < want)
            return 1;
    return 0;
}

/* Sleeps a little: the first rounds only give the core away. */
static void backoff(int spins)
{
    if (spins < 64) {
        sched_yield();
    } else {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
}

/* Has the consumers name what they hold while the module is still there. */
static void await_drains(void)
{
    uint64_t want = __atomic_add_fetch(&unload.wanted, 1, __ATOMIC_SEQ_CST);
    if (!drains_pending(want))
        return;
    prof_core_nudge();
    int64_t t0 = prof_now_ns(), waited = 0;
    for (int spins = 0; drains_pending(want); spins++) {
        waited = prof_now_ns() - t0;
        if (waited > DRAIN_LIMIT_NS || prof_core_stopping()) {
            __atomic_add_fetch(&unload.st.drain_timeouts, 1, __ATOMIC_RELAXED);
            break;
        }
        backoff(spins);
    }
    __atomic_add_fetch(&unload.drain_ns, (uint64_t)waited, __ATOMIC_RELAXED);
}

void prof_unload_started(void)
{
    await_drains();
    uint32_t old = __atomic_fetch_add(&unload.epoch, 1, __ATOMIC_SEQ_CST);
    /* the signal handler stamps its samples with this copy (it may reference nothing else) */
    __atomic_store_n(&g_sig.unload_epoch, old + 1, __ATOMIC_SEQ_CST);
    __atomic_add_fetch(&unload.st.unloads, 1, __ATOMIC_RELAXED);
    int64_t *inside = &unload.inside[old & 1];
    if (!__atomic_load_n(inside, __ATOMIC_SEQ_CST))
        return;
    __atomic_add_fetch(&unload.st.waits, 1, __ATOMIC_RELAXED);
    int64_t t0 = prof_now_ns(), waited = 0;
    for (int spins = 0; __atomic_load_n(inside, __ATOMIC_SEQ_CST) > 0; spins++) {
        waited = prof_now_ns() - t0;
        if (waited > WAIT_LIMIT_NS) {
            __atomic_add_fetch(&unload.st.timeouts, 1, __ATOMIC_RELAXED);
            prof_log_once(unload.timeout_logged, LOG_WARN,
                          "a module unload waited a second for clrscope's naming thread and went "
                          "on without it");
            break;
        }
        backoff(spins);
    }
    uint64_t w = (uint64_t)waited, max = __atomic_load_n(&unload.st.wait_ns_max, __ATOMIC_RELAXED);
    while (w > max && !__atomic_compare_exchange_n(&unload.st.wait_ns_max, &max, w, 1,
                                                   __ATOMIC_RELAXED, __ATOMIC_RELAXED))
        ;
}

void prof_unload_get_stats(struct prof_unload_stats *out)
{
    out->unloads = __atomic_load_n(&unload.st.unloads, __ATOMIC_RELAXED);
    out->waits = __atomic_load_n(&unload.st.waits, __ATOMIC_RELAXED);
    out->drain_waits_ms = __atomic_load_n(&unload.drain_ns, __ATOMIC_RELAXED) / 1000000;
    out->drain_timeouts = __atomic_load_n(&unload.st.drain_timeouts, __ATOMIC_RELAXED);
    out->wait_ns_max = __atomic_load_n(&unload.st.wait_ns_max, __ATOMIC_RELAXED);
    out->timeouts = __atomic_load_n(&unload.st.timeouts, __ATOMIC_RELAXED);
    out->refused = __atomic_load_n(&unload.st.refused, __ATOMIC_RELAXED);
}
