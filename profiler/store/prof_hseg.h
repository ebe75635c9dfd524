/*
 * prof_hseg - the history's segments on disk: one file holds every windowed profile of a span of
 * time (cpu, wall, allocations, exceptions, locks), its marks, and how to read it back.
 *
 * A segment is a 24-byte header, then its payload compressed by zlib:
 *   "clrshist" | u8 version (2; 1 is read) | 3 bytes 0 | u32 payload bytes | u32 compressed bytes |
 *   u32 CRC-32 of the compressed bytes                                (integers little-endian)
 * The payload is a sequence of unsigned LEB128 numbers and byte strings:
 *   t_from t_to pid                      the span [t_from, t_to) in unix seconds, the writer's pid
 *   nstrings { len bytes }               every name and label (no NUL inside), string 0 = ""
 *   nkinds { kind nnodes { parent name }(node 1..nnodes-1) nrows { node tid label v0 v1 v2 } }
 *   nmarks { t_ms label }
 *   ngcsec { t_ms dt_us process_cpu_us gc_cpu_us gc_threads_cpu_us gc_user_cpu_us pause_us
 *            heap0..heap4 collections0..collections2 }       the GC's per-second records
 *   ngc { number generation reason type complete t_ms duration_us pause_us heap_before
 *         heap_after promoted }                              and its collections
 *   gc_omitted                           collections left out of the list (version 2)
 *   ncounter { name units flags dt_ms interval_ms value }  the runtime counters' values
 *            (name, units: string indexes; flags: 1 a rate, 2 an integer value; dt_ms: the
 *            time after the previous point's, the first's after t_from, zigzag; value: zigzag
 *            for an integer, else the IEEE-754 bits of the double; version 2: a version 1
 *            payload ends before gc_omitted)
 * A node's parent is an earlier node (node 0 is the root, "all"); every index is checked. A
 * segment that is torn (a crash mid-write, a full disk), cut or altered fails its lengths or its
 * CRC and is refused as a whole, with the reason; nothing in it is trusted before that.
 *
 * The accumulator (struct prof_hacc) merges call paths and rows from views and segments: the
 * writer merges a minute's per-second rows before it encodes them; the reader merges the segments
 * of a window, and the part of it still in memory, into one view. Its memory is scratch memory
 * (prof_scratch), capped in call-path nodes: a path that does not fit is cut where the tree ends
 * (its samples stay on the deepest node that fit) and counted.
 *
 * ctx: pure (no globals, no locks, no I/O but prof_hseg_read_dir's reads of one directory); the
 * caller's thread, one accumulator per thread at a time.
 */
#ifndef PROF_HSEG_H
#define PROF_HSEG_H

#include <stddef.h>
#include <stdint.h>

#include "prof_counters.h"
#include "prof_gc.h"
#include "prof_marks.h"
#include "prof_scratch.h"
#include "prof_store.h"

#define PROF_HSEG_HEADER 24
#define PROF_HSEG_MAX_PAYLOAD (256u << 20) /* a segment claiming more is refused */
#define PROF_HSEG_SUFFIX ".clrh"

struct hacc_kind {
    uint32_t *parent;
    const char **name;
    uint32_t nnodes, capnodes;
    uint32_t *nslot; /* open addressing over (parent, name): node + 1, 0 = empty */
    uint32_t nnslot;
    struct prof_row *rows;
    uint32_t nrows, caprows;
    uint32_t *rslot; /* over (node, tid, label): row + 1 */
    uint32_t nrslot;
};

struct prof_hacc {
    struct prof_scratch mem;
    const char **str; /* interned strings; pointer equality is string equality */
    uint32_t nstr, capstr;
    uint32_t *sslot;
    uint32_t nsslot;
    struct hacc_kind k[PK_COUNT];
    struct prof_gc_second *gsec; /* the GC's per-second records, in the order added */
    uint32_t ngsec, capgsec;
    struct prof_gc_collection *gcoll; /* its collections, in the order added */
    uint32_t ngcoll, capgcoll;
    uint64_t gcoll_omitted;           /* collections the writer left out of the list */
    struct prof_counter_point *cpt; /* the runtime counters' points (interned strings) */
    uint32_t ncpt, capcpt;
    uint32_t max_nodes;     /* per kind */
    uint64_t cut_paths;     /* paths cut at max_nodes */
    int oom;                /* an allocation failed: what is held is incomplete */
    double t_from, t_to;    /* the span merged so far (t_from > t_to: nothing yet) */
};

