/* hs_gcdump.c - see hs_gcdump.h. */
#include "hs_gcdump.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

enum tag {
    TAG_NULL = 1,
    TAG_BEGIN_OBJECT = 4,
    TAG_END_OBJECT = 6,
    TAG_BYTE = 8,
    TAG_STRING = 13,
};

#define MAX_FILE 0x7fff0000ll
#define DOTNET_TICKS_AT_UNIX_EPOCH 621355968000000000ll

/* Output through a private buffer: the node blob is written a few bytes at a time. */
struct out {
    FILE *f;
    int64_t pos;
    int failed;
    size_t used;
    unsigned char buf[1 << 16];
};

static void drain(struct out *o)
{
    if (o->used && !o->failed && fwrite(o->buf, 1, o->used, o->f) != o->used)
        o->failed = errno ? errno : EIO;
    o->used = 0;
}

static void put(struct out *o, const void *p, size_t n)
{
    o->pos += (int64_t)n;
    if (o->failed)
        return;
    if (o->used + n > sizeof o->buf) {
        drain(o);
        if (n > sizeof o->buf) {
            if (!o->failed && fwrite(p, 1, n, o->f) != n)
                o->failed = errno ? errno : EIO;
            return;
        }
    }
    memcpy(o->buf + o->used, p, n);
    o->used += n;
}

static void put8(struct out *o, uint8_t v)
{
    put(o, &v, 1);
}

static void put32(struct out *o, int32_t v)
{
    uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    put(o, b, 4);
}

static void put64(struct out *o, int64_t v)
{
    uint64_t u = (uint64_t)v;
    uint8_t b[8];
    for (int i = 0; i < 8; i++)
        b[i] = (uint8_t)(u >> (8 * i));
    put(o, b, 8);
}

static void putf(struct out *o, float v)
{
    int32_t bits;
    memcpy(&bits, &v, sizeof bits);
    put32(o, bits);
}

/* Decodes one UTF-8 code point (invalid bytes become U+FFFD, one byte consumed). */
static uint32_t next_cp(const unsigned char **ps)
{
    const unsigned char *s = *ps;
    uint32_t c = s[0];
    int n = c < 0x80 ? 0 : (c & 0xe0) == 0xc0 ? 1 : (c & 0xf0) == 0xe0 ? 2 : (c & 0xf8) == 0xf0 ? 3 : -1;
    if (n < 0) {
        *ps = s + 1;
        return 0xfffd;
    }
    c &= n == 0 ? 0x7f : n == 1 ? 0x1f : n == 2 ? 0x0f : 0x07;
    for (int i = 1; i <= n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *ps = s + 1;
            return 0xfffd;
        }
        c = c << 6 | (s[i] & 0x3f);
    }
    *ps = s + n + 1;
    return c > 0x10ffff ? 0xfffd : c;
}

static void put_unit(struct out *o, uint32_t u)
{
    if (u < 0x80) {
        put8(o, (uint8_t)u);
    } else if (u < 0x800) {
        uint8_t b[2] = {(uint8_t)(0xc0 | u >> 6), (uint8_t)(0x80 | (u & 0x3f))};
        put(o, b, 2);
    } else {
        uint8_t b[3] = {(uint8_t)(0xe0 | ((u >> 12) & 0xf)), (uint8_t)(0x80 | ((u >> 6) & 0x3f)),
                        (uint8_t)(0x80 | (u & 0x3f))};
        put(o, b, 3);
    }
}

/* FastSerialization string: UTF-16 unit count, then each unit in 1-3 bytes. */
static void put_str(struct out *o, const char *s)
{
    if (!s) {
        put32(o, -1);
        return;
    }
    int32_t units = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;)
        units += next_cp(&p) >= 0x10000 ? 2 : 1;
    put32(o, units);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        uint32_t c = next_cp(&p);
        if (c >= 0x10000) {
            c -= 0x10000;
            put_unit(o, 0xd800 + (c >> 10));
            put_unit(o, 0xdc00 + (c & 0x3ff));
        } else {
            put_unit(o, c);
        }
    }
}

static void put_type(struct out *o, int32_t version, int32_t min_reader, const char *name)
{
    put8(o, TAG_BEGIN_OBJECT);
    put8(o, TAG_NULL); /* the type of a SerializationType */
    put32(o, version);
    put32(o, min_reader);
    put_str(o, name);
    put8(o, TAG_END_OBJECT);
}

