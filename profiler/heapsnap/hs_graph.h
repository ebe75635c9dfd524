/*
 * hs_graph - part of the heap snapshot (prof_heapsnap.h), the step after the dump GC: the
 * analysis (struct heap_graph, hg_*). Turns a heap_capture (hs_capture.h) into a compact object
 * graph and computes what users read.
 *
 *   hg_index        runtime type ids mapped to dense type indices (records rewritten in place,
 *                   in the capture's own pages, in the order the runtime reported them), and
 *                   references and roots resolved from addresses to object indices through a
 *                   temporary address index (sorted positions + a page table);
 *   hg_dominators   the dominator tree of the graph under a virtual super-root whose children are
 *                   the roots (objects reachable from no root hang under it too, counted as
 *                   unreachable): Cooper-Harvey-Kennedy's iterative algorithm over a DFS postorder,
 *                   no recursion; retained size of every object and of every type (the instances
 *                   that no other instance of the same type dominates);
 *   hg_paths        for each type, up to HG_MAX_PATHS shortest distinct chains of types from a root
 *                   (breadth-first search from the super-root).
 *
 * Memory: the capture's 24 bytes per object + 4 per reference stay; the passes add at most about
 * 16 bytes per object + 4 per reference, freed before each function returns. Every function takes
 * an abort flag (checked now and then) and publishes progress in permille.
 * Not thread-safe: one thread owns a heap_graph.
 *
 * ctx: every function on clrscope-heap (the snapshot's worker), or a test's or fuzz target's
 * thread; nothing here touches the runtime or global state.
 */
#ifndef HS_GRAPH_H
#define HS_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "hs_capture.h"
#include "prof_scratch.h"

#define HG_NONE 0xffffffffu
#define HG_MAX_PATHS 3
#define HG_PATH_KEEP 16     /* longer chains keep their first 6 and last 10 types */
#define HG_PATH_ELLIPSIS 0xfffffffeu

/* Root descriptions. Labels >= HG_CAT_COUNT name static variables (hg->statics[label - COUNT]). */
enum hg_root_cat {
    HG_CAT_LOCAL,        /* [local vars] */
    HG_CAT_STRONG,       /* [strong handles] */
    HG_CAT_PINNED,       /* [pinning handles] */
    HG_CAT_FINALIZER,    /* [finalizer handles] */
    HG_CAT_DEPENDENT,    /* [dependent handles] */
    HG_CAT_COM,          /* [COM/WinRT objects] */
    HG_CAT_OTHER,        /* [other roots] */
    HG_CAT_STATICS,      /* [static vars] (parent of the per-variable labels) */
    HG_CAT_THREAD_STATICS,
    HG_CAT_UNREACHABLE,  /* [unreachable from roots] */
    HG_CAT_COUNT
};

/* One object, after hg_index (same 24 bytes as struct hc_node, reused in place). */
struct hg_node {
    uint64_t addr;
    uint32_t type;   /* dense type index */
    uint32_t first;  /* its references: edges[first .. first + nedges) */
    uint32_t size;
    uint32_t nedges;
};

struct hg_root {
    uint32_t node;
    uint32_t label;
};

struct hg_static {
    uint64_t type_id; /* runtime TypeID the event carries (on .NET 10: the value's type) */
    uint32_t flags;   /* 0x1 thread-local */
    uint32_t node;    /* the object it holds */
    char *field;      /* UTF-8 */
};

struct hg_type {
    uint64_t id;       /* runtime TypeID */
    uint64_t count, bytes, retained;
    uint32_t npaths;
    uint32_t path_at[HG_MAX_PATHS]; /* offsets into hg->paths: [len, label, t1 .. t(len-1)] */
};

struct heap_graph {
    struct heap_capture cap;  /* owns the pages nodes/edges live in */
    struct prof_scratch mem;  /* owns every array below: mappings, given back by hg_free */
    struct hg_node *nodes;
    uint32_t n;
    uint32_t *edges;          /* object index or HG_NONE (a reference to something not dumped) */
    uint64_t ne;
    struct hg_type *types;
    uint32_t ntypes;
    struct hg_root *roots;    /* distinct rooted objects, first description wins */
    uint32_t nroots;
    struct hg_static *statics;
    uint32_t nstatics;
    uint64_t *retained;       /* per object, after hg_dominators */
    uint32_t *paths;
    size_t npaths_used, paths_cap;

    uint64_t bytes;
    uint64_t unresolved_edges; /* references to objects that were not in the dump */
    uint64_t unresolved_roots;
    uint32_t unreachable;      /* objects reached from no root */
    uint64_t unreachable_bytes;
    int approximate;           /* dominators stopped before converging */
    int iterations;
    unsigned root_cats;        /* bit set of HG_CAT_* that occur */
    char error[160];
};

/* Takes over `cap` (the caller's struct is zeroed). Validates, sorts, resolves. 0 or -1 (error set).
 * `progress` runs from `p0` to `p1` permille. */
int hg_index(struct heap_graph *g, struct heap_capture *cap, const int *abort_flag,
             unsigned *progress, unsigned p0, unsigned p1);
int hg_dominators(struct heap_graph *g, const int *abort_flag, unsigned *progress, unsigned p0,
                  unsigned p1);
int hg_paths(struct heap_graph *g, const int *abort_flag);
void hg_free(struct heap_graph *g);

/* Object index of `addr`, or HG_NONE. A linear scan: for tests and diagnostics. */
uint32_t hg_find(const struct heap_graph *g, uint64_t addr);
/* Static name of a root category ("[local vars]"...). */
const char *hg_cat_name(unsigned cat);

#endif
