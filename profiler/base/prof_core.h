/*
 * prof_core - what every module of the profiler may ask: the runtime's ICorProfilerInfo and the
 * facts of the runtime and the process, the clocks, and the naps of clrscope's threads (cut short
 * at Shutdown or by a nudge). It starts nothing: the composition root (prof_entry.c) fills the
 * facts in Initialize, before any clrscope thread starts, and starts the modules in order.
 *
 * g_core is written once in Initialize, then read-only, except `profiles` (a bit is cleared when
 * a profile fails, any thread) and `stopping`, which is atomic (set under the nap lock, so that
 * prof_core_nap_until never misses it).
 *
 * ctx: the clocks, prof_self_tid, prof_core_disable and prof_core_stopping any thread, runtime
 * callbacks included; the naps on clrscope's own threads; prof_core_nudge any thread (it takes
 * the nap lock for an instant); the read and attach functions in Initialize,
 * prof_core_begin_stopping in Shutdown (prof_entry.c).
 */
#ifndef PROF_CORE_H
#define PROF_CORE_H

#include <stdint.h>
#include <sys/types.h>

#include "clr_abi.h"

/* Thread-local storage for code the runtime calls on its threads (callbacks, events). The
 * library is dlopen'ed, so by default each thread's first access goes through __tls_get_addr,
 * which mallocs that thread's block: in a callback, maybe under the app's malloc lock. Initial-exec
 * puts the few bytes in the static TLS block that every thread gets at creation (glibc keeps a
 * reserve for dlopen'ed libraries); unit.tls_static checks that the library imports no
 * __tls_get_addr. */
#define PROF_TLS __thread __attribute__((tls_model("initial-exec")))

struct prof_core {
    ICorProfilerInfo15 *info; /* runtime-owned; valid until Shutdown */
    int info_version;         /* highest ICorProfilerInfoN the runtime answered */
    char runtime_version[32]; /* "10.0.1" */
    int runtime_major;
    pid_t pid;
    char process_name[64];
    char cmdline[512];
    double start_unix;        /* seconds since the epoch at Initialize */
    int64_t start_mono_ns;    /* CLOCK_MONOTONIC at Initialize */
    unsigned profiles;        /* PROFILE_* bits that are on and working */
    int active;               /* 0 = passive (old runtime or failed init) */
    int stopping;             /* atomic: set at Shutdown */
    int post_mortem;          /* `clrscope serve`: the history of an exited process, no runtime */
    pid_t served_pid;         /* post_mortem: the pid of the process whose history is served */
};

extern struct prof_core g_core;

int64_t prof_now_ns(void);   /* CLOCK_MONOTONIC */
/* The calling thread's kernel thread id, cached per thread (a gettid system call the first time
 * only: runtime callbacks ask on every event). */
uint32_t prof_self_tid(void);
double prof_unix_now(void);  /* CLOCK_REALTIME in seconds (the frozen moment, when frozen) */
/* `clrscope serve` only, before any other thread runs: prof_unix_now returns t from now on (the
 * end of the history it serves: "the last minute" is that history's last minute); 0 thaws. */
void prof_core_freeze_clock(double t);
/* CPU time (ns) consumed so far by thread `tid` of this process, -1 if it is gone. */
int64_t prof_thread_cpu_ns(pid_t tid);
int64_t prof_process_cpu_ns(void);
/* Marks a profile bit as failed (logged once by the caller) so status reports the truth. */
void prof_core_disable(unsigned profile_bit);
int prof_core_stopping(void);
/* Sleeps until CLOCK_MONOTONIC reaches deadline_ns, or until Shutdown begins (then at once).
 * Returns 1 when the profiler is stopping. For clrscope's own threads: Shutdown joins them, and
 * the app's exit must not wait for their naps. */
int prof_core_nap_until(int64_t deadline_ns);
/* The same, also cut short by a prof_core_nudge after the caller read prof_core_nudges() == seen
 * (read it before looking for work, so that a nudge in between is not slept through). */
int prof_core_nap_nudged(int64_t deadline_ns, uint32_t seen);
uint32_t prof_core_nudges(void);
/* The same, also cut short once `*word` differs from `seen` (read it before looking for work):
 * a futex word that another thread, a signal handler included, bumps and wakes without a lock
 * (atomic add, then FUTEX_WAKE). Nudges and the stop bump the word too (at most 4 words are
 * watched; a fifth naps as prof_core_nap_nudged). Returns 1 when stopping. */
int prof_core_nap_word(uint32_t *word, uint32_t seen, int64_t deadline_ns, uint32_t nudges_seen);
/* Wakes every clrscope thread napping in prof_core_nap_nudged (any thread; takes the nap lock,
 * which nappers hold only to enter and leave their wait). */
void prof_core_nudge(void);
/* Names the calling thread "clrscope-<what>" (max 15 chars in total) and marks it clrscope's
 * (prof_core_on_own_thread). prof_own_threads_named: how many times a thread has been so
 * named, so that whoever counts clrscope's threads' CPU looks for the new one at once. */
void prof_name_thread(const char *what);
uint32_t prof_own_threads_named(void);
/* 1 on a thread clrscope started (one that called prof_name_thread). Some of the runtime's calls
 * run a managed callback on the calling thread and so make it a managed thread for good; the
 * runtime's thread callbacks ask this to keep such a thread out of the app's threads. */
int prof_core_on_own_thread(void);

/* Initialize only (prof_entry.c), in this order. */
/* pid, process name (the app's name for `dotnet app.dll`) and command line, made valid UTF-8. */
void prof_core_read_process_facts(void);
/* Asks the runtime's IUnknown for the newest ICorProfilerInfoN it offers (15 down to 1) and
 * keeps it in g_core; returns N, 0 when none. */
int prof_core_attach(void *info_unknown);
/* runtime_version and runtime_major, from the runtime and the framework's directory name. */
void prof_core_read_runtime_version(void);

/* Shutdown only: sets `stopping` and wakes every nap, so clrscope's threads end at once. */
void prof_core_begin_stopping(void);

#endif
