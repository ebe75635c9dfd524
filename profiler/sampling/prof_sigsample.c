/*
 * prof_sigsample.c - the signal sampler's life (see prof_sigsample.h): the signal it takes, start
 * and stop, the housekeeping that hands rings and perf events back once no handler can see them,
 * and its stats. The clrscope-sampler thread (start: the thread that starts the sampler, before
 * the sampler thread exists). Nothing in this file runs in signal context.
 */
#include "prof_sigsample.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof_log.h"
#include "prof_maps.h"
#include "prof_cfi.h"
#include "prof_sighandler.h"
#include "prof_sigsample_int.h"

/* Which clock drives the samples. A POSIX CPU timer is checked by the kernel only on its
 * scheduler tick (every 4 ms at HZ=250), and on a busy machine threads are switched on that tick
 * too, so work that starts right after a wake-up and lasts less than a tick is seldom running
 * when one falls: bursty async code had its methods' CPU split 20-50 % off (a ~0.7 ms section
 * after a thread-pool hand-off +24 %, the 4 ms after an await -11 %, in an ASP.NET Core app
 * against the app's own thread clocks). A perf task-clock event counts the thread's CPU time
 * with a high-resolution timer that stops and resumes with the thread, so its overflow falls at
 * an exact point of the thread's CPU time, tick or not. It needs perf_event_open (refused under
 * perf_event_paranoid 3 without CAP_PERFMON, and by Docker's default seccomp profile) and one
 * file descriptor per thread; without it, the POSIX timers. */
#define FDMAP_MAX 65536      /* perf events' fds the handler can map back to their ring */
#define PERF_FD_BUDGET 4096  /* perf events at most, and at most 1/8 of RLIMIT_NOFILE */

struct sigsample_state sig = {.calib = {.to = {-1, -1}, .from = {-1, -1}}};

void prof_sigsample_set_timer(int mode, double budget)
{
    sig.timer_mode = mode;
    sig.budget = budget;
}

void prof_sigsample_set_cfi(int on)
{
#if defined(__x86_64__)
    sig.cfi_off = !on;
#else
    (void)on;
    sig.cfi_off = 1; /* prof_cfi_step knows x86-64's registers only: frame pointers */
#endif
}

void sigsample_retire(int ring, int fd)
{
    if (sig.nret == sig.capret) {
        size_t nc = sig.capret ? sig.capret * 2 : 64;
        struct retired *r = realloc(sig.ret, nc * sizeof *r);
        if (!r)
            return; /* leak it rather than recycle (or close) what a handler may read */
        sig.ret = r;
        sig.capret = nc;
    }
    sig.ret[sig.nret++] = (struct retired){.ring = ring, .fd = fd};
}

static void recycle_ring(int idx)
{
    struct prof_sig_ring *r = sigsample_ring_at(idx);
    for (uint32_t i = 0; i < g_sig.entries; i++)
        __atomic_store_n(&prof_sig_entry_at(r, i)->state, PROF_SIG_EMPTY, __ATOMIC_RELEASE);
    __atomic_store_n(&r->lost, 0, __ATOMIC_RELAXED);
    sig.free_rings[sig.nfree++] = idx;
}

/* Everything retired before this call was swapped out before the handler count read 0. */
static void reclaim(void)
{
    if (!sig.nret || __atomic_load_n(&g_sig.inflight, __ATOMIC_SEQ_CST))
        return;
    for (size_t i = 0; i < sig.nret; i++) {
        if (sig.ret[i].ring >= 0)
            recycle_ring(sig.ret[i].ring);
        if (sig.ret[i].fd >= 0)
            close(sig.ret[i].fd);
    }
    sig.nret = 0;
}

/* A listed library loaded since the CFI table was built (prof_cfi.h): a table with it. The one
 * it replaces is left in place, as a handler may be reading it (a few KB, CFI_REBUILDS at most). */
#define CFI_REBUILDS 8
static void cfi_update(void)
{
    const struct prof_cfi *cur = __atomic_load_n(&g_sig.cfi, __ATOMIC_ACQUIRE);
    if (sig.cfi_off || sig.cfi_rebuilds >= CFI_REBUILDS || !cur || cur->n >= PROF_CFI_LIBS ||
        prof_cfi_count() <= (int)cur->n)
        return;
    sig.cfi_rebuilds++;
    struct prof_cfi *t = prof_cfi_build(0);
    if (t && t->n > cur->n)
        __atomic_store_n(&g_sig.cfi, t, __ATOMIC_RELEASE);
    else
        free(t);
}

