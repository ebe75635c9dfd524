/*
 * prof_history_read - what prof_history.c shares with the readers of its segments
 * (prof_history_read.c): the reader's state and one read of a window's segments.
 *
 * ctx: any thread but a runtime callback or signal handler (API handlers); reads files.
 */
#ifndef PROF_HISTORY_READ_H
#define PROF_HISTORY_READ_H

#include <stdint.h>

#include "prof_hseg.h"

struct prof_history_reader {
    int reading;    /* segments of this process can be read back */
    int serving;    /* a post-mortem server: everything is read from the segments */
    int64_t seg_s;  /* the segment length */
    char pdir[700]; /* this process's directory */
};
void prof_history_reader_state(struct prof_history_reader *r);
/* Kind `kind` (or PROF_HSEG_GC, PROF_HSEG_COUNTERS) of the segments of `pdir` over from_s..to_s
 * that start before `before`, into `a`; one reader at a time. Counts what was read and refused
 * in the status, logs a refusal once. Returns the segments read. */
uint32_t prof_history_read_segments(const char *pdir, int kind, int64_t from_s, int64_t to_s,
                                    int64_t before, const char *filter, struct prof_hacc *a);

#endif
