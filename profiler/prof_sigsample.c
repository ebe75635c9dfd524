/* prof_sigsample.c - see prof_sigsample.h. Nothing in this file runs in signal context. */
#include "prof_sigsample.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "prof_log.h"
#include "prof_maps.h"
#include "prof_sighandler.h"

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

struct sthread {
    uint32_t tid;
    uint32_t ring;
    int timer;        /* kernel timer id, -1 = none */
    int fd;           /* or a perf task-clock event, -1 = none */
    int64_t cpu_seen; /* perf: the thread's CPU clock when its samples were last weighed */
    int retry;        /* its clock could not be changed: the next sync arms it again */
    uint64_t ss_ins, ss_run; /* schedstat at the last review: switches in (0: none), CPU ns */
};

static int armed(const struct sthread *t)
{
    return t->timer >= 0 || t->fd >= 0;
}

/* Something the handler may still be looking at: recycled (or closed) once inflight was 0. */
struct retired {
    int ring;  /* recycle this ring (-1 = none) */
    int fd;    /* or close this perf event (-1 = none): a handler that read its number from
                * g_sig.fdmap before it was cleared may still ioctl it, and once closed the number
                * could be the app's next file */
};

/* The perf-cost measurement's pipes and CPU (prof_sigsample_review): shared with its helper
 * thread; static storage, so that a helper left behind never reads freed memory. One
 * measurement per process. */
struct sigsample_calib {
    int to[2], from[2]; /* pipes: sampler -> helper, helper -> sampler; each side closes its
                         * own ends */
    int cpu;            /* written before the helper starts; both pin themselves to it */
};

/* The signal sampler's state. Written by the clrscope-sampler thread only, but where noted
 * "start": by prof_sigsample_set_timer and prof_sigsample_start, on the thread that starts the
 * sampler before the sampler thread exists, read-only after. prof_sigsample_stop runs on the
 * sampler thread, or once it has ended. What the handler shares lives in g_sig
 * (prof_sighandler.h). */
struct sigsample_state {
    int signo;            /* start: the signal, 0 = not started */
    int64_t interval_ns;  /* start: CPU time between two samples of a thread */
    int max_rings;        /* start: rings at most (CLRSCOPE_MAX_THREADS, PROF_SIG_MAX_CHUNKS) */
    int timer_mode;       /* start: PROF_SIG_TIMER_* asked for */
    double budget;        /* start: CLRSCOPE_CPU_TIMER_BUDGET as a fraction of the app's CPU */
    int stopped;          /* prof_sigsample_stop was called: no clock is armed again */
    /* the clocks: perf events or POSIX timers (start, then arm and prof_sigsample_use_perf) */
    int perf;             /* new threads get perf events (else POSIX timers) */
    int perf_usable;      /* the kernel gives perf events here (auto may go back to them) */
    int perf_budget;      /* perf events at most (file descriptors) */
    int perf_open;        /* perf events now */
    int perf_user_only;   /* the kernel refused events that count its time: exclude_kernel */
    const char *perf_off; /* why the POSIX timers are used (NULL: perf events) */
    uint64_t perf_fallbacks, clock_misses;
    uint64_t phase_rng;   /* xorshift64 state for the timers' first expiries (never 0) */
    /* auto: what perf events cost the app (prof_sigsample_review) */
    int64_t switch_cost_ns; /* measured extra per context switch of a thread with one; -1 */
    double switch_rate;   /* the app's context switches per CPU-second, last window */
    double perf_cost;     /* switch_cost_ns * switch_rate: their share of the app's CPU */
    int64_t review_at, rev_cpu_ns, changed_at;
    uint64_t rev_switches, clock_changes;
    size_t review_next;   /* the next thread whose schedstat the review reads */
    int calib_tried, over, under; /* windows in a row past the budget / under half of it */
    struct sigsample_calib calib;
    /* the sampled threads and their rings */
    struct sthread *th;   /* sorted by tid */
    size_t nth;
    int *free_rings;      /* allocated at start */
    int nfree;
    int nchunks;          /* chunks allocated (g_sig.chunks[0..nchunks)) */
    struct retired *ret;  /* rings and perf events the handler may still be using */
    size_t nret, capret;
    uint64_t timer_failures, samples, truncated, new_code;
    int timer_failure_logged, perf_logged; /* atomic (prof_log_once) */
};

static struct sigsample_state sig = {.calib = {.to = {-1, -1}, .from = {-1, -1}}};

