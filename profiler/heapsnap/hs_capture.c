/* hs_capture.c - see hs_capture.h. Runs on GC threads with the world stopped: no malloc,
 * no logging, no locks shared with other threads, every read bounded by `len`. */
#include "hs_capture.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define BULK_HEADER 10u  /* Index u32, Count u32, ClrInstanceID u16 */
#define NODE_SIZE 32u    /* Address, Size, TypeID, EdgeCount: 4 x u64 */
#define EDGE_SIZE 12u    /* Value u64, ReferencingFieldID u32 */
#define ROOT_SIZE 21u    /* RootedNodeAddress u64, GCRootKind u8, GCRootFlag u32, GCRootID u64 */
#define CWT_SIZE 24u     /* GCKeyNodeID u64, GCValueNodeID u64, GCRootID u64 */
#define STATIC_HEADER 14u /* Count u32, AppDomainID u64, ClrInstanceID u16 */
#define STATIC_FIXED 28u  /* GCRootID u64, ObjectID u64, TypeID u64, Flags u32 */
#define MAX_NAME_BYTES 1024u

static uint32_t rd32(const uint8_t *p)
{
    uint32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static uint64_t rd64(const uint8_t *p)
{
    uint64_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static void lock(struct heap_capture *c)
{
    while (__atomic_test_and_set(&c->spin, __ATOMIC_ACQUIRE)) {
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static void unlock(struct heap_capture *c)
{
    __atomic_clear(&c->spin, __ATOMIC_RELEASE);
}

static int reserve_region(struct hc_region *r, uint64_t bytes)
{
    r->base = NULL;
    r->reserved = 0;
    if (!bytes)
        return 0;
    size_t page = 4096;
    size_t len = (size_t)((bytes + page - 1) / page * page);
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    if (p == MAP_FAILED)
        return -1;
    r->base = p;
    r->reserved = len;
    return 0;
}

static void release_region(struct hc_region *r)
{
    if (r->base)
        munmap(r->base, r->reserved);
    r->base = NULL;
    r->reserved = 0;
}

int hc_reserve(struct heap_capture *c, uint64_t max_nodes, uint64_t max_edges, uint64_t max_roots,
               uint64_t statics_bytes)
{
    memset(c, 0, sizeof *c);
    if (reserve_region(&c->r_nodes, max_nodes * sizeof(struct hc_node)) ||
        reserve_region(&c->r_edges, max_edges * sizeof(uint64_t)) ||
        reserve_region(&c->r_roots, max_roots * sizeof(struct hc_root)) ||
        reserve_region(&c->r_statics, statics_bytes)) {
        int e = errno;
        hc_release(c);
        errno = e;
        return -1;
    }
    c->nodes = c->r_nodes.base;
    c->edges = c->r_edges.base;
    c->roots = c->r_roots.base;
    c->statics = c->r_statics.base;
    c->nodes_cap = c->r_nodes.reserved / sizeof(struct hc_node);
    c->edges_cap = c->r_edges.reserved / sizeof(uint64_t);
    c->roots_cap = c->r_roots.reserved / sizeof(struct hc_root);
    c->statics_cap = c->r_statics.reserved;
    return 0;
}

void hc_release(struct heap_capture *c)
{
    release_region(&c->r_nodes);
    release_region(&c->r_edges);
    release_region(&c->r_roots);
    release_region(&c->r_statics);
    memset(c, 0, sizeof *c);
}

void hc_trim(struct hc_region *r, size_t keep_bytes)
{
    size_t page = 4096;
    size_t keep = (keep_bytes + page - 1) / page * page;
    if (r->base && keep < r->reserved)
        madvise((char *)r->base + keep, r->reserved - keep, MADV_DONTNEED);
}

/* Reads a bulk header; returns the element count that the payload really holds. */
static uint32_t bulk_count(struct heap_capture *c, const uint8_t *p, uint32_t len, uint32_t hdr,
                           uint32_t elem, uint32_t *index)
{
    if (len < hdr) {
        c->malformed++;
        return 0;
    }
    if (index)
        *index = rd32(p);
    uint32_t claimed = rd32(p + (hdr == BULK_HEADER ? 4 : 0));
    uint32_t fits = (len - hdr) / elem;
    if (claimed > fits) {
        c->malformed++;
        return fits;
    }
    return claimed;
}

void hc_bulk_node(struct heap_capture *c, const uint8_t *p, uint32_t len)
{
    lock(c);
    uint32_t index = 0;
    uint32_t n = bulk_count(c, p, len, BULK_HEADER, NODE_SIZE, &index);
    if (len >= BULK_HEADER) {
        if (index != c->next_node_batch)
            c->out_of_order++;
        c->next_node_batch = index + 1;
    }
    const uint8_t *e = p + BULK_HEADER;
    for (uint32_t i = 0; i < n; i++, e += NODE_SIZE) {
        if (c->n_nodes >= c->nodes_cap) {
            c->dropped_nodes += n - i;
            break;
        }
        /* the heap footprint: the GC reports the object's size, allocations are 8-aligned */
        uint64_t size = rd64(e + 8), nedges = rd64(e + 24);
        if (size <= UINT64_MAX - 7)
            size = (size + 7) & ~(uint64_t)7;
        struct hc_node *nd = &c->nodes[c->n_nodes++];
        nd->addr = rd64(e);
        nd->type = rd64(e + 16);
        if (size > UINT32_MAX) {
            c->huge++;
            size = UINT32_MAX;
        }
        nd->size = (uint32_t)size;
        /* An object cannot hold more references than 8-byte slots; anything above is garbage. */
        if (nedges > size / 8 + 1) {
            c->malformed++;
            nedges = size / 8 + 1;
        }
        nd->nedges = (uint32_t)nedges;
        c->claimed_edges += nedges;
        c->bytes += size;
    }
    unlock(c);
}

void hc_bulk_edge(struct heap_capture *c, const uint8_t *p, uint32_t len)
{
    lock(c);
    uint32_t index = 0;
    uint32_t n = bulk_count(c, p, len, BULK_HEADER, EDGE_SIZE, &index);
    if (len >= BULK_HEADER) {
        if (index != c->next_edge_batch)
            c->out_of_order++;
        c->next_edge_batch = index + 1;
    }
    const uint8_t *e = p + BULK_HEADER;
    for (uint32_t i = 0; i < n; i++, e += EDGE_SIZE) {
        if (c->n_edges >= c->edges_cap) {
            c->dropped_edges += n - i;
            break;
        }
        c->edges[c->n_edges++] = rd64(e);
    }
    unlock(c);
}

static void add_root(struct heap_capture *c, uint64_t addr, uint16_t kind, uint32_t flags)
{
    if (c->n_roots >= c->roots_cap) {
        c->dropped_roots++;
        return;
    }
    struct hc_root *r = &c->roots[c->n_roots++];
    r->addr = addr;
    r->kind = kind;
    r->pad = 0;
    r->flags = flags;
}

void hc_bulk_root_edge(struct heap_capture *c, const uint8_t *p, uint32_t len)
{
    lock(c);
    uint32_t n = bulk_count(c, p, len, BULK_HEADER, ROOT_SIZE, NULL);
    const uint8_t *e = p + BULK_HEADER;
    for (uint32_t i = 0; i < n; i++, e += ROOT_SIZE) {
        uint64_t addr = rd64(e);
        uint8_t kind = e[8];
        uint32_t flags = rd32(e + 9);
        if (!addr)
            continue;
        if (flags & HC_FLAG_WEAK) {
            c->weak_roots++;
            continue;
        }
        add_root(c, addr, kind, flags);
    }
    unlock(c);
}

void hc_bulk_cwt_edge(struct heap_capture *c, const uint8_t *p, uint32_t len)
{
    lock(c);
    uint32_t n = bulk_count(c, p, len, BULK_HEADER, CWT_SIZE, NULL);
    const uint8_t *e = p + BULK_HEADER;
    for (uint32_t i = 0; i < n; i++, e += CWT_SIZE) {
        uint64_t key = rd64(e), value = rd64(e + 8);
        if (key && value)
            add_root(c, value, HC_KIND_CWT, 0);
    }
    unlock(c);
}

/* GCBulkRootStaticVar elements are variable-sized (a NUL-terminated UTF-16 field name). */
void hc_bulk_static_var(struct heap_capture *c, const uint8_t *p, uint32_t len)
{
    lock(c);
    if (len < STATIC_HEADER) {
        c->malformed++;
        unlock(c);
        return;
    }
    uint32_t n = rd32(p);
    uint32_t off = STATIC_HEADER;
    for (uint32_t i = 0; i < n; i++) {
        if (len - off < STATIC_FIXED + 2) {
            c->malformed++;
            break;
        }
        const uint8_t *e = p + off;
        uint32_t name_at = off + STATIC_FIXED, end = name_at;
        while (end + 1 < len && (p[end] | p[end + 1]))
            end += 2;
        if (end + 1 >= len) {
            c->malformed++; /* no terminator inside the payload */
            break;
        }
        uint32_t name_bytes = end - name_at;
        off = end + 2;
        uint64_t obj = rd64(e + 8);
        if (!obj)
            continue;
        if (name_bytes > MAX_NAME_BYTES)
            name_bytes = MAX_NAME_BYTES;
        uint64_t rec = (sizeof(struct hc_static) + name_bytes + 7) & ~(uint64_t)7;
        if (c->statics_used + rec > c->statics_cap || c->statics_used > UINT32_MAX ||
            c->n_roots >= c->roots_cap) {
            c->dropped_statics++;
            continue;
        }
        struct hc_static h = {.obj = obj, .type = rd64(e + 16), .flags = rd32(e + 24),
                              .name_bytes = name_bytes};
        uint8_t *dst = c->statics + c->statics_used;
        memcpy(dst, &h, sizeof h);
        memcpy(dst + sizeof h, p + name_at, name_bytes);
        add_root(c, obj, HC_KIND_STATIC, (uint32_t)c->statics_used);
        c->statics_used += rec;
        c->n_statics++;
    }
    unlock(c);
}

int hc_on_event(struct heap_capture *c, uint32_t id, uint32_t version, const uint8_t *p,
                uint32_t len)
{
    (void)version; /* every heap-dump template is still version 0 */
    if (!p)
        len = 0;
    switch (id) {
    case 18:
        hc_bulk_node(c, p, len);
        return 1;
    case 19:
        hc_bulk_edge(c, p, len);
        return 1;
    case 16:
        hc_bulk_root_edge(c, p, len);
        return 1;
    case 17:
        hc_bulk_cwt_edge(c, p, len);
        return 1;
    case 38:
        hc_bulk_static_var(c, p, len);
        return 1;
    case 15: case 20: case 21: case 22: case 23: case 36: case 37:
        __atomic_fetch_add(&c->other_events, 1, __ATOMIC_RELAXED);
        return 1;
    default:
        return 0;
    }
}

int hc_parse_gc_start(const uint8_t *p, uint32_t len, uint32_t *count, uint32_t *depth,
                      uint32_t *reason, uint32_t *type)
{
    if (!p || len < 16)
        return 0;
    *count = rd32(p);
    *depth = rd32(p + 4);
    *reason = rd32(p + 8);
    *type = rd32(p + 12);
    return 1;
}

int hc_parse_gc_end(const uint8_t *p, uint32_t len, uint32_t *count, uint32_t *depth)
{
    if (!p || len < 8)
        return 0;
    *count = rd32(p);
    *depth = rd32(p + 4);
    return 1;
}
