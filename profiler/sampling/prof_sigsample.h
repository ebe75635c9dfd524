/*
 * prof_sigsample - CPU stack samples without stopping the world (CLRSCOPE_CPU_SAMPLER=signal).
 *
 * Every sampled thread gets a POSIX timer on its own CPU-time clock (timer_create with the
 * thread's CPU clock and SIGEV_THREAD_ID), so the kernel signals exactly the thread that burned
 * CLRSCOPE_SAMPLING_HZ-th of a second of CPU, while it runs; idle threads cost nothing and no
 * thread is polled. The handler (prof_sighandler.c) walks that thread's frame-pointer chain into a
 * per-thread ring of preallocated entries; the sampler thread drains the rings once a tick and
 * names the frames outside signal context. Each sample weighs the CPU time its timer measured
 * (interval x (1 + overruns), plus expirations dropped while the ring was full), so the CPU total
 * stays exact up to one interval per thread. A timer's first expiry is drawn at random within
 * its first interval, so that error is zero on average: a thread that burns less than an
 * interval in all is sampled with the probability of its share of one.
 *
 * Signal: the first of SIGPROF, SIGUSR2, SIGUSR1 that has no handler and is not ignored (never
 * SIGRTMIN, which CoreCLR uses to interrupt threads); installed SA_SIGINFO | SA_RESTART, never
 * removed (a late signal must always find it). If another component later replaces it,
 * prof_sigsample_intact() turns false and the caller must stop using this module.
 *
 * ctx: the clrscope-sampler thread, holding prof_codemap_lock() around the drains, syncs, clock
 * changes and upkeep (the code map names what they hand over; prof_maps is kept under that lock),
 * but not around prof_sigsample_review (its one measurement takes ~20 ms); prof_sigsample_set_timer
 * and prof_sigsample_start before that thread starts (prof_sampler_start), prof_sigsample_stop on
 * it or once it has ended (prof_sampler_stop).
 */
#ifndef PROF_SIGSAMPLE_H
#define PROF_SIGSAMPLE_H

#include <stddef.h>
#include <stdint.h>

struct prof_sigsample_stats {
    int signo;                 /* 0 when not started */
    uint64_t threads;          /* threads with an armed timer now */
    uint64_t timer_failures;   /* timer_create/settime refusals (thread left unsampled) */
    uint64_t samples;          /* samples drained */
    uint64_t stale;            /* signals for a ring that had changed owner (ignored) */
    uint64_t ring_full;        /* expirations that found both entries full (weight carried) */
    uint64_t interrupted;      /* CPU samples whose signal cut a system call short (EINTR) */
    uint64_t interrupted_outside; /* of them, calls code outside the runtime made */
    uint64_t no_stack;         /* walks limited to the leaf: stack not in the maps snapshot */
    uint64_t altstack;         /* walks limited to the leaf: thread on its signal stack */
    uint64_t truncated;        /* walks stopped at CLRSCOPE_MAX_FRAMES */
    uint64_t maps_refreshes;   /* /proc/self/maps snapshots taken */
    uint64_t new_code;         /* walks through code mapped since the snapshot (refresh asked) */
    uint64_t osr_returns;      /* return addresses of OSR frames the walk looks behind */
    const char *timer;         /* "perf" (task-clock events) or "posix" (CPU timers) */
    const char *timer_off;     /* why not perf events (NULL when they are used) */
    uint64_t perf_threads;     /* threads sampled by a perf event now */
    uint64_t perf_fallbacks;   /* threads given a POSIX timer instead (descriptors) */
    uint64_t clock_misses;     /* perf drains without the thread's clock (weighed by period) */
    uint64_t rearm_failures;   /* perf events the handler could not re-enable */
    int reviewing;             /* auto: the clock follows perf events' measured cost */
    int64_t switch_cost_ns;    /* what a perf event adds to a context switch (-1: not measured) */
    double switch_rate;        /* the app's context switches per CPU-second (last window) */
    double perf_cost;          /* their product: perf events' share of the app's CPU */
    double timer_budget;       /* the share they may cost (prof_sigsample_set_timer) */
    uint64_t clock_changes;    /* times auto changed the clock */
    uint64_t handler_cycles;   /* time spent in the handler (prof_sig_cycles units) */
    const char *native_unwind; /* CLRSCOPE_NATIVE_UNWIND: "cfi" or "fp" */
    uint32_t cfi_libraries;    /* libraries whose frames are unwound by their CFI */
    struct prof_sigsample_wall_stats {
        int signo;                /* the wall asks' signal, 0 = none */
        uint64_t asked;           /* threads asked for their stack */
        uint64_t answered;        /* answers recorded */
        uint64_t late;            /* answers that came after their ask was given up on */
        uint64_t blocked_outside; /* not asked: blocked in a system call code outside the
                                   * runtime made (walked with the runtime suspended) */
        uint64_t fragile;         /* not asked: seen so blocked at an earlier tick */
        uint64_t no_ring;         /* not asked: not sampled yet (a thread just started) */
        uint64_t ask_failures;    /* the signal could not be queued */
        uint64_t unreadable;      /* not asked: its system call state could not be read */
        uint64_t same_wait;       /* not asked: its clock moved, but it was blocked in the
                                   * same call at the same place as at its last answer */
        uint64_t unknown;         /* not asked: blocked in a call whose caller could not be
                                   * found (walked with the runtime suspended that time) */
        uint64_t given_up;        /* asks unanswered for a second (the signal blocked, or
                                   * the answer lost): that thread walked with the runtime
                                   * suspended that time */
        uint64_t ring_full;       /* answers that found the thread's ring full */
        uint64_t unproven;        /* not asked: running, and seen nowhere else yet (its first
                                   * ticks; its next CPU sample stands for it) */
        uint64_t by_cpu;          /* of those, wall samples taken from the thread's next CPU
                                   * sample */
        uint64_t interrupted;     /* answers whose signal cut a system call short (EINTR) */
        uint64_t interrupted_outside; /* of them, calls code outside the runtime made: that
                                       * thread is walked with the runtime suspended from then */
    } wall;
};

