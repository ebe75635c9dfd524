/* hs_graph.c - see hs_graph.h. Runs on clrscope-heap; no recursion anywhere (graphs are
 * millions of objects deep in the worst case), every work array is sized up front. */
#include "hs_graph.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "prof_scratch.h"

#define SUPER_LABEL_BIT 0x80000000u
#define MAX_ITERATIONS 64
#define MAX_PATH_WALK 100000u
#define PATH_TRIES 24

static const char *const g_cat_names[HG_CAT_COUNT] = {
    "[local vars]",       "[strong handles]",  "[pinning handles]", "[finalizer queue]",
    "[dependent handles]", "[COM/WinRT objects]", "[other roots]",  "[static vars]",
    "[thread static vars]", "[unreachable from roots]",
};

const char *hg_cat_name(unsigned cat)
{
    return cat < HG_CAT_COUNT ? g_cat_names[cat] : "[root]";
}

static int aborted(const int *flag)
{
    return flag && __atomic_load_n(flag, __ATOMIC_RELAXED);
}

static void set_progress(unsigned *p, unsigned v)
{
    if (p)
        __atomic_store_n(p, v, __ATOMIC_RELAXED);
}

static int fail(struct heap_graph *g, const char *msg)
{
    snprintf(g->error, sizeof g->error, "%s", msg);
    return -1;
}

/* ---- type ids -> dense indices: open addressing on the (never zero after +1) id ---- */

struct typemap {
    struct prof_scratch *mem;
    uint64_t *keys; /* id + 1; 0 = empty */
    uint32_t *vals;
    uint32_t mask, used;
};

static int typemap_grow(struct typemap *m)
{
    struct prof_scratch *mem = m->mem;
    uint32_t nsize = m->mask ? (m->mask + 1) * 2 : 1024;
    uint64_t *k = prof_scratch_calloc(mem, nsize, sizeof *k);
    uint32_t *v = prof_scratch_alloc(mem, (size_t)nsize * sizeof *v);
    if (!k || !v) {
        prof_scratch_free(mem, k);
        prof_scratch_free(mem, v);
        return -1;
    }
    for (uint32_t i = 0; m->mask && i <= m->mask; i++) {
        if (!m->keys[i])
            continue;
        uint32_t h = (uint32_t)((m->keys[i] * 0x9e3779b97f4a7c15ull) >> 32) & (nsize - 1);
        while (k[h])
            h = (h + 1) & (nsize - 1);
        k[h] = m->keys[i];
        v[h] = m->vals[i];
    }
    prof_scratch_free(mem, m->keys);
    prof_scratch_free(mem, m->vals);
    m->keys = k;
    m->vals = v;
    m->mask = nsize - 1;
    return 0;
}

/* Returns the index for `id` (`*fresh` = 1 when it was new) or HG_NONE on out-of-memory. */
static uint32_t typemap_get(struct typemap *m, uint64_t id, uint32_t next, int *fresh)
{
    if ((m->used + 1) * 2 > m->mask + 1 && typemap_grow(m))
        return HG_NONE;
    uint64_t key = id + 1;
    uint32_t h = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> 32) & m->mask;
    while (m->keys[h]) {
        if (m->keys[h] == key) {
            *fresh = 0;
            return m->vals[h];
        }
        h = (h + 1) & m->mask;
    }
    m->keys[h] = key;
    m->vals[h] = next;
    m->used++;
    *fresh = 1;
    return next;
}

/* ---- sorting: natural merge sort of object indices by address ---- */

static int sort_by_addr(struct prof_scratch *mem, const struct hg_node *nodes, uint32_t n, uint32_t *order)
{
    uint32_t *tmp = prof_scratch_alloc(mem, (size_t)n * sizeof *tmp);
    uint32_t *runs = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *runs);
    if (!tmp || !runs) {
        prof_scratch_free(mem, tmp);
        prof_scratch_free(mem, runs);
        return -1;
    }
    uint32_t nruns = 0;
    for (uint32_t i = 0; i < n; i++) {
        order[i] = i;
        if (i == 0 || nodes[i].addr < nodes[i - 1].addr)
            runs[nruns++] = i;
    }
    runs[nruns] = n;
    uint32_t *src = order, *dst = tmp;
    while (nruns > 1) {
        uint32_t out = 0;
        for (uint32_t r = 0; r < nruns; r += 2) {
            uint32_t a = runs[r], mid = runs[r + 1], b = r + 2 <= nruns ? runs[r + 2] : n;
            if (r + 1 >= nruns) {
                mid = b = n;
            }
            uint32_t i = a, j = mid, k = a;
            while (i < mid && j < b)
                dst[k++] = nodes[src[j]].addr < nodes[src[i]].addr ? src[j++] : src[i++];
            while (i < mid)
                dst[k++] = src[i++];
            while (j < b)
                dst[k++] = src[j++];
            runs[out++] = a;
        }
        runs[out] = n;
        nruns = out;
        uint32_t *t = src;
        src = dst;
        dst = t;
    }
    if (src != order)
        memcpy(order, src, (size_t)n * sizeof *order);
    prof_scratch_free(mem, tmp);
    prof_scratch_free(mem, runs);
    return 0;
}

