/*
 * prof_walk - the calling thread's managed stack, for callbacks that run on the thread the event
 * is about (allocation, exception, contention events of an in-process EventPipe session).
 *
 * Two walks:
 *   - the runtime's: a synchronous DoStackSnapshot of the current thread (a supported call on
 *     Linux), which writes FunctionIDs, 0 marking a run of native frames. A few microseconds per
 *     call, more on deep stacks (ASP.NET Core: ~50 frames).
 *   - the frame pointers: prof_sig_walk_self, the signal sampler's checked walk applied to the
 *     calling thread, records return addresses (under a microsecond). It leaves out the leading
 *     frames of clrscope and libcoreclr (the event plumbing) and needs the signal sampler's maps
 *     snapshot and table of frameless methods (CPU profile on, CLRSCOPE_CPU_SAMPLER=signal); the
 *     addresses become FunctionIDs later, on clrscope-agg, through the sampler's code map
 *     (prof_walk_resolve). Its biases are the CPU sampler's: a frameless method not learned yet
 *     hides its caller (until the code map has seen it once), and so does a method running OSR
 *     code. The runtime's allocation stubs push rbp without making it the frame pointer, which
 *     hides the allocating method; prof_sig_walk_self finds its return address in the stub's
 *     frame (PROF_SIG_F_GAP) and the code map keeps it only if it follows a call.
 * prof_walk_fast picks the runtime's walk (CLRSCOPE_ALLOC_WALK=runtime, the default), the frame
 * pointers when they can run (=fp), or both (=check: the stacks are compared on clrscope-agg and
 * counted, for tests and for users who doubt a stack).
 *
 * ctx: capture functions on any thread, inside a runtime callback (no allocation, no locks);
 * prof_walk_resolve, prof_walk_check and prof_walk_names on clrscope-agg only; prof_walk_init at
 * Initialize; stats anywhere.
 */
#ifndef PROF_WALK_H
#define PROF_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "prof_ring.h"

enum prof_walk_mode { PROF_WALK_FP = 0, PROF_WALK_RUNTIME = 1, PROF_WALK_CHECK = 2 };

/* Reads CLRSCOPE_ALLOC_WALK and the address ranges of clrscope and libcoreclr. */
void prof_walk_init(void);
/* The runtime's walk: FunctionIDs leaf first into frames[0..max); returns how many. */
int prof_walk_current(uintptr_t *frames, int max, uint32_t *truncated);
/* Fills r->frames, r->nframes, r->truncated, r->ips and r->check by the configured walk. */
void prof_walk_fast(struct prof_rec *r);
/* clrscope-agg: turns a record's return addresses into FunctionIDs in place (r->ips = 0), and in
 * check mode compares them with the runtime's walk kept in the same record (counted). */
void prof_walk_resolve(struct prof_rec *r);
/* Fills rec-style frames into names (root first) using prof_symbols; clrscope threads only. */
int prof_walk_names(const uintptr_t *frames, int n, int truncated, const char **names, int cap);

struct prof_walk_stats {
    int mode;             /* enum prof_walk_mode, as configured */
    uint64_t fp;          /* stacks taken by frame pointers */
    uint64_t runtime;     /* stacks taken by DoStackSnapshot (mode runtime, or fallback) */
    uint64_t fallbacks;   /* of those, frame-pointer walks that could not run (no snapshot yet,
                           * stack not in it) */
    uint64_t resolved;    /* return addresses turned into FunctionIDs (prof_codemap) */
    uint64_t check_same;  /* check mode: stacks identical in both walks */
    uint64_t check_differ;/* check mode: stacks that differ (logged at debug level) */
};
void prof_walk_get_stats(struct prof_walk_stats *out);
const char *prof_walk_mode_name(int mode);

#endif
