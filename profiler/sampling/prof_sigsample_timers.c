/*
 * prof_sigsample_timers.c - each sampled thread's ring and clock: a perf task-clock event or a
 * POSIX CPU timer that signals that very thread (see prof_sigsample.c for the choice), armed with
 * a random first expiry; the sampled set kept equal to the runtime's threads
 * (prof_sigsample_sync), and every thread moved to the other clock when auto asks
 * (prof_sigsample_use_perf). The clrscope-sampler thread only.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof_log.h"
#include "prof_maps.h"
#include "prof_sigsample_int.h"

static int ring_alloc(void)
{
    if (!sig.nfree) {
        if (sig.nchunks * PROF_SIG_CHUNK >= sig.max_rings || sig.nchunks >= PROF_SIG_MAX_CHUNKS)
            return -1;
        char *chunk = calloc(PROF_SIG_CHUNK, g_sig.ring_size);
        if (!chunk)
            return -1;
        __atomic_store_n(&g_sig.chunks[sig.nchunks], (struct prof_sig_ring *)chunk,
                         __ATOMIC_RELEASE);
        for (int i = PROF_SIG_CHUNK - 1; i >= 0; i--)
            if (sig.nchunks * PROF_SIG_CHUNK + i < sig.max_rings)
                sig.free_rings[sig.nfree++] = sig.nchunks * PROF_SIG_CHUNK + i;
        sig.nchunks++;
        if (!sig.nfree)
            return -1;
    }
    return sig.free_rings[--sig.nfree];
}

/* The thread's CPU clock (ns), or -1 when it cannot be read (the thread is gone). */
int64_t sigsample_thread_cpu(uint32_t tid)
{
    clockid_t cid = (clockid_t)((~(unsigned)tid << 3) | 6u); /* MAKE_THREAD_CPUCLOCK(tid, SCHED) */
    struct timespec ts;
    if (clock_gettime(cid, &ts))
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A perf task-clock event's attributes as the sampler uses them (arm_perf, calib_event). */
void sigsample_task_clock_attr(struct perf_event_attr *a, uint64_t period)
{
    memset(a, 0, sizeof *a);
    a->type = PERF_TYPE_SOFTWARE;
    a->size = sizeof *a;
    a->config = PERF_COUNT_SW_TASK_CLOCK;
    a->sample_period = period;
    a->exclude_hv = 1;
}

/* A perf task-clock event on thread t that signals that very thread every interval of its CPU
 * time (in user mode only where the kernel allows no more: perf_event_paranoid 2 without
 * CAP_PERFMON). 0, or -errno. */
static int arm_perf(struct sthread *t, int idx, uint32_t gen)
{
    struct perf_event_attr a;
    sigsample_task_clock_attr(&a, (uint64_t)sig.interval_ns);
    /* the first period anywhere in the first interval, at least the 10 us the kernel allows
     * (as for the timers below); the handler sets the whole interval after it */
    uint64_t x = sig.phase_rng ? sig.phase_rng : (uint64_t)sigsample_mono_ns() | 1u;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    sig.phase_rng = x;
    uint64_t first = 10000 + x % (uint64_t)sig.interval_ns;
    a.sample_period = first < (uint64_t)sig.interval_ns ? first : (uint64_t)sig.interval_ns;
    a.disabled = 1;
    /* Time in the kernel sampled too where allowed (perf_event_paranoid 1, CAP_PERFMON): the
     * signal then lands where the thread entered the kernel (a page fault, a system call), as a
     * POSIX timer's does. Else user time only; the thread's clock still weighs it all, shared
     * evenly among the drain's samples (a method's page faults count as everyone's). */
    int fd = -1;
    if (!sig.perf_user_only) {
        fd = (int)syscall(SYS_perf_event_open, &a, (pid_t)t->tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0 && (errno == EACCES || errno == EPERM))
            sig.perf_user_only = 1;
    }
    if (fd < 0) {
        a.exclude_kernel = 1;
        fd = (int)syscall(SYS_perf_event_open, &a, (pid_t)t->tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
    }
    if (fd < 0)
        return -errno;
    int e = 0;
    struct f_owner_ex own = {.type = F_OWNER_TID, .pid = (pid_t)t->tid};
    int fl = fcntl(fd, F_GETFL);
    if (fd >= g_sig.fdmap_len)
        e = EMFILE;
    else if (fl < 0 || fcntl(fd, F_SETOWN_EX, &own) || fcntl(fd, F_SETSIG, sig.signo) ||
             fcntl(fd, F_SETFL, fl | O_ASYNC | O_NONBLOCK))
        e = errno;
    if (!e) {
        __atomic_store_n(&sigsample_ring_at(idx)->perf_first,
                         a.sample_period != (uint64_t)sig.interval_ns, __ATOMIC_RELAXED);
        __atomic_store_n(&g_sig.fdmap[fd], (uint64_t)gen << 32 | (uint32_t)idx, __ATOMIC_RELEASE);
        t->cpu_seen = sigsample_thread_cpu(t->tid);
        if (ioctl(fd, PERF_EVENT_IOC_REFRESH, 1)) { /* enabled for one period at a time */
            e = errno;
            __atomic_store_n(&g_sig.fdmap[fd], 0, __ATOMIC_SEQ_CST);
            sigsample_retire(-1, fd); /* (it was in the map: closed as close_perf's are) */
            return -e;
        }
    }
    if (e) {
        close(fd);
        return -e;
    }
    t->fd = fd;
    sig.perf_open++;
    return 0;
}

/* A ring arm() could not use: to the free list, or, when it was the thread's own ring (a late
 * signal of its previous clock may still be writing to it), retired until no handler runs. */
static void give_back(int idx, int own)
{
    if (own)
        sigsample_retire(idx, -1);
    else
        sig.free_rings[sig.nfree++] = idx;
}

/* Arms a perf event or a CPU-time timer on thread `tid` that signals that very thread, on ring
 * `own` (the thread's, when its clock changes) or a new one (own < 0). */
static int arm(struct sthread *t, int own)
{
    int idx = own >= 0 ? own : ring_alloc();
    if (idx < 0)
        return -ENOSPC;
    struct prof_sig_ring *r = sigsample_ring_at(idx);
    uint32_t gen = __atomic_add_fetch(&r->gen, 1, __ATOMIC_SEQ_CST);
    r->tid = t->tid;
    if (sig.perf && sig.perf_open < sig.perf_budget) {
        int rc = arm_perf(t, idx, gen);
        if (!rc) {
            t->ring = (uint32_t)idx;
            return 0;
        }
        if (rc == -ESRCH) {
            give_back(idx, own >= 0);
            return rc;
        }
        if (!sig.perf_open && rc != -EMFILE && rc != -ENFILE && rc != -ENOMEM) {
            /* refused outright (paranoid 3, seccomp, no perf events): timers from now on */
            sig.perf = 0;
            sig.perf_usable = 0;
            sig.perf_off = "perf_event_open refused";
            prof_log_once(sig.perf_logged, LOG_INFO,
                          "cpu sampler: perf_event_open refused (%s): CPU samples come from "
                          "per-thread CPU timers, which the kernel fires on its scheduler tick "
                          "(the CPU split of work in short bursts, such as async continuations, "
                          "can be off; docs/profiles/cpu-wall.md, \"Known biases\")", strerrordesc_np(-rc));
        } else {
            sig.perf_fallbacks++; /* this thread only (out of descriptors) */
        }
    } else if (sig.perf) {
        sig.perf_fallbacks++; /* past the descriptor budget */
    }
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = sig.signo;
    sev.sigev_value.sival_ptr = (void *)(uintptr_t)((uint64_t)gen << 32 | (uint32_t)idx);
    sev._sigev_un._tid = (pid_t)t->tid;
    /* the kernel's per-thread CPU clock id: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED) */
    clockid_t cid = (clockid_t)((~(unsigned)t->tid << 3) | 6u);
    int kid = -1;
    if (syscall(SYS_timer_create, cid, &sev, &kid)) {
        int e = errno;
        give_back(idx, own >= 0);
        return -e;
    }
    struct itimerspec its = {
        .it_interval = {.tv_sec = sig.interval_ns / 1000000000LL,
                        .tv_nsec = sig.interval_ns % 1000000000LL},
    };
    /* The first expiry falls anywhere in the first interval of the thread's CPU, not at its end:
     * then a thread that burns c ns of CPU gets c / interval samples on average, whatever c. With
     * a whole interval first, a thread that lives less than one (4 ms of work on a thread of its
     * own) was never sampled at all, and every thread's last part interval was lost. */
    its.it_value = its.it_interval;
    if (sig.interval_ns > 1) {
        uint64_t x = sig.phase_rng ? sig.phase_rng : (uint64_t)sigsample_mono_ns() | 1u;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        sig.phase_rng = x;
        int64_t first = 1 + (int64_t)(x % (uint64_t)sig.interval_ns);
        its.it_value.tv_sec = first / 1000000000LL;
        its.it_value.tv_nsec = first % 1000000000LL;
    }
    if (syscall(SYS_timer_settime, kid, 0, &its, NULL)) {
        int e = errno;
        syscall(SYS_timer_delete, kid);
        give_back(idx, own >= 0);
        return -e;
    }
    t->ring = (uint32_t)idx;
    t->timer = kid;
    return 0;
}

/* Stops t's perf event: late signals for its fd map to nothing from now on. The fd is closed
 * by the reclaim (prof_sigsample.c), once no handler runs that may have read it from the map
 * before. */
void sigsample_close_perf(struct sthread *t)
{
    ioctl(t->fd, PERF_EVENT_IOC_DISABLE, 0);
    __atomic_store_n(&g_sig.fdmap[t->fd], 0, __ATOMIC_SEQ_CST);
    sigsample_retire(-1, t->fd);
    t->fd = -1;
    sig.perf_open--;
}

static void disarm(struct sthread *t, prof_sigsample_fn fn, void *arg)
{
    if (!sigsample_armed(t))
        return;
    if (t->timer >= 0)
        syscall(SYS_timer_delete, t->timer);
    t->timer = -1;
    /* (a perf event's last samples weighed while its fd is open) */
    sigsample_drain_ring(t, fn, arg);
    if (t->fd >= 0)
        sigsample_close_perf(t);
    struct prof_sig_ring *r = sigsample_ring_at((int)t->ring);
    __atomic_add_fetch(&r->gen, 1, __ATOMIC_SEQ_CST); /* late signals now miss */
    sigsample_retire((int)t->ring, -1);
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return x < y ? -1 : x > y;
}

void prof_sigsample_sync(uint32_t *tids, size_t n, prof_sigsample_fn fn, void *arg)
{
    if (!sig.signo)
        return;
    if (n)
        qsort(tids, n, sizeof *tids, cmp_u32); /* (tids may be NULL when n is 0) */
    struct sthread *nt = malloc((n ? n : 1) * sizeof *nt);
    if (!nt)
        return;
    size_t i = 0, j = 0, k = 0;
    int fresh = 0; /* new threads armed */
    while (i < sig.nth || j < n) {
        if (j < n && j > 0 && tids[j] == tids[j - 1]) {
            j++;
            continue;
        }
        if (j >= n || (i < sig.nth && sig.th[i].tid < tids[j])) {
            disarm(&sig.th[i++], fn, arg); /* gone */
        } else if (i >= sig.nth || tids[j] < sig.th[i].tid) {
            struct sthread t = {.tid = tids[j++], .timer = -1, .fd = -1, .cpu_seen = -1};
            if (!t.tid)
                continue;
            int rc = arm(&t, -1);
            if (rc == -EINVAL || rc == -ESRCH)
                continue; /* the thread exited before the runtime told us: no failure */
            if (rc) { /* kept with no timer, so that it is not retried every sync */
                sig.timer_failures++;
                prof_log_once(sig.timer_failure_logged, LOG_WARN,
                              "cpu sampler: cannot arm a CPU timer for thread %u (%s); "
                              "such threads are not CPU-sampled", t.tid, strerrordesc_np(-rc));
            } else if (!fresh++) {
                /* its stack may be newer than the snapshot: taken again before its first sample,
                 * 10 ms of its CPU away (once a sync: the others' stacks are in it too). Not for
                 * a thread that could not be armed: one the runtime still lists after it exited
                 * fails at every sync */
                prof_maps_refresh_for_thread();
            }
            nt[k++] = t;
        } else {
            struct sthread t = sig.th[i++];
            j++;
            /* (counted in timer_failures once, at the change) */
            if (t.retry && !sigsample_armed(&t)) {
                int rc = arm(&t, -1);
                if (!rc)
                    prof_maps_refresh(1);
                t.retry = rc && rc != -EINVAL && rc != -ESRCH;
            }
            nt[k++] = t;
        }
    }
    free(sig.th);
    sig.th = nt;
    sig.nth = k;
}

/* Stops thread t's clock and records what its ring holds (weighed at the interval it was taken
 * at); returns its ring for the thread's next clock, or -1. */
static int stop_clock(struct sthread *t, prof_sigsample_fn fn, void *arg)
{
    if (!sigsample_armed(t))
        return -1;
    /* the same ring again: a signal of the old clock still in flight can only write this
     * thread's own sample into it (and arm's new generation stops the rest) */
    int own = (int)t->ring;
    /* late signals of the old clock miss from now on (arm bumps it again) */
    __atomic_add_fetch(&sigsample_ring_at(own)->gen, 1, __ATOMIC_SEQ_CST);
    if (t->timer >= 0)
        syscall(SYS_timer_delete, t->timer);
    t->timer = -1;
    /* (a perf event's samples weighed while its fd is open) */
    sigsample_drain_ring(t, fn, arg);
    if (t->fd >= 0)
        sigsample_close_perf(t);
    return own;
}

static void start_clock(struct sthread *t, int own)
{
    t->cpu_seen = -1;
    t->retry = 0;
    int rc = arm(t, own);
    if (rc && rc != -EINVAL && rc != -ESRCH) {
        sig.timer_failures++;
        t->retry = 1; /* the next sync tries again */
    }
}

void prof_sigsample_set_interval(int64_t interval_ns, prof_sigsample_fn fn, void *arg)
{
    if (!sig.signo || sig.stopped || interval_ns <= 0 || interval_ns == sig.interval_ns)
        return;
    int *own = malloc((sig.nth ? sig.nth : 1) * sizeof *own);
    if (!own)
        return; /* (asked again at the governor's next step) */
    /* every ring emptied at the old interval first: a sample weighs the interval it was taken
     * at, and the drain weighs by the one in force */
    for (size_t i = 0; i < sig.nth; i++)
        own[i] = stop_clock(&sig.th[i], fn, arg);
    sig.interval_ns = interval_ns;
    __atomic_store_n(&g_sig.perf_period, (uint64_t)interval_ns, __ATOMIC_RELAXED);
    for (size_t i = 0; i < sig.nth; i++)
        start_clock(&sig.th[i], own[i]);
    free(own);
    prof_maps_refresh(1);
}

int64_t prof_sigsample_interval(void)
{
    return sig.interval_ns;
}

void prof_sigsample_use_perf(int on, int64_t now, prof_sigsample_fn fn, void *arg)
{
    if (!sig.signo || sig.stopped || !sig.perf_usable || !on == !sig.perf)
        return;
    sig.perf = on;
    sig.changed_at = now;
    sig.clock_changes++;
    for (size_t i = 0; i < sig.nth; i++) {
        struct sthread *t = &sig.th[i];
        start_clock(t, stop_clock(t, fn, arg));
    }
    prof_maps_refresh(1);
    size_t perf_threads = 0, armed_now = 0;
    for (size_t i = 0; i < sig.nth; i++) {
        armed_now += sigsample_armed(&sig.th[i]);
        perf_threads += sig.th[i].fd >= 0;
    }
    sig.perf_off = sig.perf ? NULL : !on ? "auto: perf events would cost more than "
                                       "their budget of the app's CPU here (perf_cost.share "
                                       "over perf_cost.budget)"
                                     : sig.perf_off; /* (refused meanwhile: arm said why) */
    prof_log(LOG_INFO, "cpu sampler: %s (%zu of %zu threads on perf events): they would cost "
             "~%.2f %% of the app's CPU here (%lld ns per context switch, %.0f switches per "
             "CPU-second; budget %g %%)",
             on ? "perf events again" : "POSIX CPU timers instead of perf events", perf_threads,
             armed_now, 100 * sig.perf_cost, (long long)sig.switch_cost_ns, sig.switch_rate,
             100 * sig.budget);
}
