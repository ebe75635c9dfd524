/*
 * hs_int.h - what the files of the heap snapshot share; no other module uses it.
 *
 *   prof_heapsnap.c  the module's public face (prof_heapsnap.h): the request, the list of
 *                    snapshots and its lock, and clrscope-heap, which takes each snapshot through
 *                    the steps below and publishes the result
 *   hs_guards.c      what a snapshot may take: heap size, memory, dump directory, disk space
 *   hs_session.c     the dump GC: the heap-dump EventPipe session and the GC-thread event hook
 *   hs_capture.c     the capture: the dump GC's events parsed on the GC threads
 *   hs_graph.c       the analysis: index, dominators, retained sizes, root paths
 *   hs_file.c        the snapshot's .gcdump file: the graph laid out for the writer, then written
 *   hs_gcdump.c      the .gcdump format writer
 *   hs_summary.c     the per-type summary the API reads
 *   hs_tidy.c        CLRSCOPE_DUMP_KEEP applied to the files of processes that have exited (in a
 *                    directory no other user can write to)
 *
 * The files below prof_heapsnap.c never take the list's lock and call nothing above them: they
 * get the snapshot they work on and return what they found; prof_heapsnap.c publishes it.
 */
#ifndef HS_INT_H
#define HS_INT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "prof_heapsnap.h"

/* strerror's text for `e` in `out` (GNU strerror_r returns its text instead of filling buf). */
static inline void hs_errtext(int e, char *out, size_t cap)
{
    char buf[128];
    const char *m = strerror_r(e, buf, sizeof buf);
    snprintf(out, cap, "%s", m);
}

/* ---- hs_guards.c (civetweb worker and clrscope-heap, as noted) ---- */

/* The request's guards (civetweb worker): fills `why` (heap, limit, available and needed bytes)
 * and the heap estimate; 0 when the snapshot may go, -1 with why->reason and why->message set
 * when it may not. `force` skips the heap-size limit, never the memory guard. A heap under the
 * limit may wait up to the runtime counters' period + 1.5 s for the allocation counter's interval
 * that covers the request. */
int hs_guards_check(int force, struct hs_refusal *why, int64_t *heap_out);
/* The dump directory made, checked and opened (prof_files_dir_open: private to this user when it
 * is the default one, else fit for clrscope's files) and writable: its descriptor, with its
 * status in *dst, or -1 with `err` set (clrscope-heap, before the dump GC). */
int hs_dump_dir_ready(struct stat *dst, char *err, size_t errcap);
/* 0 when the file system of directory `dirfd` (named `dir` in the message) has `need` bytes
 * free (or cannot tell), else -1 with `err` set. */
int hs_disk_room(int dirfd, const char *dir, uint64_t need, char *err, size_t errcap);
/* The process's resident set in bytes, -1 if unknown (any thread). */
int64_t hs_rss_bytes(void);

/* ---- hs_session.c (clrscope-heap; its event hook on GC threads) ---- */

/* Registers the event hook with prof_events (Initialize, from prof_heapsnap_init). */
void hs_session_init(void);
/* A capture with address space for a heap of about `heap` bytes (nothing committed yet), or
 * NULL with errno set. */
struct heap_capture *hs_session_reserve(int64_t heap);
/* Runs the dump GC with the heap-dump session open and collects its events into `cap`; writes
 * s->progress (20..400 permille) and s->gc_pause_ms. 0, or -1 with `err` set, and then the
 * capture is gone: released, or left to a runtime callback that never returned from it (leaked
 * rather than freed under its feet). */
int hs_session_collect(struct hs_snapshot *s, struct heap_capture *cap, char *err, size_t errcap);

/* ---- hs_file.c (clrscope-heap) ---- */

/* Writes the snapshot's graph to clrscope-PID-ID.gcdump in the dump directory open as `dirfd`
 * (a temporary name renamed when complete): 0 with the file's path in `path` and its status
 * (size, device, inode) in `file_st`, or -1 with `err` set and no file left. Reads s->id and s->t
 * only. */
int hs_file_write(const struct hs_snapshot *s, int dirfd, const struct heap_graph *g,
                  const char **tnames, const char **tmods, char *path, size_t pathcap,
                  struct stat *file_st, char *err, size_t errcap);
/* The file of snapshot `s` opened for reading: see prof_heapsnap_open_file (any thread, under
 * the list's lock). */
int hs_file_open(const struct hs_snapshot *s, char *why, size_t whycap);
/* Removes the file of snapshot `s` when it is still the one written (else leaves whatever is
 * at its name alone). Any thread, under the list's lock. */
void hs_file_remove(const struct hs_snapshot *s);
/* "[static var NAME]" or "[thread static var NAME]" for static variable `s`, in `mem`; NULL when
 * out of memory. */
char *hs_static_label(struct prof_scratch *mem, const struct heap_graph *g, uint32_t s);

/* ---- hs_summary.c (clrscope-heap) ---- */

/* Fills s->rows, s->pathv and s->owned (in s->mem) from the analysed graph and its type names.
 * 0, or -1 when out of memory. */
int hs_summary_build(struct hs_snapshot *s, const struct heap_graph *g, const char **tnames);

/* ---- hs_tidy.c (clrscope-heap) ---- */

/* Removes the oldest .gcdump files of exited processes beyond CLRSCOPE_DUMP_KEEP from the dump
 * directory open as `dirfd` (status `dst`): only files of this user, and nothing in a directory
 * other users can write to (clrscope-heap, after each snapshot). */
void hs_tidy_exited(int dirfd, const struct stat *dst);

#endif
