/*
 * prof_heapsnap - heap snapshots on demand (gcdump): an in-process EventPipe session with the
 * heap-dump keywords makes the runtime walk the heap in an induced full GC; bulk node/edge/root
 * events are parsed into a compact capture on the GC threads, analysed (dominators, retained
 * sizes, root paths) and written as a .gcdump file on the clrscope-heap thread, and summarised
 * per type for the API.
 *
 * One snapshot at a time, and at most one start per CLRSCOPE_DUMP_MIN_INTERVAL_S. Finished
 * snapshots live in memory (their per-type summary) and on disk (the .gcdump, under
 * CLRSCOPE_DUMP_DIR); CLRSCOPE_DUMP_KEEP of them are kept: past that the oldest one that no
 * reader has asked for in the last HS_IN_USE_S goes (else the one read longest ago), so a burst
 * of new snapshots does not take away the one someone is looking at. A file is served only while
 * it is still the one written (its directory, inode and size, checked at each request).
 *
 * This header and prof_heapsnap.c are the module's public face; its other files start with hs_
 * (hs_int.h lists them): the dump GC and its event hook (hs_session), the capture (hs_capture),
 * the analysis (hs_graph), the file (hs_file, and hs_gcdump for the format), the summary
 * (hs_summary), the guards (hs_guards), the files of exited processes (hs_tidy).
 *
 * ctx: prof_heapsnap_init at Initialize, before prof_events_start (it registers the module's
 * event hook, which then runs on GC threads with the world stopped: atomics only);
 * prof_heapsnap_stop at Shutdown; prof_heapsnap_request, the list and prof_heapsnap_delete on
 * civetweb workers; the snapshot itself is taken on clrscope-heap. The list is guarded by a
 * mutex no runtime callback ever takes (prof_heapsnap_lock). Snapshot structs are immutable once
 * their status leaves HS_RUNNING, except for fields documented as live.
 * prof_heapsnap_write_graph: any thread (no global state).
 */
#ifndef PROF_HEAPSNAP_H
#define PROF_HEAPSNAP_H

#include <stdint.h>
#include <stdio.h>

#include "hs_gcdump.h"
#include "hs_graph.h"
#include "prof_scratch.h"

/* A snapshot a reader asked for within this many seconds is removed by CLRSCOPE_DUMP_KEEP only
 * when every other one was read as recently. */
#define HS_IN_USE_S 600

void prof_heapsnap_init(void);
void prof_heapsnap_stop(void);

enum hs_status { HS_RUNNING, HS_DONE, HS_FAILED };

struct hs_path {
    uint32_t at, len; /* strings pathv[at .. at + len): root description first, then types */
};

struct hs_row {
    const char *type;
    uint64_t count, bytes, retained;
    uint32_t npaths;
    struct hs_path paths[HG_MAX_PATHS];
};

struct hs_snapshot {
    int id;
    int status;            /* live while running */
    unsigned progress;     /* permille; live */
    const char *phase;     /* live: "starting", "collecting", "analyzing", "writing", "done" */
    char error[256];
    double t;              /* unix time of the request */
    double duration_s;     /* request to done */
    double gc_pause_ms;    /* the dump GC, GCStart to GCEnd */
    uint32_t unload_epoch; /* prof_unload's epoch before the dump GC: its types are named under it */
    double ms_index, ms_dominators, ms_paths, ms_names, ms_write, ms_summary; /* analysis steps */
    int forced;            /* ?force=1 overrode a guard */
    uint64_t heap_estimate;
    uint64_t objects, bytes, references, roots;
    uint64_t unresolved_references, unreachable_objects, unreachable_bytes;
    int approximate;
    char file[600];        /* "" when no file was written */
    uint64_t file_bytes;
    uint64_t dir_dev, dir_ino;   /* the dump directory it was written in */
    uint64_t file_dev, file_ino; /* the file as written (and file_bytes, file_mtime_ns): /file
                                    serves nothing else */
    int64_t file_mtime_ns;
    int64_t last_read_ns;  /* live, under the lock: a reader's last request for it (details,
                              paths, file, diff; CLOCK_MONOTONIC), 0 = none */
    int file_refused;      /* live, under the lock: a refusal to serve its file was logged */
    struct hs_row *rows;   /* sorted by retained, descending */
    uint32_t nrows;
    const char **pathv;
    uint32_t npathv;
    char *owned;           /* storage for strings this snapshot made itself */
    struct prof_scratch mem; /* rows, pathv and owned: mappings, unmapped with the snapshot */
};

/* Why a request was turned down. */
enum hs_reason {
    HS_UNAVAILABLE, /* heap snapshots off, no runtime that can take one, shutting down, no memory */
    HS_BUSY,        /* one is running (running_id) */
    HS_TOO_BIG,     /* the heap is above CLRSCOPE_DUMP_MAX_HEAP_MB (heap_bytes, limit_bytes) */
    HS_LOW_MEMORY,  /* less memory available than one needs (available_bytes, needed_bytes) */
    HS_RATE_LIMITED, /* the previous one started less than CLRSCOPE_DUMP_MIN_INTERVAL_S ago
                        (retry_after_s) */
};

struct hs_refusal {
    enum hs_reason reason;
    char message[300];
    int running_id;
    int retry_after_s;
    int64_t heap_bytes, limit_bytes, available_bytes, needed_bytes;
};

/* Starts a snapshot. Returns its id (> 0), or 0 with `why` filled. `force` lets a heap above
 * CLRSCOPE_DUMP_MAX_HEAP_MB be taken, never one the memory available cannot hold, nor one sooner
 * than CLRSCOPE_DUMP_MIN_INTERVAL_S after the previous start. Any non-runtime thread. */
int prof_heapsnap_request(int force, struct hs_refusal *why);

/* The list: lock, look, unlock. Pointers stay valid until unlock. */
void prof_heapsnap_lock(void);
void prof_heapsnap_unlock(void);
int prof_heapsnap_count(void);
const struct hs_snapshot *prof_heapsnap_at(int i); /* 0 = newest */
const struct hs_snapshot *prof_heapsnap_find(int id);
/* prof_heapsnap_find for a reader who looks at the snapshot (its details, paths, file, a diff):
 * notes the time, which keeps it from being the first one CLRSCOPE_DUMP_KEEP removes. */
const struct hs_snapshot *prof_heapsnap_find_read(int id);
/* Opens snapshot s's .gcdump for reading (close-on-exec), under the lock: relative to its
 * directory, never through a link, and only while directory and file are the ones written (same
 * device and inode, same size and time of change, the directory still fit: prof_files_dir_fit).
 * Returns the descriptor; -1 with errno when there is no file (none written, or removed:
 * ENOENT); -2 with the reason in `why` when the file or its directory was replaced or changed
 * (the first such refusal of each snapshot is logged). */
int prof_heapsnap_open_file(const struct hs_snapshot *s, char *why, size_t whycap);
/* 0 deleted, -1 no such id, -2 still running. Takes the lock itself. */
int prof_heapsnap_delete(int id);

/* Writes an analysed graph as a .gcdump to `f`: the root, one pseudo node per root category and
 * per static variable, then the objects (tnames[t] = name of hg type t, tmods[t] its module's
 * file or NULL; tmods itself may be NULL). 0, or -1 with err set.
 * Pure (no runtime, no global state; hs_file.c): the heap-graph fuzz target calls it too. */
int prof_heapsnap_write_graph(FILE *f, const struct heap_graph *g, const char **tnames,
                              const char **tmods, const struct gd_meta *meta, char *err,
                              size_t errcap);

#endif