uint32_t hg_find(const struct heap_graph *g, uint64_t addr)
{
    for (uint32_t i = 0; i < g->n; i++)
        if (g->nodes[i].addr == addr)
            return i;
    return HG_NONE;
}

/* The address index used while resolving references: objects stay in the order the runtime
 * reported them (moving 24-byte records into address order costs a cache miss each), and
 * `order` lists them by address. On top, the distinct 4 KiB pages that hold object starts
 * (small enough to stay in cache) with the first sorted position of each, and per sorted position
 * the address's offset in its page (2 bytes, searched instead of the records). */
struct pages {
    struct prof_scratch *mem;
    const uint32_t *order;
    uint64_t *no;
    uint32_t *first;  /* npages + 1 entries */
    uint16_t *offset; /* by sorted position */
    uint32_t n;
};

static void pages_free(struct pages *pg)
{
    struct prof_scratch *mem = pg->mem;
    prof_scratch_free(mem, pg->no);
    prof_scratch_free(mem, pg->first);
    prof_scratch_free(mem, pg->offset);
    memset(pg, 0, sizeof *pg);
}

static uint64_t addr_at(const struct heap_graph *g, const uint32_t *order, uint32_t pos)
{
    return g->nodes[order[pos]].addr;
}

static int pages_build(struct prof_scratch *mem, struct pages *pg, const struct heap_graph *g,
                       const uint32_t *order)
{
    memset(pg, 0, sizeof *pg);
    pg->mem = mem;
    pg->order = order;
    uint32_t n = 0;
    for (uint32_t i = 0; i < g->n; i++)
        n += i == 0 || (addr_at(g, order, i) >> 12) != (addr_at(g, order, i - 1) >> 12);
    pg->no = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *pg->no);
    pg->first = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *pg->first);
    pg->offset = prof_scratch_alloc(mem, ((size_t)g->n + 1) * sizeof *pg->offset);
    if (!pg->no || !pg->first || !pg->offset) {
        pages_free(pg);
        return -1;
    }
    for (uint32_t i = 0; i < g->n; i++) {
        uint64_t a = addr_at(g, order, i), p = a >> 12;
        pg->offset[i] = (uint16_t)(a & 4095);
        if (i == 0 || p != pg->no[pg->n - 1]) {
            pg->no[pg->n] = p;
            pg->first[pg->n++] = i;
        }
    }
    pg->first[pg->n] = g->n;
    return 0;
}

/* The sorted position of the first object at or after `addr` within addr's page, and whether the
 * page exists at all (*page). */
static uint32_t pages_lower(const struct pages *pg, uint64_t addr, uint32_t *page)
{
    uint64_t p = addr >> 12;
    uint32_t lo = 0, hi = pg->n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (pg->no[mid] < p)
            lo = mid + 1;
        else
            hi = mid;
    }
    *page = lo;
    if (lo == pg->n || pg->no[lo] != p)
        return HG_NONE;
    uint32_t a = pg->first[lo], b = pg->first[lo + 1];
    uint16_t off = (uint16_t)(addr & 4095);
    while (a < b) {
        uint32_t mid = a + (b - a) / 2;
        if (pg->offset[mid] < off)
            a = mid + 1;
        else
            b = mid;
    }
    return a;
}

static uint32_t pages_find(const struct pages *pg, const struct heap_graph *g, uint64_t addr)
{
    uint32_t page, pos = pages_lower(pg, addr, &page);
    if (pos == HG_NONE || pos >= pg->first[page + 1])
        return HG_NONE;
    uint32_t v = pg->order[pos];
    return g->nodes[v].addr == addr ? v : HG_NONE;
}

