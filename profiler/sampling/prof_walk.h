/*
 * prof_walk - the calling thread's managed stack, for callbacks that run on the thread the event
 * is about (allocation events of an in-process EventPipe session; exceptions and contention use
 * the runtime's walk only).
 *
 * Two walks:
 *   - the runtime's: a synchronous DoStackSnapshot of the current thread (a supported call on
 *     Linux), which writes FunctionIDs, 0 marking a run of native frames. Microseconds per call,
 *     tens on deep stacks (ASP.NET Core: ~40 frames).
 *   - the frame pointers: prof_sig_walk_self, the signal sampler's checked walk applied to the
 *     calling thread, records return addresses (well under a microsecond). It leaves out the
 *     leading frames of clrscope and libcoreclr (the event plumbing) and needs the maps
 *     snapshot and table of frameless methods (prof_maps), which the sampler thread keeps
 *     current; the addresses become FunctionIDs later, on clrscope-agg, through the sampler's
 *     code map (prof_walk_resolve).
 * The runtime's allocation stubs push rbp without making it the frame pointer, which hides the
 * allocating method from the chain; OSR code hides the caller of the method it replaces. Where
 * the hidden record lies is a fixed offset per stub (per OSR call site), which this module
 * learns by calibration: the first CAL_FIRST frame-pointer samples and one in CAL_EVERY after,
 * and every sample whose leaf stub is not known yet, are walked both ways; the runtime's stack
 * goes to the profile, and the records the frame-pointer walk saw (probes) vote on where the
 * runtime's extra frame came from. A place published after VOTES agreeing calibrations is read
 * exactly by later walks (prof_maps_set_hidden); one that keeps disagreeing is marked
 * unsure and its samples keep the runtime's walk (and calibrate it: RECOVER agreeing ones in a
 * row bring it back). Only evidence counts against a place: a probe the code map cannot name
 * (code JIT-compiled since its last refresh) proves nothing. A walk that meets such code, or
 * finds the leaf stub's record missing, is walked by the runtime too. Remaining bias, the CPU
 * sampler's: a
 * frameless method the code map has not seen yet hides its caller (one walk).
 * CLRSCOPE_ALLOC_WALK=fp (the default) does this; =runtime takes the runtime's walk always;
 * =check calibrates every sample and counts where the two walks agree (for tests, and for users
 * who doubt a stack).
 *
 * ctx: capture functions on any thread, inside a runtime callback (no allocation, no locks);
 * prof_walk_begin, prof_walk_resolve, prof_walk_end and prof_walk_names on clrscope-agg only;
 * prof_walk_init at Initialize; stats and prof_walk_mode_name anywhere.
 */
#ifndef PROF_WALK_H
#define PROF_WALK_H

#include <stddef.h>
#include <stdint.h>

#include "prof_ring.h"

enum prof_walk_mode { PROF_WALK_FP = 0, PROF_WALK_RUNTIME = 1, PROF_WALK_CHECK = 2 };

/* Reads CLRSCOPE_ALLOC_WALK and the address ranges of clrscope and libcoreclr. */
void prof_walk_init(void);
/* The runtime's walk: FunctionIDs leaf first into frames[0..max); returns how many. ips (may be
 * NULL) gets each frame's address: a record keeps them at frames[REC_CHECK_AT..] with rt_ips set,
 * for prof_walk_resolve to add the frames of inlined code. */
int prof_walk_current(uintptr_t *frames, int max, uint32_t *truncated, uintptr_t *ips);
/* Fills r->frames, r->nframes, r->truncated, r->ips and r->check by the configured walk. */
void prof_walk_fast(struct prof_rec *r);
/* clrscope-agg, between prof_walk_begin() and prof_walk_end() (which hold the code map's lock
 * around a batch of records): turns a record's return addresses into FunctionIDs in place
 * (r->ips = 0), with a frame for each method the JIT inlined there (prof_codemap.h); a record
 * walked both ways feeds calibration (and check mode's counts) and leaves the runtime's stack;
 * a runtime's walk that kept its addresses (r->rt_ips) gets the inlined methods' frames too. */
void prof_walk_begin(void);
void prof_walk_resolve(struct prof_rec *r);
void prof_walk_end(void);
/* Fills rec-style frames into names (root first) using prof_symbols; clrscope threads only. */
int prof_walk_names(const uintptr_t *frames, int n, int truncated, const char **names, int cap);

struct prof_walk_stats {
    int mode;             /* enum prof_walk_mode, as configured */
    uint64_t fp;          /* stacks taken by frame pointers */
    uint64_t runtime;     /* stacks taken by DoStackSnapshot (mode runtime, or fallback) */
    uint64_t fallbacks;   /* of those, frame-pointer walks that could not run (no snapshot yet,
                           * stack not in it) */
    uint64_t unknown_stub;/* of those, samples whose leaf stub was not learned yet */
    uint64_t not_code;    /* of those, frame-pointer walks that met code the sampler's maps
                           * snapshot does not know yet (mapped since) */
    uint64_t calibrations;/* of those, calibration samples (both walks) */
    uint32_t places_learned, places_unsure; /* stubs and OSR call sites known, given up */
    uint64_t resolved;    /* return addresses turned into FunctionIDs (prof_codemap) */
    uint64_t check_same;  /* check mode: stacks identical in both walks */
    uint64_t check_differ;/* check mode: stacks that differ (logged at debug level) */
};
void prof_walk_get_stats(struct prof_walk_stats *out);
const char *prof_walk_mode_name(int mode);

#endif