void prof_sigsample_set_timer(int mode, double budget)
{
    sig.timer_mode = mode;
    sig.budget = budget;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static struct prof_sig_ring *ring_at(int idx)
{
    char *chunk = (char *)g_sig.chunks[idx / PROF_SIG_CHUNK];
    return (struct prof_sig_ring *)(chunk + (size_t)(idx % PROF_SIG_CHUNK) * g_sig.ring_size);
}

static void retire(int ring, int fd)
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
    struct prof_sig_ring *r = ring_at(idx);
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

void prof_sigsample_maintain(int64_t now)
{
    prof_maps_maintain(now);
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

static int pick_signal(void)
{
    static const int candidates[] = {SIGPROF, SIGUSR2, SIGUSR1};
    sigset_t mine; /* the thread starting the sampler may block more than the main thread */
    uint64_t blocked = main_thread_blocked();
    if (!pthread_sigmask(SIG_BLOCK, NULL, &mine))
        for (int s = 1; s <= 64; s++)
            if (sigismember(&mine, s) == 1)
                blocked |= 1ull << (s - 1);
    for (size_t i = 0; i < sizeof candidates / sizeof *candidates; i++) {
        struct sigaction old;
        if (sigaction(candidates[i], NULL, &old) || (blocked >> (candidates[i] - 1) & 1))
            continue;
        if (!(old.sa_flags & SA_SIGINFO) && old.sa_handler == SIG_DFL)
            return candidates[i];
    }
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
    g_sig.entries = (uint32_t)(entries < 2 ? 2 : entries > PROF_SIG_MAX_ENTRIES ? PROF_SIG_MAX_ENTRIES
                                                                             : entries);
    /* the entries a ring does not use stay untouched zero pages (the chunks are calloc'd) */
    g_sig.ring_size = (uint32_t)(sizeof(struct prof_sig_ring) + g_sig.entries * g_sig.entry_size);
    prof_maps_take();

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

/* ---- threads and their timers ---- */

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
static int64_t thread_cpu(uint32_t tid)
{
    clockid_t cid = (clockid_t)((~(unsigned)tid << 3) | 6u); /* MAKE_THREAD_CPUCLOCK(tid, SCHED) */
    struct timespec ts;
    if (clock_gettime(cid, &ts))
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* A perf task-clock event's attributes as the sampler uses them (arm_perf, calib_event). */
static void task_clock_attr(struct perf_event_attr *a, uint64_t period)
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
    task_clock_attr(&a, (uint64_t)sig.interval_ns);
    /* the first period anywhere in the first interval, at least the 10 us the kernel allows
     * (as for the timers below); the handler sets the whole interval after it */
    uint64_t x = sig.phase_rng ? sig.phase_rng : (uint64_t)mono_ns() | 1u;
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
        __atomic_store_n(&ring_at(idx)->perf_first, a.sample_period != (uint64_t)sig.interval_ns,
                         __ATOMIC_RELAXED);
        __atomic_store_n(&g_sig.fdmap[fd], (uint64_t)gen << 32 | (uint32_t)idx, __ATOMIC_RELEASE);
        t->cpu_seen = thread_cpu(t->tid);
        if (ioctl(fd, PERF_EVENT_IOC_REFRESH, 1)) { /* enabled for one period at a time */
            e = errno;
            __atomic_store_n(&g_sig.fdmap[fd], 0, __ATOMIC_SEQ_CST);
            retire(-1, fd); /* (it was in the map: closed as close_perf's are) */
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
        retire(idx, -1);
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
    struct prof_sig_ring *r = ring_at(idx);
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
                          "can be off; README \"Known biases\")", strerrordesc_np(-rc));
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
        uint64_t x = sig.phase_rng ? sig.phase_rng : (uint64_t)mono_ns() | 1u;
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

static int drain_ring(struct sthread *t, prof_sigsample_fn fn, void *arg)
{
    struct prof_sig_ring *r = ring_at((int)t->ring);
    int got = 0;
    /* A perf event's samples share the CPU the thread's clock says it burned since its samples
     * were last weighed, equally: that counts its time in the kernel (where the event does not
     * sample) and periods lost to a full ring, and keeps the thread's total exact. */
    int64_t share = -1, rest = 0;
    uint32_t nfull = 0, k = 0;
    if (t->fd >= 0) {
        for (uint32_t i = 0; i < g_sig.entries; i++)
            nfull += __atomic_load_n(&prof_sig_entry_at(r, i)->state, __ATOMIC_ACQUIRE) ==
                     PROF_SIG_FULL;
        if (!nfull)
            return 0;
        int64_t now = thread_cpu(t->tid);
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
        if (__atomic_load_n(&e->state, __ATOMIC_ACQUIRE) != PROF_SIG_FULL)
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
        struct prof_sigsample smp = {.tid = t->tid, .flags = (int)e->flags, .n = (int)n,
                                     .nwindow = (int)nw, .ips = e->ips, .window = e->window,
                                     .cpu_ns = cpu, .epoch = e->epoch, .found = e->found};
        fn(arg, &smp);
        __atomic_store_n(&e->state, PROF_SIG_EMPTY, __ATOMIC_RELEASE);
        got++;
    }
    sig.samples += (uint64_t)got;
    return got;
}

/* Stops t's perf event: late signals for its fd map to nothing from now on. The fd is closed
 * by reclaim(), once no handler runs that may have read it from the map before. */
static void close_perf(struct sthread *t)
{
    ioctl(t->fd, PERF_EVENT_IOC_DISABLE, 0);
    __atomic_store_n(&g_sig.fdmap[t->fd], 0, __ATOMIC_SEQ_CST);
    retire(-1, t->fd);
    t->fd = -1;
    sig.perf_open--;
}

static void disarm(struct sthread *t, prof_sigsample_fn fn, void *arg)
{
    if (!armed(t))
        return;
    if (t->timer >= 0)
        syscall(SYS_timer_delete, t->timer);
    t->timer = -1;
    drain_ring(t, fn, arg); /* (a perf event's last samples weighed while its fd is open) */
    if (t->fd >= 0)
        close_perf(t);
    struct prof_sig_ring *r = ring_at((int)t->ring);
    __atomic_add_fetch(&r->gen, 1, __ATOMIC_SEQ_CST); /* late signals now miss */
    retire((int)t->ring, -1);
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
            } else {
                prof_maps_refresh(1); /* its stack may be newer than the snapshot */
            }
            nt[k++] = t;
        } else {
            struct sthread t = sig.th[i++];
            j++;
            if (t.retry && !armed(&t)) { /* (counted in timer_failures once, at the change) */
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

int prof_sigsample_drain(prof_sigsample_fn fn, void *arg)
{
    int got = 0;
    for (size_t i = 0; i < sig.nth; i++)
        if (armed(&sig.th[i]))
            got += drain_ring(&sig.th[i], fn, arg);
    return got;
}

/* ---- auto: perf events while they cost little ----
 *
 * A perf task-clock event is switched out and in with its thread: the kernel stops and restarts
 * its high-resolution timer at every context switch (measured 2.2 us per switch on the bench's
 * VM, against nothing for a POSIX CPU timer). An ASP.NET Core server switches threads about once
 * per request, so there that cost reached 3 % of the server's CPU. With CLRSCOPE_CPU_TIMER=auto,
 * the sampler thread measures that cost once on two threads of its own, reads the app's context
 * switches per CPU-second (getrusage, every REVIEW_NS), and uses perf events while the product
 * stays under CLRSCOPE_CPU_TIMER_BUDGET of the app's CPU, POSIX timers otherwise (back to perf
 * below half the budget). The switch rate does not depend on the clock in use, so the review
 * reads the same in either state. */
#define REVIEW_NS 5000000000LL       /* the switch rate is read over windows this long */
#define REVIEW_HOLD_NS 60000000000LL /* a clock, once changed, is kept at least this long */
#define REVIEW_MIN_CPU 0.05          /* a window counts when the app used 5 % of a core */
#define CALIB_WORST_NS 5000          /* no measuring while even this cost is under budget */
#define REVIEW_THREADS 256           /* schedstat files read per review, at most */
/* Short batches, alternating clocks, the fastest of each counts: on a busy CPU most batches of
 * 20 round trips (~0.2 ms) still run undisturbed, where whole seconds never would. */
#define CALIB_ROUNDS 20              /* round trips per batch */
#define CALIB_BATCHES 50             /* batches per clock */

#define CALIB_LIMIT_NS 500000000LL /* the whole measurement, at most: else "not measured" */

/* A perf task-clock event on the calling thread as arm_perf makes them, without the signal. */
static int calib_event(void)
{
    struct perf_event_attr a;
    task_clock_attr(&a, (uint64_t)sig.interval_ns);
    a.exclude_kernel = sig.perf_user_only;
    return (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

static int pin_to(int cpu)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    return sched_setaffinity(0, sizeof set, &set);
}

/* The helper echoes each byte: 'p' opens an event on itself first ('f' comes back when it
 * cannot), 'c' closes it; it ends when the pipe closes. */
static void *calib_helper(void *arg)
{
    (void)arg;
    pthread_setname_np(pthread_self(), "clrscope-calib");
    pin_to(sig.calib.cpu);
    int fd = -1;
    char b;
    while (read(sig.calib.to[0], &b, 1) == 1) {
        if (b == 'p' && fd < 0 && (fd = calib_event()) < 0)
            b = 'f';
        else if (b == 'c' && fd >= 0) {
            close(fd);
            fd = -1;
        }
        if (write(sig.calib.from[1], &b, 1) != 1)
            break;
    }
    if (fd >= 0)
        close(fd);
    close(sig.calib.to[0]);
    close(sig.calib.from[1]);
    return NULL;
}

/* Sends b, waits for its echo until `deadline`: 0, or -1 (also when the echo is not b). */
static int ask(char b, int64_t deadline)
{
    char got;
    if (write(sig.calib.to[1], &b, 1) != 1)
        return -1;
    for (;;) {
        int64_t left = deadline - mono_ns();
        if (left <= 0)
            return -1;
        struct pollfd pf = {.fd = sig.calib.from[0], .events = POLLIN};
        int n = poll(&pf, 1, (int)(left / 1000000 + 1));
        if (n < 0 && errno == EINTR)
            continue;
        if (n != 1)
            return -1;
        return read(sig.calib.from[0], &got, 1) == 1 && got == b ? 0 : -1;
    }
}

/* What a perf event on each of two threads adds to a context switch between them on one CPU
 * (ns), or -1 when it could not be measured within CALIB_LIMIT_NS. 1,000 round trips per clock,
 * ~15 ms on the bench's VM. The sampler thread is pinned meanwhile, then given its mask back. */
static int64_t calibrate(void)
{
    sig.calib.cpu = sched_getcpu();
    cpu_set_t saved;
    if (sig.calib.cpu < 0 || sched_getaffinity(0, sizeof saved, &saved))
        return -1;
    if (pipe2(sig.calib.to, O_CLOEXEC) || pipe2(sig.calib.from, O_CLOEXEC)) {
        for (int i = 0; i < 2; i++) {
            if (sig.calib.to[i] >= 0)
                close(sig.calib.to[i]);
            if (sig.calib.from[i] >= 0)
                close(sig.calib.from[i]);
            sig.calib.to[i] = sig.calib.from[i] = -1;
        }
        return -1;
    }
    pthread_t th;
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old); /* the helper starts with every signal blocked */
    int started = !pthread_create(&th, NULL, calib_helper, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!started) {
        close(sig.calib.to[0]);
        close(sig.calib.to[1]);
        close(sig.calib.from[0]);
        close(sig.calib.from[1]);
        return -1;
    }
    int64_t best[2] = {INT64_MAX, INT64_MAX};
    int64_t deadline = mono_ns() + CALIB_LIMIT_NS;
    int ok = !pin_to(sig.calib.cpu);
    for (int b = 0; b < CALIB_BATCHES && ok; b++) {
        for (int perf = 0; perf < 2 && ok; perf++) {
            int fd = perf ? calib_event() : -1;
            if (perf && (fd < 0 || ask('p', deadline))) {
                ok = 0;
            } else {
                int64_t t0 = mono_ns();
                for (int i = 0; i < CALIB_ROUNDS && ok; i++)
                    ok = !ask('r', deadline);
                int64_t t = mono_ns() - t0;
                if (ok && t < best[perf])
                    best[perf] = t;
                if (ok && perf && ask('c', deadline))
                    ok = 0;
            }
            if (fd >= 0)
                close(fd);
        }
    }
    close(sig.calib.to[1]); /* the helper reads the end of its pipe and returns */
    if (sched_setaffinity(0, sizeof saved, &saved)) {
        cpu_set_t any; /* (the cpuset changed meanwhile: every CPU it allows) */
        memset(&any, 0xff, sizeof any);
        sched_setaffinity(0, sizeof any, &any);
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += 100000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    if (pthread_timedjoin_np(th, NULL, &until)) {
        pthread_detach(th); /* starved on its CPU: it ends when it runs, closing its own ends */
        ok = 0;
    }
    close(sig.calib.from[0]);
    if (!ok)
        return -1;
    int64_t d = (best[1] - best[0]) / (2 * CALIB_ROUNDS); /* two switches per round trip */
    return d > 0 ? d : 0;
}

static int64_t tv_ns(struct timeval tv)
{
    return (int64_t)tv.tv_sec * 1000000000LL + (int64_t)tv.tv_usec * 1000;
}

/* A thread's time on CPU (ns) and the times it was switched in (/proc/.../schedstat). 0, -1. */
static int schedstat(uint32_t tid, uint64_t *run_ns, uint64_t *ins)
{
    char path[64], buf[128];
    snprintf(path, sizeof path, "/proc/self/task/%u/schedstat", tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    unsigned long long run, wait, slices;
    if (sscanf(buf, "%llu %llu %llu", &run, &wait, &slices) != 3)
        return -1;
    *run_ns = run;
    *ins = slices;
    return 0;
}

/* The sampled threads' switches and CPU since the last review (at most REVIEW_THREADS of them,
 * in turn): those are the switches a perf event makes dearer (clrscope's own threads, the
 * runtime's native ones carry none). 0, or -1 when no thread's schedstat could be read. */
static int sampled_switches(uint64_t *dsw, int64_t *dcpu, size_t *counted)
{
    size_t n = sig.nth < REVIEW_THREADS ? sig.nth : REVIEW_THREADS, read_any = 0;
    *dsw = 0;
    *dcpu = 0;
    *counted = 0;
    for (size_t k = 0; k < n; k++) {
        struct sthread *t = &sig.th[(sig.review_next + k) % sig.nth];
        uint64_t run = 0, ins = 0;
        if (schedstat(t->tid, &run, &ins))
            continue;
        read_any++;
        if (t->ss_ins && ins >= t->ss_ins && run >= t->ss_run) {
            *dsw += ins - t->ss_ins;
            *dcpu += (int64_t)(run - t->ss_run);
            (*counted)++;
        }
        t->ss_ins = ins ? ins : 1;
        t->ss_run = run;
    }
    if (sig.nth)
        sig.review_next = (sig.review_next + n) % sig.nth;
    return read_any ? 0 : -1;
}

int prof_sigsample_review(int64_t now)
{
    if (!sig.signo || sig.stopped || sig.timer_mode != PROF_SIG_TIMER_AUTO || !sig.perf_usable ||
        (sig.review_at && now - sig.review_at < REVIEW_NS) ||
        (sig.calib_tried && sig.switch_cost_ns < 0))
        return -1; /* (a failed measurement keeps perf events for good) */
    int64_t dt = now - sig.review_at;
    int whole = sig.review_at && dt <= 10 * REVIEW_NS; /* (else one the sampler slept through) */
    sig.review_at = now;
    uint64_t dsw;
    int64_t dcpu;
    size_t counted;
    if (sampled_switches(&dsw, &dcpu, &counted)) {
        /* no schedstat (CONFIG_SCHED_INFO off): the whole process's counts, ours included */
        struct rusage ru;
        if (getrusage(RUSAGE_SELF, &ru))
            return -1;
        uint64_t sw = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
        int64_t cpu = tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime);
        whole = whole && sig.rev_switches && cpu >= sig.rev_cpu_ns && sw >= sig.rev_switches;
        dsw = sw - sig.rev_switches;
        dcpu = cpu - sig.rev_cpu_ns;
        counted = sig.nth;
        sig.rev_switches = sw;
        sig.rev_cpu_ns = cpu;
    }
    /* a window that tells nothing breaks a run of windows past (or under) the budget; so does
     * one too idle to tell, with nothing to save: under 5 % of a core (the threads counted) */
    if (!whole || !counted || !sig.nth ||
        (double)dcpu < REVIEW_MIN_CPU * (double)dt * (double)counted / (double)sig.nth) {
        sig.over = sig.under = 0;
        return -1;
    }
    sig.switch_rate = (double)dsw * 1e9 / (double)dcpu;
    if (!sig.calib_tried) {
        if (sig.switch_rate * CALIB_WORST_NS / 1e9 <= sig.budget)
            return -1; /* cheap whatever a switch costs */
        sig.calib_tried = 1;
        int64_t t0 = mono_ns();
        sig.switch_cost_ns = calibrate();
        if (sig.switch_cost_ns < 0)
            prof_log(LOG_INFO, "cpu sampler: could not measure what perf events add to a "
                     "context switch here; they are kept (CLRSCOPE_CPU_TIMER=posix gives them up)");
        else
            prof_log(LOG_DEBUG, "cpu sampler: perf events add %lld ns to a context switch here",
                     (long long)sig.switch_cost_ns);
        /* the next window leaves the measurement out: its own threads' switches count in the
         * getrusage fallback (schedstat counts only the sampled threads, which it spares) */
        sig.review_at = now + (mono_ns() - t0);
        struct rusage ru;
        if (!getrusage(RUSAGE_SELF, &ru)) {
            sig.rev_switches = (uint64_t)ru.ru_nvcsw + (uint64_t)ru.ru_nivcsw;
            sig.rev_cpu_ns = tv_ns(ru.ru_utime) + tv_ns(ru.ru_stime);
        }
    }
    if (sig.switch_cost_ns < 0)
        return -1;
    sig.perf_cost = sig.switch_rate * (double)sig.switch_cost_ns / 1e9;
    /* two windows in a row decide (a start-up's JIT or one burst of GCs alone does not) */
    sig.over = sig.perf && sig.perf_cost > sig.budget ? sig.over + 1 : 0;
    sig.under = !sig.perf && sig.perf_cost < sig.budget / 2 ? sig.under + 1 : 0;
    if (sig.changed_at && now - sig.changed_at < REVIEW_HOLD_NS)
        return -1;
    if (sig.over >= 2 || sig.under >= 2) {
        sig.over = sig.under = 0;
        return !sig.perf;
    }
    return -1;
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
        int own = -1;
        if (armed(t)) {
            /* the same ring again: a signal of the old clock still in flight can only write
             * this thread's own sample into it (and arm's new generation stops the rest) */
            own = (int)t->ring;
            /* late signals of the old clock miss from now on (arm bumps it again) */
            __atomic_add_fetch(&ring_at(own)->gen, 1, __ATOMIC_SEQ_CST);
            if (t->timer >= 0)
                syscall(SYS_timer_delete, t->timer);
            t->timer = -1;
            drain_ring(t, fn, arg); /* (a perf event's samples weighed while its fd is open) */
            if (t->fd >= 0)
                close_perf(t);
        }
        t->cpu_seen = -1;
        t->retry = 0;
        int rc = arm(t, own);
        if (rc && rc != -EINVAL && rc != -ESRCH) {
            sig.timer_failures++;
            t->retry = 1; /* the next sync tries again */
        }
    }
    prof_maps_refresh(1);
    size_t perf_threads = 0, armed_now = 0;
    for (size_t i = 0; i < sig.nth; i++) {
        armed_now += armed(&sig.th[i]);
        perf_threads += sig.th[i].fd >= 0;
    }
    sig.perf_off = sig.perf ? NULL : !on ? "auto: perf events would cost more than "
                                       "CLRSCOPE_CPU_TIMER_BUDGET of the app's CPU here "
                                       "(perf_cost)"
                                     : sig.perf_off; /* (refused meanwhile: arm said why) */
    prof_log(LOG_INFO, "cpu sampler: %s (%zu of %zu threads on perf events): they would cost "
             "~%.2f %% of the app's CPU here (%lld ns per context switch, %.0f switches per "
             "CPU-second; budget %g %%)",
             on ? "perf events again" : "POSIX CPU timers instead of perf events", perf_threads,
             armed_now, 100 * sig.perf_cost, (long long)sig.switch_cost_ns, sig.switch_rate,
             100 * sig.budget);
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
            close_perf(&sig.th[i]);
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
        out->threads += armed(&sig.th[i]);
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
    out->clock_changes = sig.clock_changes;
    out->clock_misses = sig.clock_misses;
    out->rearm_failures = __atomic_load_n(&g_sig.rearm_failures, __ATOMIC_RELAXED);
    out->timer_failures = sig.timer_failures;
    out->samples = sig.samples;
    out->stale = __atomic_load_n(&g_sig.stale, __ATOMIC_RELAXED);
    out->ring_full = __atomic_load_n(&g_sig.ring_full, __ATOMIC_RELAXED);
    out->no_stack = __atomic_load_n(&g_sig.no_stack, __ATOMIC_RELAXED);
    out->altstack = __atomic_load_n(&g_sig.altstack, __ATOMIC_RELAXED);
    out->truncated = sig.truncated;
    out->new_code = sig.new_code;
    struct prof_maps_stats ms;
    prof_maps_get_stats(&ms);
    out->maps_refreshes = ms.refreshes;
    out->osr_returns = ms.osr_returns;
}
