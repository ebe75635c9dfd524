/*
 * test_heap_graph.c - the heap-snapshot pipeline without a runtime:
 *   - hs_capture's event parsers on hand-built payloads, truncated payloads and random bytes;
 *   - hs_graph's dominators and retained sizes against a brute-force definition on random
 *     graphs (d dominates v iff v is unreachable from the super-root once d is removed), the
 *     per-type retained rule, unreachable objects, shortest root paths;
 *   - hs_gcdump's compressed ints and file framing.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hs_gcdump.h"
#include "hs_capture.h"
#include "hs_graph.h"

#include "unit_check.h"

/* ---- payload builders (little-endian, packed, as the runtime writes them) ---- */

struct buf {
    uint8_t b[1 << 16];
    uint32_t n;
};

static void w16(struct buf *p, uint16_t v)
{
    memcpy(p->b + p->n, &v, 2);
    p->n += 2;
}

static void w32(struct buf *p, uint32_t v)
{
    memcpy(p->b + p->n, &v, 4);
    p->n += 4;
}

static void w64(struct buf *p, uint64_t v)
{
    memcpy(p->b + p->n, &v, 8);
    p->n += 8;
}

static void header(struct buf *p, uint32_t index, uint32_t count)
{
    p->n = 0;
    w32(p, index);
    w32(p, count);
    w16(p, 7);
}

/* A synthetic heap: object i at address base + 64 * perm[i], `type[i]`, `size[i]`, edges. */
struct toy {
    uint32_t n;
    uint64_t addr[400];
    uint64_t type[400];
    uint32_t size[400];
    uint32_t nkids[400];
    uint32_t kids[400][8];
    uint32_t roots[16], nroots;
};

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Feeds the toy heap through the real parsers, nodes and edges in batches of `batch`. */
static void feed(struct heap_capture *c, const struct toy *t, uint32_t batch)
{
    static struct buf p;
    uint32_t idx = 0;
    for (uint32_t i = 0; i < t->n; i += batch) {
        uint32_t k = t->n - i < batch ? t->n - i : batch;
        header(&p, idx++, k);
        for (uint32_t j = i; j < i + k; j++) {
            w64(&p, t->addr[j]);
            w64(&p, t->size[j]);
            w64(&p, t->type[j]);
            w64(&p, t->nkids[j]);
        }
        hc_on_event(c, 18, 0, p.b, p.n);
    }
    /* edges in one stream, in node order, batches of 5 */
    uint32_t eidx = 0, pending = 0;
    header(&p, 0, 0);
    for (uint32_t i = 0; i < t->n; i++) {
        for (uint32_t e = 0; e < t->nkids[i]; e++) {
            w64(&p, t->addr[t->kids[i][e]]);
            w32(&p, 0);
            if (++pending == 5) {
                uint32_t cnt = pending;
                memcpy(p.b + 4, &cnt, 4);
                memcpy(p.b, &eidx, 4);
                hc_on_event(c, 19, 0, p.b, p.n);
                eidx++;
                pending = 0;
                header(&p, 0, 0);
            }
        }
    }
    if (pending) {
        memcpy(p.b + 4, &pending, 4);
        memcpy(p.b, &eidx, 4);
        hc_on_event(c, 19, 0, p.b, p.n);
    }
    header(&p, 0, t->nroots);
    for (uint32_t r = 0; r < t->nroots; r++) {
        w64(&p, t->addr[t->roots[r]]);
        p.b[p.n++] = 2; /* Handle */
        w32(&p, 0);
        w64(&p, 0x1000 + r);
    }
    hc_on_event(c, 16, 0, p.b, p.n);
}

static int build(struct heap_graph *g, const struct toy *t, uint32_t batch)
{
    struct heap_capture c;
    if (hc_reserve(&c, 4096, 8192, 1024, 1 << 16))
        return -1;
    feed(&c, t, batch);
    unsigned prog = 0;
    if (hg_index(g, &c, NULL, &prog, 0, 100))
        return -1;
    if (hg_dominators(g, NULL, &prog, 100, 200))
        return -1;
    return hg_paths(g, NULL);
}

/* ---- brute force ---- */

/* reachable from the super-root (children: roots, then unreached nodes in address order, as the
 * implementation defines it) with `removed` taken out */