static int cint_len(int32_t v)
{
    if (v >= -64 && v < 64)
        return 1;
    if (v >= -8192 && v < 8192)
        return 2;
    if (v >= -(1 << 20) && v < (1 << 20))
        return 3;
    if (v >= -(1 << 27) && v < (1 << 27))
        return 4;
    return 5;
}

int gcdump_cint(int32_t v, uint8_t *out)
{
    int n = cint_len(v);
    int64_t w = v;
    for (int i = n - 1, k = 0; i >= 0; i--, k++) {
        uint8_t b = (uint8_t)((w >> (7 * i)) & 0x7f);
        out[k] = i ? (uint8_t)(b | 0x80) : b;
    }
    return n;
}

static int32_t clamp_size(uint32_t size)
{
    return size > 0x7fffffffu ? 0x7fffffff : (int32_t)size;
}

struct rec {
    uint8_t head[10];
    int head_len;
    uint32_t nvalid;
};

/* The record's leading ints (type/size, child count); returns the record's total length. */
static int64_t record(const struct gd_node *nd, int32_t type_size, uint32_t index, struct rec *r)
{
    int32_t size = clamp_size(nd->size);
    int32_t ts = (int32_t)(nd->type << 1);
    int explicit_size = size != type_size;
    r->head_len = gcdump_cint(ts | explicit_size, r->head);
    if (explicit_size)
        r->head_len += gcdump_cint(size, r->head + r->head_len);
    int64_t len = 0;
    r->nvalid = 0;
    for (uint32_t k = 0; k < nd->nkids; k++) {
        if (nd->kids[k] == GD_SKIP)
            continue;
        r->nvalid++;
        len += cint_len((int32_t)(nd->kids[k] + nd->kid_bias - index));
    }
    r->head_len += gcdump_cint((int32_t)r->nvalid, r->head + r->head_len);
    return len + r->head_len;
}

static void put_record(struct out *o, const struct gd_node *nd, uint32_t index, const struct rec *r)
{
    put(o, r->head, (size_t)r->head_len);
    uint8_t buf[5];
    for (uint32_t k = 0; k < nd->nkids; k++) {
        if (nd->kids[k] == GD_SKIP)
            continue;
        int n = gcdump_cint((int32_t)(nd->kids[k] + nd->kid_bias - index), buf);
        put(o, buf, (size_t)n);
    }
}

static int too_big(struct out *o, int64_t more)
{
    return o->pos + more > MAX_FILE;
}

static int write_all(struct out *o, const struct gd_source *src, const struct gd_meta *meta,
                     char *err, size_t errcap);

int gcdump_write(FILE *f, const struct gd_source *src, const struct gd_meta *meta, char *err,
                 size_t errcap)
{
    struct out *o = malloc(sizeof *o);
    if (!o) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    o->f = f;
    o->pos = 0;
    o->failed = 0;
    o->used = 0;
    int rc = write_all(o, src, meta, err, errcap);
    free(o);
    return rc;
}

