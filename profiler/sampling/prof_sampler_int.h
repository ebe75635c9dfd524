/*
 * prof_sampler_int.h - what the files of the sampler share: its state (one struct, defined in
 * prof_sampler.c) and the functions one file calls in another. Not for other modules: their
 * interface is prof_sampler.h.
 *
 * The files: prof_sampler.c (the sampler thread's loop, the signal sampler's ticks, the modes,
 * start and stop), prof_sampler_wall.c (the stop-the-world walk of every managed thread, and the
 * samples a tick records from it) and prof_sampler_dump.c (thread dumps served with that walk).
 *
 * ctx: the clrscope-sampler thread, but where prof_sampler.h says otherwise.
 */
#ifndef PROF_SAMPLER_INT_H
#define PROF_SAMPLER_INT_H

#include <pthread.h>
#include <stdint.h>

#include "clr_abi.h"
#include "prof_intern.h"
#include "prof_sampler.h"
#include "prof_sigsample.h"

enum cpu_mode { CPU_SUSPEND, CPU_SIGNAL };

/* One frame of a stop-the-world walk: fn 0 for a run of native frames, at ip. */
struct frame {
    uintptr_t fn, ip;
};

/* One thread's walk in a suspension (sampler.caps; its frames in sampler.frames). */
struct captured {
    uint32_t os_tid;
    int nframes, truncated;
    int cached; /* not walked: it used no CPU since its stack was walked (its cpu_seen's stack) */
    int64_t cpu_ns; /* the thread's CPU clock right after its walk, still suspended */
    /* thread dumps: the lock it waits for, read in the same suspension as its stack
     * (prof_lock_waiting: atomics only); wait_since 0 = none */
    uint64_t lock_id, lock_owner;
    int64_t wait_since;
};

/* A thread's CPU clock at the last tick that walked it (sampler.seen, by tid), and the stack
 * the wall sampler keeps for it: a thread whose CPU clock has not moved since its stack was
 * walked cannot have changed that stack, so a wall tick records it again without suspending the
 * runtime for it. */
struct cpu_seen {
    uint32_t tid;     /* 0 = free */
    uint32_t gen;     /* the last tick that saw it (sampler.clock) */
    int64_t cpu_ns;
    int64_t stack_cpu; /* its CPU clock, read before the tick that walked `stack`; -1: no stack */
    int64_t now_cpu;   /* its CPU clock, read before the tick numbered `prep` */
    uint32_t prep;     /* the sampler_wall_prepare that read now_cpu */
    const char **stack; /* root first, k interned names (never freed): max_frames + 1 room */
    int k;             /* 0: the walk found no thread of that tid to record (none recorded) */
    /* wall asks (sampler_wall_by_signal): the wall time since its last wall sample, which the
     * answer to ask asked_seq (sent at asked_ns, its CPU clock then asked_cpu) carries;
     * walk_prep == prep: the tick's stop-the-world walk must walk it (it was not asked) */
    int64_t owed_ns;
    int64_t asked_cpu, asked_ns;
    uint32_t asked_seq, walk_prep;
    /* by_cpu: not asked (running, not proven safe to ask yet): its first CPU sample taken after
     * asked_cycles (prof_sig_cycles) carries owed_ns (sampler_wall_cpu_sample) */
    int by_cpu;
    uint64_t asked_cycles;
    /* retry: asked again at the next tick with what it owes (its answer held a leaf alone, or
     * where it blocked was not known); deferred: such ticks in a row, up to WALL_DEFER_TICKS
     * before it is walked with the runtime suspended */
    int retry, deferred;
    /* where it was blocked when asked (kind 0: not blocked), and where its kept stack was when
     * it came from such an answer: found blocked there again, it has not moved */
    struct prof_wall_state asked_at, kept_at;
    /* quiet: the wall ticks in a row that found its clock unmoved (up to QUIET_AFTER); a quiet
     * thread's clock is read one tick in QUIET_EVERY and its kept stack stored as often
     * (prof_sampler_wall.c), with the ticks in between: quiet_n of them, quiet_ns of wall time,
     * not stored yet */
    uint32_t quiet;
    int32_t quiet_n;
    int64_t quiet_ns;
};

/* Scratch space for naming one signal sample (sampler thread only). */
struct sig_names {
    const char **leaf; /* max_frames, leaf first */
    unsigned char *managed;
    const char **root; /* max_frames + 1, root first */
    double now_unix;
    /* prof_sig_cycles() at now_unix, and the counter's rate measured against CLOCK_MONOTONIC
     * since the first tick (0 until a second has passed): a signal sample is stored at the
     * second it was taken, not at the drain that found it up to a tick later */
    uint64_t now_cycles;
    double ns_per_cycle;
    uint64_t cycles0;
    int64_t cycles0_ns;
};

/* The sampler's state. Written by prof_sampler_start (on the thread that starts clrscope,
 * before the sampler thread exists) and by the clrscope-sampler thread after; where noted,
 * atomics other threads read, or `st` under st_lock. */