/* The object whose [addr, addr + size) holds `p` (interior pointers from stack roots). */
static uint32_t pages_containing(const struct pages *pg, const struct heap_graph *g, uint64_t p)
{
    uint32_t page, pos = pages_lower(pg, p, &page);
    if (pos != HG_NONE && pos < pg->first[page + 1] && addr_at(g, pg->order, pos) == p)
        return pg->order[pos];
    /* the last object starting before p: just before `pos` on this page, or on an earlier one */
    uint32_t before = pos != HG_NONE ? pos : (page < pg->n ? pg->first[page] : g->n);
    if (before == 0)
        return HG_NONE;
    uint32_t v = pg->order[before - 1];
    const struct hg_node *nd = &g->nodes[v];
    return nd->addr <= p && p - nd->addr < nd->size ? v : HG_NONE;
}

static char *utf16_to_utf8(struct prof_scratch *mem, const uint8_t *p, uint32_t nbytes)
{
    char *out = prof_scratch_alloc(mem, (size_t)nbytes / 2 * 3 + 1);
    if (!out)
        return NULL;
    size_t o = 0;
    for (uint32_t i = 0; i + 1 < nbytes; i += 2) {
        uint32_t c = (uint32_t)p[i] | (uint32_t)p[i + 1] << 8;
        if (c >= 0xd800 && c < 0xdc00 && i + 3 < nbytes) {
            uint32_t lo = (uint32_t)p[i + 2] | (uint32_t)p[i + 3] << 8;
            if (lo >= 0xdc00 && lo < 0xe000) {
                c = 0x10000 + ((c - 0xd800) << 10) + (lo - 0xdc00);
                i += 2;
            }
        }
        if (c >= 0xd800 && c < 0xe000)
            c = '?';
        if (c < 0x80) {
            out[o++] = (char)c;
        } else if (c < 0x800) {
            out[o++] = (char)(0xc0 | c >> 6);
            out[o++] = (char)(0x80 | (c & 0x3f));
        } else if (c < 0x10000) {
            out[o++] = (char)(0xe0 | c >> 12);
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
            out[o++] = (char)(0x80 | (c & 0x3f));
        } else {
            out[o++] = (char)(0xf0 | c >> 18);
            out[o++] = (char)(0x80 | ((c >> 12) & 0x3f));
            out[o++] = (char)(0x80 | ((c >> 6) & 0x3f));
            out[o++] = (char)(0x80 | (c & 0x3f));
        }
    }
    out[o] = 0;
    return out;
}

static unsigned root_category(const struct hc_root *r)
{
    if (r->kind == HC_KIND_CWT || r->kind == 6)
        return HG_CAT_DEPENDENT;
    if (r->flags & HC_FLAG_REFCOUNTED)
        return HG_CAT_COM;
    switch (r->kind) {
    case 0:
        return HG_CAT_LOCAL;
    case 1:
        return HG_CAT_FINALIZER;
    case 2:
        return (r->flags & HC_FLAG_PINNING) ? HG_CAT_PINNED : HG_CAT_STRONG;
    default:
        return HG_CAT_OTHER;
    }
}

static int index_roots(struct heap_graph *g, const struct pages *pg)
{
    struct prof_scratch *mem = &g->mem;
    struct heap_capture *c = &g->cap;
    uint64_t nr = c->n_roots;
    g->roots = prof_scratch_alloc(mem, (size_t)(nr ? nr : 1) * sizeof *g->roots);
    g->statics = prof_scratch_alloc(mem, (size_t)(c->n_statics ? c->n_statics : 1) * sizeof *g->statics);
    uint8_t *seen = prof_scratch_calloc(mem, (size_t)g->n / 8 + 1, 1);
    if (!g->roots || !g->statics || !seen) {
        prof_scratch_free(mem, seen);
        return fail(g, "out of memory while resolving roots");
    }
    /* static variables first: their descriptions are the most telling */
    for (uint64_t k = 0; k < 2 * nr; k++) {
        const struct hc_root *r = &c->roots[k % nr];
        if ((r->kind == HC_KIND_STATIC) != (k < nr))
            continue;
        uint32_t v = pages_find(pg, g, r->addr);
        if (v == HG_NONE)
            v = pages_containing(pg, g, r->addr);
        if (v == HG_NONE) {
            g->unresolved_roots++;
            continue;
        }
        uint32_t label;
        if (r->kind == HC_KIND_STATIC) {
            struct hc_static h;
            if ((uint64_t)r->flags + sizeof h > c->statics_used)
                continue;
            memcpy(&h, c->statics + r->flags, sizeof h);
            if ((uint64_t)r->flags + sizeof h + h.name_bytes > c->statics_used)
                continue;
            char *field = utf16_to_utf8(mem, c->statics + r->flags + sizeof h, h.name_bytes);
            if (!field)
                continue;
            g->statics[g->nstatics] = (struct hg_static){h.type, h.flags, v, field};
            label = HG_CAT_COUNT + g->nstatics++;
            g->root_cats |= 1u << ((h.flags & 1) ? HG_CAT_THREAD_STATICS : HG_CAT_STATICS);
        } else {
            label = root_category(r);
            g->root_cats |= 1u << label;
        }
        if (seen[v / 8] & (1u << (v % 8)))
            continue;
        seen[v / 8] |= (uint8_t)(1u << (v % 8));
        g->roots[g->nroots++] = (struct hg_root){v, label};
    }
    prof_scratch_free(mem, seen);
    return 0;
}

