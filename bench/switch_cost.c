/* bench/switch_cost.c - what each CPU-sampling clock adds to a context switch on this machine.
 *
 * Two threads pinned to one CPU pass a byte to and fro through two pipes, so every round trip is
 * two context switches between them. Each thread carries the clock under test, armed as
 * clrscope's signal sampler arms it (prof_sigsample.c): none, a POSIX timer on the thread's CPU
 * clock (timer_create, 100 Hz), or a perf task-clock event (sampling every 10 ms of the thread's
 * CPU, user time only unless the kernel allows more), plus a counting-only perf event to tell the
 * event's switching from its timer. The clocks alternate over ROUNDS rounds; each prints the
 * median time of a round trip and the extra per switch against no clock.
 *
 *   cc -O2 -pthread -o switch_cost bench/switch_cost.c && ./switch_cost [round_trips] [rounds]
 *
 * With BENCH_FIGURES set (bench/run.sh), each clock's extra time per switch is also appended to
 * that file as one JSON line, the form bench/render.py reads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { NONE, POSIX_TIMER, PERF_SAMPLING, PERF_COUNTING, CLOCKS };
static const char *const names[CLOCKS] = {"none", "posix timer", "perf task-clock (sampling)",
                                          "perf task-clock (counting)"};
static const char *const keys[CLOCKS] = {"none", "posix", "perf_sampling", "perf_counting"};

struct pair {
    int clock;
    long trips;
    int ping[2], pong[2];
    int cpu;
};

static int perf_kernel_ok = 1;

/* Arms the clock on the calling thread; returns a handle to release, or -1 (errno set). */
static long arm(int clock, timer_t *tm)
{
    if (clock == POSIX_TIMER) {
        struct sigevent sev;
        memset(&sev, 0, sizeof sev);
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = SIGPROF;
        sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
        clockid_t cid;
        if (pthread_getcpuclockid(pthread_self(), &cid) || timer_create(cid, &sev, tm))
            return -1;
        struct itimerspec its = {{0, 10000000}, {0, 10000000}};
        return timer_settime(*tm, 0, &its, NULL) ? -1 : 0;
    }
    if (clock == PERF_SAMPLING || clock == PERF_COUNTING) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.type = PERF_TYPE_SOFTWARE;
        a.size = sizeof a;
        a.config = PERF_COUNT_SW_TASK_CLOCK;
        a.sample_period = clock == PERF_SAMPLING ? 10000000 : 0;
        a.exclude_hv = 1;
        long fd = -1;
        if (perf_kernel_ok) {
            fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
            if (fd < 0 && (errno == EACCES || errno == EPERM))
                perf_kernel_ok = 0;
        }
        if (fd < 0) {
            a.exclude_kernel = 1;
            fd = syscall(SYS_perf_event_open, &a, 0, -1, -1, 0);
        }
        return fd;
    }
    return 0;
}

static void release(int clock, long h, timer_t tm)
{
    if (clock == POSIX_TIMER)
        timer_delete(tm);
    else if (h > 0)
        close((int)h);
}

static void pin(int cpu)
{
    cpu_set_t s;
    CPU_ZERO(&s);
    CPU_SET(cpu, &s);
    sched_setaffinity(0, sizeof s, &s);
}

static void *echo(void *arg)
{
    struct pair *p = arg;
    pin(p->cpu);
    timer_t tm;
    long h = arm(p->clock, &tm);
    char c;
    for (long i = 0; i < p->trips; i++)
        if (read(p->ping[0], &c, 1) != 1 || write(p->pong[1], &c, 1) != 1)
            break;
    if (h >= 0)
        release(p->clock, h, tm);
    return NULL;
}

/* ns per round trip with `clock` on both threads, or -1 when the clock cannot be had. */
static double run(int clock, long trips, int cpu)
{
    struct pair p = {.clock = clock, .trips = trips, .cpu = cpu};
    if (pipe(p.ping) || pipe(p.pong))
        return -1;
    timer_t tm;
    long h = arm(clock, &tm);
    double ns = -1;
    pthread_t th;
    if (h >= 0 && !pthread_create(&th, NULL, echo, &p)) {
        char c = 'x';
        struct timespec a, b;
        clock_gettime(CLOCK_MONOTONIC, &a);
        for (long i = 0; i < trips; i++)
            if (write(p.ping[1], &c, 1) != 1 || read(p.pong[0], &c, 1) != 1)
                break;
        clock_gettime(CLOCK_MONOTONIC, &b);
        pthread_join(th, NULL);
        ns = ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)trips;
    }
    if (h >= 0)
        release(clock, h, tm);
    close(p.ping[0]);
    close(p.ping[1]);
    close(p.pong[0]);
    close(p.pong[1]);
    return ns;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    long trips = argc > 1 ? atol(argv[1]) : 100000;
    int rounds = argc > 2 ? atoi(argv[2]) : 5;
    if (trips < 1 || rounds < 1 || rounds > 100) {
        fprintf(stderr, "usage: switch_cost [round_trips >= 1] [rounds 1..100]\n");
        return 2;
    }
    signal(SIGPROF, SIG_IGN); /* the POSIX timers' signals: nothing to do */
    int cpu = sched_getcpu();
    if (cpu < 0)
        cpu = 0;
    pin(cpu);
    double t[CLOCKS][100];
    for (int r = 0; r < rounds; r++)
        for (int c = 0; c < CLOCKS; c++)
            t[c][r] = run(c, trips, cpu);
    double med[CLOCKS];
    for (int c = 0; c < CLOCKS; c++) {
        qsort(t[c], (size_t)rounds, sizeof t[c][0], cmp);
        med[c] = t[c][rounds / 2];
    }
    printf("%ld round trips between two threads pinned to CPU %d (two context switches each), "
           "%d rounds, clocks alternating; median per round trip, min..max; perf events %s\n\n",
           trips, cpu, rounds, perf_kernel_ok ? "count kernel time too" : "count user time only");
    printf("| clock on each thread | us per round trip | ratio to none | extra per switch (us) |\n");
    printf("|---|---|---|---|\n");
    const char *fig_path = getenv("BENCH_FIGURES");
    FILE *fig = fig_path && *fig_path ? fopen(fig_path, "a") : NULL;
    for (int c = 0; c < CLOCKS; c++) {
        if (t[c][0] < 0) {
            printf("| %s | unavailable here | – | – |\n", names[c]);
            continue;
        }
        printf("| %s | %.2f (%.2f..%.2f) | %.3f | %.2f |\n", names[c], med[c] / 1e3,
               t[c][0] / 1e3, t[c][rounds - 1] / 1e3, med[c] / med[NONE],
               (med[c] - med[NONE]) / 2e3);
        if (fig)
            fprintf(fig, "{\"section\": \"switch_cost\", \"name\": \"%s.extra_per_switch\", "
                    "\"value\": %.3f, \"unit\": \"us\", \"round_trip_us\": %.3f, \"n\": %d}\n",
                    keys[c], (med[c] - med[NONE]) / 2e3, med[c] / 1e3, rounds);
    }
    if (fig)
        fclose(fig);
    return 0;
}
