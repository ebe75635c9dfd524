/*
 * prof_events - clrscope's in-process EventPipe sessions on Microsoft-Windows-DotNETRuntime (one
 * for GC, allocation and contention events, one for exceptions at level Error) and on the
 * System.Runtime counters, and the routing of their events (delivered synchronously on the
 * thread that fired them) to modules. The System.Runtime counters' session is prof_counters'
 * own: prof_events_start has it started, and routes its events.
 *
 * The heap-dump events go to the handler prof_heapsnap registers (prof_events_on_heapdump) and
 * not to a call of prof_heapsnap's: prof_heapsnap uses this module (prof_events_state,
 * prof_events_reapply_sessions), so a call back would make the two depend on each other.
 * There is no stop: the sessions end with the runtime; stopping one during Shutdown can trigger
 * a GC there.
 *
 * ctx: prof_events_extra_event_mask, prof_events_on_heapdump and prof_events_start at
 * Initialize (the handler before the start); prof_events_delivered on the thread that wrote the event (runtime threads,
 * inside EventPipeEventDelivered: lock-free, no allocation); prof_events_state any thread;
 * prof_events_reapply_sessions on clrscope's own threads only, never from a callback.
 */
#ifndef PROF_EVENTS_H
#define PROF_EVENTS_H

#include <stdint.h>

#include "clr_abi.h"

/* A module's handler of runtime events (id, version, payload), on the thread that fired them. */
typedef void (*prof_events_handler)(DWORD id, DWORD version, const BYTE *data, ULONG len);

/* Sets the handler of the heap-dump events (ids 15-23, 36-38), which also gets GCStart and GCEnd
 * (1, 2) after prof_gc. It runs on GC threads, the world stopped: lock-free, no allocation. */
void prof_events_on_heapdump(prof_events_handler h);
DWORD prof_events_extra_event_mask(void);
void prof_events_start(void);
/* Every event of the session (the thread that wrote it): runtime events go to their modules by
 * id, System.Runtime's counters (self-describing, so with their metadata) to prof_counters. */
void prof_events_delivered(EVENTPIPE_PROVIDER provider, DWORD id, DWORD version, const BYTE *meta,
                           ULONG meta_len, const BYTE *data, ULONG len, ThreadID thread,
                           ULONG nframes, const UINT_PTR *frames);
/* Session state for status: 1 running, 0 off, -1 refused by the runtime. */
int prof_events_state(void);
/* Starts and stops a throw-away session with the keywords and level of each running session on
 * the runtime provider, which resets the provider after another session of that provider ended
 * (prof_heapsnap's, after a heap snapshot: runtime issue dotnet/runtime#121462). Call it from a
 * thread of clrscope's own, never from a callback. */
void prof_events_reapply_sessions(void);

/* The allocation switch, for the overhead governor (prof_budget). With a budget on .NET 10 the
 * allocation keyword runs in a session of its own; switching it off stops that session and
 * starts a parking one (so that the runtime really stops building the events, see
 * prof_events.c), switching it on does the reverse: four EventPipe operations a cycle, no thread
 * suspension. prof_events_alloc_switch returns 0 (done, or already so), 1 (not now: a heap
 * snapshot holds the switch) or -1 (not switchable, or the runtime refused). Call it from one
 * thread of clrscope's own that makes no other profiler call (the runtime may attach a Thread
 * object to it), never from a callback. prof_events_hold_switch/release_switch bracket a heap
 * snapshot's session, during which the switch waits. */
int prof_events_alloc_switchable(void);
/* When the last switch that did something began, when the allocation session's own start or
 * stop returned (the events flow, or stop, somewhere between the two), and when the whole switch
 * was done (CLOCK_MONOTONIC ns). The switching thread only. */
struct prof_events_switch_times {
    int64_t call_ns, flip_ns, done_ns;
};
void prof_events_switch_times(struct prof_events_switch_times *out);
int prof_events_alloc_on(void); /* 1 while allocation events flow (always, when not switchable) */
int prof_events_alloc_switch(int on);
void prof_events_hold_switch(void);
void prof_events_release_switch(void);

/* Time spent in event delivery (clrscope's callbacks on the app's threads, CLOCK_MONOTONIC) since
 * start: allocation events (ids 10, 303) and the rest, and the switch's counts. Any thread. */
struct prof_events_cost {
    uint64_t alloc_ns, alloc_events, other_ns, other_events;
    uint64_t switches, switch_failures;
};
void prof_events_read_cost(struct prof_events_cost *out);

#endif
