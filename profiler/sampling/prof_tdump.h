/*
 * prof_tdump - thread dumps: what every managed thread is doing right now (its stack, OS state and
 * CPU time), taken on demand, as Go's goroutine dump, dotnet-stack or dotnet-monitor's /stacks.
 *
 * A request (prof_tdump_take, on an HTTP worker) asks the sampler thread for a dump and waits for
 * it. The sampler thread (prof_sampler.c) reads every thread's OS state, suspends the runtime,
 * walks every managed thread as its wall ticks do, resumes, names the frames and publishes the
 * dump here. Identical stacks are grouped (largest group first), as a reader scans them: "40
 * threads wait in the thread pool, 3 in Orders.Lock". The newest dump is kept (immutable,
 * reference-counted) and handed out again to requests made within TDUMP_REUSE_MS of its
 * publication (or ten times what it took, when longer), so a page reloaded in a loop stops the
 * world at most twice a second.
 *
 * ctx: prof_tdump_take and the getters on any clrscope or HTTP thread (never a runtime callback);
 * prof_tdump_wanted, prof_tdump_publish and prof_tdump_fail on the sampler thread only;
 * prof_tdump_enable from prof_sampler_start and prof_sampler_stop; prof_tdump_mem_bytes on
 * clrscope-agg (prof_tdump_kind); prof_tdump_group, prof_tdump_find_deadlocks, prof_tdump_pool,
 * prof_tdump_app_frame and prof_tdump_free work on the dump they are given, on any thread.
 */
#ifndef PROF_TDUMP_H
#define PROF_TDUMP_H

#include <stddef.h>
#include <stdint.h>

#define TDUMP_REUSE_MS 500
/* A lock wait counts towards a deadlock once it has lasted this long: a cycle of waits that
 * resolves within milliseconds (an owner that let go as the dump was taken) is none. */
#define TDUMP_DEADLOCK_MIN_NS 1000000000LL

struct prof_tdump_thread {
    uint32_t tid;     /* OS thread id */
    char name[48];    /* managed name, else the OS name; "" when unknown */
    char state;       /* /proc state letter just before the suspension: R, S, D, T, Z, … or '?' */
    int64_t cpu_ns;   /* the thread's CPU clock, read while it was suspended; -1 unknown */
    uint32_t group;   /* index into prof_tdump.groups */
    /* The lock it waits for (the lock profile's contention events; prof_lock_waiting):
     * wait_ns 0 = none known; lock_owner 0 = owner unknown. */
    uint64_t lock_id, lock_owner;
    int64_t wait_ns;
    uint32_t deadlock; /* 1-based number of the cycle of lock waits it is in, 0 none */
};

struct prof_tdump_group {
    uint32_t nthreads;
    uint32_t first_frame, nframes; /* frames[first_frame ..+ nframes), leaf first */
    int truncated;                 /* deeper than CLRSCOPE_MAX_FRAMES: the root side is cut */
};

struct prof_tdump {
    int refs; /* atomic */
    uint64_t seq;             /* 1, 2, … */
    double t_unix;            /* when the runtime was suspended */
    int64_t t_mono_ns;
    int64_t suspend_ns;       /* how long the world stood still */
    uint32_t nthreads, ngroups, omitted; /* omitted: past CLRSCOPE_MAX_THREADS */
    uint32_t ndeadlocks;      /* cycles of threads each waiting for a lock the next one holds */
    struct prof_tdump_thread *threads; /* grouped: a group's threads together, by tid */
    struct prof_tdump_group *groups;   /* largest first */
    const char **frames;               /* names live as long as the process (prof_symbols) */
};

enum { TDUMP_OK = 0, TDUMP_UNAVAILABLE = -1, TDUMP_TIMEOUT = -2, TDUMP_FAILED = -3 };

/* The sampler thread runs (prof_sampler_start): dumps can be taken. */
void prof_tdump_enable(int on);
/* Hands out a dump no older than TDUMP_REUSE_MS, asking the sampler thread for a new one when
 * there is none, and waiting up to timeout_ms. any_age: the newest dump whatever its age, a new
 * one only when none was ever taken (a HEAD request, which wants the headers and must not stop
 * the world for them). *out holds a reference (prof_tdump_release) when TDUMP_OK; else *why says
 * why (a static string). */
int prof_tdump_take(int timeout_ms, int any_age, struct prof_tdump **out, const char **why);
void prof_tdump_release(struct prof_tdump *d);

/* Sampler thread: the request to serve (0 = none). */
uint64_t prof_tdump_wanted(void);
/* Sampler thread: the dump for request `want` (ownership passes here; groups, threads and
 * frames are filled, refs and seq are set here). */
void prof_tdump_publish(uint64_t want, struct prof_tdump *d);
/* Sampler thread: request `want` could not be served; `why` is a static string. */
void prof_tdump_fail(uint64_t want, const char *why);

/* Groups captured stacks. Input: n threads whose frames (leaf first) are frames[off[i] ..+
 * len[i]); fills d->groups, d->threads[].group and d->frames and orders d->threads by group.
 * Returns 0, or -1 out of memory (d untouched but for what it owned before). Exposed for tests. */
int prof_tdump_group(struct prof_tdump *d, const char *const *frames, const uint32_t *off,
                     const uint32_t *len, const int *truncated);
/* Finds the deadlocks among d->threads (their lock_owner links, waits of TDUMP_DEADLOCK_MIN_NS
 * or more): numbers each cycle's threads (deadlock = 1, 2, …) and sets d->ndeadlocks. A thread
 * that waits for a deadlocked one is not in the cycle itself. Returns -1 out of memory (nothing
 * marked). Exposed for tests. */
int prof_tdump_find_deadlocks(struct prof_tdump *d);
/* The thread pool in a dump. A worker is a thread under the pool's WorkerThreadStart; it is busy
 * while it runs a work item (ThreadPoolWorkQueue.Dispatch is on its stack), idle otherwise, and
 * blocked when busy but not on a CPU (its OS state sleeping or disk-wait): a work item that waits
 * synchronously (`.Result`, `.Wait()`, a lock, sync I/O) holds its thread. Starvation is likely
 * when no worker is idle and at least three quarters of them are blocked: work queued now waits
 * for the pool to inject a thread (about one a second once its minimum is reached). */
#define TDUMP_POOL_SITES 3
struct prof_tdump_pool {
    uint32_t workers, idle, busy, blocked;
    int starvation_likely;
    /* where the blocked workers wait: the innermost frame of the app's own code on each stack
     * (not System., Microsoft., Interop., Internal. or native), else its leaf; most first */
    uint32_t nsites;
    const char *site[TDUMP_POOL_SITES];
    uint32_t site_count[TDUMP_POOL_SITES];
};
void prof_tdump_pool(const struct prof_tdump *d, struct prof_tdump_pool *out);
/* A frame of the app's own code (see prof_tdump_pool). */
int prof_tdump_app_frame(const char *frame);

/* Frees a dump built outside prof_tdump_publish (tests, failed builds). */
void prof_tdump_free(struct prof_tdump *d);

struct prof_tdump_stats {
    uint64_t taken, reused, failed, timeouts;
};
void prof_tdump_get_stats(struct prof_tdump_stats *out);
/* The bytes the newest dump holds (kept for reuse until the next one): self.mem.thread_dumps. */
size_t prof_tdump_mem_bytes(void);

struct prof_kind;
/* The aggregator's row: the thread dumps' memory. */
extern const struct prof_kind prof_tdump_kind;

#endif
