/*
 * prof_sigsample_calib.c - measures, once per process, what a perf task-clock event adds to a
 * context switch here: the clrscope-sampler thread and a helper thread of its own, pinned to one
 * CPU, pass a byte back and forth through two pipes, without and with an event on each, and the
 * fastest batches of each kind are compared. Runs on the sampler thread (prof_sigsample_review)
 * and its helper, clrscope-calib, which reads sig.calib only.
 */
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "prof_sigsample_int.h"

/* Short batches, alternating clocks, the fastest of each counts: on a busy CPU most batches of
 * 20 round trips (~0.2 ms) still run undisturbed, where whole seconds never would. */
#define CALIB_ROUNDS 20              /* round trips per batch */
#define CALIB_BATCHES 50             /* batches per clock */

#define CALIB_LIMIT_NS 500000000LL /* the whole measurement, at most: else "not measured" */

/* A perf task-clock event on the calling thread as arm_perf makes them, without the signal. */
static int calib_event(void)
{
    struct perf_event_attr a;
    sigsample_task_clock_attr(&a, (uint64_t)sig.interval_ns);
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
        int64_t left = deadline - sigsample_mono_ns();
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
int64_t sigsample_calibrate(void)
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
    int64_t deadline = sigsample_mono_ns() + CALIB_LIMIT_NS;
    int ok = !pin_to(sig.calib.cpu);
    for (int b = 0; b < CALIB_BATCHES && ok; b++) {
        for (int perf = 0; perf < 2 && ok; perf++) {
            int fd = perf ? calib_event() : -1;
            if (perf && (fd < 0 || ask('p', deadline))) {
                ok = 0;
            } else {
                int64_t t0 = sigsample_mono_ns();
                for (int i = 0; i < CALIB_ROUNDS && ok; i++)
                    ok = !ask('r', deadline);
                int64_t t = sigsample_mono_ns() - t0;
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