static void reach(const struct toy *t, int removed, uint8_t *seen)
{
    uint32_t stack[400], sp = 0;
    memset(seen, 0, t->n);
    for (uint32_t r = 0; r < t->nroots; r++) {
        uint32_t v = t->roots[r];
        if ((int)v != removed && !seen[v]) {
            seen[v] = 1;
            stack[sp++] = v;
        }
    }
    while (sp) {
        uint32_t v = stack[--sp];
        for (uint32_t e = 0; e < t->nkids[v]; e++) {
            uint32_t c = t->kids[v][e];
            if ((int)c != removed && !seen[c]) {
                seen[c] = 1;
                stack[sp++] = c;
            }
        }
    }
}

/* Index of toy object i in the graph (objects are sorted by address). */
static uint32_t gi(const struct heap_graph *g, const struct toy *t, uint32_t i)
{
    return hg_find(g, t->addr[i]);
}

static void random_toy(struct toy *t, uint32_t n, uint32_t maxdeg, uint32_t nroots)
{
    memset(t, 0, sizeof *t);
    t->n = n;
    /* distinct, shuffled addresses */
    for (uint32_t i = 0; i < n; i++)
        t->addr[i] = 0x7f0000000000ull + 64ull * i;
    for (uint32_t i = n; i > 1; i--) {
        uint32_t j = (uint32_t)(rnd() % i);
        uint64_t x = t->addr[i - 1];
        t->addr[i - 1] = t->addr[j];
        t->addr[j] = x;
    }
    for (uint32_t i = 0; i < n; i++) {
        t->type[i] = 0x1000 + rnd() % 4;
        t->size[i] = 24 + (uint32_t)(rnd() % 5) * 8;
        t->nkids[i] = (uint32_t)(rnd() % (maxdeg + 1));
        for (uint32_t e = 0; e < t->nkids[i]; e++)
            t->kids[i][e] = (uint32_t)(rnd() % n);
    }
    t->nroots = nroots;
    for (uint32_t r = 0; r < nroots; r++)
        t->roots[r] = (uint32_t)(rnd() % n);
}

static void test_random_dominators(void)
{
    int bad = 0;
    for (int round = 0; round < 150; round++) {
        struct toy *t = calloc(1, sizeof *t);
        uint32_t n = 5 + (uint32_t)(rnd() % 60);
        random_toy(t, n, round % 3 ? 3 : 1, 1 + (uint32_t)(rnd() % 3));
        struct heap_graph g;
        if (build(&g, t, 1 + round % 7)) {
            CHECK(0, "build failed: %s", g.error);
            free(t);
            continue;
        }
        uint8_t base[400], without[400];
        reach(t, -1, base);
        /* For objects reachable from the roots the dominator set is well defined: retained(d) =
         * sum of sizes of v (reachable) whose every root path passes d. Objects reached from no
         * root hang under the super-root; they are excluded from the comparison but must be
         * counted as unreachable. */
        uint32_t unreachable = 0;
        for (uint32_t v = 0; v < n; v++)
            unreachable += !base[v];
        CHECK(g.unreachable == unreachable, "unreachable %u != %u", g.unreachable, unreachable);
        for (uint32_t d = 0; d < n; d++) {
            if (!base[d])
                continue;
            reach(t, (int)d, without);
            uint64_t want = 0;
            for (uint32_t v = 0; v < n; v++)
                if (base[v] && !without[v])
                    want += t->size[v];
            uint64_t got = g.retained[gi(&g, t, d)];
            if (got != want && bad++ < 5)
                CHECK(0, "round %d: retained of %u = %llu, brute force %llu", round, d,
                      (unsigned long long)got, (unsigned long long)want);
        }
        CHECK(g.n == n, "nodes %u", g.n);
        hg_free(&g);
        free(t);
    }
    CHECK(bad == 0, "%d retained sizes differ from brute force", bad);
}