static int check_capture(struct heap_graph *g)
{
    const struct heap_capture *c = &g->cap;
    char msg[160];
    if (c->dropped_nodes || c->dropped_edges) {
        snprintf(msg, sizeof msg, "the heap outgrew the space reserved for it (%llu objects, "
                 "%llu references dropped)", (unsigned long long)c->dropped_nodes,
                 (unsigned long long)c->dropped_edges);
        return fail(g, msg);
    }
    if (c->malformed || c->out_of_order) {
        snprintf(msg, sizeof msg, "the runtime's heap events were inconsistent (%llu malformed, "
                 "%llu out of order)", (unsigned long long)c->malformed,
                 (unsigned long long)c->out_of_order);
        return fail(g, msg);
    }
    if (!c->n_nodes)
        return fail(g, "the runtime reported no objects");
    if (c->n_nodes >= 0x7fffffffu || c->n_edges >= HG_NONE)
        return fail(g, "too many objects for one snapshot");
    if (c->claimed_edges != c->n_edges) {
        snprintf(msg, sizeof msg, "objects claim %llu references but %llu arrived",
                 (unsigned long long)c->claimed_edges, (unsigned long long)c->n_edges);
        return fail(g, msg);
    }
    return 0;
}

int hg_index(struct heap_graph *g, struct heap_capture *cap, const int *abort_flag,
             unsigned *progress, unsigned p0, unsigned p1)
{
    struct prof_scratch *mem = &g->mem;
    memset(g, 0, sizeof *g);
    g->cap = *cap;
    memset(cap, 0, sizeof *cap);
    if (check_capture(g))
        return -1;
    struct heap_capture *c = &g->cap;
    uint32_t n = (uint32_t)c->n_nodes;
    g->n = n;
    g->ne = c->n_edges;
    g->bytes = c->bytes;

    /* 1. dense type indices and edge offsets, rewriting each record in place */
    struct typemap tm = {.mem = mem};
    uint32_t tcap = 256;
    g->types = prof_scratch_calloc(mem, tcap, sizeof *g->types);
    if (!g->types)
        return fail(g, "out of memory");
    uint64_t first = 0;
    for (uint32_t i = 0; i < n; i++) {
        struct hc_node in = c->nodes[i];
        int fresh = 0;
        uint32_t t = typemap_get(&tm, in.type, g->ntypes, &fresh);
        if (t == HG_NONE)
            goto oom;
        if (fresh) {
            if (g->ntypes == tcap) {
                struct hg_type *nt = prof_scratch_realloc(mem, g->types, (size_t)tcap * 2 * sizeof *nt);
                if (!nt)
                    goto oom;
                memset(nt + tcap, 0, (size_t)tcap * sizeof *nt);
                g->types = nt;
                tcap *= 2;
            }
            g->types[t].id = in.type;
            g->ntypes++;
        }
        g->types[t].count++;
        g->types[t].bytes += in.size;
        struct hg_node out = {in.addr, t, (uint32_t)first, in.size, in.nedges};
        memcpy(&c->nodes[i], &out, sizeof out);
        first += in.nedges;
    }
    prof_scratch_free(mem, tm.keys);
    prof_scratch_free(mem, tm.vals);
    tm.keys = NULL;
    tm.vals = NULL;
    g->nodes = (struct hg_node *)(void *)c->nodes;
    set_progress(progress, p0 + (p1 - p0) / 5);
    if (aborted(abort_flag))
        return fail(g, "cancelled");

    /* 2. the address index */
    int rc;
    uint32_t *order = prof_scratch_alloc(mem, (size_t)n * sizeof *order);
    struct pages pg = {0};
    if (!order || sort_by_addr(mem, g->nodes, n, order) || pages_build(mem, &pg, g, order)) {
        prof_scratch_free(mem, order);
        goto oom;
    }
    set_progress(progress, p0 + (p1 - p0) * 2 / 5);
    if (aborted(abort_flag))
        goto cancelled;

    /* 3. references: 8-byte addresses -> 4-byte indices, in place (slot k is read before the
     * 4 bytes at 4k, which belong to slot k/2 <= k, are written) */
    unsigned char *raw = (unsigned char *)c->edges;
    uint64_t last_a = 0;
    uint32_t last_v = HG_NONE;
    for (uint64_t k = 0; k < g->ne; k++) {
        uint64_t a;
        memcpy(&a, raw + 8 * k, sizeof a);
        uint32_t v = a == last_a ? last_v : pages_find(&pg, g, a);
        last_a = a;
        last_v = v;
        if (v == HG_NONE)
            g->unresolved_edges++;
        memcpy(raw + 4 * k, &v, sizeof v);
        if ((k & 0xfffff) == 0) {
            if (aborted(abort_flag))
                goto cancelled;
            set_progress(progress, p0 + (unsigned)((p1 - p0) * (2 + 2 * (double)k / g->ne) / 5));
        }
    }
    g->edges = (uint32_t *)(void *)raw;
    hc_trim(&c->r_edges, (size_t)g->ne * sizeof(uint32_t));

    /* 4. roots */
    rc = index_roots(g, &pg);
    pages_free(&pg);
    prof_scratch_free(mem, order);
    if (rc)
        return -1;
    set_progress(progress, p1);
    return 0;
cancelled:
    pages_free(&pg);
    prof_scratch_free(mem, order);
    return fail(g, "cancelled");
oom:
    prof_scratch_free(mem, tm.keys);
    prof_scratch_free(mem, tm.vals);
    return fail(g, "out of memory while indexing the heap");
}