struct sampler_state {
    pthread_t thread;
    int running;   /* atomic: the sampler thread runs (prof_sampler_start, prof_sampler_stop) */
    int stop;      /* atomic: prof_sampler_stop asks the sampler thread to end */
    uint32_t threads_started; /* atomic: a thread started since the last sync (1), else 0 */
    int cpu_mode;  /* enum cpu_mode; atomic (the sampler thread falls back to CPU_SUSPEND) */
    int wall_hz;
    int wall_slowdown; /* atomic: the overhead governor's divisor of wall_hz (1..5) */
    int cpu_slowdown;  /* atomic: the governor's divisor of the CPU sampling rate (1, 2, 4) */
    int64_t tick_ns;  /* how far apart the thread wakes (but in stop-the-world CPU mode) */
    int ring_entries; /* per-thread signal ring size */
    /* The allocation and live profiles walk stacks by frame pointers (prof_walk) with the signal
     * sampler's maps snapshot and code map. When the signal sampler does not run (cpu off, the
     * stop-the-world sampler chosen or fallen back to) this thread keeps them fresh itself:
     * without them every allocation sample would take the runtime's much slower walk. */
    int keep_maps;
    uint32_t *tids; /* max_threads, for the signal sampler's thread list */
    struct sig_names sn;
    struct captured *caps;
    struct frame *frames; /* cap_threads * max_frames */
    int cap_threads;
    struct cpu_seen *seen;
    uint32_t nseen; /* power of two */
    uint32_t clock; /* the ticks that walked or read the threads (wall or CPU): seen's ages */
    /* the wall ticks' reads of the managed threads' CPU clocks (sampler_wall_prepare) */
    uint32_t prep;        /* the last read's number */
    uint32_t *wall_tids;  /* max_threads: the threads it read */
    size_t wall_ntids;
    int wall_unlisted;    /* the last walk found a thread the read had not: walk every tick */
    /* CLRSCOPE_WALL_WALK=signal (the default; with the signal CPU sampler): threads that ran are
     * asked for their stacks by a signal (prof_sigsample_wall_*); their names kept in wall_names
     * (the code map's names last until its next refresh) */
    int wall_signal;
    uint32_t wall_seq;
    uint32_t wall_by_cpu; /* threads whose next CPU sample stands for their wall sample */
    struct prof_intern wall_names;
    int wall_names_ready;
    uint64_t unload_acked; /* what the sampler last told prof_unload it had drained */
    int suspend_warned;    /* atomic (prof_log_once) */
    struct prof_sampler_stats st; /* under st_lock: the sampler thread writes, anyone reads */
    pthread_mutex_t st_lock;
};

extern struct sampler_state sampler;

/* prof_sampler.c */
/* Names a signal sample's frames into sn->root, root first ("[truncated]" above a cut stack,
 * "[unknown]" for none); returns how many (clrscope-sampler, under prof_codemap_lock). */
int sampler_name_sample(struct sig_names *sn, const struct prof_sigsample *smp);

/* prof_sampler_wall.c */
/* Room for `threads` threads' stacks (at most CLRSCOPE_MAX_THREADS): 0, or -1 out of memory. */
int sampler_ensure_capacity(int threads);
/* Drops the threads not seen for more than max_age ticks, so that the table does not fill with
 * dead tids: every 64 ticks those older than 100, and when the table is full those not seen at
 * this tick or the last. */
void sampler_seen_sweep(uint32_t max_age);
/* Stores what quiet threads' kept stacks owe (at the sampler's end). */
void sampler_flush_quiet(void);
/* Walks all managed threads while the runtime is suspended; with use_cache, not those whose
 * stack the wall sampler kept and whose CPU clock has not moved since (sampler_wall_prepare read
 * it): they are captured as `cached`; with only_marked, only the threads sampler_wall_by_signal
 * left to it (walk_prep). No malloc, no locks, no logging. */
int sampler_capture_all(ICorProfilerInfo15 *info, int *overflow, int read_cpu, int read_locks,
                        int use_cache, int only_marked);
/* Names the n stacks captured and records them: CPU samples weighed by the CPU each thread
 * burned since the last tick (do_cpu), wall samples weighed wall_ns (do_wall). With use_cache,
 * keeps each walked thread's stack for the next wall ticks. */
void sampler_record(int n, double now_unix, int64_t wall_ns, int do_cpu, int do_wall,
                    int use_cache);
/* Before a wall tick: reads every managed thread's CPU clock. Returns 1 when none of them has
 * run since its stack was kept (and the threads are those the last walk found): the tick can be
 * recorded from the kept stacks (sampler_wall_from_cache) without suspending the runtime. */
int sampler_wall_prepare(void);
/* Records a wall sample of wall_ns for every managed thread from its kept stack; returns how
 * many. */
int sampler_wall_from_cache(double now_unix, int64_t wall_ns);
/* After sampler_wall_prepare found threads that ran: records the others from their kept stacks,
 * asks those that ran for their stacks by a signal and records the answers (waiting up to
 * WALL_ANSWER_WAIT_NS; a late answer is recorded at a later tick with the time it owes), and
 * marks the threads it could not ask for the stop-the-world walk (walk_prep). Returns how many
 * it marked; *answers, *cached: the samples it recorded from answers and from kept stacks;
 * *leaf: of those marked, the answers that held a leaf alone. Takes prof_codemap_lock. */
int sampler_wall_by_signal(double now_unix, int64_t wall_ns, int *answers, int *cached,
                           int *leaf);
/* A CPU sample of a thread sampler_wall_by_signal left to its next CPU sample (sampler.wall_by_cpu
 * says whether any is): recorded as its wall sample too, with what it owes; root[0..m) its names
 * (clrscope-sampler, under prof_codemap_lock). */
void sampler_wall_cpu_sample(double when_unix, const struct prof_sigsample *smp,
                             const char **root, int m);

/* prof_sampler_dump.c: serves dump request `want` (prof_tdump.h). */
void sampler_dump_threads(ICorProfilerInfo15 *info, uint64_t want);

#endif
