/* prof_hseg.c - see prof_hseg.h. */
#define ZLIB_CONST
#include "prof_hseg.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

static const char MAGIC[8] = {'c', 'l', 'r', 's', 'h', 'i', 's', 't'};
#define HSEG_VERSION 2
#define HSEG_OLDEST_VERSION 1 /* without the counters */
#define MAX_STRING (64u << 10)

/* ---- hashing ---- */

static uint64_t mix(uint64_t h)
{
    h ^= h >> 33;
    h *= 0xff51afd7ed558ccdULL;
    h ^= h >> 33;
    h *= 0xc4ceb9fe1a85ec53ULL;
    return h ^ (h >> 33);
}

static uint64_t hash_str(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ULL;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ULL;
    return mix(h);
}

/* A table of `*nslot` slots (a power of two) holding id + 1, grown to keep it at most half
 * full; rehash(id) gives an id's hash. */
static int grow_slots(struct prof_scratch *m, uint32_t **slots, uint32_t *nslot, uint32_t n,
                      uint64_t (*rehash)(const void *, uint32_t), const void *ctx)
{
    if (*slots && (uint64_t)(n + 1) * 2 <= *nslot)
        return 0;
    uint32_t ns = *nslot ? *nslot * 2 : 64;
    while ((uint64_t)(n + 1) * 2 > ns)
        ns *= 2;
    uint32_t *s = prof_scratch_calloc(m, ns, sizeof *s);
    if (!s)
        return -1;
    for (uint32_t id = 0; id < n; id++) {
        uint32_t i = (uint32_t)rehash(ctx, id) & (ns - 1);
        while (s[i])
            i = (i + 1) & (ns - 1);
        s[i] = id + 1;
    }
    prof_scratch_free(m, *slots);
    *slots = s;
    *nslot = ns;
    return 0;
}

static int grow_array(struct prof_scratch *m, void **p, uint32_t *cap, uint32_t need, size_t size)
{
    if (need <= *cap)
        return 0;
    uint32_t nc = *cap ? *cap : 64;
    while (nc < need) {
        if (nc > UINT32_MAX / 2)
            return -1;
        nc *= 2;
    }
    void *q = prof_scratch_realloc(m, *p, (size_t)nc * size);
    if (!q)
        return -1;
    *p = q;
    *cap = nc;
    return 0;
}

/* ---- the accumulator ---- */

void prof_hacc_init(struct prof_hacc *a, uint32_t max_nodes)
{
    memset(a, 0, sizeof *a);
    a->max_nodes = max_nodes < 1 ? 1 : max_nodes;
    a->t_from = 1e300;
    a->t_to = -1e300;
}

void prof_hacc_free(struct prof_hacc *a)
{
    prof_scratch_release(&a->mem);
    prof_hacc_init(a, a->max_nodes);
}

static uint64_t str_rehash(const void *ctx, uint32_t id)
{
    const struct prof_hacc *a = ctx;
    return hash_str(a->str[id], strlen(a->str[id]));
}

/* The accumulator's copy of s[0..n) (no NUL inside), NULL out of memory. */
static const char *intern(struct prof_hacc *a, const char *s, size_t n)
{
    if (grow_slots(&a->mem, &a->sslot, &a->nsslot, a->nstr, str_rehash, a))
        return NULL;
    uint64_t h = hash_str(s, n);
    uint32_t i = (uint32_t)h & (a->nsslot - 1);
    for (; a->sslot[i]; i = (i + 1) & (a->nsslot - 1)) {
        const char *c = a->str[a->sslot[i] - 1];
        if (!strncmp(c, s, n) && c[n] == 0)
            return c;
    }
    if (grow_array(&a->mem, (void **)&a->str, &a->capstr, a->nstr + 1, sizeof *a->str))
        return NULL;
    char *c = prof_scratch_alloc(&a->mem, n + 1);
    if (!c)
        return NULL;
    memcpy(c, s, n);
    c[n] = 0;
    a->str[a->nstr] = c;
    a->sslot[i] = ++a->nstr;
    return c;
}