static void test_shapes(void)
{
    struct toy *t = calloc(1, sizeof *t);
    /* diamond: 0 -> 1, 2; 1 -> 3; 2 -> 3; 3 -> 4; plus 5 unreachable, 6 a cycle 6->5->6 */
    t->n = 7;
    for (uint32_t i = 0; i < 7; i++) {
        t->addr[i] = 0x10000 + 0x100ull * (7 - i); /* descending: exercises the sort */
        t->type[i] = 0xA0;
        t->size[i] = 8u * (i + 1);
    }
    t->type[3] = t->type[4] = 0xB0;
    t->nkids[0] = 2, t->kids[0][0] = 1, t->kids[0][1] = 2;
    t->nkids[1] = 1, t->kids[1][0] = 3;
    t->nkids[2] = 1, t->kids[2][0] = 3;
    t->nkids[3] = 1, t->kids[3][0] = 4;
    t->nkids[5] = 1, t->kids[5][0] = 6;
    t->nkids[6] = 1, t->kids[6][0] = 5;
    t->nroots = 1, t->roots[0] = 0;
    struct heap_graph g;
    CHECK(build(&g, t, 2) == 0, "build: %s", g.error);
    CHECK(g.retained[gi(&g, t, 0)] == 8 + 16 + 24 + 32 + 40, "diamond root retained %llu",
          (unsigned long long)g.retained[gi(&g, t, 0)]);
    CHECK(g.retained[gi(&g, t, 1)] == 16, "left arm retains itself only");
    CHECK(g.retained[gi(&g, t, 3)] == 72, "join node retains its tail");
    CHECK(g.unreachable == 2 && g.unreachable_bytes == 104, "unreachable %u/%llu", g.unreachable,
          (unsigned long long)g.unreachable_bytes);
    /* per type: 0xB0 = {3, 4}, 4 dominated by 3 -> type retained = retained(3) = 72 */
    for (uint32_t ty = 0; ty < g.ntypes; ty++) {
        if (g.types[ty].id == 0xB0) {
            CHECK(g.types[ty].count == 2 && g.types[ty].bytes == 72, "type B totals");
            CHECK(g.types[ty].retained == 72, "type B retained %llu",
                  (unsigned long long)g.types[ty].retained);
            CHECK(g.types[ty].npaths >= 1, "type B has a path");
            const uint32_t *p = g.paths + g.types[ty].path_at[0];
            /* shortest: [strong handles], A(0), A(1 or 2), B(3) */
            CHECK(p[0] == 4 && p[1] == HG_CAT_STRONG, "path len %u label %u", p[0], p[1]);
        }
        if (g.types[ty].id == 0xA0)
            CHECK(g.types[ty].retained == 8 + 16 + 24 + 32 + 40 + 48 + 56,
                  "type A retained %llu (includes its unreachable instances)",
                  (unsigned long long)g.types[ty].retained);
    }
    hg_free(&g);

    /* a long chain of one type: type retained counts it once */
    memset(t, 0, sizeof *t);
    t->n = 300;
    for (uint32_t i = 0; i < 300; i++) {
        t->addr[i] = 0x20000 + 32ull * i;
        t->type[i] = 0xC0;
        t->size[i] = 32;
        if (i + 1 < 300)
            t->nkids[i] = 1, t->kids[i][0] = i + 1;
    }
    t->nroots = 1, t->roots[0] = 0;
    CHECK(build(&g, t, 64) == 0, "chain build");
    CHECK(g.ntypes == 1 && g.types[0].retained == 300 * 32, "chain type retained %llu",
          (unsigned long long)g.types[0].retained);
    CHECK(g.retained[0] == 300 * 32, "chain head retains all");
    /* the deepest element's path is long: it must have been shortened with an ellipsis; paths
     * are collected breadth first, so the first is the head's */
    CHECK(g.types[0].npaths == HG_MAX_PATHS, "chain paths %u", g.types[0].npaths);
    hg_free(&g);
    free(t);
}

