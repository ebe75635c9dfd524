/*
 * fuzz_heapdump - the heap-snapshot path end to end without a runtime: the GCBulk* payload
 * parsers (hs_capture), the heap-graph builder (index, dominators, root paths: hs_graph), and
 * the .gcdump writer (prof_heapsnap_write_graph + gcdump_write: hs_gcdump), whose output an independent
 * reader (gcdump_check.h) decodes and compares with the graph node by node.
 *
 * Input: the first byte picks the mode. Raw: records of [event u8][length u16][payload] fed to
 * hc_on_event as they are. Structured: a small heap (objects, types, sizes, references, roots,
 * static variables, batch sizes) encoded into well-formed payloads, so the builder and the writer
 * see deep graphs and not only refusals.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "gcdump_check.h"
#include "hs_capture.h"
#include "hs_graph.h"
#include "prof_heapsnap.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint32_t event_ids[] = {15, 16, 17, 18, 19, 20, 21, 22, 23, 36, 37, 38, 1, 2};

struct pb {
    uint8_t b[1 << 14];
    uint32_t n;
};

static void put(struct pb *p, const void *v, uint32_t n)
{
    if (p->n + n <= sizeof p->b) {
        memcpy(p->b + p->n, v, n);
        p->n += n;
    }
}

static void put16(struct pb *p, uint16_t v) { put(p, &v, 2); }
static void put32(struct pb *p, uint32_t v) { put(p, &v, 4); }
static void put64(struct pb *p, uint64_t v) { put(p, &v, 8); }

static void emit(struct heap_capture *c, uint32_t id, const struct pb *p)
{
    uint8_t *copy = malloc(p->n ? p->n : 1); /* exact size for ASan */
    if (!copy)
        abort();
    memcpy(copy, p->b, p->n);
    hc_on_event(c, id, 0, copy, p->n);
    free(copy);
}

#define MAXN 96

static void structured(struct heap_capture *c, struct fin *in)
{
    uint32_t n = fin_u8(in) % MAXN + 1, batch = fin_u8(in) % 16 + 1;
    uint64_t addr[MAXN];
    for (uint32_t i = 0; i < n; i++)
        addr[i] = 0x100000 + 32 * (uint64_t)fin_u8(in); /* duplicates are possible on purpose */
    static struct pb p;
    /* nodes, each with up to 5 references (index >= n: an object that is not in the dump) */
    uint8_t nk[MAXN], kid[MAXN][5];
    uint32_t idx = 0;
    for (uint32_t i = 0; i < n; i += batch) {
        uint32_t k = n - i < batch ? n - i : batch;
        p.n = 0;
        put32(&p, idx++);
        put32(&p, k);
        put16(&p, 7);
        for (uint32_t j = i; j < i + k; j++) {
            uint8_t t = fin_u8(in);
            nk[j] = fin_u8(in) % 6;
            for (uint32_t e = 0; e < nk[j]; e++)
                kid[j][e] = fin_u8(in);
            put64(&p, addr[j]);
            put64(&p, (uint64_t)(t & 0x80 ? fin_u32(in) : 24u + 8u * (t & 7)));
            put64(&p, 0x7000 + (t & 15));
            put64(&p, nk[j]);
        }
        emit(c, 18, &p);
    }
    uint32_t eidx = 0, pending = 0;
    p.n = 10;
    for (uint32_t i = 0; i < n; i++) {
        for (uint32_t e = 0; e < nk[i]; e++) {
            put64(&p, kid[i][e] < n ? addr[kid[i][e]] : 0x900000 + kid[i][e]);
            put32(&p, 0);
            if (++pending == batch) {
                memcpy(p.b, &eidx, 4);
                memcpy(p.b + 4, &pending, 4);
                emit(c, 19, &p);
                eidx++;
                pending = 0;
                p.n = 10;
            }
        }
    }
    if (pending) {
        memcpy(p.b, &eidx, 4);
        memcpy(p.b + 4, &pending, 4);
        emit(c, 19, &p);
    }
    /* roots: kind and flags from the input (weak ones are skipped by the parser) */
    uint32_t nroots = fin_u8(in) % 12;
    p.n = 0;
    put32(&p, 0);
    put32(&p, nroots);
    put16(&p, 7);
    for (uint32_t r = 0; r < nroots; r++) {
        uint8_t which = fin_u8(in), kind = fin_u8(in) % 10, flags = fin_u8(in) & 0xf;
        put64(&p, which < 250 ? addr[which % n] : 0x900000 + which);
        put(&p, &kind, 1);
        put32(&p, flags);
        put64(&p, 0x1000 + r);
    }
    emit(c, 16, &p);
    /* dependent handles */
    uint32_t ncwt = fin_u8(in) % 3;
    p.n = 0;
    put32(&p, 0);
    put32(&p, ncwt);
    put16(&p, 7);
    for (uint32_t r = 0; r < ncwt; r++) {
        put64(&p, addr[fin_u8(in) % n]);
        put64(&p, addr[fin_u8(in) % n]);
        put64(&p, 0);
    }
    emit(c, 17, &p);
    /* static variables with UTF-16 names taken from the input */
    uint32_t nstat = fin_u8(in) % 4;
    p.n = 0;
    put32(&p, nstat);
    put64(&p, 1);
    put16(&p, 7);
    for (uint32_t s = 0; s < nstat; s++) {
        put64(&p, 0);
        put64(&p, addr[fin_u8(in) % n]);
        put64(&p, 0x7000 + s);
        put32(&p, fin_u8(in) & 1);
        uint32_t chars = fin_u8(in) % 24;
        for (uint32_t k = 0; k < chars; k++) {
            uint16_t u = fin_u16(in);
            put16(&p, u ? u : 'x');
        }
        put16(&p, 0);
    }
    emit(c, 38, &p);
}

