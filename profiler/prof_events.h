/*
 * prof_events - clrscope's in-process EventPipe sessions on Microsoft-Windows-DotNETRuntime (one
 * for GC, allocation and contention events, one for exceptions at level Error) and on the
 * System.Runtime counters, and the routing of their events (delivered synchronously on the
 * thread that fired them) to modules. The System.Runtime counters' session is prof_counters'
 * own: prof_events_start has it started, and routes its events.
 *
 * ctx: prof_events_extra_event_mask and prof_events_start at Initialize, prof_events_stop at
 * Shutdown; prof_events_delivered on the thread that wrote the event (runtime threads, inside
 * EventPipeEventDelivered: lock-free, no allocation); prof_events_state any thread;
 * prof_events_reapply_sessions on clrscope's own threads only, never from a callback.
 */
#ifndef PROF_EVENTS_H
#define PROF_EVENTS_H

#include "clr_abi.h"

DWORD prof_events_extra_event_mask(void);
void prof_events_start(void);
void prof_events_stop(void);
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

#endif
