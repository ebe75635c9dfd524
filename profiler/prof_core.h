/*
 * prof_core - the one profiler instance: the runtime's ICorProfilerInfo, runtime facts, process
 * facts, and the start/stop order of every module. Written once in Initialize (before any clrscope
 * thread starts), then read-only, except `stopping`, which is atomic (set under the nap lock, so
 * that prof_core_nap_until never misses it).
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
};

extern struct prof_core g_core;

int64_t prof_now_ns(void);   /* CLOCK_MONOTONIC */
/* The calling thread's kernel thread id, cached per thread (a gettid system call the first time
 * only: runtime callbacks ask on every event). */
uint32_t prof_self_tid(void);
double prof_unix_now(void);  /* CLOCK_REALTIME in seconds */
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
/* Wakes every clrscope thread napping in prof_core_nap_nudged (any thread; takes the nap lock,
 * which nappers hold only to enter and leave their wait). */
void prof_core_nudge(void);
/* Names the calling thread "clrscope-<what>" (max 15 chars in total). */
void prof_name_thread(const char *what);

/* Called from the callback object (prof_entry.c). */
HRESULT prof_core_initialize(void *info_unknown);
void prof_core_shutdown(void);

#endif
