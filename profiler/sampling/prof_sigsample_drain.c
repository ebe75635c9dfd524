/*
 * prof_sigsample_drain.c - reads what the handlers wrote into the threads' rings: each full
 * entry goes to the caller's function with the CPU time it stands for, and is handed back to the
 * handler (FULL -> EMPTY); the answers to wall asks stay for prof_sigsample_wall_collect. The
 * clrscope-sampler thread only.
 */
#include <stdint.h>

#include "prof_sigsample_int.h"

int sigsample_drain_ring(struct sthread *t, prof_sigsample_fn fn, void *arg)
{
    struct prof_sig_ring *r = sigsample_ring_at((int)t->ring);
    int got = 0;
    /* A perf event's samples share the CPU the thread's clock says it burned since its samples
     * were last weighed, equally: that counts its time in the kernel (where the event does not
     * sample) and periods lost to a full ring, and keeps the thread's total exact. */
    int64_t share = -1, rest = 0;
    uint32_t nfull = 0, k = 0;
    if (t->fd >= 0) {
        for (uint32_t i = 0; i < g_sig.entries; i++) {
            struct prof_sig_entry *e = prof_sig_entry_at(r, i);
            nfull += __atomic_load_n(&e->state, __ATOMIC_ACQUIRE) == PROF_SIG_FULL &&
                     !(e->flags & PROF_SIG_F_WALL);
        }
        if (!nfull)
            return 0;
        int64_t now = sigsample_thread_cpu(t->tid);
        if (now >= 0 && t->cpu_seen >= 0 && now >= t->cpu_seen) {
            share = (now - t->cpu_seen) / nfull;
            rest = (now - t->cpu_seen) % nfull;
        } else {
            sig.clock_misses++;
        }
        if (now >= 0)
            t->cpu_seen = now;
    }
    for (uint32_t i = 0; i < g_sig.entries; i++) {
        struct prof_sig_entry *e = prof_sig_entry_at(r, i);
        if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != PROF_SIG_FULL ||
            (e->flags & PROF_SIG_F_WALL)) /* a wall answer: prof_sigsample_wall_collect's */
            continue;
        uint64_t lost = __atomic_exchange_n(&r->lost, 0, __ATOMIC_RELAXED);
        int64_t cpu = sig.interval_ns * (int64_t)(1 + (uint64_t)e->overrun + lost);
        if (t->fd >= 0) {
            if (k >= nfull) /* filled since the count: weighed at the next drain */
                break;
            cpu = share >= 0 ? share + (++k == nfull ? rest : 0) : sig.interval_ns;
        }
        uint32_t n = e->n <= (uint32_t)g_sig.max_frames ? e->n : (uint32_t)g_sig.max_frames;
        uint32_t nw = e->nwindow <= PROF_SIG_WINDOW ? e->nwindow : PROF_SIG_WINDOW;
        if (e->flags & PROF_SIG_F_TRUNCATED)
            sig.truncated++;
        if (e->flags & PROF_SIG_F_NEWCODE)
            sig.new_code++;
        if ((e->flags & PROF_SIG_F_EINTR) && sigsample_cut_call_outside(e->ips, n))
            sig.interrupted_outside++;
        struct prof_sigsample smp = {.tid = t->tid, .flags = (int)e->flags, .n = (int)n,
                                     .nwindow = (int)nw, .ips = e->ips, .window = e->window,
                                     .cpu_ns = cpu, .epoch = e->epoch, .found = e->found, .fresh = e->fresh,
                                     .jit = e->jit, .cycles = e->cycles};
        fn(arg, &smp);
        __atomic_store_n(&e->state, PROF_SIG_EMPTY, __ATOMIC_RELEASE);
        got++;
    }
    sig.samples += (uint64_t)got;
    return got;
}

int prof_sigsample_drain(prof_sigsample_fn fn, void *arg)
{
    int got = 0;
    for (size_t i = 0; i < sig.nth; i++)
        if (sigsample_armed(&sig.th[i]))
            got += sigsample_drain_ring(&sig.th[i], fn, arg);
    return got;
}