/* An empty accumulator holding at most max_nodes call-path nodes per kind. */
void prof_hacc_init(struct prof_hacc *a, uint32_t max_nodes);
void prof_hacc_free(struct prof_hacc *a);
/* Adds a view's rows of its kind (only those labelled `filter` when not NULL), and its span. 0,
 * or -1 out of memory. */
int prof_hacc_add_view(struct prof_hacc *a, const struct prof_view *v, const char *filter);
/* Adds the GC's per-second records and collections (copied). 0, or -1 out of memory. */
int prof_hacc_add_gc(struct prof_hacc *a, const struct prof_gc_second *s, size_t ns,
                     const struct prof_gc_collection *c, size_t nc);
/* Adds the runtime counters' points (their strings interned). 0, or -1 out of memory. */
int prof_hacc_add_counters(struct prof_hacc *a, const struct prof_counter_point *p, size_t n);
/* Turns kind `kind` of the accumulator into a view: the view takes the accumulator's memory (the
 * accumulator is empty afterwards; prof_view_free gives the memory back). 0, or -1. */
int prof_hacc_take_view(struct prof_hacc *a, int kind, struct prof_view *out);

/* Encodes what `a` holds (every kind), the span [t_from, t_to) and the marks into a segment: the
 * bytes in *out (from `mem`), their count in *len. 0, or -1 (out of memory). */
int prof_hseg_encode(const struct prof_hacc *a, int64_t t_from, int64_t t_to, uint32_t pid,
                     const struct prof_mark *marks, size_t nmarks, struct prof_scratch *mem,
                     unsigned char **out, size_t *len);

struct prof_hseg_info {
    int64_t t_from, t_to;
    uint32_t pid;
    uint32_t nkinds, nmarks;
};

#define PROF_HSEG_ALL (-2) /* a `kind` that takes every kind, the GC's records and the counters */
#define PROF_HSEG_GC (-3)  /* a `kind` that takes the GC's records alone */
#define PROF_HSEG_COUNTERS (-4) /* a `kind` that takes the runtime counters' points alone */

/* Checks a segment's header and CRC and decodes it, adding kind `kind` (-1: none; PROF_HSEG_ALL:
 * every kind) to `a` (may be
 * NULL: check only), rows labelled `filter` only when not NULL, and its marks to marks[0..cap)
 * (*nmarks counts them; marks may be NULL). 0, or -1 with the reason in `why`. */
int prof_hseg_decode(const unsigned char *buf, size_t len, int kind, const char *filter,
                     struct prof_hacc *a, struct prof_mark *marks, size_t cap, size_t *nmarks,
                     struct prof_hseg_info *info, char *why, size_t whycap);
/* The same for the payload alone (after inflate), for the fuzz target. */
int prof_hseg_decode_payload(const unsigned char *p, size_t n, int kind, const char *filter,
                             struct prof_hacc *a, struct prof_mark *marks, size_t cap,
                             size_t *nmarks, struct prof_hseg_info *info, char *why,
                             size_t whycap);

/* A segment's file name, "<t_from>-<t_to>.clrh"; parsed back by prof_hseg_name_span (0, or -1
 * for any other name). */
void prof_hseg_name(char *buf, size_t cap, int64_t t_from, int64_t t_to);
int prof_hseg_name_span(const char *name, int64_t *t_from, int64_t *t_to);

struct prof_hseg_read_stats {
    uint32_t read, skipped;     /* segments merged; refused (torn, corrupt, unreadable) */
    char last_skip[160];        /* the last refusal: "<file>: <reason>" */
};

/* A segment file's bytes in scratch memory `m` (NULL with the reason in `why`). */
unsigned char *prof_hseg_read_file(const char *path, struct prof_scratch *m, size_t *len,
                                   char *why, size_t whycap);

/* Merges kind `kind` of every segment in directory `dir` (a path) that lies within whole seconds
 * [from_s, to_s] or overlaps them (a segment counts whole) and ends by `before` (unix seconds,
 * exclusive; INT64_MAX: any) into `a`; marks likewise when `marks` is not NULL. A segment that
 * cannot be read or decoded is skipped, said in `st`. 0, or -1 when the directory cannot be
 * read. */
int prof_hseg_read_dir(const char *dir, int kind, int64_t from_s, int64_t to_s, int64_t before,
                       const char *filter, struct prof_hacc *a, struct prof_mark *marks,
                       size_t cap, size_t *nmarks, struct prof_hseg_read_stats *st);

#endif