static int write_all(struct out *o, const struct gd_source *src, const struct gd_meta *meta,
                     char *err, size_t errcap)
{
    int32_t *tsize = malloc(((size_t)src->ntypes + 1) * sizeof *tsize);
    if (!tsize) {
        snprintf(err, errcap, "out of memory");
        return -1;
    }
    /* pass 1: each type's size is its first node's; the total */
    for (uint32_t t = 0; t <= src->ntypes; t++)
        tsize[t] = -1;
    tsize[0] = 0;
    int64_t total = 0;
    struct gd_node nd;
    for (uint32_t i = 0; i < src->nnodes; i++) {
        src->node(src->ctx, i, &nd);
        if (nd.type > src->ntypes)
            nd.type = 0;
        if (tsize[nd.type] < 0)
            tsize[nd.type] = clamp_size(nd.size);
        total += clamp_size(nd.size);
    }
    for (uint32_t t = 0; t <= src->ntypes; t++)
        if (tsize[t] < 0)
            tsize[t] = 0;

    put32(o, 20);
    put(o, "!FastSerialization.1", 20);
    put8(o, TAG_BEGIN_OBJECT);
    put_type(o, 10, 8, "GCHeapDump");
    put8(o, TAG_BEGIN_OBJECT);
    put_type(o, 1, 0, "Graphs.MemoryGraph");
    put64(o, total);
    put32(o, (int32_t)src->root);
    put32(o, (int32_t)src->ntypes + 1);
    put_str(o, "UNDEFINED");
    put32(o, 0);
    put_str(o, NULL);
    for (uint32_t t = 1; t <= src->ntypes; t++) {
        put_str(o, src->type_name(src->ctx, t));
        put32(o, tsize[t]);
        put_str(o, src->type_module ? src->type_module(src->ctx, t) : NULL);
    }

    /* pass 2: blob offsets (the undefined node's 2-byte record comes first) */
    put32(o, (int32_t)src->nnodes);
    if (too_big(o, (int64_t)src->nnodes * 12)) {
        free(tsize);
        snprintf(err, errcap, "the heap is too large for the .gcdump format (2 GiB per file)");
        return -1;
    }
    int64_t blob = 2;
    struct rec r;
    for (uint32_t i = 0; i < src->nnodes && !o->failed; i++) {
        src->node(src->ctx, i, &nd);
        if (nd.type > src->ntypes)
            nd.type = 0;
        put32(o, (int32_t)blob);
        blob += record(&nd, tsize[nd.type], i, &r);
        if (blob > MAX_FILE)
            break;
    }
    if (too_big(o, blob + (int64_t)src->nnodes * 8 + 4096)) {
        free(tsize);
        snprintf(err, errcap, "the heap is too large for the .gcdump format (2 GiB per file)");
        return -1;
    }
    put32(o, (int32_t)blob);
    put8(o, 0); /* UNDEFINED: type 0, same size as its type */
    put8(o, 0); /* no children */
    /* pass 3: the records */
    for (uint32_t i = 0; i < src->nnodes && !o->failed; i++) {
        src->node(src->ctx, i, &nd);
        if (nd.type > src->ntypes)
            nd.type = 0;
        record(&nd, tsize[nd.type], i, &r);
        put_record(o, &nd, i, &r);
    }
    free(tsize);
    put32(o, (int32_t)src->nnodes);
    for (uint32_t i = 0; i < src->nnodes && !o->failed; i++) {
        src->node(src->ctx, i, &nd);
        put64(o, (int64_t)nd.addr);
    }
    put8(o, TAG_BYTE);
    put8(o, 1); /* Is64Bit */
    put8(o, TAG_END_OBJECT);

    /* the rest of GCHeapDump */
    put8(o, 1);
    putf(o, 1.0f);
    putf(o, 1.0f);
    put8(o, TAG_NULL); /* JSHeapInfo */
    put8(o, TAG_NULL); /* DotNetHeapInfo */
    put_str(o, meta->log ? meta->log : "");
    put64(o, DOTNET_TICKS_AT_UNIX_EPOCH + (int64_t)(meta->unix_time * 1e7));
    put_str(o, meta->machine);
    put_str(o, meta->process_name);
    put32(o, meta->pid);
    put64(o, meta->commit);
    put64(o, meta->working_set);
    put32(o, 0);
    if (meta->tool) {
        put8(o, TAG_STRING);
        put_str(o, meta->tool);
    }
    put8(o, TAG_END_OBJECT);

    /* end of objects, forward-reference table, trailer */
    put8(o, TAG_END_OBJECT);
    int32_t table = (int32_t)o->pos;
    put32(o, 0);
    int32_t trailer = (int32_t)o->pos;
    put32(o, table);
    put32(o, trailer);
    drain(o);
    if (!o->failed && fflush(o->f))
        o->failed = errno ? errno : EIO;
    if (o->failed) {
        char msg[96] = "";
        /* GNU strerror_r: the text is the returned pointer (msg may stay untouched) */
        const char *text = strerror_r(o->failed, msg, sizeof msg);
        snprintf(err, errcap, "%s", text && text[0] ? text : "I/O error");
        return -1;
    }
    if (o->pos > MAX_FILE) {
        snprintf(err, errcap, "the heap is too large for the .gcdump format (2 GiB per file)");
        return -1;
    }
    return 0;
}
