/*
 * prof_threads - the registry of managed threads: ThreadID -> OS tid and name.
 *
 * Written by the runtime's thread callbacks (any app thread) under a short mutex that clrscope
 * never holds while the runtime is suspended; read by the sampler and aggregator after resume.
 * Capacity is CLRSCOPE_MAX_THREADS; threads beyond it are counted in `dropped`. A thread of
 * clrscope's that the runtime made managed (a managed EventSource callback run on it,
 * prof_core_on_own_thread) is kept but marked: it is not counted, listed or sampled as the app's.
 *
 * ctx: prof_threads_init at Initialize; created, destroyed, assigned and named in the runtime's
 * thread callbacks (any app thread); name_of, count and tids on clrscope's threads and API
 * handlers (name_of may read /proc: not in a callback); is_own anywhere.
 */
#ifndef PROF_THREADS_H
#define PROF_THREADS_H

#include <stddef.h>
#include <stdint.h>

#include "clr_abi.h"

void prof_threads_init(int cap);
void prof_threads_created(ThreadID t);
/* Returns the ended thread's OS tid (0 unknown). */
uint32_t prof_threads_destroyed(ThreadID t);
void prof_threads_assigned(ThreadID t, DWORD os_tid);
void prof_threads_named(ThreadID t, ULONG cch, const WCHAR *name);
/* Copies the name of OS thread `tid` (managed name, else /proc comm; for a managed thread that
 * ended, its name, from the last 1,024 such threads) into buf; returns buf. */
const char *prof_threads_name_of(uint32_t os_tid, char *buf, size_t cap);
/* 1 when OS thread `os_tid` is one of clrscope's that the runtime made managed. No lock, no
 * malloc: callable while the runtime is suspended. */
int prof_threads_is_own(uint32_t os_tid);
/* The app's managed threads (clrscope's own left out). */
size_t prof_threads_count(void);
/* Copies the OS tids of up to `cap` of the app's managed threads (those already assigned to an
 * OS thread; clrscope's own left out) into out; returns how many. ctx: clrscope threads. */
size_t prof_threads_tids(uint32_t *out, size_t cap);

#endif