static uint64_t node_key(uint32_t parent, const char *name)
{
    return mix(((uint64_t)parent << 1) ^ (uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15ULL);
}

static uint64_t node_rehash(const void *ctx, uint32_t id)
{
    const struct hacc_kind *k = ctx;
    return node_key(k->parent[id], k->name[id]);
}

static uint64_t row_key(uint32_t node, uint32_t tid, const char *label)
{
    return mix(((uint64_t)node << 32 | tid) ^ (uint64_t)(uintptr_t)label * 0x9E3779B97F4A7C15ULL);
}

static uint64_t row_rehash(const void *ctx, uint32_t id)
{
    const struct hacc_kind *k = ctx;
    return row_key(k->rows[id].node, k->rows[id].tid, k->rows[id].label);
}

/* Room for `need` nodes in k's parent and name arrays. */
static int grow_nodes(struct prof_hacc *a, struct hacc_kind *k, uint32_t need)
{
    if (need <= k->capnodes)
        return 0;
    uint32_t cap = k->capnodes;
    if (grow_array(&a->mem, (void **)&k->parent, &cap, need, sizeof *k->parent))
        return -1;
    void *nm = prof_scratch_realloc(&a->mem, k->name, (size_t)cap * sizeof *k->name);
    if (!nm)
        return -1; /* parent grew, capnodes did not: the next call grows name again */
    k->name = nm;
    k->capnodes = cap;
    return 0;
}

static int kind_root(struct prof_hacc *a, struct hacc_kind *k)
{
    if (k->nnodes)
        return 0;
    const char *all = intern(a, "all", 3);
    if (!all || grow_nodes(a, k, 1))
        return -1;
    k->parent[0] = 0;
    k->name[0] = all;
    k->nnodes = 1;
    return 0;
}

/* The node (parent, name), made when new; past the cap, the parent itself (counted). */
static int64_t node_get(struct prof_hacc *a, struct hacc_kind *k, uint32_t parent,
                        const char *name)
{
    if (grow_slots(&a->mem, &k->nslot, &k->nnslot, k->nnodes, node_rehash, k))
        return -1;
    uint64_t h = node_key(parent, name);
    uint32_t i = (uint32_t)h & (k->nnslot - 1);
    for (; k->nslot[i]; i = (i + 1) & (k->nnslot - 1)) {
        uint32_t id = k->nslot[i] - 1;
        if (k->parent[id] == parent && k->name[id] == name)
            return id;
    }
    if (k->nnodes >= a->max_nodes) {
        a->cut_paths++;
        return parent;
    }
    if (grow_nodes(a, k, k->nnodes + 1))
        return -1;
    k->parent[k->nnodes] = parent;
    k->name[k->nnodes] = name;
    k->nslot[i] = ++k->nnodes;
    return k->nnodes - 1;
}

static int row_add(struct prof_hacc *a, struct hacc_kind *k, uint32_t node, uint32_t tid,
                   const char *label, const int64_t v[PROF_NVALUES])
{
    if (grow_slots(&a->mem, &k->rslot, &k->nrslot, k->nrows, row_rehash, k))
        return -1;
    uint64_t h = row_key(node, tid, label);
    uint32_t i = (uint32_t)h & (k->nrslot - 1);
    struct prof_row *r = NULL;
    for (; k->rslot[i]; i = (i + 1) & (k->nrslot - 1)) {
        struct prof_row *c = &k->rows[k->rslot[i] - 1];
        if (c->node == node && c->tid == tid && c->label == label) {
            r = c;
            break;
        }
    }
    if (!r) {
        if (grow_array(&a->mem, (void **)&k->rows, &k->caprows, k->nrows + 1, sizeof *k->rows))
            return -1;
        r = &k->rows[k->nrows];
        memset(r, 0, sizeof *r);
        r->node = node;
        r->tid = tid;
        r->label = label;
        k->rslot[i] = ++k->nrows;
    }
    for (int j = 0; j < PROF_NVALUES; j++) {
        int64_t x = v[j] < 0 ? 0 : v[j];
        r->v[j] = r->v[j] > INT64_MAX - x ? INT64_MAX : r->v[j] + x;
    }
    return 0;
}

static void span(struct prof_hacc *a, double from, double to)
{
    if (from < a->t_from)
        a->t_from = from;
    if (to > a->t_to)
        a->t_to = to;
}

int prof_hacc_add_view(struct prof_hacc *a, const struct prof_view *v, const char *filter)
{
    if (v->kind < 0 || v->kind >= PK_COUNT)
        return 0;
    struct hacc_kind *k = &a->k[v->kind];
    if (kind_root(a, k))
        goto oom;
    span(a, v->t_from, v->t_to);
    if (!v->nnodes)
        return 0;
    uint32_t *map = prof_scratch_calloc(&a->mem, v->nnodes, sizeof *map);
    if (!map)
        goto oom;
    for (size_t i = 1; i < v->nnodes; i++) {
        uint32_t p = v->parent[i] < i ? map[v->parent[i]] : 0;
        const char *nm = v->name[i] ? v->name[i] : "";
        const char *s = intern(a, nm, strlen(nm));
        int64_t id = s ? node_get(a, k, p, s) : -1;
        if (id < 0) {
            prof_scratch_free(&a->mem, map);
            goto oom;
        }
        map[i] = (uint32_t)id;
    }
    for (size_t i = 0; i < v->nrows; i++) {
        const struct prof_row *r = &v->rows[i];
        const char *lb = r->label ? r->label : "";
        if (filter && strcmp(lb, filter))
            continue;
        const char *s = intern(a, lb, strlen(lb));
        if (!s || row_add(a, k, r->node < v->nnodes ? map[r->node] : 0, r->tid, s, r->v)) {
            prof_scratch_free(&a->mem, map);
            goto oom;
        }
    }
    prof_scratch_free(&a->mem, map);
    return 0;
oom:
    a->oom = 1;
    return -1;
}

int prof_hacc_add_gc(struct prof_hacc *a, const struct prof_gc_second *s, size_t ns,
                     const struct prof_gc_collection *c, size_t nc)
{
    if (ns > UINT32_MAX - a->ngsec || nc > UINT32_MAX - a->ngcoll ||
        grow_array(&a->mem, (void **)&a->gsec, &a->capgsec, a->ngsec + (uint32_t)ns,
                   sizeof *a->gsec) ||
        grow_array(&a->mem, (void **)&a->gcoll, &a->capgcoll, a->ngcoll + (uint32_t)nc,
                   sizeof *a->gcoll)) {
        a->oom = 1;
        return -1;
    }
    if (ns)
        memcpy(a->gsec + a->ngsec, s, ns * sizeof *s);
    if (nc)
        memcpy(a->gcoll + a->ngcoll, c, nc * sizeof *c);
    a->ngsec += (uint32_t)ns;
    a->ngcoll += (uint32_t)nc;
    return 0;
}

int prof_hacc_add_counters(struct prof_hacc *a, const struct prof_counter_point *p, size_t n)
{
    if (n > UINT32_MAX - a->ncpt ||
        grow_array(&a->mem, (void **)&a->cpt, &a->capcpt, a->ncpt + (uint32_t)n, sizeof *a->cpt)) {
        a->oom = 1;
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        struct prof_counter_point q = p[i];
        const char *name = p[i].name ? p[i].name : "", *units = p[i].units ? p[i].units : "";
        if (!(q.name = intern(a, name, strnlen(name, MAX_STRING))) ||
            !(q.units = intern(a, units, strnlen(units, MAX_STRING)))) {
            a->oom = 1;
            return -1;
        }
        a->cpt[a->ncpt++] = q;
    }
    return 0;
}

int prof_hacc_take_view(struct prof_hacc *a, int kind, struct prof_view *out)
{
    memset(out, 0, sizeof *out);
    if (kind < 0 || kind >= PK_COUNT || a->oom)
        return -1;
    struct hacc_kind *k = &a->k[kind];
    if (kind_root(a, k))
        return -1;
    out->kind = kind;
    out->t_from = a->t_from <= a->t_to ? a->t_from : 0;
    out->t_to = a->t_from <= a->t_to ? a->t_to : 0;
    out->nnodes = k->nnodes;
    out->parent = k->parent;
    out->name = k->name;
    out->nrows = k->nrows;
    out->rows = k->rows;
    out->mem = a->mem; /* the view owns the memory now */
    memset(&a->mem, 0, sizeof a->mem);
    prof_hacc_init(a, a->max_nodes);
    return 0;
}

/* ---- encoding ---- */

struct obuf {
    struct prof_scratch *m;
    unsigned char *p;
    size_t n, cap;
    int oom;
};

static void put(struct obuf *b, const void *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n > b->cap) {
        size_t nc = b->cap ? b->cap : 4096;
        while (nc < b->n + n)
            nc *= 2;
        unsigned char *q = prof_scratch_realloc(b->m, b->p, nc);
        if (!q) {
            b->oom = 1;
            return;
        }
        b->p = q;
        b->cap = nc;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

static void put_u(struct obuf *b, uint64_t x)
{
    unsigned char t[10];
    size_t n = 0;
    do {
        t[n] = x & 0x7f;
        x >>= 7;
        if (x)
            t[n] |= 0x80;
        n++;
    } while (x);
    put(b, t, n);
}

static void put_le32(unsigned char *p, uint32_t x)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(x >> (8 * i));
}

static uint32_t get_le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Seconds as whole milliseconds / microseconds (negative and NaN as 0, huge values capped). */
static uint64_t scaled(double v, double k)
{
    double x = v * k + 0.5;
    return x > 0 ? (x < 9e18 ? (uint64_t)x : (uint64_t)9e18) : 0;
}

static uint64_t zigzag(int64_t x)
{
    return ((uint64_t)x << 1) ^ (uint64_t)(x >> 63);
}

static int64_t unzigzag(uint64_t x)
{
    return (int64_t)(x >> 1) ^ -(int64_t)(x & 1);
}

static uint64_t ms(double s)
{
    return scaled(s, 1e3);
}

static uint64_t us(double s)
{
    return scaled(s, 1e6);
}

/* The index of an interned string in a->str (a string interned by `a`: found by its hash). */
static uint32_t str_index(const struct prof_hacc *a, const char *s)
{
    uint64_t h = hash_str(s, strlen(s));
    for (uint32_t i = (uint32_t)h & (a->nsslot - 1); a->sslot[i]; i = (i + 1) & (a->nsslot - 1))
        if (a->str[a->sslot[i] - 1] == s)
            return a->sslot[i] - 1;
    return 0; /* not reached for the accumulator's own strings */
}

int prof_hseg_encode(const struct prof_hacc *a, int64_t t_from, int64_t t_to, uint32_t pid,
                     const struct prof_mark *marks, size_t nmarks, struct prof_scratch *mem,
                     unsigned char **out, size_t *len)
{
    *out = NULL;
    *len = 0;
    if (a->oom)
        return -1;
    struct obuf b = {.m = mem};
    put_u(&b, (uint64_t)(t_from < 0 ? 0 : t_from));
    put_u(&b, (uint64_t)(t_to < 0 ? 0 : t_to));
    put_u(&b, pid);
    /* string 0 is "" whether or not the accumulator has it */
    put_u(&b, (uint64_t)a->nstr + 1);
    put_u(&b, 0);
    for (uint32_t i = 0; i < a->nstr; i++) {
        size_t n = strlen(a->str[i]);
        put_u(&b, n);
        put(&b, a->str[i], n);
    }
    uint32_t nk = 0;
    for (int kind = 0; kind < PK_COUNT; kind++)
        nk += a->k[kind].nnodes > 0;
    put_u(&b, nk);
    for (int kind = 0; kind < PK_COUNT; kind++) {
        const struct hacc_kind *k = &a->k[kind];
        if (!k->nnodes)
            continue;
        put_u(&b, (uint64_t)kind);
        put_u(&b, k->nnodes);
        for (uint32_t i = 1; i < k->nnodes; i++) {
            put_u(&b, k->parent[i]);
            put_u(&b, (uint64_t)str_index(a, k->name[i]) + 1);
        }
        put_u(&b, k->nrows);
        for (uint32_t i = 0; i < k->nrows; i++) {
            const struct prof_row *r = &k->rows[i];
            put_u(&b, r->node);
            put_u(&b, r->tid);
            put_u(&b, r->label[0] ? (uint64_t)str_index(a, r->label) + 1 : 0);
            for (int j = 0; j < PROF_NVALUES; j++)
                put_u(&b, (uint64_t)(r->v[j] < 0 ? 0 : r->v[j]));
        }
    }
    put_u(&b, nmarks);
    for (size_t i = 0; i < nmarks; i++) {
        put_u(&b, (uint64_t)(marks[i].t > 0 ? marks[i].t * 1000.0 + 0.5 : 0));
        size_t n = strnlen(marks[i].label, sizeof marks[i].label);
        put_u(&b, n);
        put(&b, marks[i].label, n);
    }
    put_u(&b, a->ngsec);
    for (uint32_t i = 0; i < a->ngsec; i++) {
        const struct prof_gc_second *g = &a->gsec[i];
        put_u(&b, ms(g->t));
        put_u(&b, us(g->dt));
        put_u(&b, us(g->process_cpu_s));
        put_u(&b, us(g->gc_cpu_s));
        put_u(&b, us(g->gc_threads_cpu_s));
        put_u(&b, us(g->gc_user_cpu_s));
        put_u(&b, us(g->pause_s));
        for (int h = 0; h < GC_NHEAPS; h++)
            put_u(&b, g->heap[h]);
        for (int k = 0; k < 3; k++)
            put_u(&b, g->collections[k]);
    }
    put_u(&b, a->ngcoll);
    for (uint32_t i = 0; i < a->ngcoll; i++) {
        const struct prof_gc_collection *c = &a->gcoll[i];
        put_u(&b, c->number);
        put_u(&b, (uint64_t)(c->generation < 0 ? 0 : c->generation));
        put_u(&b, c->reason);
        put_u(&b, c->type);
        put_u(&b, (uint64_t)(c->complete != 0));
        put_u(&b, ms(c->t));
        put_u(&b, us(c->duration_ms / 1e3));
        put_u(&b, us(c->pause_ms / 1e3));
        put_u(&b, c->heap_before);
        put_u(&b, c->heap_after);
        put_u(&b, c->promoted);
    }
    put_u(&b, a->gcoll_omitted);
    /* a counter's points one after another: a second apart, often the same value, so the
     * deltas and integers repeat and deflate to little */
    put_u(&b, a->ncpt);
    int64_t prev_ms = (t_from < 0 ? 0 : t_from) * 1000;
    for (uint32_t i = 0; i < a->ncpt; i++) {
        const struct prof_counter_point *c = &a->cpt[i];
        double v = isfinite(c->value) ? c->value : 0;
        int integral = v == trunc(v) && fabs(v) < 9007199254740992.0; /* 2^53 */
        int64_t t = (int64_t)ms(c->t_unix);
        put_u(&b, (uint64_t)str_index(a, c->name) + 1);
        put_u(&b, (uint64_t)str_index(a, c->units) + 1);
        put_u(&b, (uint64_t)(c->incrementing != 0) | (uint64_t)integral << 1);
        put_u(&b, zigzag(t - prev_ms));
        put_u(&b, ms(c->interval_s));
        if (integral) {
            put_u(&b, zigzag((int64_t)v));
        } else {
            uint64_t bits;
            memcpy(&bits, &v, sizeof bits);
            put_u(&b, bits);
        }
        prev_ms = t;
    }
    if (b.oom || b.n > PROF_HSEG_MAX_PAYLOAD) {
        prof_scratch_free(mem, b.p);
        return -1;
    }
    uLong bound = compressBound((uLong)b.n);
    unsigned char *z = prof_scratch_alloc(mem, PROF_HSEG_HEADER + bound);
    if (!z) {
        prof_scratch_free(mem, b.p);
        return -1;
    }
    uLongf zn = bound;
    int zrc = compress2(z + PROF_HSEG_HEADER, &zn, b.p, (uLong)b.n, 6);
    prof_scratch_free(mem, b.p);
    if (zrc != Z_OK) {
        prof_scratch_free(mem, z);
        return -1;
    }
    memcpy(z, MAGIC, 8);
    z[8] = HSEG_VERSION;
    z[9] = z[10] = z[11] = 0;
    put_le32(z + 12, (uint32_t)b.n);
    put_le32(z + 16, (uint32_t)zn);
    put_le32(z + 20, (uint32_t)crc32(0L, z + PROF_HSEG_HEADER, (uInt)zn));
    *out = z;
    *len = PROF_HSEG_HEADER + zn;
    return 0;
}

/* ---- decoding ---- */

struct ibuf {
    const unsigned char *p;
    size_t n, at;
    int bad;
};

static uint64_t get_u(struct ibuf *b)
{
    uint64_t x = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (b->at >= b->n) {
            b->bad = 1;
            return 0;
        }
        unsigned char c = b->p[b->at++];
        x |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return x;
    }
    b->bad = 1;
    return 0;
}

