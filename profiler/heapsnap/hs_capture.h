/*
 * hs_capture - part of the heap snapshot (prof_heapsnap.h), the step of the dump GC: the
 * capture, the GC-thread half (struct heap_capture, hc_*).
 *
 * During the induced full GC of a heap dump the runtime fires GCBulkNode, GCBulkEdge,
 * GCBulkRootEdge, GCBulkRootConditionalWeakTableElementEdge and GCBulkRootStaticVar events on its
 * GC thread(s) while every managed thread is stopped. Those threads may be stopped inside malloc,
 * so the parsers here never allocate, never log and take no lock another thread could hold: each
 * element is appended to an address-space reservation made with mmap(MAP_NORESERVE) before the
 * dump starts (pages are committed by the first write to them, no system call in the parse path).
 * A spin flag orders appends if the runtime ever fires from several GC threads at once.
 *
 * Every payload read is bounded by the payload length: any byte sequence is safe to feed in. What
 * does not fit (a reservation is full, a payload is truncated) is dropped and counted, and the
 * snapshot then reports it instead of pretending to be complete.
 *
 * Layout per object: 24 bytes (address, type id, size, edge count) + 8 bytes per reference.
 *
 * ctx: hc_reserve before the dump GC and hc_release / hc_trim after it, on clrscope-heap (the
 * capture then goes to hg_index, hs_graph.h); hc_on_event, the parsers and hc_parse_gc_* on GC
 * threads during the dump GC (the event hook of hs_session.c), the world stopped.
 */
#ifndef HS_CAPTURE_H
#define HS_CAPTURE_H

#include <stddef.h>
#include <stdint.h>

/* One object as the runtime reported it. */
struct hc_node {
    uint64_t addr;
    uint64_t type;   /* the runtime's TypeID (= ClassID / MethodTable) */
    uint32_t size;   /* bytes; clamped to UINT32_MAX (counted in `huge`) */
    uint32_t nedges; /* how many entries of the edge stream belong to this object */
};

/* Root kinds as stored (the runtime's GCRootKind values 0..9 are kept; these are ours). */
enum {
    HC_KIND_CWT = 100,    /* a dependent-handle value whose key is alive */
    HC_KIND_STATIC = 101, /* a GCBulkRootStaticVar entry; `aux` = byte offset of its record */
};

/* Runtime GCRootFlags. */
#define HC_FLAG_PINNING 0x1u
#define HC_FLAG_WEAK 0x2u
#define HC_FLAG_INTERIOR 0x4u
#define HC_FLAG_REFCOUNTED 0x8u

struct hc_root {
    uint64_t addr;
    uint16_t kind;  /* GCRootKind or HC_KIND_* */
    uint16_t pad;
    uint32_t flags; /* GCRootFlags, or for HC_KIND_STATIC the byte offset of its record */
};

/* Static-variable records in `statics`: this header, then `name_bytes` of UTF-16LE, padded to 8. */
struct hc_static {
    uint64_t obj;
    uint64_t type;
    uint32_t flags;      /* 0x1 thread-local */
    uint32_t name_bytes;
};

struct hc_region {
    void *base;
    size_t reserved; /* bytes of address space */
};

struct heap_capture {
    struct hc_region r_nodes, r_edges, r_roots, r_statics;
    struct hc_node *nodes;
    uint64_t *edges;
    struct hc_root *roots;
    uint8_t *statics;
    uint64_t nodes_cap, edges_cap, roots_cap, statics_cap;

    /* Written by the parsers (under `spin`); read by the owner once the dump is over. */
    uint64_t n_nodes, n_edges, n_roots, statics_used, n_statics;
    uint64_t claimed_edges;    /* sum of the nodes' edge counts */
    uint64_t bytes;            /* sum of the nodes' sizes */
    uint64_t dropped_nodes, dropped_edges, dropped_roots, dropped_statics;
    uint64_t weak_roots;       /* weak references: not roots, not kept */
    uint64_t malformed;        /* payloads shorter than their element count claims */
    uint64_t out_of_order;     /* batch Index not the expected next one */
    uint64_t huge;             /* objects whose size did not fit 32 bits */
    uint64_t other_events;     /* BulkType, COM, survival events: seen, ignored */
    uint32_t next_node_batch, next_edge_batch;
    int spin;
};

/* Reserves address space for up to the given counts (0 fields are not reserved). Returns 0, or
 * -1 with errno when the kernel refuses the reservation. Nothing is committed yet. */
int hc_reserve(struct heap_capture *c, uint64_t max_nodes, uint64_t max_edges, uint64_t max_roots,
               uint64_t statics_bytes);
/* Releases every reservation; the struct is zeroed. Safe on a zeroed struct. */
void hc_release(struct heap_capture *c);
/* Gives back the pages of [keep_bytes, reserved) of a region (after the owner compacted it). */
void hc_trim(struct hc_region *r, size_t keep_bytes);

/* Parses one heap-dump event (ids 15-23, 36-38). Returns 1 if the id is a heap-dump event. */
int hc_on_event(struct heap_capture *c, uint32_t id, uint32_t version, const uint8_t *p,
                uint32_t len);

/* The individual parsers (exposed for unit tests). */
void hc_bulk_node(struct heap_capture *c, const uint8_t *p, uint32_t len);
void hc_bulk_edge(struct heap_capture *c, const uint8_t *p, uint32_t len);
void hc_bulk_root_edge(struct heap_capture *c, const uint8_t *p, uint32_t len);
void hc_bulk_cwt_edge(struct heap_capture *c, const uint8_t *p, uint32_t len);
void hc_bulk_static_var(struct heap_capture *c, const uint8_t *p, uint32_t len);

/* GCStart (id 1) / GCEnd (id 2) payload fields; return 0 when the payload is too short. */
int hc_parse_gc_start(const uint8_t *p, uint32_t len, uint32_t *count, uint32_t *depth,
                      uint32_t *reason, uint32_t *type);
int hc_parse_gc_end(const uint8_t *p, uint32_t len, uint32_t *count, uint32_t *depth);

#endif