static void test_errors(void)
{
    struct heap_capture c;
    struct heap_graph g;
    struct buf p;
    /* an object claims 2 references, only 1 arrives */
    CHECK(hc_reserve(&c, 16, 16, 16, 4096) == 0, "reserve");
    header(&p, 0, 1);
    w64(&p, 0x1000);
    w64(&p, 32);
    w64(&p, 0xAB);
    w64(&p, 2);
    hc_on_event(&c, 18, 0, p.b, p.n);
    header(&p, 0, 1);
    w64(&p, 0x1000);
    w32(&p, 0);
    hc_on_event(&c, 19, 0, p.b, p.n);
    CHECK(hg_index(&g, &c, NULL, NULL, 0, 0) == -1 && strstr(g.error, "references"),
          "inconsistent edges refused: %s", g.error);
    hg_free(&g);

    /* overflow of the reservation is counted and refused */
    CHECK(hc_reserve(&c, 1, 16, 16, 4096) == 0, "reserve small");
    uint64_t cap = c.nodes_cap;
    header(&p, 0, (uint32_t)cap + 3);
    for (uint64_t i = 0; i < cap + 3; i++) {
        w64(&p, 0x1000 + 64 * i);
        w64(&p, 24);
        w64(&p, 0xAB);
        w64(&p, 0);
    }
    hc_on_event(&c, 18, 0, p.b, p.n);
    CHECK(c.dropped_nodes == 3, "dropped %llu", (unsigned long long)c.dropped_nodes);
    CHECK(hg_index(&g, &c, NULL, NULL, 0, 0) == -1 && strstr(g.error, "outgrew"), "overflow: %s",
          g.error);
    hg_free(&g);

    /* a stack root that points inside an object (interior pointer) roots that object */
    CHECK(hc_reserve(&c, 16, 16, 16, 4096) == 0, "reserve");
    header(&p, 0, 2);
    for (int i = 0; i < 2; i++) {
        w64(&p, 0x1000 + 0x100u * (unsigned)i);
        w64(&p, 64);
        w64(&p, 0xAB);
        w64(&p, 0);
    }
    hc_on_event(&c, 18, 0, p.b, p.n);
    header(&p, 0, 2);
    w64(&p, 0x1100 + 24); /* inside the second object */
    p.b[p.n++] = 0;       /* Stack */
    w32(&p, HC_FLAG_INTERIOR);
    w64(&p, 1);
    w64(&p, 0x1000 + 64 + 8); /* past the first object's end: nothing */
    p.b[p.n++] = 0;
    w32(&p, HC_FLAG_INTERIOR);
    w64(&p, 2);
    hc_on_event(&c, 16, 0, p.b, p.n);
    CHECK(hg_index(&g, &c, NULL, NULL, 0, 0) == 0, "index: %s", g.error);
    CHECK(g.nroots == 1 && g.roots[0].node == 1 && g.roots[0].label == HG_CAT_LOCAL &&
              g.unresolved_roots == 1, "interior root: %u roots, %llu unresolved", g.nroots,
          (unsigned long long)g.unresolved_roots);
    hg_free(&g);

    /* empty capture */
    CHECK(hc_reserve(&c, 16, 16, 16, 4096) == 0, "reserve");
    CHECK(hg_index(&g, &c, NULL, NULL, 0, 0) == -1, "no objects refused");
    hg_free(&g);
}

static void test_parsers(void)
{
    struct heap_capture c;
    struct buf p;
    CHECK(hc_reserve(&c, 1024, 1024, 1024, 1 << 16) == 0, "reserve");
    /* count claims more elements than the payload holds: only whole ones are taken */
    header(&p, 0, 5);
    for (int i = 0; i < 2; i++) {
        w64(&p, 0x1000 + 64u * (unsigned)i);
        w64(&p, 24);
        w64(&p, 0xAB);
        w64(&p, 0);
    }
    p.n += 7; /* a partial third */
    hc_on_event(&c, 18, 0, p.b, p.n);
    CHECK(c.n_nodes == 2 && c.malformed == 1, "nodes %llu malformed %llu",
          (unsigned long long)c.n_nodes, (unsigned long long)c.malformed);
    /* sizes are heap footprints: a byte[100] (124 bytes of object) takes 128 */
    header(&p, 1, 1);
    w64(&p, 0x2000);
    w64(&p, 124);
    w64(&p, 0xAC);
    w64(&p, 0);
    hc_on_event(&c, 18, 0, p.b, p.n);
    CHECK(c.n_nodes == 3 && c.nodes[2].size == 128, "size rounded to 8: %u", c.nodes[2].size);
    /* batch index gap */
    header(&p, 5, 0);
    hc_on_event(&c, 18, 0, p.b, p.n);
    CHECK(c.out_of_order == 1, "index gap counted");
    /* weak and null roots are not roots; pinning handles are */
    header(&p, 0, 3);
    w64(&p, 0x1000);
    p.b[p.n++] = 2;
    w32(&p, HC_FLAG_WEAK);
    w64(&p, 1);
    w64(&p, 0);
    p.b[p.n++] = 2;
    w32(&p, 0);
    w64(&p, 2);
    w64(&p, 0x1040);
    p.b[p.n++] = 2;
    w32(&p, HC_FLAG_PINNING);
    w64(&p, 3);
    hc_on_event(&c, 16, 0, p.b, p.n);
    CHECK(c.n_roots == 1 && c.weak_roots == 1 && c.roots[0].flags == HC_FLAG_PINNING,
          "roots %llu weak %llu", (unsigned long long)c.n_roots, (unsigned long long)c.weak_roots);
    /* static var: name read up to its terminator; a missing terminator is malformed */
    p.n = 0;
    w32(&p, 2);
    w64(&p, 1);
    w16(&p, 7);
    w64(&p, 0x55);
    w64(&p, 0x1000);
    w64(&p, 0xAB);
    w32(&p, 0);
    const char *name = "Tree";
    for (const char *q = name; *q; q++)
        w16(&p, (uint16_t)*q);
    w16(&p, 0);
    w64(&p, 0x56);
    w64(&p, 0x1040);
    w64(&p, 0xAB);
    w32(&p, 1);
    w16(&p, 'x'); /* no terminator */
    uint64_t mal = c.malformed;
    hc_on_event(&c, 38, 0, p.b, p.n);
    CHECK(c.n_statics == 1 && c.malformed == mal + 1, "statics %llu", (unsigned long long)c.n_statics);
    struct hc_static h;
    memcpy(&h, c.statics, sizeof h);
    CHECK(h.obj == 0x1000 && h.name_bytes == 8 && !memcmp(c.statics + sizeof h, "T\0r\0e\0e\0", 8),
          "static record");
    /* GC start/end */
    uint32_t cnt = 0, depth = 0, reason = 0, type = 0;
    uint8_t gs[26] = {9, 0, 0, 0, 2, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0};
    CHECK(hc_parse_gc_start(gs, sizeof gs, &cnt, &depth, &reason, &type) && cnt == 9 &&
              depth == 2 && reason == 1 && type == 0, "GCStart fields");
    CHECK(!hc_parse_gc_start(gs, 15, &cnt, &depth, &reason, &type), "short GCStart refused");
    CHECK(!hc_parse_gc_end(NULL, 10, &cnt, &depth), "NULL GCEnd refused");
    hc_release(&c);
}