#define FAIL(...)                                                                              \
    do {                                                                                       \
        snprintf(why, whycap, __VA_ARGS__);                                                    \
        goto fail;                                                                             \
    } while (0)

static int decode_pass(const unsigned char *p, size_t n, int kind, const char *filter,
                       struct prof_hacc *a, struct prof_mark *marks, size_t cap, size_t *nmarks,
                       struct prof_hseg_info *info, char *why, size_t whycap)
{
    struct prof_scratch tmp = {0};
    struct ibuf b = {.p = p, .n = n};
    struct prof_hseg_info in = {0};
    size_t nm = 0;
    if (nmarks)
        *nmarks = 0;
    in.t_from = (int64_t)(get_u(&b) & INT64_MAX);
    in.t_to = (int64_t)(get_u(&b) & INT64_MAX);
    in.pid = (uint32_t)get_u(&b);
    if (b.bad || in.t_to < in.t_from)
        FAIL("bad span");
    uint64_t nstr = get_u(&b);
    if (b.bad || nstr < 1 || nstr > n) /* each string takes at least a byte */
        FAIL("bad string count");
    /* the strings as offsets into the payload (interned into `a` only when a kind is taken) */
    uint32_t *soff = prof_scratch_calloc(&tmp, nstr, sizeof *soff);
    uint32_t *slen = prof_scratch_calloc(&tmp, nstr, sizeof *slen);
    const char **sp = prof_scratch_calloc(&tmp, nstr, sizeof *sp);
    if (!soff || !slen || !sp)
        FAIL("out of memory");
    for (uint64_t i = 0; i < nstr; i++) {
        uint64_t len = get_u(&b);
        if (b.bad || len > MAX_STRING || len > b.n - b.at)
            FAIL("bad string %" PRIu64, i);
        if (memchr(b.p + b.at, 0, len))
            FAIL("string %" PRIu64 " holds a NUL", i);
        soff[i] = (uint32_t)b.at;
        slen[i] = (uint32_t)len;
        b.at += len;
    }
    uint64_t nk = get_u(&b);
    if (b.bad || nk > PK_COUNT)
        FAIL("bad kind count");
    for (uint64_t ki = 0; ki < nk; ki++) {
        uint64_t kd = get_u(&b);
        uint64_t nn = get_u(&b);
        if (b.bad || kd >= PK_COUNT || nn < 1 || nn > b.n)
            FAIL("bad kind header");
        int take = a && (kind == PROF_HSEG_ALL || (int)kd == kind);
        struct hacc_kind *k = take ? &a->k[kd] : NULL;
        uint32_t *map = NULL;
        if (take) {
            if (kind_root(a, k))
                FAIL("out of memory");
            map = prof_scratch_calloc(&tmp, nn, sizeof *map);
            if (!map)
                FAIL("out of memory");
        }
        for (uint64_t i = 1; i < nn; i++) {
            uint64_t par = get_u(&b), name = get_u(&b);
            if (b.bad || par >= i || name >= nstr)
                FAIL("bad node %" PRIu64 " of kind %" PRIu64, i, kd);
            if (take) {
                if (!sp[name] && !(sp[name] = intern(a, (const char *)p + soff[name],
                                                     slen[name])))
                    FAIL("out of memory");
                int64_t id = node_get(a, k, map[par], sp[name]);
                if (id < 0)
                    FAIL("out of memory");
                map[i] = (uint32_t)id;
            }
        }
        uint64_t nr = get_u(&b);
        if (b.bad || nr > b.n)
            FAIL("bad row count of kind %" PRIu64, kd);
        for (uint64_t i = 0; i < nr; i++) {
            uint64_t node = get_u(&b), tid = get_u(&b), label = get_u(&b);
            int64_t v[PROF_NVALUES];
            for (int j = 0; j < PROF_NVALUES; j++) {
                uint64_t x = get_u(&b);
                v[j] = x > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)x;
            }
            if (b.bad || node >= nn || label >= nstr || tid > UINT32_MAX)
                FAIL("bad row %" PRIu64 " of kind %" PRIu64, i, kd);
            if (!take)
                continue;
            if (filter && (strlen(filter) != slen[label] ||
                           memcmp(filter, p + soff[label], slen[label])))
                continue;
            if (!sp[label] &&
                !(sp[label] = intern(a, (const char *)p + soff[label], slen[label])))
                FAIL("out of memory");
            if (row_add(a, k, map[node], (uint32_t)tid, sp[label], v))
                FAIL("out of memory");
        }
        if (map)
            prof_scratch_free(&tmp, map);
        in.nkinds++;
    }
    uint64_t nmk = get_u(&b);
    if (b.bad || nmk > b.n)
        FAIL("bad mark count");
    for (uint64_t i = 0; i < nmk; i++) {
        uint64_t t = get_u(&b), len = get_u(&b);
        if (b.bad || len >= PROF_MARK_LABEL_MAX || len > b.n - b.at)
            FAIL("bad mark %" PRIu64, i);
        if (marks && nm < cap) {
            memset(&marks[nm], 0, sizeof marks[nm]);
            marks[nm].t = (double)t / 1000.0;
            memcpy(marks[nm].label, b.p + b.at, len);
            marks[nm].label[len] = 0;
            nm++;
        }
        b.at += len;
        in.nmarks++;
    }
    int take_gc = a && (kind == PROF_HSEG_ALL || kind == PROF_HSEG_GC);
    uint64_t ngs = get_u(&b);
    if (b.bad || ngs > b.n)
        FAIL("bad GC second count");
    for (uint64_t i = 0; i < ngs; i++) {
        struct prof_gc_second g = {0};
        g.t = (double)get_u(&b) / 1e3;
        g.dt = (double)get_u(&b) / 1e6;
        g.process_cpu_s = (double)get_u(&b) / 1e6;
        g.gc_cpu_s = (double)get_u(&b) / 1e6;
        g.gc_threads_cpu_s = (double)get_u(&b) / 1e6;
        g.gc_user_cpu_s = (double)get_u(&b) / 1e6;
        g.pause_s = (double)get_u(&b) / 1e6;
        for (int h = 0; h < GC_NHEAPS; h++)
            g.heap[h] = get_u(&b);
        for (int k = 0; k < 3; k++) {
            uint64_t x = get_u(&b);
            g.collections[k] = x > UINT32_MAX ? UINT32_MAX : (uint32_t)x;
        }
        if (b.bad)
            FAIL("bad GC second %" PRIu64, i);
        if (take_gc && prof_hacc_add_gc(a, &g, 1, NULL, 0))
            FAIL("out of memory");
    }
    uint64_t ngc = get_u(&b);
    if (b.bad || ngc > b.n)
        FAIL("bad collection count");
    for (uint64_t i = 0; i < ngc; i++) {
        struct prof_gc_collection c = {0};
        c.number = get_u(&b);
        uint64_t gen = get_u(&b), reason = get_u(&b), type = get_u(&b), done = get_u(&b);
        c.t = (double)get_u(&b) / 1e3;
        c.duration_ms = (double)get_u(&b) / 1e3;
        c.pause_ms = (double)get_u(&b) / 1e3;
        c.heap_before = get_u(&b);
        c.heap_after = get_u(&b);
        c.promoted = get_u(&b);
        if (b.bad || gen > 2 || reason > UINT32_MAX || type > 2 || done > 1)
            FAIL("bad collection %" PRIu64, i);
        c.generation = (int)gen;
        c.reason = (unsigned)reason;
        c.type = (unsigned)type;
        c.complete = (int)done;
        if (take_gc && prof_hacc_add_gc(a, NULL, 0, &c, 1))
            FAIL("out of memory");
    }
    /* what the list left out, and the counters (a version 1 payload ends before them) */
    uint64_t omitted = 0, ncp = 0;
    if (b.at < b.n) {
        omitted = get_u(&b);
        ncp = get_u(&b);
    }
    if (b.bad || ncp > b.n)
        FAIL("bad counter count");
    if (take_gc)
        a->gcoll_omitted += omitted;
    int take_c = a && (kind == PROF_HSEG_ALL || kind == PROF_HSEG_COUNTERS);
    int64_t prev_ms = in.t_from > INT64_MAX / 1000 ? 0 : in.t_from * 1000;
    for (uint64_t i = 0; i < ncp; i++) {
        uint64_t name = get_u(&b), units = get_u(&b), flags = get_u(&b), dt = get_u(&b),
                 iv = get_u(&b), x = get_u(&b);
        int64_t d = unzigzag(dt);
        double v;
        if (flags & 2) {
            v = (double)unzigzag(x);
        } else {
            memcpy(&v, &x, sizeof v);
        }
        if (b.bad || name >= nstr || units >= nstr || flags > 3 || !isfinite(v) ||
            (d > 0 && prev_ms > INT64_MAX - d) || prev_ms + d < 0)
            FAIL("bad counter value %" PRIu64, i);
        prev_ms += d;
        int inc = (int)(flags & 1);
        uint64_t t = (uint64_t)prev_ms;
        if (!take_c)
            continue;
        if ((!sp[name] && !(sp[name] = intern(a, (const char *)p + soff[name], slen[name]))) ||
            (!sp[units] && !(sp[units] = intern(a, (const char *)p + soff[units], slen[units]))))
            FAIL("out of memory");
        struct prof_counter_point q = {.name = sp[name], .units = sp[units],
                                       .incrementing = (int)inc, .t_unix = (double)t / 1e3,
                                       .value = v, .interval_s = (double)iv / 1e3};
        if (grow_array(&a->mem, (void **)&a->cpt, &a->capcpt, a->ncpt + 1, sizeof *a->cpt))
            FAIL("out of memory");
        a->cpt[a->ncpt++] = q;
    }
    if (b.at != b.n)
        FAIL("%zu bytes after the end", b.n - b.at);
    if (a && (kind == PROF_HSEG_ALL || (kind >= 0 && kind < PK_COUNT)))
        span(a, (double)in.t_from, (double)in.t_to);
    if (nmarks)
        *nmarks = nm;
    if (info)
        *info = in;
    prof_scratch_release(&tmp);
    return 0;
