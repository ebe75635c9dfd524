/* prof_exc - exceptions thrown, by type, message and stack, with a per-second adaptive cap. */
#ifndef PROF_EXC_H
#define PROF_EXC_H

#include <stdint.h>

#include "clr_abi.h"
#include "prof_ring.h"
#include "prof_wtab.h"

struct prof_exc_stats {
    uint64_t events;          /* exceptions thrown since the session started (exact) */
    uint64_t sampled;         /* samples handed to the aggregator */
    uint64_t dropped;         /* samples lost (event ring full); their counts are still upscaled */
    uint64_t overflow_events; /* events of types past the type table (counted together) */
    uint64_t types;           /* distinct exception types in the table */
    uint64_t table_resets;    /* times the full type table was emptied (prof_exc.c) */
    uint64_t table_dropped;   /* type/message table entries folded into "[other]" */
    uint64_t no_message;      /* samples taken before the message field was known (callback) */
};

/* Initialize: reads CLRSCOPE_EXCEPTION_SOURCE; the event mask bits the callback source needs
 * (COR_PRF_MONITOR_EXCEPTIONS) when exceptions are profiled that way, else 0. */
DWORD prof_exc_event_mask(void);
/* 1 when exceptions come from the runtime's events (CLRSCOPE_EXCEPTION_SOURCE=events). */
int prof_exc_uses_events(void);
/* GarbageCollectionStarted (threads suspended): exception objects thrown before it are
 * forgotten (rethrows). */
void prof_exc_gc_started(void);
/* ExceptionThrown's rethrow check: 1 when `obj` was thrown since the last GC; it is remembered
 * now either way (the last 256 objects). */
int prof_exc_thrown_before(ObjectID obj);
/* ICorProfilerCallback::ExceptionThrown (the throwing thread, cooperative mode). */
void prof_exc_on_throw(ObjectID obj);
/* EventPipe callback (app thread): ExceptionThrown_V1. */
void prof_exc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len);
/* clrscope-agg, at each wake-up: finds the exception message field until it is known. */
void prof_exc_poll(void);
/* clrscope-agg: one sample (rec->a = type slot, rec->b = the slot's count at the event). */
void prof_exc_consume(const struct prof_rec *rec, const char **names, int n);
/* Attributes the events counted since each type's last sample to that sample's stack: 1 Hz on
 * clrscope-agg only. */
void prof_exc_tick(double now_unix);

/* The events of one type counted since its last sample: what the next prof_exc_tick adds to
 * that sample's table row (type, message; method `site`) and to its stack in the store (PK_EXC,
 * label = type). */
struct prof_exc_unattributed {
    const char *type, *message, *site; /* as the table keeps them (valid UTF-8) */
    const char **frames;               /* root first, as the store has them */
    int nframes;
    int64_t count, rethrown;
};
/* The table's sums over the last `seconds` (type `filter` only, when not NULL), as
 * prof_wtab_sum gives them, and the events no sample carries yet, read together under the
 * module's lock: the two add up to what the table holds once the next tick has run, the figures
 * as of now. Changes nothing. Each array is one malloc'd block with its strings (free() each);
 * 0, or -1 when out of memory (both NULL). Any clrscope thread (API handlers). */
int prof_exc_read(double seconds, const char *filter, struct prof_wtab_row **rows, size_t *nrows,
                  struct prof_exc_unattributed **pending, size_t *npending);
void prof_exc_get_stats(struct prof_exc_stats *out);
/* (type, message) -> v0 estimated count, v1 samples, v2 of v0 the same object thrown again
 * (callback source); extra = the throwing method. NULL when off. */
struct prof_wtab *prof_exc_table(void);

struct prof_kind;
/* The aggregator's row: consumes REC_EXCEPTION records, polls the callback's hand-off, ticks the
 * estimates. */
extern const struct prof_kind prof_exc_kind;

#endif