/* ---- dominators ---- */

struct frame {
    uint32_t node;
    uint32_t pos;
};

/* Iterative DFS from the super-root S = n. Children of S: the roots, then every object not yet
 * reached (phase 2: unreachable). Fills post[v] and order[p]; marks `from_super`. */
static int dfs_postorder(struct heap_graph *g, uint32_t *post, uint32_t *order, uint8_t *from_super,
                         uint32_t *phase1_end)
{
    struct prof_scratch *mem = &g->mem;
    uint32_t n = g->n, S = n, counter = 0;
    struct frame *stack = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *stack);
    if (!stack)
        return -1;
    for (uint32_t i = 0; i <= n; i++)
        post[i] = HG_NONE;
    const uint32_t onstack = HG_NONE - 1;
    /* every root hangs under S even when another root's references reach it first */
    for (uint32_t r = 0; r < g->nroots; r++)
        from_super[g->roots[r].node / 8] |= (uint8_t)(1u << (g->roots[r].node % 8));
    size_t sp = 0;
    stack[sp++] = (struct frame){S, 0};
    post[S] = onstack;
    *phase1_end = HG_NONE;
    while (sp) {
        struct frame *f = &stack[sp - 1];
        uint32_t child = HG_NONE;
        if (f->node == S) {
            while (child == HG_NONE && f->pos < g->nroots + n) {
                uint32_t cand;
                if (f->pos < g->nroots) {
                    cand = g->roots[f->pos].node;
                } else {
                    if (*phase1_end == HG_NONE)
                        *phase1_end = counter;
                    cand = f->pos - g->nroots;
                }
                f->pos++;
                if (post[cand] == HG_NONE) {
                    child = cand;
                    from_super[cand / 8] |= (uint8_t)(1u << (cand % 8));
                }
            }
        } else {
            const struct hg_node *nd = &g->nodes[f->node];
            while (child == HG_NONE && f->pos < nd->nedges) {
                uint32_t cand = g->edges[nd->first + f->pos++];
                if (cand != HG_NONE && post[cand] == HG_NONE)
                    child = cand;
            }
        }
        if (child != HG_NONE) {
            post[child] = onstack;
            stack[sp++] = (struct frame){child, 0};
        } else {
            post[f->node] = counter;
            order[counter++] = f->node;
            sp--;
        }
    }
    if (*phase1_end == HG_NONE)
        *phase1_end = counter - 1;
    prof_scratch_free(mem, stack);
    return 0;
}