fail:
    if (a && a->oom == 0 && strstr(why, "out of memory"))
        a->oom = 1;
    prof_scratch_release(&tmp);
    return -1;
}

int prof_hseg_decode_payload(const unsigned char *p, size_t n, int kind, const char *filter,
                             struct prof_hacc *a, struct prof_mark *marks, size_t cap,
                             size_t *nmarks, struct prof_hseg_info *info, char *why,
                             size_t whycap)
{
    if (nmarks)
        *nmarks = 0;
    /* checked whole before anything is merged: a refused payload adds nothing */
    if (decode_pass(p, n, -1, NULL, NULL, NULL, 0, NULL, info, why, whycap))
        return -1;
    if (!a && !marks)
        return 0;
    return decode_pass(p, n, kind, filter, a, marks, cap, nmarks, info, why, whycap);
}

int prof_hseg_decode(const unsigned char *buf, size_t len, int kind, const char *filter,
                     struct prof_hacc *a, struct prof_mark *marks, size_t cap, size_t *nmarks,
                     struct prof_hseg_info *info, char *why, size_t whycap)
{
    struct prof_scratch tmp = {0};
    if (nmarks)
        *nmarks = 0;
    if (len < PROF_HSEG_HEADER || memcmp(buf, MAGIC, 8))
        FAIL("not a clrscope history segment");
    if (buf[8] < HSEG_OLDEST_VERSION || buf[8] > HSEG_VERSION)
        FAIL("segment version %u (this build reads %u to %u)", buf[8], HSEG_OLDEST_VERSION,
             HSEG_VERSION);
    uint32_t raw = get_le32(buf + 12), zn = get_le32(buf + 16), crc = get_le32(buf + 20);
    if ((uint64_t)zn != len - PROF_HSEG_HEADER)
        FAIL("torn: %zu of %u compressed bytes", len - PROF_HSEG_HEADER, zn);
    if (raw > PROF_HSEG_MAX_PAYLOAD)
        FAIL("payload of %u bytes", raw);
    if ((uint32_t)crc32(0L, buf + PROF_HSEG_HEADER, (uInt)zn) != crc)
        FAIL("checksum mismatch");
    unsigned char *p = prof_scratch_alloc(&tmp, raw ? raw : 1);
    if (!p)
        FAIL("out of memory");
    uLongf got = raw;
    if (uncompress(p, &got, buf + PROF_HSEG_HEADER, zn) != Z_OK || got != raw)
        FAIL("does not inflate to %u bytes", raw);
    int rc = prof_hseg_decode_payload(p, raw, kind, filter, a, marks, cap, nmarks, info, why,
                                      whycap);
    prof_scratch_release(&tmp);
    return rc;
fail:
    prof_scratch_release(&tmp);
    return -1;
}