enum { PROF_SIG_TIMER_AUTO = 0, PROF_SIG_TIMER_PERF = 1, PROF_SIG_TIMER_POSIX = 2 };
/* CLRSCOPE_CPU_TIMER and CLRSCOPE_CPU_TIMER_BUDGET (a fraction), before prof_sigsample_start:
 * auto (perf events where the kernel allows and while they cost the app less than `budget` of
 * its CPU, else POSIX timers; prof_sigsample_review), perf (where the kernel allows), posix. */
void prof_sigsample_set_timer(int mode, double budget);
/* CLRSCOPE_NATIVE_UNWIND, before prof_sigsample_start: 1 (cfi, the default) unwinds the frames of
 * the libraries without frame pointers by their CFI (prof_cfi.h), 0 (fp) follows frame pointers
 * only. */
void prof_sigsample_set_cfi(int on);

/* One captured sample, valid during the callback only. */
struct prof_sigsample {
    uint32_t tid;
    int flags;              /* PROF_SIG_F_* (prof_sighandler.h) */
    int n;                  /* ips[0] = interrupted pc, ips[1..n) = return addresses, leaf first */
    int nwindow;            /* window[i] = the stack word at sp + 8 * i */
    const uintptr_t *ips;
    const uintptr_t *window;
    int64_t cpu_ns;         /* the CPU time this sample stands for */
    uint32_t epoch;         /* the unload epoch it was taken in (prof_unload.h) */
    uint64_t found;         /* bit i: ips[i] was read off the chain (an OSR Tier0 record) */
    uint64_t fresh;         /* bit i: ips[i] in no mapping the snapshot knew (prof_sig_entry) */
    uintptr_t jit;          /* the method the thread's JIT was compiling (prof_sig_jit_top) */
    uint32_t wall_seq;      /* a wall answer: the ask's sequence number (PROF_SIG_WALL_SEQ_MASK) */
    int64_t cpu_end;        /* a wall answer: the thread's CPU clock after its walk, or -1 */
    uint64_t cycles;        /* prof_sig_cycles() when it was taken (prof_sighandler.h) */
};

typedef void (*prof_sigsample_fn)(void *arg, const struct prof_sigsample *s);
/* A wall answer's consumer: 1 when it took the answer, 0 when it was stale (counted late). */
typedef int (*prof_sigsample_wall_fn)(void *arg, const struct prof_sigsample *s);

/* Picks and installs the signal, takes the first maps snapshot. 0, or -errno after one log line
 * (-EBUSY: no free signal). `hz` is the CPU sampling rate per CPU-second of a thread; `entries` the
 * samples each thread's ring holds between two drains (2..PROF_SIG_MAX_ENTRIES). */
int prof_sigsample_start(int hz, int max_frames, int max_threads, int entries);
/* Deletes every timer; the handler stays installed and ignores whatever arrives late. Self-walks
 * (prof_sig_walk_self) go back to the runtime's walk until prof_maps_start (prof_maps_stop). */
void prof_sigsample_stop(void);
/* 1 while the installed handler of our signal is still ours. */
int prof_sigsample_intact(void);
/* Makes the sampled set equal to tids[0..n) (sorted in place): arms timers for new threads,
 * drains and disarms vanished ones (their last samples go to fn). */