/* Random and truncated payloads for every heap event id: must never crash or write out of
 * bounds (run under ASan with -DPROF_SANITIZER=address,undefined). */
static void test_fuzz(void)
{
    static const uint32_t ids[] = {1, 2, 15, 16, 17, 18, 19, 20, 21, 22, 23, 36, 37, 38, 99};
    struct heap_capture c;
    CHECK(hc_reserve(&c, 256, 256, 64, 8192) == 0, "reserve");
    static uint8_t data[600];
    for (int iter = 0; iter < 300000; iter++) {
        uint32_t len = (uint32_t)(rnd() % sizeof data);
        for (uint32_t i = 0; i < len; i++)
            data[i] = (uint8_t)rnd();
        /* plausible headers half the time, so the element loops run */
        if (len >= 10 && (iter & 1)) {
            uint32_t count = (uint32_t)(rnd() % 40);
            memcpy(data + 4, &count, 4);
            if (rnd() & 1)
                memcpy(data, &count, 4);
        }
        uint32_t id = ids[rnd() % (sizeof ids / sizeof ids[0])];
        uint8_t *copy = malloc(len ? len : 1); /* exact size: ASan sees any overrun */
        memcpy(copy, data, len);
        hc_on_event(&c, id, 0, copy, len);
        uint32_t a, b, d, e;
        hc_parse_gc_start(copy, len, &a, &b, &d, &e);
        hc_parse_gc_end(copy, len, &a, &b);
        free(copy);
        if ((iter % 5000) == 4999) {
            /* run the analysis on whatever accumulated: it must refuse or succeed, not crash */
            struct heap_graph g;
            if (hg_index(&g, &c, NULL, NULL, 0, 0) == 0 && hg_dominators(&g, NULL, NULL, 0, 0) == 0)
                hg_paths(&g, NULL);
            hg_free(&g);
            CHECK(hc_reserve(&c, 256, 256, 64, 8192) == 0, "re-reserve");
        }
    }
    hc_on_event(&c, 18, 0, NULL, 100);
    CHECK(c.n_nodes <= c.nodes_cap && c.n_edges <= c.edges_cap && c.n_roots <= c.roots_cap &&
              c.statics_used <= c.statics_cap, "within reservations");
    hc_release(&c);
    CHECK(1, "fuzz survived");
}

/* ---- hs_gcdump ---- */

