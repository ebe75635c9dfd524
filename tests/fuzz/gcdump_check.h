/*
 * gcdump_check.h - an independent reader of the .gcdump files hs_gcdump.c makes (the subset
 * of FastSerialization it writes): it walks the whole stream, decodes every string, type and node
 * record, and checks the structure a reader (PerfView, dotnet-gcdump) relies on: tags and type
 * names in place, offsets inside the blob and in order, records ending where the next begins,
 * type indexes and child indexes in range, the total size equal to the sum of the node sizes, and
 * the trailer pointing at the forward-reference table. Used by the heap-graph fuzz target.
 */
#ifndef GCDUMP_CHECK_H
#define GCDUMP_CHECK_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct gdr {
    const uint8_t *p, *end, *start;
    int err;
};

struct gdr_node {
    uint32_t type;
    int32_t size;
    uint64_t addr;
    uint32_t nkids;
    uint32_t kid_at; /* into kids[] */
};

struct gdr_file {
    int64_t total;
    int32_t root;
    uint32_t ntypes; /* including type 0, UNDEFINED */
    char **type_names;
    int32_t *type_sizes;
    char **type_modules; /* NULL entries: the file gave no module */
    uint32_t nnodes;
    struct gdr_node *nodes;
    uint32_t *kids;
    size_t nkids;
};

static inline uint32_t gdr_bytes(struct gdr *r, void *out, size_t n)
{
    if (r->err || (size_t)(r->end - r->p) < n) {
        r->err = 1;
        if (out)
            memset(out, 0, n);
        return 0;
    }
    if (out)
        memcpy(out, r->p, n);
    r->p += n;
    return 1;
}

static inline uint8_t gdr_u8(struct gdr *r)
{
    uint8_t v = 0;
    gdr_bytes(r, &v, 1);
    return v;
}

static inline int32_t gdr_i32(struct gdr *r)
{
    uint8_t b[4];
    gdr_bytes(r, b, 4);
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 |
                     (uint32_t)b[3] << 24);
}

static inline int64_t gdr_i64(struct gdr *r)
{
    uint64_t lo = (uint32_t)gdr_i32(r), hi = (uint32_t)gdr_i32(r);
    return (int64_t)(lo | hi << 32);
}

static inline void gdr_expect(struct gdr *r, uint8_t tag)
{
    if (gdr_u8(r) != tag)
        r->err = 1;
}

/* A string: UTF-16 unit count (-1 = null), each unit as 1-3 UTF-8-style bytes. Returns a malloc'd
 * copy holding the units' low bytes for ASCII units and '?' for others (NULL for null/error). */
static inline char *gdr_str(struct gdr *r, int *is_null)
{
    int32_t units = gdr_i32(r);
    *is_null = units == -1;
    if (r->err || units < -1 || units > (1 << 24)) {
        r->err = 1;
        return NULL;
    }
    if (units == -1)
        return NULL;
    char *s = malloc((size_t)units + 1);
    if (!s) {
        r->err = 1;
        return NULL;
    }
    for (int32_t i = 0; i < units && !r->err; i++) {
        uint8_t b = gdr_u8(r);
        uint32_t u;
        if (b < 0x80) {
            u = b;
        } else if ((b & 0xe0) == 0xc0) {
            uint8_t c = gdr_u8(r);
            if ((c & 0xc0) != 0x80)
                r->err = 1;
            u = (uint32_t)(b & 0x1f) << 6 | (c & 0x3f);
            if (u < 0x80)
                r->err = 1; /* overlong */
        } else if ((b & 0xf0) == 0xe0) {
            uint8_t c = gdr_u8(r), d = gdr_u8(r);
            if ((c & 0xc0) != 0x80 || (d & 0xc0) != 0x80)
                r->err = 1;
            u = (uint32_t)(b & 0x0f) << 12 | (uint32_t)(c & 0x3f) << 6 | (d & 0x3f);
            if (u < 0x800)
                r->err = 1;
        } else {
            r->err = 1; /* a UTF-16 unit never needs 4 bytes */
            u = 0;
        }
        s[i] = u < 0x80 ? (char)u : '?';
    }
    s[units] = 0;
    if (r->err) {
        free(s);
        return NULL;
    }
    return s;
}