static uint32_t intersect(const uint32_t *doms, uint32_t a, uint32_t b)
{
    while (a != b) {
        while (a < b)
            a = doms[a];
        while (b < a)
            b = doms[b];
    }
    return a;
}

/* Dominator tree DFS with per-type "instances on the current path" counters: a type's retained
 * size sums the instances that no other instance of the same type dominates. */
static int type_retained(struct heap_graph *g, const uint32_t *idom)
{
    struct prof_scratch *mem = &g->mem;
    uint32_t n = g->n, S = n;
    uint32_t *start = prof_scratch_calloc(mem, (size_t)n + 2, sizeof *start);
    uint32_t *kids = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *kids);
    struct frame *stack = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *stack);
    uint32_t *active = prof_scratch_calloc(mem, g->ntypes ? g->ntypes : 1, sizeof *active);
    if (!start || !kids || !stack || !active) {
        prof_scratch_free(mem, start);
        prof_scratch_free(mem, kids);
        prof_scratch_free(mem, stack);
        prof_scratch_free(mem, active);
        return -1;
    }
    for (uint32_t v = 0; v < n; v++)
        start[idom[v] + 1]++;
    for (uint32_t i = 0; i <= n; i++)
        start[i + 1] += start[i];
    for (uint32_t v = 0; v < n; v++)
        kids[start[idom[v]]++] = v;
    for (uint32_t i = n + 1; i > 0; i--)
        start[i] = start[i - 1];
    start[0] = 0;
    size_t sp = 0;
    stack[sp++] = (struct frame){S, 0};
    while (sp) {
        struct frame *f = &stack[sp - 1];
        uint32_t v = f->node;
        if (f->pos < start[v + 1] - start[v]) {
            uint32_t c = kids[start[v] + f->pos++];
            uint32_t t = g->nodes[c].type;
            if (!active[t]++)
                g->types[t].retained += g->retained[c];
            stack[sp++] = (struct frame){c, 0};
        } else {
            if (v != S)
                active[g->nodes[v].type]--;
            sp--;
        }
    }
    prof_scratch_free(mem, start);
    prof_scratch_free(mem, kids);
    prof_scratch_free(mem, stack);
    prof_scratch_free(mem, active);
    return 0;
}