/* ---- names and directories ---- */

void prof_hseg_name(char *buf, size_t cap, int64_t t_from, int64_t t_to)
{
    snprintf(buf, cap, "%" PRId64 "-%" PRId64 PROF_HSEG_SUFFIX, t_from, t_to);
}

int prof_hseg_name_span(const char *name, int64_t *t_from, int64_t *t_to)
{
    const char *p = name;
    int64_t v[2] = {0, 0};
    for (int i = 0; i < 2; i++) {
        if (*p < '0' || *p > '9')
            return -1;
        int digits = 0;
        while (*p >= '0' && *p <= '9') {
            if (++digits > 12)
                return -1;
            v[i] = v[i] * 10 + (*p++ - '0');
        }
        if (i == 0 && *p++ != '-')
            return -1;
    }
    if (strcmp(p, PROF_HSEG_SUFFIX) || v[1] < v[0])
        return -1;
    *t_from = v[0];
    *t_to = v[1];
    return 0;
}

/* Reads a whole regular file of at most `max` bytes into scratch memory. */
static unsigned char *read_file(int dfd, const char *name, size_t max, struct prof_scratch *m,
                                size_t *len, char *why, size_t whycap)
{
    int fd = openat(dfd, name, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (fd < 0) {
        snprintf(why, whycap, "%s", strerror(errno));
        return NULL;
    }
    struct stat st;
    unsigned char *p = NULL;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (uint64_t)st.st_size > max) {
        snprintf(why, whycap, "not a regular file of at most %zu bytes", max);
        goto out;
    }
    p = prof_scratch_alloc(m, st.st_size ? (size_t)st.st_size : 1);
    if (!p) {
        snprintf(why, whycap, "out of memory");
        goto out;
    }
    size_t got = 0;
    while (got < (size_t)st.st_size) {
        ssize_t r = read(fd, p + got, (size_t)st.st_size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    *len = got;
out:
    close(fd);
    return p;
}

unsigned char *prof_hseg_read_file(const char *path, struct prof_scratch *m, size_t *len,
                                   char *why, size_t whycap)
{
    return read_file(AT_FDCWD, path, PROF_HSEG_HEADER + compressBound(PROF_HSEG_MAX_PAYLOAD), m,
                     len, why, whycap);
}

int prof_hseg_read_dir(const char *dir, int kind, int64_t from_s, int64_t to_s, int64_t before,
                       const char *filter, struct prof_hacc *a, struct prof_mark *marks,
                       size_t cap, size_t *nmarks, struct prof_hseg_read_stats *st)
{
    if (nmarks)
        *nmarks = 0;
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0)
        return -1;
    DIR *d = fdopendir(dfd);
    if (!d) {
        close(dfd);
        return -1;
    }
    size_t nm = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        int64_t f, t;
        if (prof_hseg_name_span(e->d_name, &f, &t) || t <= from_s || f > to_s || t > before)
            continue;
        struct prof_scratch m = {0};
        size_t len = 0, got = 0;
        char why[120] = "";
        unsigned char *buf = read_file(dirfd(d), e->d_name,
                                       PROF_HSEG_HEADER + compressBound(PROF_HSEG_MAX_PAYLOAD),
                                       &m, &len, why, sizeof why);
        struct prof_hseg_info info;
        if (!buf || prof_hseg_decode(buf, len, kind, filter, a, marks ? marks + nm : NULL,
                                     marks ? cap - nm : 0, &got, &info, why, sizeof why)) {
            st->skipped++;
            snprintf(st->last_skip, sizeof st->last_skip, "%.40s: %s", e->d_name, why);
        } else {
            st->read++;
            nm += got;
        }
        prof_scratch_release(&m);
        if (a && a->oom)
            break;
    }
    closedir(d);
    if (nmarks)
        *nmarks = nm;
    return 0;
}
