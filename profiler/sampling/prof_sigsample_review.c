/*
 * prof_sigsample_review.c - auto: perf events while they cost little (CLRSCOPE_CPU_TIMER=auto).
 * Every REVIEW_NS the sampled threads' context switches and CPU time tell what perf events cost
 * the app; prof_sigsample_review says when the clock should change. The clrscope-sampler thread
 * only, without the code map's lock (its one measurement takes ~20 ms).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include "prof_log.h"
#include "prof_sigsample_int.h"

/* A perf task-clock event is switched out and in with its thread: the kernel stops and restarts
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
        int64_t t0 = sigsample_mono_ns();
        sig.switch_cost_ns = sigsample_calibrate();
        if (sig.switch_cost_ns < 0)
            prof_log(LOG_INFO, "cpu sampler: could not measure what perf events add to a "
                     "context switch here; they are kept (CLRSCOPE_CPU_TIMER=posix gives them up)");
        else
            prof_log(LOG_DEBUG, "cpu sampler: perf events add %lld ns to a context switch here",
                     (long long)sig.switch_cost_ns);
        /* the next window leaves the measurement out: its own threads' switches count in the
         * getrusage fallback (schedstat counts only the sampled threads, which it spares) */
        sig.review_at = now + (sigsample_mono_ns() - t0);
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