int hg_dominators(struct heap_graph *g, const int *abort_flag, unsigned *progress, unsigned p0,
                  unsigned p1)
{
    struct prof_scratch *mem = &g->mem;
    uint32_t n = g->n, S = n;
    uint32_t *post = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *post);
    uint32_t *order = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *order);
    uint8_t *from_super = prof_scratch_calloc(mem, (size_t)n / 8 + 1, 1);
    uint32_t *pstart = NULL, *preds = NULL, *doms = NULL;
    if (!post || !order || !from_super)
        goto oom;
    uint32_t phase1_end = 0;
    if (dfs_postorder(g, post, order, from_super, &phase1_end))
        goto oom;
    for (uint32_t v = 0; v < n; v++) {
        if (post[v] >= phase1_end) {
            g->unreachable++;
            g->unreachable_bytes += g->nodes[v].size;
        }
    }
    if (g->unreachable)
        g->root_cats |= 1u << HG_CAT_UNREACHABLE;
    set_progress(progress, p0 + (p1 - p0) / 5);

    /* predecessors (reverse CSR), indexed by object */
    pstart = prof_scratch_calloc(mem, (size_t)n + 2, sizeof *pstart);
    if (!pstart)
        goto oom;
    uint64_t valid = 0;
    for (uint64_t k = 0; k < g->ne; k++) {
        if (g->edges[k] != HG_NONE) {
            pstart[g->edges[k] + 1]++;
            valid++;
        }
    }
    preds = prof_scratch_alloc(mem, (size_t)(valid ? valid : 1) * sizeof *preds);
    if (!preds)
        goto oom;
    for (uint32_t i = 0; i < n; i++)
        pstart[i + 1] += pstart[i];
    for (uint32_t u = 0; u < n; u++) {
        const struct hg_node *nd = &g->nodes[u];
        for (uint32_t j = 0; j < nd->nedges; j++) {
            uint32_t v = g->edges[nd->first + j];
            if (v != HG_NONE)
                preds[pstart[v]++] = u;
        }
    }
    for (uint32_t i = n; i > 0; i--)
        pstart[i] = pstart[i - 1];
    pstart[0] = 0;
    set_progress(progress, p0 + (p1 - p0) * 2 / 5);

    /* Cooper, Harvey, Kennedy: "A Simple, Fast Dominance Algorithm" (2001), on postorder numbers */
    uint32_t ps = post[S];
    doms = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *doms);
    if (!doms)
        goto oom;
    for (uint32_t i = 0; i <= n; i++)
        doms[i] = HG_NONE;
    doms[ps] = ps;
    int changed = 1;
    while (changed) {
        changed = 0;
        if (++g->iterations > MAX_ITERATIONS) {
            g->approximate = 1;
            break;
        }
        for (uint32_t p = ps; p-- > 0;) {
            uint32_t v = order[p];
            uint32_t nd;
            if (from_super[v / 8] & (1u << (v % 8))) {
                nd = ps;
            } else {
                nd = HG_NONE;
                for (uint32_t j = pstart[v]; j < pstart[v + 1]; j++) {
                    uint32_t q = post[preds[j]];
                    /* references from unreachable objects do not keep reachable ones alive */
                    if (doms[q] == HG_NONE || (p < phase1_end && q >= phase1_end))
                        continue;
                    nd = nd == HG_NONE ? q : intersect(doms, q, nd);
                }
                if (nd == HG_NONE)
                    nd = ps; /* cannot happen in a DFS order; stay safe */
            }
            if (doms[p] != nd) {
                doms[p] = nd;
                changed = 1;
            }
        }
        if (aborted(abort_flag))
            goto cancelled;
        set_progress(progress, p0 + (p1 - p0) * (2 + (g->iterations < 3 ? g->iterations : 3)) / 6);
    }
    prof_scratch_free(mem, preds);
    preds = NULL;
    prof_scratch_free(mem, pstart);
    pstart = NULL;
    prof_scratch_free(mem, from_super);
    from_super = NULL;

    /* retained sizes: children before their dominators in postorder */
    g->retained = prof_scratch_alloc(mem, ((size_t)n + 1) * sizeof *g->retained);
    if (!g->retained)
        goto oom;
    for (uint32_t v = 0; v < n; v++)
        g->retained[v] = g->nodes[v].size;
    g->retained[S] = 0;
    for (uint32_t p = 0; p < ps; p++)
        g->retained[order[doms[p]]] += g->retained[order[p]];
    /* idom per object, reusing `post` */
    for (uint32_t v = 0; v < n; v++)
        post[v] = order[doms[post[v]]];
    prof_scratch_free(mem, doms);
    doms = NULL;
    prof_scratch_free(mem, order);
    order = NULL;
    if (type_retained(g, post))
        goto oom;
    prof_scratch_free(mem, post);
    set_progress(progress, p1);
    return 0;
cancelled:
    prof_scratch_free(mem, post);
    prof_scratch_free(mem, order);
    prof_scratch_free(mem, from_super);
    prof_scratch_free(mem, pstart);
    prof_scratch_free(mem, preds);
    prof_scratch_free(mem, doms);
    return fail(g, "cancelled");
oom:
    prof_scratch_free(mem, post);
    prof_scratch_free(mem, order);
    prof_scratch_free(mem, from_super);
    prof_scratch_free(mem, pstart);
    prof_scratch_free(mem, preds);
    prof_scratch_free(mem, doms);
    return fail(g, "out of memory while computing dominators");
}

/* ---- shortest root paths ---- */

static int paths_push(struct heap_graph *g, const uint32_t *seq, uint32_t len)
{
    struct prof_scratch *mem = &g->mem;
    if (g->npaths_used + len + 1 > g->paths_cap) {
        size_t nc = g->paths_cap ? g->paths_cap * 2 : 4096;
        while (nc < g->npaths_used + len + 1)
            nc *= 2;
        uint32_t *np = prof_scratch_realloc(mem, g->paths, nc * sizeof *np);
        if (!np)
            return -1;
        g->paths = np;
        g->paths_cap = nc;
    }
    g->paths[g->npaths_used] = len;
    memcpy(g->paths + g->npaths_used + 1, seq, (size_t)len * sizeof *seq);
    g->npaths_used += len + 1;
    return 0;
}