/* The blob's compressed int: signed, 7 bits a byte, most significant first, high bit = more. */
static inline int32_t gdr_cint(struct gdr *r)
{
    uint8_t b = gdr_u8(r);
    int32_t v = (int32_t)((uint32_t)(b & 0x7f) << 25) >> 25;
    for (int k = 1; (b & 0x80) && !r->err; k++) {
        if (k >= 5) {
            r->err = 1;
            break;
        }
        b = gdr_u8(r);
        v = (int32_t)(((uint32_t)v << 7) + (b & 0x7fu));
    }
    return v;
}

static inline void gdr_type_header(struct gdr *r, int32_t version, int32_t min_reader,
                                   const char *name)
{
    int is_null;
    gdr_expect(r, 4);
    gdr_expect(r, 1);
    if (gdr_i32(r) != version || gdr_i32(r) != min_reader)
        r->err = 1;
    char *s = gdr_str(r, &is_null);
    if (!s || strcmp(s, name))
        r->err = 1;
    free(s);
    gdr_expect(r, 6);
}

static inline void gdr_free(struct gdr_file *f)
{
    for (uint32_t t = 0; f->type_names && t < f->ntypes; t++)
        free(f->type_names[t]);
    for (uint32_t t = 0; f->type_modules && t < f->ntypes; t++)
        free(f->type_modules[t]);
    free(f->type_names);
    free(f->type_modules);
    free(f->type_sizes);
    free(f->nodes);
    free(f->kids);
    memset(f, 0, sizeof *f);
}

