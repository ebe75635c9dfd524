/*
 * prof_gc_clock.c - the CPU clock of an app thread that runs a blocking GC itself (workstation
 * GC), read by that thread at the start and at the end of each of its GC pauses
 * (prof_gc_events.c), and how it was read, for clrscope-agg.
 *
 * The clock is the thread's own perf "task-clock" event (perf_event_open, software, counting
 * user and kernel time: exclude_kernel only stops it from taking samples, so an unprivileged
 * process may open it where perf_event_paranoid is 2), read with read(2). The plain thread CPU
 * clock (CLOCK_THREAD_CPUTIME_ID) is exact too, but reading it brings the scheduler's accounting
 * of the running thread up to date, and when the thread's time slice is used up the kernel
 * switches to another runnable thread right there, in the GC pause, with the app's other threads
 * stopped: on a core shared with a busy process, clock reads at each end of a 1 ms busy section
 * made it switched out 1.3x as often and 1.2x longer on average; the perf read kept it at the
 * rate without any read. Where perf events are refused (perf_event_paranoid 3, a seccomp
 * filter, no descriptor left) the thread CPU clock is read instead: still exact, at that cost.
 *
 * Each thread opens its event at its first GC pause and keeps it (one descriptor per thread
 * that ever ran a GC, at most GC_CLOCK_MAX_FDS at once); a thread-specific-data destructor
 * closes it when the thread exits.
 *
 * ctx: gc_clock_init at Initialize (before the GC events are enabled); gc_clock_self_ns on
 * runtime threads inside GC pauses: no malloc, no lock, two system calls once per thread and
 * one per read; gc_clock_stats on any thread (atomics).
 */
#include "prof_gc.h"
#include "prof_gc_int.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof_core.h"

#define GC_CLOCK_MAX_FDS 256 /* threads holding a perf clock at once; the others read the clock */

/* Shared by every runtime thread that runs a GC (atomics) and set up by Initialize. */
static struct gc_clock_state {
    pthread_key_t key;     /* its destructor closes the exiting thread's descriptor */
    int key_ok;            /* written once at Initialize */
    int refused;           /* errno of a refusal that holds for every thread (0: none yet) */
    int open_fds;          /* perf clocks open now */
    uint64_t perf_threads; /* threads that opened one, ever */
    uint64_t thread_reads; /* reads of CLOCK_THREAD_CPUTIME_ID instead */
} gc_clock;

/* The calling thread's perf clock: descriptor + 1; 0 = not tried yet; -1 = read the thread CPU
 * clock. */
static PROF_TLS int tls_clock_fd;

static void close_clock(void *v)
{
    int fd = (int)(intptr_t)v - 1;
    if (fd >= 0) {
        close(fd);
        __atomic_fetch_sub(&gc_clock.open_fds, 1, __ATOMIC_RELAXED);
    }
}

void gc_clock_init(void)
{
    if (!gc_clock.key_ok && pthread_key_create(&gc_clock.key, close_clock) == 0)
        gc_clock.key_ok = 1;
}

static int open_clock(void)
{
    if (!gc_clock.key_ok || __atomic_load_n(&gc_clock.refused, __ATOMIC_RELAXED))
        return -1;
    if (__atomic_add_fetch(&gc_clock.open_fds, 1, __ATOMIC_RELAXED) > GC_CLOCK_MAX_FDS) {
        __atomic_fetch_sub(&gc_clock.open_fds, 1, __ATOMIC_RELAXED);
        return -1;
    }
    struct perf_event_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.size = sizeof attr;
    attr.type = PERF_TYPE_SOFTWARE;
    attr.config = PERF_COUNT_SW_TASK_CLOCK;
    attr.exclude_kernel = 1; /* counts kernel time all the same: it only samples nothing there */
    attr.exclude_hv = 1;
    long fd = syscall(SYS_perf_event_open, &attr, 0 /* this thread */, -1, -1,
                      PERF_FLAG_FD_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        __atomic_fetch_sub(&gc_clock.open_fds, 1, __ATOMIC_RELAXED);
        /* out of descriptors is this moment's; anything else is the system's answer for all */
        if (e != EMFILE && e != ENFILE && e != ENOMEM && e != EINTR)
            __atomic_store_n(&gc_clock.refused, e ? e : EPERM, __ATOMIC_RELAXED);
        return -1;
    }
    if (pthread_setspecific(gc_clock.key, (void *)(intptr_t)(fd + 1))) {
        close((int)fd);
        __atomic_fetch_sub(&gc_clock.open_fds, 1, __ATOMIC_RELAXED);
        return -1;
    }
    __atomic_fetch_add(&gc_clock.perf_threads, 1, __ATOMIC_RELAXED);
    return (int)fd;
}

int64_t gc_clock_self_ns(int *perf)
{
    if (tls_clock_fd == 0) {
        int fd = open_clock();
        tls_clock_fd = fd >= 0 ? fd + 1 : -1;
    }
    if (tls_clock_fd > 0) {
        uint64_t v = 0;
        if (read(tls_clock_fd - 1, &v, sizeof v) == (ssize_t)sizeof v && v <= INT64_MAX) {
            *perf = 1;
            return (int64_t)v;
        }
    }
    *perf = 0;
    __atomic_fetch_add(&gc_clock.thread_reads, 1, __ATOMIC_RELAXED);
    struct timespec ts;
    if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts))
        return -1;
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void gc_clock_stats(uint64_t *perf_threads, uint64_t *thread_reads, int *refused)
{
    *perf_threads = __atomic_load_n(&gc_clock.perf_threads, __ATOMIC_RELAXED);
    *thread_reads = __atomic_load_n(&gc_clock.thread_reads, __ATOMIC_RELAXED);
    *refused = __atomic_load_n(&gc_clock.refused, __ATOMIC_RELAXED);
}
