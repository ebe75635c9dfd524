/*
 * prof_unload - keeps clrscope's questions to the runtime away from code and types that are being
 * unloaded (collectible AssemblyLoadContexts, AssemblyBuilderAccess.RunAndCollect).
 *
 * clrscope names ClassIDs, FunctionIDs and return addresses on its own threads, some time after
 * the event that produced them. When the module behind one of them is unloaded in between, the
 * runtime frees the MethodTables, MethodDescs and code it points to, and asking about it reads
 * freed memory: the host crashes. The runtime says when a module's unload starts
 * (ModuleUnloadStarted, with COR_PRF_MONITOR_MODULE_LOADS) and frees nothing of it before that
 * callback returns. So:
 *   - an unload epoch counts the unloads started; every record and signal sample carries the
 *     epoch read when it was taken, when everything it names was alive (it was running or being
 *     allocated);
 *   - a thread that is about to ask the runtime about a record's IDs enters with that epoch
 *     (prof_unload_enter). Entry is refused when an unload has started since: the record is then
 *     named from caches only (prof_symbols and prof_codemap check prof_unload_may_query and
 *     answer "[unloaded …]" instead of asking);
 *   - ModuleUnloadStarted first asks clrscope's consumer threads (clrscope-agg for the event
 *     ring, clrscope-sample for the signal samples) to drain what they hold, wakes them, and
 *     waits (at most 200 ms) until each says it has: so records taken before the unload are
 *     named while everything is still there, and few are refused even when an app unloads
 *     hundreds of modules a second;
 *   - then it bumps the epoch, and waits until every thread that entered before the bump has
 *     left (prof_unload_leave), for at most a second (logged once when that runs out). Entering
 *     and waiting are a Dekker pair over seq-cst atomics, with one counter per epoch parity so
 *     that new entries do not hold up the wait.
 * A process that never unloads pays two uncontended atomic adds per named record.
 *
 * ctx: prof_unload_started on the runtime thread that unloads (the finalizer, in preemptive
 * mode): it takes no lock and only waits as above; prof_unload_epoch any thread, callbacks
 * included (an atomic load); prof_unload_get_stats any thread; the rest on clrscope's threads
 * that name records (the consumers, and whoever enters to ask the runtime).
 */
#ifndef PROF_UNLOAD_H
#define PROF_UNLOAD_H

#include <stdint.h>

struct prof_unload_stats {
    uint64_t unloads;        /* ModuleUnloadStarted callbacks */
    uint64_t drain_waits_ms; /* time the unloads waited for the consumers to drain, in total */
    uint64_t drain_timeouts; /* drains not done within 200 ms (records refused instead) */
    uint64_t waits;          /* unloads that found a query in flight */
    uint64_t wait_ns_max;    /* the longest such wait */
    uint64_t timeouts;       /* waits given up after a second */
    uint64_t refused;        /* entries refused: records named from caches only */
};

/* The threads that name records taken earlier. Each one, per pass: read prof_core_nudges(), then
 * prof_unload_drain_wanted(), empty its queues, call prof_unload_drained with what it read, and
 * nap with prof_core_nap_nudged. prof_unload_consumer(c, 1) when it starts, (c, 0) when it ends.
 * A heap snapshot is one from before its GC until its types are named: unloads wait for it (up
 * to the same 200 ms) instead of making it name them from the caches only. */
enum { PROF_UNLOAD_AGG, PROF_UNLOAD_SAMPLER, PROF_UNLOAD_HEAP, PROF_UNLOAD_CONSUMERS };
void prof_unload_consumer(int consumer, int active);
uint64_t prof_unload_drain_wanted(void);
void prof_unload_drained(int consumer, uint64_t wanted);

/* The epoch now: read it when a record's IDs are taken. */
uint32_t prof_unload_epoch(void);
/* 1: the IDs taken at `epoch` may be asked about until prof_unload_leave (which must follow).
 * 0: an unload started since; do not ask (no leave). Nests. */
int prof_unload_enter(uint32_t epoch);
void prof_unload_leave(void);
/* Whether the calling thread is inside a successful prof_unload_enter. */
int prof_unload_may_query(void);
/* ModuleUnloadStarted. */
void prof_unload_started(void);
void prof_unload_get_stats(struct prof_unload_stats *out);

#endif