/* Reads and checks a whole file. 0 on success; otherwise -1 and a reason in why. */
static inline int gdr_read(const uint8_t *data, size_t len, struct gdr_file *f, const char **why)
{
    struct gdr rr = {data, data + len, data, 0}, *r = &rr;
    int is_null;
    memset(f, 0, sizeof *f);
    *why = "header";
    if (gdr_i32(r) != 20 || !gdr_bytes(r, NULL, 20) || memcmp(data + 4, "!FastSerialization.1", 20))
        return -1;
    gdr_expect(r, 4);
    gdr_type_header(r, 10, 8, "GCHeapDump");
    gdr_expect(r, 4);
    gdr_type_header(r, 1, 0, "Graphs.MemoryGraph");
    if (r->err)
        return -1;
    *why = "graph header";
    f->total = gdr_i64(r);
    f->root = gdr_i32(r);
    int32_t ntypes = gdr_i32(r);
    if (r->err || ntypes < 1 || ntypes > (1 << 24))
        return -1;
    f->ntypes = (uint32_t)ntypes;
    f->type_names = calloc(f->ntypes, sizeof *f->type_names);
    f->type_sizes = calloc(f->ntypes, sizeof *f->type_sizes);
    f->type_modules = calloc(f->ntypes, sizeof *f->type_modules);
    if (!f->type_names || !f->type_sizes || !f->type_modules)
        goto fail;
    *why = "types";
    for (uint32_t t = 0; t < f->ntypes && !r->err; t++) {
        f->type_names[t] = gdr_str(r, &is_null);
        if (!f->type_names[t])
            r->err = 1;
        f->type_sizes[t] = gdr_i32(r);
        f->type_modules[t] = gdr_str(r, &is_null);
    }
    if (r->err || strcmp(f->type_names[0], "UNDEFINED"))
        goto fail;
    *why = "node offsets";
    int32_t nnodes = gdr_i32(r);
    if (r->err || nnodes < 0 || (size_t)nnodes > (size_t)(r->end - r->p) / 4)
        goto fail;
    f->nnodes = (uint32_t)nnodes;
    const uint8_t *offs = r->p;
    r->p += (size_t)nnodes * 4;
    int32_t bloblen = gdr_i32(r);
    if (r->err || bloblen < 2 || bloblen > r->end - r->p)
        goto fail;
    const uint8_t *blob = r->p;
    r->p += bloblen;
    *why = "undefined node";
    if (blob[0] != 0 || blob[1] != 0)
        goto fail;
    f->nodes = calloc(f->nnodes + 1, sizeof *f->nodes);
    if (!f->nodes)
        goto fail;
    size_t kcap = 64;
    f->kids = malloc(kcap * sizeof *f->kids);
    if (!f->kids)
        goto fail;
    int64_t sum = 0;
    int32_t prev_end = 2;
    for (uint32_t i = 0; i < f->nnodes; i++) {
        int32_t off;
        memcpy(&off, offs + 4 * (size_t)i, 4);
        *why = "node offset order";
        if (off != prev_end || off >= bloblen)
            goto fail;
        struct gdr br = {blob + off, blob + bloblen, blob, 0};
        int32_t ts = gdr_cint(&br);
        *why = "node type";
        if (ts < 0 || (uint32_t)(ts >> 1) >= f->ntypes)
            goto fail;
        struct gdr_node *nd = &f->nodes[i];
        nd->type = (uint32_t)(ts >> 1);
        nd->size = (ts & 1) ? gdr_cint(&br) : f->type_sizes[nd->type];
        *why = "node size";
        if (nd->size < 0)
            goto fail;
        sum += nd->size;
        int32_t nk = gdr_cint(&br);
        *why = "child count";
        if (br.err || nk < 0 || nk > bloblen)
            goto fail;
        nd->nkids = (uint32_t)nk;
        nd->kid_at = (uint32_t)f->nkids;
        for (int32_t k = 0; k < nk; k++) {
            int64_t child = (int64_t)i + gdr_cint(&br);
            *why = "child index";
            if (br.err || child < 0 || child >= nnodes)
                goto fail;
            if (f->nkids == kcap) {
                uint32_t *nk2 = realloc(f->kids, 2 * kcap * sizeof *f->kids);
                if (!nk2)
                    goto fail;
                f->kids = nk2;
                kcap *= 2;
            }
            f->kids[f->nkids++] = (uint32_t)child;
        }
        prev_end = (int32_t)(br.p - blob);
    }
    *why = "blob length";
    if (prev_end != bloblen)
        goto fail;
    *why = "total size";
    if (sum != f->total)
        goto fail;
    *why = "root";
    if (f->nnodes && (f->root < 0 || (uint32_t)f->root >= f->nnodes))
        goto fail;
    *why = "addresses";
    if (gdr_i32(r) != nnodes)
        goto fail;
    for (uint32_t i = 0; i < f->nnodes; i++)
        f->nodes[i].addr = (uint64_t)gdr_i64(r);
    gdr_expect(r, 8);
    gdr_expect(r, 1);
    gdr_expect(r, 6);
    *why = "heap dump fields";
    gdr_expect(r, 1);
    gdr_i32(r);
    gdr_i32(r); /* multipliers */
    gdr_expect(r, 1);
    gdr_expect(r, 1);
    free(gdr_str(r, &is_null)); /* log */
    gdr_i64(r);                 /* ticks */
    free(gdr_str(r, &is_null)); /* machine */
    free(gdr_str(r, &is_null)); /* process */
    gdr_i32(r);
    gdr_i64(r);
    gdr_i64(r);
    if (gdr_i32(r) != 0)
        goto fail;
    if (r->p < r->end && *r->p == 13) {
        r->p++;
        free(gdr_str(r, &is_null)); /* creation tool */
    }
    gdr_expect(r, 6);
    gdr_expect(r, 6);
    *why = "trailer";
    int32_t table = (int32_t)(r->p - data);
    if (gdr_i32(r) != 0)
        goto fail;
    int32_t trailer = (int32_t)(r->p - data);
    if (gdr_i32(r) != table || gdr_i32(r) != trailer || r->err || r->p != r->end)
        goto fail;
    *why = NULL;
    return 0;
fail:
    gdr_free(f);
    return -1;
}

#endif