/* Builds [label, t_root .. t_v] (root first) for v into seq; returns its length or 0. */
static uint32_t build_path(const struct heap_graph *g, const uint32_t *parent, uint32_t v,
                           uint32_t *seq, uint32_t *near, uint32_t *far)
{
    /* walk up: `near` keeps the types closest to v, `far` is a ring of the latest ones seen */
    uint32_t nn = 0, nf = 0, steps = 0, u = v;
    while (!(parent[u] & SUPER_LABEL_BIT)) {
        uint32_t t = g->nodes[u].type;
        if (nn < HG_PATH_KEEP)
            near[nn++] = t;
        far[nf++ % 6] = t;
        u = parent[u];
        if (++steps > MAX_PATH_WALK)
            return 0;
    }
    uint32_t t = g->nodes[u].type;
    if (nn < HG_PATH_KEEP)
        near[nn++] = t;
    far[nf++ % 6] = t;
    uint32_t len = 0, total = steps + 1;
    seq[len++] = parent[u] & ~SUPER_LABEL_BIT;
    if (total <= HG_PATH_KEEP) {
        for (uint32_t i = nn; i-- > 0;)
            seq[len++] = near[i];
        return len;
    }
    /* far ring holds the last 6 visited (closest to the root), oldest first at nf % 6 */
    for (uint32_t i = 0; i < 6; i++)
        seq[len++] = far[(nf + 5 - i) % 6];
    seq[len++] = HG_PATH_ELLIPSIS;
    for (uint32_t i = 10; i-- > 0;)
        seq[len++] = near[i];
    return len;
}

static int same_path(const uint32_t *a, const uint32_t *b, uint32_t len)
{
    return a[0] == len && !memcmp(a + 1, b, (size_t)len * sizeof *b);
}

int hg_paths(struct heap_graph *g, const int *abort_flag)
{
    struct prof_scratch *mem = &g->mem;
    uint32_t n = g->n;
    uint32_t *parent = prof_scratch_alloc(mem, (size_t)n * sizeof *parent);
    uint32_t *queue = prof_scratch_alloc(mem, (size_t)n * sizeof *queue);
    uint8_t *tries = prof_scratch_calloc(mem, g->ntypes ? g->ntypes : 1, 1);
    if (!parent || !queue || !tries) {
        prof_scratch_free(mem, parent);
        prof_scratch_free(mem, queue);
        prof_scratch_free(mem, tries);
        return fail(g, "out of memory while finding root paths");
    }
    for (uint32_t i = 0; i < n; i++)
        parent[i] = HG_NONE;
    uint32_t head = 0, tail = 0, next_unseen = 0;
    for (uint32_t r = 0; r < g->nroots; r++) {
        uint32_t v = g->roots[r].node;
        if (parent[v] == HG_NONE) {
            parent[v] = SUPER_LABEL_BIT | g->roots[r].label;
            queue[tail++] = v;
        }
    }
    uint32_t seq[HG_PATH_KEEP + 4], near[HG_PATH_KEEP], far[6];
    for (;;) {
        if (head == tail) {
            while (next_unseen < n && parent[next_unseen] != HG_NONE)
                next_unseen++;
            if (next_unseen == n)
                break;
            parent[next_unseen] = SUPER_LABEL_BIT | HG_CAT_UNREACHABLE;
            queue[tail++] = next_unseen;
        }
        uint32_t v = queue[head++];
        if ((head & 0xfffff) == 0 && aborted(abort_flag))
            break;
        struct hg_type *ty = &g->types[g->nodes[v].type];
        if (ty->npaths < HG_MAX_PATHS && tries[g->nodes[v].type] < PATH_TRIES) {
            tries[g->nodes[v].type]++;
            uint32_t len = build_path(g, parent, v, seq, near, far);
            int dup = !len;
            for (uint32_t k = 0; k < ty->npaths && !dup; k++)
                dup = same_path(g->paths + ty->path_at[k], seq, len);
            if (!dup) {
                ty->path_at[ty->npaths] = (uint32_t)g->npaths_used;
                if (paths_push(g, seq, len) == 0)
                    ty->npaths++;
            }
        }
        const struct hg_node *nd = &g->nodes[v];
        for (uint32_t j = 0; j < nd->nedges; j++) {
            uint32_t c = g->edges[nd->first + j];
            if (c != HG_NONE && parent[c] == HG_NONE) {
                parent[c] = v;
                queue[tail++] = c;
            }
        }
    }
    prof_scratch_free(mem, parent);
    prof_scratch_free(mem, queue);
    prof_scratch_free(mem, tries);
    return aborted(abort_flag) ? fail(g, "cancelled") : 0;
}

void hg_free(struct heap_graph *g)
{
    prof_scratch_release(&g->mem); /* every array the graph made, back to the system */
    hc_release(&g->cap);
    memset(g, 0, sizeof *g);
}
