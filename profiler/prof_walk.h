/*
 * prof_walk - the calling thread's managed stack, for callbacks that run on the thread the event
 * is about (allocation, exception, contention events of an in-process EventPipe session).
 * A synchronous DoStackSnapshot(current thread) is a supported call on Linux. Writes FunctionIDs
 * leaf first into a caller buffer; 0 marks a run of native frames. No allocation, no locks.
 */
#ifndef PROF_WALK_H
#define PROF_WALK_H

#include <stdint.h>

int prof_walk_current(uintptr_t *frames, int max, uint32_t *truncated);
/* Fills rec-style frames into names (root first) using prof_symbols; clrscope threads only. */
int prof_walk_names(const uintptr_t *frames, int n, int truncated, const char **names, int cap);

#endif