static void raw(struct heap_capture *c, struct fin *in)
{
    for (int k = 0; fin_more(in) && k < 64; k++) {
        uint32_t id = event_ids[fin_u8(in) % (sizeof event_ids / sizeof event_ids[0])];
        size_t len;
        uint8_t *p = fin_payload(in, fin_u16(in), &len);
        hc_on_event(c, id, 0, p, (uint32_t)len);
        uint32_t a, b, d, e;
        hc_parse_gc_start(p, (uint32_t)len, &a, &b, &d, &e);
        hc_parse_gc_end(p, (uint32_t)len, &a, &b);
        free(p);
    }
}

static void check_graph(const struct heap_graph *g)
{
    uint64_t count = 0;
    for (uint32_t t = 0; t < g->ntypes; t++)
        count += g->types[t].count;
    FUZZ_CHECK(count == g->n, "type counts %llu != objects %u", (unsigned long long)count, g->n);
    for (uint32_t i = 0; i < g->n; i++) {
        const struct hg_node *nd = &g->nodes[i];
        FUZZ_CHECK(nd->type < g->ntypes, "node %u type %u of %u", i, nd->type, g->ntypes);
        FUZZ_CHECK((uint64_t)nd->first + nd->nedges <= g->ne, "node %u edges out of range", i);
        for (uint32_t e = 0; e < nd->nedges; e++) {
            uint32_t to = g->edges[nd->first + e];
            FUZZ_CHECK(to == HG_NONE || to < g->n, "edge to %u of %u", to, g->n);
        }
        if (g->retained && !g->approximate)
            FUZZ_CHECK(g->retained[i] >= nd->size, "retained %llu < size %u of node %u",
                       (unsigned long long)g->retained[i], nd->size, i);
    }
    for (uint32_t r = 0; r < g->nroots; r++)
        FUZZ_CHECK(g->roots[r].node < g->n, "root %u node %u of %u", r, g->roots[r].node, g->n);
    for (uint32_t s = 0; s < g->nstatics; s++)
        FUZZ_CHECK(g->statics[s].node < g->n && g->statics[s].field, "static %u", s);
}