void prof_sigsample_maintain(int64_t now)
{
    struct prof_maps_stats before, after;
    prof_maps_get_stats(&before);
    prof_maps_maintain(now);
    prof_maps_get_stats(&after);
    if (after.refreshes != before.refreshes)
        cfi_update();
    reclaim();
}

/* ---- signal ---- */

/* The signals the process's main thread blocks (SigBlk of /proc/self/status): a mask inherited
 * from whoever started the process (a container's init, a supervisor) reaches every thread the
 * runtime starts, and a timer signal blocked there would stay pending for good. 0 if unknown. */
static uint64_t main_thread_blocked(void)
{
    FILE *f = fopen("/proc/self/status", "re");
    if (!f)
        return 0;
    char line[256];
    unsigned long long mask = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "SigBlk: %llx", &mask) == 1)
            break;
    fclose(f);
    return (uint64_t)mask;
}

int sigsample_signal_free(int s)
{
    sigset_t mine; /* the thread starting the sampler may block more than the main thread */
    uint64_t blocked = main_thread_blocked();
    if (!pthread_sigmask(SIG_BLOCK, NULL, &mine))
        for (int i = 1; i <= 64; i++)
            if (sigismember(&mine, i) == 1)
                blocked |= 1ull << (i - 1);
    struct sigaction old;
    if (sigaction(s, NULL, &old) || (blocked >> (s - 1) & 1))
        return 0;
    return !(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL;
}

static int pick_signal(void)
{
    static const int candidates[] = {SIGPROF, SIGUSR2, SIGUSR1};
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++)
        if (sigsample_signal_free(candidates[i]))
            return candidates[i];
    return 0;
}

int prof_sigsample_intact(void)
{
    struct sigaction cur;
    if (!sig.signo || sigaction(sig.signo, NULL, &cur))
        return 0;
    return (cur.sa_flags & SA_SIGINFO) && cur.sa_sigaction == prof_sig_handler;
}

int prof_sigsample_start(int hz, int max_frames, int max_threads, int entries)
{
    if (sig.signo)
        return 0;
    int signo = pick_signal();
    if (!signo) {
        prof_log(LOG_WARN, "cpu sampler: SIGPROF, SIGUSR2 and SIGUSR1 all have handlers, are "
                 "ignored or are blocked; falling back to the stop-the-world sampler");
        return -EBUSY;
    }
    sig.max_rings = max_threads < PROF_SIG_CHUNK * PROF_SIG_MAX_CHUNKS
                      ? max_threads
                      : PROF_SIG_CHUNK * PROF_SIG_MAX_CHUNKS;
    sig.free_rings = malloc((size_t)sig.max_rings * sizeof *sig.free_rings);
    if (!sig.free_rings)
        return -ENOMEM;
    sig.interval_ns = 1000000000LL / hz;
    sig.perf_off = "CLRSCOPE_CPU_TIMER=posix";
    if (sig.timer_mode != PROF_SIG_TIMER_POSIX) {
        struct rlimit rl;
        long budget = PERF_FD_BUDGET, len = FDMAP_MAX;
        if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY) {
            if ((long)(rl.rlim_cur / 8) < budget)
                budget = (long)(rl.rlim_cur / 8);
            if ((long)rl.rlim_cur < len) /* no fd can be higher (a raised limit: EMFILE below) */
                len = (long)rl.rlim_cur;
        }
        uint64_t *map = budget >= 16 ? calloc((size_t)len, sizeof *map) : NULL;
        if (map) {
            g_sig.fdmap_len = (int)len;
            g_sig.perf_period = (uint64_t)sig.interval_ns;
            __atomic_store_n(&g_sig.fdmap, map, __ATOMIC_RELEASE);
            sig.perf = 1;
            sig.perf_usable = 1;
            sig.switch_cost_ns = -1;
            sig.perf_budget = (int)budget;
            sig.perf_off = NULL;
        } else {
            sig.perf_off = budget < 16 ? "RLIMIT_NOFILE leaves too few file descriptors"
                                     : "out of memory";
        }
    }
    g_sig.max_frames = max_frames;
    g_sig.entry_size = (uint32_t)(sizeof(struct prof_sig_entry) +
                                  (size_t)max_frames * sizeof(uintptr_t));
    g_sig.entries = (uint32_t)(entries < 2                      ? 2
                               : entries > PROF_SIG_MAX_ENTRIES ? PROF_SIG_MAX_ENTRIES
                                                                : entries);
    /* the entries a ring does not use stay untouched zero pages (the chunks are calloc'd) */
    g_sig.ring_size = (uint32_t)(sizeof(struct prof_sig_ring) + g_sig.entries * g_sig.entry_size);
    prof_maps_take();
    /* the libraries without frame pointers are all loaded by now (libcoreclr's dependencies) */
    if (!sig.cfi_off && !__atomic_load_n(&g_sig.cfi, __ATOMIC_ACQUIRE))
        __atomic_store_n(&g_sig.cfi, prof_cfi_build(0), __ATOMIC_RELEASE);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = prof_sig_handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    if (sigaction(signo, &sa, NULL)) {
        int e = errno;
        prof_log(LOG_WARN, "cpu sampler: cannot install a handler for signal %d (%s); "
                 "falling back to the stop-the-world sampler", signo, strerrordesc_np(e));
        return -e;
    }
    sig.signo = signo;
    prof_maps_keep();
    prof_log(LOG_DEBUG, "cpu sampler: per-thread CPU timers on signal %d (%s)", signo,
             sigabbrev_np(signo));
    return 0;
}