void prof_sigsample_sync(uint32_t *tids, size_t n, prof_sigsample_fn fn, void *arg);
/* Hands every sample captured since the last call to fn; returns how many. */
int prof_sigsample_drain(prof_sigsample_fn fn, void *arg);
/* auto (sampler thread, without the code map's lock: it may measure for ~20 ms once): every few
 * seconds, what perf events cost the app. 1 when they should be used again, 0 when POSIX timers
 * should replace them, -1 to keep the clock (prof_sigsample_use_perf makes the change). */
int prof_sigsample_review(int64_t now_ns);
/* Re-arms every sampled thread with perf events (on) or POSIX timers (off); its samples so far go
 * to fn. */
void prof_sigsample_use_perf(int on, int64_t now_ns, prof_sigsample_fn fn, void *arg);
/* Changes the CPU time between two samples of a thread (the overhead governor's slowdown of
 * CLRSCOPE_SAMPLING_HZ): every thread's ring is recorded at the old interval through fn, then
 * its clock armed again at the new one. The clrscope-sampler thread. prof_sigsample_interval:
 * the interval in force. */
void prof_sigsample_set_interval(int64_t interval_ns, prof_sigsample_fn fn, void *arg);
int64_t prof_sigsample_interval(void);
/* Housekeeping: keeps the maps snapshot current (prof_maps_maintain), recycles the rings and
 * closes the perf events the handler can no longer see. */
void prof_sigsample_maintain(int64_t now_ns);
void prof_sigsample_get_stats(struct prof_sigsample_stats *out);
/* The sampler's doorbell for napping through idle ticks: samples the handlers have written so
 * far; arm(n): the handler that writes the n-th sample from now bumps the word
 * prof_sigsample_bell() points to and wakes its futex (once; arm(0) disarms). */
/* Wall asks (prof_sigsample_wall.c): a thread whose CPU clock moved since its stack was walked
 * is asked for it by a signal of its own, answered by the handler into the thread's ring.
 * wall_on: 1 while asks can be made (the signal installed and still ours). A round: begin, then
 * ask each thread (1 asked; 0 not asked: blocked in a system call code outside the runtime made,
 * or its state unreadable; -1 not asked: no ring yet, or the signal could not be queued), wait
 * up to max_ns for the answers, collect them (late ones included: fn tells them apart by
 * wall_seq). clrscope-sampler only: collect under prof_codemap_lock (it names the answers'
 * frames); the asks read the maps snapshot and the CFI tables to find the caller of a blocked
 * call, which only this thread replaces, so they need no lock. */
/* After prof_sigsample_start: installs the handler on a second free one of SIGPROF, SIGUSR2,
 * SIGUSR1 for wall asks; returns it, or 0 (after one log line) when none is free. */
int prof_sigsample_wall_install(void);
int prof_sigsample_wall_on(void);
void prof_sigsample_wall_get_stats(struct prof_sigsample_wall_stats *out);
/* Where a thread is (/proc/self/task/TID/syscall): running (or about to: the kernel says
 * "running"), waiting for a CPU in user code, or blocked in system call nr with these arguments,
 * stack pointer and pc. 0, or -1 when it cannot be read (the thread is gone). A thread whose
 * CPU clock moved only for taking a signal is found blocked in the same call at the same place:
 * its stack has not changed. */
enum { PROF_WALL_RUNNING = 1, PROF_WALL_USER = 2, PROF_WALL_BLOCKED = 3 };
struct prof_wall_state {
    int kind;
    long nr;
    uintptr_t args[6], sp, pc;
};
int prof_sigsample_wall_state(uint32_t tid, struct prof_wall_state *st);
void prof_sigsample_wall_begin(void);
/* st: the thread's state just read (NULL: unreadable, not asked). 1: asked; 2: not asked, running
 * and not proven safe to ask yet: its next CPU sample stands for the wall sample (the CPU
 * sampler's signal reaches it anyway); 3: not asked, blocked where the caller of the wait is not
 * known (yet: a library mapped since the maps snapshot, which is refreshed): to be asked again
 * at the next tick; 0: to be walked with the runtime suspended; -1: not sampled. */
int prof_sigsample_wall_ask(uint32_t tid, uint32_t seq, const struct prof_wall_state *st);
/* Counts a wall sample taken from a thread's CPU sample (the stats' by_cpu). */
void prof_sigsample_wall_by_cpu(void);
/* Counts a thread found blocked where its last answer was (the stats' same_wait). */
void prof_sigsample_wall_same(void);
/* Counts an ask given up on after several ticks without an answer (the stats' given_up). */
void prof_sigsample_wall_give_up(void);
void prof_sigsample_wall_wait(int64_t max_ns);
int prof_sigsample_wall_collect(prof_sigsample_wall_fn fn, void *arg);

uint64_t prof_sigsample_handled(void);
void prof_sigsample_arm_bell(uint32_t n);
uint32_t *prof_sigsample_bell(void);

#endif
