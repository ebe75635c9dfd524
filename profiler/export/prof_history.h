/*
 * prof_history - the profiles kept on disk past the memory's CLRSCOPE_HISTORY_S: every
 * CLRSCOPE_HISTORY_SEGMENT_S (60) the clrscope-history thread writes the last segment of every
 * windowed profile (cpu, wall, allocations, exceptions, locks) and the marks made in it to
 * CLRSCOPE_HISTORY_DIR/<process>-<pid>-<start>/<from>-<to>.clrh (prof_hseg.h: compressed, with a
 * checksum; written to a temporary name, fsync'd, renamed), and then (after the first segment,
 * then every 10 minutes or once it has written 1 % of the cap) deletes the oldest segments of
 * the directory, this user's processes' alike, while they hold more than
 * CLRSCOPE_HISTORY_MAX_MB (200; 0 = no history) or are older than CLRSCOPE_HISTORY_MAX_AGE (24h).
 * A segment in which nothing was recorded is not written. At Shutdown the part of the segment
 * that had begun is written too.
 *
 * A window that reaches back past the memory is read from this process's segments, whole ones,
 * up to the first segment boundary the memory still covers, and from the memory after it
 * (prof_history_view_range): the same view a window in memory gives.
 *
 * Failures: a directory that cannot be made or is not fit (prof_files.h) turns history off; a
 * full disk (ENOSPC, EDQUOT) turns it off too; either says why in the status, logged once, and
 * the profiles go on in memory. A segment that cannot be read back (torn by a crash, cut,
 * altered) is skipped, counted and logged once.
 *
 * ctx: prof_history_start/stop from Initialize/Shutdown; prof_history_view_range and
 * prof_history_get_stats from any thread but a runtime callback or signal handler (API
 * handlers: they read files, bounded by the window asked for and the node cap).
 */
#ifndef PROF_HISTORY_H
#define PROF_HISTORY_H

#include <stddef.h>
#include <stdint.h>

#include "prof_hseg.h"
#include "prof_store.h"

struct prof_history_stats {
    int enabled;              /* segments are being written */
    char dir[512];            /* CLRSCOPE_HISTORY_DIR */
    char process_dir[160];    /* this process's directory in it */
    char off_reason[200];     /* why history is off ("" when on) */
    int segment_s;
    double max_mb;
    int64_t max_age_s;
    uint64_t written, written_bytes, write_failures, empty_skipped;
    uint64_t deleted;         /* segments deleted for the caps */
    uint64_t disk_bytes, disk_segments; /* the whole directory at the last tidy, plus this
                                         * process's segments written since */
    int64_t oldest_s;         /* the oldest second this process's segments hold (0: none) */
    int64_t last_to_s;        /* the end of the last segment written */
    uint64_t read, skipped;   /* segments read back for windows; refused */
    char last_error[200];     /* the last write failure, the last refused segment */
    double write_cpu_s;       /* clrscope-history's CPU time */
};

void prof_history_start(void);
/* `clrscope serve`: loads every segment of process directory `pdir` into the store, initialised
 * here to hold their whole span (the clock frozen at its end, prof_core_freeze_clock), and the
 * marks they hold. 0, or -1 with the reason in `why`. Before any other clrscope thread runs. */
int prof_history_serve(const char *pdir, char *why, size_t whycap);
void prof_history_stop(void);
void prof_history_get_stats(struct prof_history_stats *s);
/* The longest window a query may ask for: the memory's history, or the disk's max age while
 * history is on. */
int64_t prof_history_reach_s(void);
/* Kind `kind` over whole unix seconds from_s..to_s, from disk where the memory no longer holds
 * them (prof_store_view_range otherwise). *from_disk (may be NULL): segments read. 0, or -1. */
int prof_history_view_range(int kind, int64_t from_s, int64_t to_s, const char *filter,
                            struct prof_view *out, uint32_t *from_disk);

/* The GC's per-second records and collections of the last `seconds` (prof_gc_view's), the part
 * past the memory from disk; all of it from disk in a post-mortem server. 0, or -1. */
struct prof_gc_view;
int prof_history_gc_view(double seconds, size_t max_collections, struct prof_gc_view *out);
/* The runtime counters' points of the last `seconds` (prof_counters_series'), the part past the
 * memory from disk; all of it from disk in a post-mortem server. Sorted by counter name, then
 * time. The strings of the disk's points live in `acc`. */
struct prof_counters_view {
    struct prof_counter_point *pts; /* malloc'd */
    size_t n;
    struct prof_hacc acc;
};
int prof_history_counters_view(double seconds, struct prof_counters_view *out);
void prof_counters_view_free(struct prof_counters_view *v);
/* The last `seconds` of kind `kind`: prof_store_view while the memory holds them, else whole
 * seconds up to the current one, the older part from disk (prof_history_view_range). */
int prof_history_view(int kind, double seconds, const char *filter, struct prof_view *out,
                      uint32_t *from_disk);

#endif