void prof_sigsample_stop(void)
{
    sig.stopped = 1;
    prof_maps_stop(); /* self-walks go back to the runtime's walk */
    for (size_t i = 0; i < sig.nth; i++) {
        if (sig.th[i].timer >= 0) {
            syscall(SYS_timer_delete, sig.th[i].timer);
            sig.th[i].timer = -1;
        }
        if (sig.th[i].fd >= 0)
            sigsample_close_perf(&sig.th[i]);
    }
    sig.nth = 0;
    /* the perf events' fds closed once no handler runs (one may have read a number from the
     * map before it was cleared), waiting 50 ms at most; the rings and the current snapshots
     * stay allocated: a signal already queued may still read them */
    for (int i = 0; i < 50 && sig.nret; i++) {
        reclaim();
        if (sig.nret)
            nanosleep(&(struct timespec){.tv_nsec = 1000000}, NULL);
    }
}

void prof_sigsample_get_stats(struct prof_sigsample_stats *out)
{
    memset(out, 0, sizeof *out);
    out->signo = sig.signo;
    for (size_t i = 0; i < sig.nth; i++) {
        out->threads += sigsample_armed(&sig.th[i]);
        out->perf_threads += sig.th[i].fd >= 0;
    }
    out->timer = sig.perf ? (sig.perf_user_only ? "perf-user" : "perf") : "posix";
    out->timer_off = sig.perf_off;
    out->perf_fallbacks = sig.perf_fallbacks;
    out->reviewing = sig.signo && !sig.stopped && sig.timer_mode == PROF_SIG_TIMER_AUTO &&
                     sig.perf_usable;
    out->switch_cost_ns = sig.switch_cost_ns;
    out->switch_rate = sig.switch_rate;
    out->perf_cost = sig.perf_cost;
    out->timer_budget = sig.budget;
    out->clock_changes = sig.clock_changes;
    out->clock_misses = sig.clock_misses;
    out->rearm_failures = __atomic_load_n(&g_sig.rearm_failures, __ATOMIC_RELAXED);
    out->timer_failures = sig.timer_failures;
    out->samples = sig.samples;
    out->stale = __atomic_load_n(&g_sig.stale, __ATOMIC_RELAXED);
    out->handler_cycles = __atomic_load_n(&g_sig.handler_cycles, __ATOMIC_RELAXED);
    out->ring_full = __atomic_load_n(&g_sig.ring_full, __ATOMIC_RELAXED);
    out->interrupted = __atomic_load_n(&g_sig.interrupted, __ATOMIC_RELAXED);
    out->interrupted_outside = sig.interrupted_outside;
    out->no_stack = __atomic_load_n(&g_sig.no_stack, __ATOMIC_RELAXED);
    out->altstack = __atomic_load_n(&g_sig.altstack, __ATOMIC_RELAXED);
    out->truncated = sig.truncated;
    out->new_code = sig.new_code;
    out->native_unwind = sig.cfi_off ? "fp" : "cfi";
    const struct prof_cfi *cfi = __atomic_load_n(&g_sig.cfi, __ATOMIC_ACQUIRE);
    out->cfi_libraries = cfi && !sig.cfi_off ? cfi->n : 0;
    struct prof_maps_stats ms;
    prof_maps_get_stats(&ms);
    out->maps_refreshes = ms.refreshes;
    out->osr_returns = ms.osr_returns;
}

uint64_t prof_sigsample_handled(void)
{
    return __atomic_load_n(&g_sig.handled, __ATOMIC_SEQ_CST);
}

void prof_sigsample_arm_bell(uint32_t n)
{
    __atomic_store_n(&g_sig.bell_at, n ? prof_sigsample_handled() + n : 0, __ATOMIC_SEQ_CST);
}

uint32_t *prof_sigsample_bell(void)
{
    return &g_sig.bell_word;
}