static int32_t decode(const uint8_t *p, int *n)
{
    uint8_t b = p[0];
    int32_t v = (int32_t)((uint32_t)(b & 0x7f) << 25) >> 25;
    int k = 1;
    while (b & 0x80) {
        b = p[k++];
        v = (int32_t)(((uint32_t)v << 7) + (b & 0x7fu));
    }
    *n = k;
    return v;
}

static void test_cint(void)
{
    static const int32_t vals[] = {0, 1, -1, 63, -64, 64, -65, 8191, -8192, 8192, 1 << 20,
                                   -(1 << 20), (1 << 27) - 1, -(1 << 27), 1 << 27, INT32_MAX,
                                   INT32_MIN, 123456789, -987654321};
    static const int lens[] = {1, 1, 1, 1, 1, 2, 2, 2, 2, 3, 4, 3, 4, 4, 5, 5, 5, 4, 5};
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        uint8_t out[5];
        int n = gcdump_cint(vals[i], out), m = 0;
        CHECK(n == lens[i], "cint(%d) length %d, want %d", vals[i], n, lens[i]);
        CHECK(decode(out, &m) == vals[i] && m == n, "cint(%d) round trip", vals[i]);
    }
    uint8_t out[5];
    CHECK(gcdump_cint(64, out) == 2 && out[0] == 0x80 && out[1] == 0x40, "64 -> 80 40");
    CHECK(gcdump_cint(-1, out) == 1 && out[0] == 0x7f, "-1 -> 7f");
}

struct tiny {
    uint32_t kids0[2];
    uint32_t kids1[1];
};

static const char *tiny_type(void *ctx, uint32_t t)
{
    (void)ctx;
    return t == 1 ? "[.NET Roots]" : t == 2 ? "Ns.A" : "Ns.\xc3\xa9\xf0\x9f\x98\x80"; /* é, U+1F600 */
}

static void tiny_node(void *ctx, uint32_t i, struct gd_node *o)
{
    struct tiny *t = ctx;
    memset(o, 0, sizeof *o);
    if (i == 0) {
        o->type = 1;
        o->kids = t->kids0;
        o->nkids = 2;
    } else {
        o->type = i == 1 ? 2 : 3;
        o->size = i == 1 ? 24 : 100000;
        o->addr = 0x1000 * i;
        o->kids = t->kids1;
        o->nkids = i == 1 ? 1 : 0;
    }
}

static void test_write(void)
{
    struct tiny t = {{1, 2}, {GD_SKIP}};
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    struct gd_source src = {.ctx = &t, .ntypes = 3, .type_name = tiny_type, .nnodes = 3,
                            .root = 0, .node = tiny_node};
    struct gd_meta meta = {.process_name = "p", .pid = 42, .unix_time = 1.7e9, .tool = "t"};
    char err[128] = "";
    CHECK(gcdump_write(f, &src, &meta, err, sizeof err) == 0, "write: %s", err);
    fclose(f);
    CHECK(len > 100 && !memcmp(mem, "\x14\0\0\0!FastSerialization.1", 24), "signature");
    int32_t last, trailer_at, table;
    memcpy(&last, mem + len - 4, 4);
    memcpy(&table, mem + last, 4);
    memcpy(&trailer_at, mem + table, 4);
    CHECK(last == (int32_t)len - 8 && trailer_at == 0 && mem[table - 1] == 6 && mem[table - 2] == 6,
          "trailer: last label %d len %zu", last, len);
    CHECK(memmem(mem, len, "GCHeapDump", 10) && memmem(mem, len, "Graphs.MemoryGraph", 18),
          "type names present");
    /* "Ns.é😀": 6 UTF-16 units, é as 2 bytes, the emoji as two 3-byte surrogates */
    CHECK(memmem(mem, len, "\x06\0\0\0Ns.\xc3\xa9\xed\xa0\xbd\xed\xb8\x80", 15) != NULL,
          "string encoding (UTF-16 count, surrogates)");
    free(mem);
    /* I/O errors are reported */
    f = fopen("/dev/full", "w");
    if (f) {
        setvbuf(f, NULL, _IONBF, 0);
        CHECK(gcdump_write(f, &src, &meta, err, sizeof err) == -1 && err[0], "ENOSPC reported");
        fclose(f);
    }
}

int main(void)
{
    test_cint();
    test_write();
    test_parsers();
    test_errors();
    test_shapes();
    test_random_dominators();
    test_fuzz();
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