static void write_and_read(const struct heap_graph *g)
{
    const char **tnames = malloc(((size_t)g->ntypes + 1) * sizeof *tnames);
    char (*store)[24] = malloc(((size_t)g->ntypes + 1) * sizeof *store);
    if (!tnames || !store)
        abort();
    const char **tmods = malloc(((size_t)g->ntypes + 1) * sizeof *tmods);
    if (!tmods)
        abort();
    for (uint32_t t = 0; t < g->ntypes; t++) {
        snprintf(store[t], sizeof store[t], "Ns.T%u", t);
        tnames[t] = store[t];
        tmods[t] = t % 3 == 2 ? NULL : t % 3 ? "/usr/share/dotnet/Lib.dll" : "/app/Ns.dll";
    }
    char *mem = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&mem, &len);
    if (!f)
        abort();
    struct gd_meta meta = {.process_name = "fuzz", .pid = 1, .unix_time = 1.7e9,
                           .machine = "m", .log = "l", .tool = "clrscope"};
    char err[256] = "";
    int rc = prof_heapsnap_write_graph(f, g, tnames, tmods, &meta, err, sizeof err);
    fclose(f);
    FUZZ_CHECK(rc == 0, "write failed: %s", err);
    struct gdr_file rf;
    const char *why = NULL;
    FUZZ_CHECK(gdr_read((const uint8_t *)mem, len, &rf, &why) == 0, "reader: %s (%zu bytes)", why,
               len);
    /* layout: root, one node per root category present, one per static variable, the objects */
    uint32_t ncat = 0;
    for (unsigned c = 0; c < HG_CAT_COUNT; c++)
        if (c != HG_CAT_UNREACHABLE && (g->root_cats & (1u << c)))
            ncat++;
    uint32_t base = 1 + ncat + g->nstatics;
    FUZZ_CHECK(rf.nnodes == base + g->n, "file nodes %u, graph %u + %u", rf.nnodes, g->n, base);
    FUZZ_CHECK(rf.root == 0 && rf.nodes[0].nkids == ncat, "root node");
    for (uint32_t i = 0; i < g->n; i++) {
        const struct hg_node *nd = &g->nodes[i];
        const struct gdr_node *fn = &rf.nodes[base + i];
        FUZZ_CHECK(fn->addr == nd->addr, "node %u address", i);
        FUZZ_CHECK((uint32_t)fn->size == (nd->size > 0x7fffffffu ? 0x7fffffffu : nd->size),
                   "node %u size %d vs %u", i, fn->size, nd->size);
        FUZZ_CHECK(!strcmp(rf.type_names[fn->type], tnames[nd->type]), "node %u type name %s/%s",
                   i, rf.type_names[fn->type], tnames[nd->type]);
        const char *fm = rf.type_modules[fn->type], *gm = tmods[nd->type];
        FUZZ_CHECK(fm ? gm && !strcmp(fm, gm) : !gm, "node %u module %s/%s", i, fm ? fm : "-",
                   gm ? gm : "-");
        uint32_t k = 0;
        for (uint32_t e = 0; e < nd->nedges; e++) {
            uint32_t to = g->edges[nd->first + e];
            if (to == HG_NONE)
                continue;
            FUZZ_CHECK(k < fn->nkids && rf.kids[fn->kid_at + k] == base + to,
                       "node %u child %u", i, k);
            k++;
        }
        FUZZ_CHECK(k == fn->nkids, "node %u has %u children in the file, %u in the graph", i,
                   fn->nkids, k);
    }
    gdr_free(&rf);
    free(mem);
    free(tnames);
    free(tmods);
    free(store);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fin in = {data, size};
    struct heap_capture c;
    if (hc_reserve(&c, 512, 1024, 128, 1 << 14))
        return 0;
    if (fin_u8(&in) & 1)
        structured(&c, &in);
    else
        raw(&c, &in);
    FUZZ_CHECK(c.n_nodes <= c.nodes_cap && c.n_edges <= c.edges_cap && c.n_roots <= c.roots_cap &&
                   c.statics_used <= c.statics_cap,
               "capture past its reservations");
    struct heap_graph *g = calloc(1, sizeof *g);
    if (!g)
        abort();
    unsigned progress = 0;
    int rc = hg_index(g, &c, NULL, &progress, 0, 100); /* takes over the capture's pages */
    if (!rc)
        rc = hg_dominators(g, NULL, &progress, 100, 200);
    if (!rc)
        rc = hg_paths(g, NULL);
    if (!rc) {
        check_graph(g);
        write_and_read(g);
    }
    hg_free(g);
    free(g);
    hc_release(&c);
    return 0;
}
