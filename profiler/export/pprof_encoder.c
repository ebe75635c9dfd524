/*
 * pprof_encoder.c - see pprof_encoder.h. The profile.proto writer and its gzip stream.
 *
 * Layout of the work: strings live in one arena and are interned through an open-addressing
 * table (linear probing, grown at 70% load); each string records the Function id of the frame of
 * that name, so a frame name costs one hash lookup. Samples are encoded as complete `sample`
 * fields the moment they are added (sizes are computed first, then bytes written once), so
 * pprof_finish only writes the small header tables around that buffer and streams everything
 * through deflate without building a second uncompressed copy.
 *
 * Every table goes through grow_(), which enforces max_bytes; an allocation failure or a cap hit
 * never leaves a table half-updated (all room is reserved before anything is written).
 * Known limitation: frames carry no line numbers and there is one Mapping for everything; the
 * Datadog `|lm:...|fn:...` frame format and per-module mappings would be the caller's job.
 */
#define ZLIB_CONST
#include "pprof_encoder.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

enum { ERR_NOMEM = -1, ERR_CAP = -2 };

/* Protobuf wire types; every field number used below is < 16, so each tag is one byte. */
enum { WT_VARINT = 0, WT_LEN = 2 };

/* Field numbers from google/pprof proto/profile.proto. */
enum {
    PROFILE_SAMPLE_TYPE = 1,
    PROFILE_SAMPLE = 2,
    PROFILE_MAPPING = 3,
    PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6,
    PROFILE_TIME_NANOS = 9,
    PROFILE_DURATION_NANOS = 10,
    PROFILE_PERIOD_TYPE = 11,
    PROFILE_PERIOD = 12,
    PROFILE_COMMENT = 13,
    PROFILE_DEFAULT_SAMPLE_TYPE = 14,
};
enum { VALUE_TYPE_TYPE = 1, VALUE_TYPE_UNIT = 2 };
enum { SAMPLE_LOCATION_ID = 1, SAMPLE_VALUE = 2, SAMPLE_LABEL = 3 };
enum { LABEL_KEY = 1, LABEL_STR = 2, LABEL_NUM = 3, LABEL_NUM_UNIT = 4 };
enum { MAPPING_ID = 1, MAPPING_FILENAME = 5, MAPPING_HAS_FUNCTIONS = 7 };
enum { LOCATION_ID = 1, LOCATION_MAPPING_ID = 2, LOCATION_LINE = 4 };
enum { LINE_FUNCTION_ID = 1 };
enum { FUNCTION_ID = 1, FUNCTION_NAME = 2, FUNCTION_SYSTEM_NAME = 3 };

#define MAPPING_ID_VALUE 1u
#define SINK_BUF_SIZE ((size_t)32 << 10)
#define OUT_MIN_SIZE ((size_t)16 << 10)
#define MAX_STRINGS ((size_t)UINT32_MAX - 1)

struct str {
    size_t off;    /* into arena */
    uint32_t len;  /* bytes, no NUL */
    uint32_t func; /* Function (= Location) id of the frame with this name, 0 = none yet */
};

struct pprof_builder {
    void *(*alloc)(void *ctx, void *ptr, size_t size);
    void *actx;
    size_t mem, max_bytes, max_samples;
    size_t nsamples, dropped;
    int level;
    int failed; /* a void call failed to allocate; pprof_finish reports it */

    char *arena;
    size_t arena_len, arena_cap;
    struct str *strs; /* string index -> entry; strs[0] is "" and is not in the hash table */
    size_t nstr, str_cap;
    uint32_t *slots; /* string index + 1, 0 = empty; nslots is a power of two */
    size_t nslots;

    uint32_t *fname; /* Function id - 1 -> name string index */
    size_t nfunc, func_cap;

    unsigned char *sbuf; /* encoded `sample` fields, tag and length included */
    size_t sbuf_len, sbuf_cap;
    uint64_t *scratch; /* one sample: location ids, then (key, str, unit) per label */
    size_t scratch_cap;

    uint32_t *comments;
    size_t ncomments, comments_cap;

    int ntypes;
    uint32_t types[2 * PPROF_MAX_TYPES]; /* (type, unit) string indices */
    uint32_t period_type[2];
    int64_t period, time_nanos, duration_nanos;
    uint32_t default_type, mapping_file;
};

/* ---- allocation ---- */

static void *libc_alloc(void *ctx, void *ptr, size_t size)
{
    (void)ctx;
    if (!size) {
        free(ptr);
        return NULL;
    }
    return realloc(ptr, size);
}

static void mem_free(pprof_builder *b, void *p, size_t size)
{
    if (!p)
        return;
    b->alloc(b->actx, p, 0);
    b->mem -= size;
}

/* Resizes a builder table from old_size to new_size bytes (new_size > old_size), within
 * max_bytes. Returns the new block, or NULL with *err set (the old block is left intact). */
static void *mem_resize(pprof_builder *b, void *p, size_t old_size, size_t new_size, int *err)
{
    if (b->mem > b->max_bytes || new_size - old_size > b->max_bytes - b->mem) {
        *err = ERR_CAP;
        return NULL;
    }
    void *np = b->alloc(b->actx, p, new_size);
    if (!np) {
        *err = ERR_NOMEM;
        return NULL;
    }
    b->mem += new_size - old_size;
    return np;
}

/* Makes room for `need` elements of `size` bytes in p (capacity *cap elements), doubling; when
 * doubling would pass max_bytes it takes all the room left (one last resize, not one per call).
 * Returns the (maybe moved) block, or NULL with *err set. */
static void *grow_(pprof_builder *b, void *p, size_t *cap, size_t size, size_t need, int *err)
{
    size_t ncap = *cap ? *cap : 16;
    while (ncap < need)
        ncap = ncap > SIZE_MAX / 2 ? need : ncap * 2;
    if (ncap > SIZE_MAX / size || need > SIZE_MAX / size) {
        *err = ERR_CAP;
        return NULL;
    }
    void *np = mem_resize(b, p, *cap * size, ncap * size, err);
    if (!np && *err == ERR_CAP && b->mem <= b->max_bytes) {
        size_t room = *cap + (b->max_bytes - b->mem) / size;
        if (room >= need && room < ncap) {
            ncap = room;
            np = mem_resize(b, p, *cap * size, ncap * size, err);
        }
    }
    if (np)
        *cap = ncap;
    return np;
}

/* Ensures arr (capacity cap) holds need elements; on failure sets rc and leaves arr as it was. */
#define GROW(b, arr, cap, need, rc)                                                                \
    do {                                                                                           \
        if ((need) > (cap)) {                                                                      \
            void *np_ = grow_((b), (arr), &(cap), sizeof *(arr), (need), &(rc));                   \
            if (np_)                                                                               \
                (arr) = np_;                                                                       \
        }                                                                                          \
    } while (0)

/* ---- varints ---- */

static size_t vsize(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

static size_t vput(unsigned char *p, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (unsigned char)v;
    return n;
}

static unsigned char tag(int field, int wire_type)
{
    return (unsigned char)((field << 3) | wire_type);
}

/* Size of a varint field that proto3 omits when zero. */
static size_t fsize(uint64_t v)
{
    return v ? 1 + vsize(v) : 0;
}

static size_t put_field(unsigned char *p, int field, uint64_t v)
{
    if (!v)
        return 0;
    p[0] = tag(field, WT_VARINT);
    return 1 + vput(p + 1, v);
}

static size_t put_len(unsigned char *p, int field, size_t len)
{
    p[0] = tag(field, WT_LEN);
    return 1 + vput(p + 1, len);
}

/* ---- strings and functions ---- */

static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

/* The slot holding s, or the empty slot where s belongs. The table is never full. */
static size_t find_slot(const pprof_builder *b, const char *s, size_t n)
{
    size_t mask = b->nslots - 1;
    size_t i = (size_t)hash_bytes(s, n) & mask;
    for (;;) {
        uint32_t v = b->slots[i];
        if (!v)
            return i;
        const struct str *e = &b->strs[v - 1];
        if (e->len == n && !memcmp(b->arena + e->off, s, n))
            return i;
        i = (i + 1) & mask;
    }
}

static int rehash(pprof_builder *b, size_t nslots)
{
    int err = 0;
    if (nslots > SIZE_MAX / sizeof *b->slots)
        return ERR_CAP;
    uint32_t *ns = mem_resize(b, NULL, 0, nslots * sizeof *ns, &err);
    if (!ns)
        return err;
    memset(ns, 0, nslots * sizeof *ns);
    uint32_t *old = b->slots;
    size_t nold = b->nslots;
    b->slots = ns;
    b->nslots = nslots;
    for (size_t i = 1; i < b->nstr; i++) {
        size_t slot = find_slot(b, b->arena + b->strs[i].off, b->strs[i].len);
        ns[slot] = (uint32_t)(i + 1);
    }
    mem_free(b, old, nold * sizeof *old);
    return 0;
}

/* Interns s[0..n) and stores its string_table index in *out. "" is always index 0. */
static int intern_n(pprof_builder *b, const char *s, size_t n, uint32_t *out)
{
    int rc = 0;
    if (!n) {
        *out = 0;
        return 0;
    }
    if (n > UINT32_MAX)
        return ERR_CAP;
    size_t slot = find_slot(b, s, n);
    if (b->slots[slot]) {
        *out = b->slots[slot] - 1;
        return 0;
    }
    if (b->nstr >= MAX_STRINGS)
        return ERR_CAP;
    if ((b->nstr + 1) * 10 > b->nslots * 7) {
        rc = rehash(b, b->nslots * 2);
        if (rc)
            return rc;
        slot = find_slot(b, s, n);
    }
    GROW(b, b->strs, b->str_cap, b->nstr + 1, rc);
    if (!rc)
        GROW(b, b->arena, b->arena_cap, b->arena_len + n, rc);
    if (rc)
        return rc;
    memcpy(b->arena + b->arena_len, s, n);
    b->strs[b->nstr] = (struct str){.off = b->arena_len, .len = (uint32_t)n, .func = 0};
    b->arena_len += n;
    b->slots[slot] = (uint32_t)(b->nstr + 1);
    *out = (uint32_t)b->nstr++;
    return 0;
}

static int intern(pprof_builder *b, const char *s, uint32_t *out)
{
    return intern_n(b, s ? s : "", s ? strlen(s) : 0, out);
}

/* The Function (= Location) id of the frame called `name`, created on first use. */
static int frame_id(pprof_builder *b, const char *name, uint64_t *id)
{
    uint32_t si;
    int rc;

    if (!name || !*name)
        name = PPROF_UNKNOWN_FRAME;
    rc = intern(b, name, &si);
    if (rc)
        return rc;
    if (!b->strs[si].func) {
        if (b->nfunc >= UINT32_MAX - 1)
            return ERR_CAP;
        GROW(b, b->fname, b->func_cap, b->nfunc + 1, rc);
        if (rc)
            return rc;
        b->fname[b->nfunc++] = si;
        b->strs[si].func = (uint32_t)b->nfunc;
    }
    *id = b->strs[si].func;
    return 0;
}

/* ---- builder ---- */

pprof_builder *pprof_new_opts(const pprof_value_type *types, int ntypes,
                              pprof_value_type period_type, int64_t period,
                              const struct pprof_opts *opts)
{
    void *(*alloc)(void *, void *, size_t) = opts && opts->alloc ? opts->alloc : libc_alloc;
    void *actx = opts && opts->alloc ? opts->alloc_ctx : NULL;
    pprof_builder *b;
    int rc = 0;

    if (!types || ntypes < 1 || ntypes > PPROF_MAX_TYPES)
        return NULL;
    b = alloc(actx, NULL, sizeof *b);
    if (!b)
        return NULL;
    memset(b, 0, sizeof *b);
    b->alloc = alloc;
    b->actx = actx;
    b->mem = sizeof *b;
    b->max_bytes = opts && opts->max_bytes ? opts->max_bytes : PPROF_DEFAULT_MAX_BYTES;
    b->max_samples = opts && opts->max_samples ? opts->max_samples : PPROF_DEFAULT_MAX_SAMPLES;
    b->level = opts && opts->gzip_level >= 1 && opts->gzip_level <= 9 ? opts->gzip_level
                                                                      : Z_DEFAULT_COMPRESSION;
    b->ntypes = ntypes;
    b->period = period;

    GROW(b, b->strs, b->str_cap, 64, rc);
    if (rc)
        goto out_free;
    b->strs[0] = (struct str){0, 0, 0};
    b->nstr = 1;
    rc = rehash(b, 128);
    for (int t = 0; !rc && t < ntypes; t++) {
        rc = intern(b, types[t].type, &b->types[2 * t]);
        if (!rc)
            rc = intern(b, types[t].unit, &b->types[2 * t + 1]);
    }
    if (!rc)
        rc = intern(b, period_type.type, &b->period_type[0]);
    if (!rc)
        rc = intern(b, period_type.unit, &b->period_type[1]);
    if (!rc)
        rc = intern(b, PPROF_MAPPING_FILE, &b->mapping_file);
    if (rc)
        goto out_free;
    return b;

out_free:
    pprof_free(b);
    return NULL;
}

pprof_builder *pprof_new(const pprof_value_type *types, int ntypes, pprof_value_type period_type,
                         int64_t period)
{
    return pprof_new_opts(types, ntypes, period_type, period, NULL);
}

void pprof_free(pprof_builder *b)
{
    if (!b)
        return;
    void *(*alloc)(void *, void *, size_t) = b->alloc;
    void *actx = b->actx;
    void *blocks[] = {b->arena, b->strs, b->slots,   b->fname,
                      b->sbuf,  b->scratch, b->comments};
    for (size_t i = 0; i < sizeof blocks / sizeof blocks[0]; i++)
        if (blocks[i])
            alloc(actx, blocks[i], 0);
    alloc(actx, b, 0);
}

void pprof_set_time(pprof_builder *b, int64_t time_nanos, int64_t duration_nanos)
{
    if (!b)
        return;
    b->time_nanos = time_nanos;
    b->duration_nanos = duration_nanos;
}

void pprof_set_max_samples(pprof_builder *b, size_t max_samples)
{
    if (b)
        b->max_samples = max_samples ? max_samples : PPROF_DEFAULT_MAX_SAMPLES;
}

void pprof_add_comment(pprof_builder *b, const char *comment)
{
    uint32_t si;
    int rc;

    if (!b || !comment)
        return;
    rc = intern(b, comment, &si);
    if (!rc)
        GROW(b, b->comments, b->comments_cap, b->ncomments + 1, rc);
    if (!rc)
        b->comments[b->ncomments++] = si;
    else if (rc == ERR_NOMEM)
        b->failed = 1;
    /* ERR_CAP: the profile is at its size cap; the comment is dropped like a sample. */
}

void pprof_set_default_sample_type(pprof_builder *b, const char *type)
{
    if (!b)
        return;
    b->default_type = 0;
    if (!type)
        return;
    size_t n = strlen(type);
    for (int t = 0; t < b->ntypes; t++) {
        const struct str *e = &b->strs[b->types[2 * t]];
        if (e->len == n && n && !memcmp(b->arena + e->off, type, n)) {
            b->default_type = b->types[2 * t];
            return;
        }
    }
}

void pprof_get_stats(const pprof_builder *b, struct pprof_stats *st)
{
    memset(st, 0, sizeof *st);
    if (!b)
        return;
    st->samples = b->nsamples;
    st->dropped = b->dropped;
    st->functions = b->nfunc;
    st->strings = b->nstr;
    st->bytes = b->mem;
}

/* ---- samples ---- */

/* Interns label i's key, string value and unit into lab[3i..3i+2] (0 = absent). */
static int resolve_labels(pprof_builder *b, const char *const *keys, const char *const *strs,
                          const char *const *units, int nlabels, uint64_t *lab)
{
    for (int i = 0; i < nlabels; i++) {
        uint32_t k = 0, s = 0, u = 0;
        int rc = intern(b, keys[i], &k);
        if (!rc && k && strs && strs[i])
            rc = intern(b, strs[i], &s);
        else if (!rc && k && units && units[i])
            rc = intern(b, units[i], &u);
        if (rc)
            return rc;
        lab[3 * i] = k;
        lab[3 * i + 1] = s;
        lab[3 * i + 2] = u;
    }
    return 0;
}

static size_t label_size(const uint64_t *lab, int is_str, int64_t num)
{
    return fsize(lab[0]) + (is_str ? fsize(lab[1]) : fsize((uint64_t)num) + fsize(lab[2]));
}

/* Appends one `sample` field: location ids ids[0..nids), values, and the resolved labels. */
static int encode_sample(pprof_builder *b, const uint64_t *ids, size_t nids, const int64_t *values,
                         const uint64_t *lab, const char *const *strs, const int64_t *nums,
                         int nlabels)
{
    size_t ids_len = 0, vals_len = 0, msg, total;
    int rc = 0;

    for (size_t k = 0; k < nids; k++)
        ids_len += vsize(ids[k]);
    for (int t = 0; t < b->ntypes; t++)
        vals_len += vsize((uint64_t)values[t]);
    msg = 1 + vsize(ids_len) + ids_len + 1 + vsize(vals_len) + vals_len;
    for (int i = 0; i < nlabels; i++) {
        if (!lab[3 * i])
            continue;
        size_t l = label_size(&lab[3 * i], strs && strs[i], nums ? nums[i] : 0);
        msg += 1 + vsize(l) + l;
    }
    total = 1 + vsize(msg) + msg;
    if (total > b->max_bytes)
        return ERR_CAP;
    GROW(b, b->sbuf, b->sbuf_cap, b->sbuf_len + total, rc);
    if (rc)
        return rc;

    unsigned char *p = b->sbuf + b->sbuf_len;
    p += put_len(p, PROFILE_SAMPLE, msg);
    p += put_len(p, SAMPLE_LOCATION_ID, ids_len);
    for (size_t k = 0; k < nids; k++)
        p += vput(p, ids[k]);
    p += put_len(p, SAMPLE_VALUE, vals_len);
    for (int t = 0; t < b->ntypes; t++)
        p += vput(p, (uint64_t)values[t]);
    for (int i = 0; i < nlabels; i++) {
        const uint64_t *l = &lab[3 * i];
        int is_str = strs && strs[i];
        int64_t num = nums ? nums[i] : 0;
        if (!l[0])
            continue;
        p += put_len(p, SAMPLE_LABEL, label_size(l, is_str, num));
        p += put_field(p, LABEL_KEY, l[0]);
        if (is_str) {
            p += put_field(p, LABEL_STR, l[1]);
        } else {
            p += put_field(p, LABEL_NUM, (uint64_t)num);
            p += put_field(p, LABEL_NUM_UNIT, l[2]);
        }
    }
    b->sbuf_len += total;
    return 0;
}

int pprof_add_sample_ex(pprof_builder *b, const char *const *frames, int nframes,
                        const int64_t *values, const char *const *label_keys,
                        const char *const *label_strs, const int64_t *label_nums,
                        const char *const *label_units, int nlabels)
{
    size_t nids;
    int rc = 0;

    if (!b || !values || nframes < 0 || nlabels < 0 || (nframes && !frames) ||
        (nlabels && !label_keys))
        return -1;
    if (b->nsamples >= b->max_samples) {
        b->dropped++;
        return 1;
    }
    nids = nframes ? (size_t)nframes : 1;
    GROW(b, b->scratch, b->scratch_cap, nids + 3 * (size_t)nlabels, rc);
    for (size_t k = 0; !rc && k < nids; k++)
        rc = frame_id(b, nframes ? frames[k] : NULL, &b->scratch[k]);
    if (!rc)
        rc = resolve_labels(b, label_keys, label_strs, label_units, nlabels, b->scratch + nids);
    if (!rc)
        rc = encode_sample(b, b->scratch, nids, values, b->scratch + nids, label_strs, label_nums,
                           nlabels);
    if (rc == ERR_CAP) {
        b->dropped++;
        return 1;
    }
    if (rc)
        return -1;
    b->nsamples++;
    return 0;
}

int pprof_add_sample(pprof_builder *b, const char *const *frames, int nframes,
                     const int64_t *values, const char *const *label_keys,
                     const char *const *label_strs, const int64_t *label_nums, int nlabels)
{
    return pprof_add_sample_ex(b, frames, nframes, values, label_keys, label_strs, label_nums,
                               NULL, nlabels);
}

/* ---- serialisation: a buffered byte sink in front of deflate ---- */

struct sink {
    pprof_builder *b;
    z_stream z;
    unsigned char *out;
    size_t out_cap;
    unsigned char *buf;
    size_t len;
    int err;
};

static voidpf z_alloc(voidpf opaque, uInt items, uInt size)
{
    pprof_builder *b = opaque;
    if (!items || !size || items > SIZE_MAX / size)
        return Z_NULL;
    return b->alloc(b->actx, NULL, (size_t)items * size);
}

static void z_free(voidpf opaque, voidpf p)
{
    pprof_builder *b = opaque;
    if (p)
        b->alloc(b->actx, p, 0);
}

static int out_grow(struct sink *s)
{
    size_t used = (size_t)(s->z.next_out - s->out);
    size_t ncap = s->out_cap ? s->out_cap * 2 : OUT_MIN_SIZE;
    if (ncap < s->out_cap)
        return -1;
    unsigned char *np = s->b->alloc(s->b->actx, s->out, ncap);
    if (!np)
        return -1;
    s->out = np;
    s->out_cap = ncap;
    s->z.next_out = np + used;
    s->z.avail_out = ncap - used > UINT_MAX ? UINT_MAX : (uInt)(ncap - used);
    return 0;
}

/* Runs p[0..n) through deflate; with finish, also ends the gzip stream. */
static int deflate_bytes(struct sink *s, const unsigned char *p, size_t n, int finish)
{
    for (;;) {
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        int last = finish && chunk == n;
        s->z.next_in = p;
        s->z.avail_in = chunk;
        for (;;) {
            if (!s->z.avail_out && out_grow(s))
                return -1;
            int zrc = deflate(&s->z, last ? Z_FINISH : Z_NO_FLUSH);
            if (zrc == Z_STREAM_END)
                return 0;
            if (zrc != Z_OK && zrc != Z_BUF_ERROR)
                return -1;
            if (!last && !s->z.avail_in)
                break;
        }
        p += chunk;
        n -= chunk;
        if (!n)
            return 0;
    }
}

static void sink_flush(struct sink *s)
{
    if (!s->err && s->len && deflate_bytes(s, s->buf, s->len, 0))
        s->err = 1;
    s->len = 0;
}

static void sink_put(struct sink *s, const void *p, size_t n)
{
    if (s->err || !n)
        return;
    if (n > SINK_BUF_SIZE - s->len) {
        sink_flush(s);
        if (n >= SINK_BUF_SIZE) {
            if (!s->err && deflate_bytes(s, p, n, 0))
                s->err = 1;
            return;
        }
    }
    memcpy(s->buf + s->len, p, n);
    s->len += n;
}

/* A length-delimited field whose payload is the varint fields (field[i], v[i]), zeros omitted. */
static void sink_msg(struct sink *s, int field, const int *fields, const uint64_t *v, int n)
{
    unsigned char tmp[8 * 11 + 12];
    size_t len = 0, off;
    for (int i = 0; i < n; i++)
        len += fsize(v[i]);
    off = put_len(tmp, field, len);
    for (int i = 0; i < n; i++)
        off += put_field(tmp + off, fields[i], v[i]);
    sink_put(s, tmp, off);
}

static void sink_varint_field(struct sink *s, int field, uint64_t v)
{
    unsigned char tmp[11];
    sink_put(s, tmp, put_field(tmp, field, v));
}

static void write_tables(struct sink *s, const char *drop_note, size_t drop_len)
{
    const pprof_builder *b = s->b;
    static const int vt_fields[] = {VALUE_TYPE_TYPE, VALUE_TYPE_UNIT};
    static const int map_fields[] = {MAPPING_ID, MAPPING_FILENAME, MAPPING_HAS_FUNCTIONS};
    static const int fn_fields[] = {FUNCTION_ID, FUNCTION_NAME, FUNCTION_SYSTEM_NAME};
    unsigned char tmp[32];

    for (int t = 0; t < b->ntypes; t++) {
        uint64_t v[] = {b->types[2 * t], b->types[2 * t + 1]};
        sink_msg(s, PROFILE_SAMPLE_TYPE, vt_fields, v, 2);
    }
    sink_put(s, b->sbuf, b->sbuf_len);
    uint64_t mv[] = {MAPPING_ID_VALUE, b->mapping_file, 1};
    sink_msg(s, PROFILE_MAPPING, map_fields, mv, 3);
    for (size_t i = 1; i <= b->nfunc; i++) {
        size_t line_len = fsize(i), off;
        size_t loc_len = fsize(i) + fsize(MAPPING_ID_VALUE) + 1 + vsize(line_len) + line_len;
        off = put_len(tmp, PROFILE_LOCATION, loc_len);
        off += put_field(tmp + off, LOCATION_ID, i);
        off += put_field(tmp + off, LOCATION_MAPPING_ID, MAPPING_ID_VALUE);
        off += put_len(tmp + off, LOCATION_LINE, line_len);
        off += put_field(tmp + off, LINE_FUNCTION_ID, i);
        sink_put(s, tmp, off);
    }
    for (size_t i = 1; i <= b->nfunc; i++) {
        uint64_t v[] = {i, b->fname[i - 1], b->fname[i - 1]};
        sink_msg(s, PROFILE_FUNCTION, fn_fields, v, 3);
    }
    for (size_t i = 0; i < b->nstr; i++) {
        sink_put(s, tmp, put_len(tmp, PROFILE_STRING_TABLE, b->strs[i].len));
        sink_put(s, b->arena + b->strs[i].off, b->strs[i].len);
    }
    if (drop_len) {
        sink_put(s, tmp, put_len(tmp, PROFILE_STRING_TABLE, drop_len));
        sink_put(s, drop_note, drop_len);
    }
}

static void write_trailer(struct sink *s, size_t drop_len)
{
    const pprof_builder *b = s->b;
    static const int vt_fields[] = {VALUE_TYPE_TYPE, VALUE_TYPE_UNIT};
    unsigned char tmp[16];

    sink_varint_field(s, PROFILE_TIME_NANOS, (uint64_t)b->time_nanos);
    sink_varint_field(s, PROFILE_DURATION_NANOS, (uint64_t)b->duration_nanos);
    uint64_t pt[] = {b->period_type[0], b->period_type[1]};
    sink_msg(s, PROFILE_PERIOD_TYPE, vt_fields, pt, 2);
    sink_varint_field(s, PROFILE_PERIOD, (uint64_t)b->period);
    if (b->ncomments || drop_len) {
        size_t len = drop_len ? vsize(b->nstr) : 0;
        for (size_t i = 0; i < b->ncomments; i++)
            len += vsize(b->comments[i]);
        sink_put(s, tmp, put_len(tmp, PROFILE_COMMENT, len));
        for (size_t i = 0; i < b->ncomments; i++)
            sink_put(s, tmp, vput(tmp, b->comments[i]));
        if (drop_len)
            sink_put(s, tmp, vput(tmp, b->nstr)); /* the extra string after the table */
    }
    sink_varint_field(s, PROFILE_DEFAULT_SAMPLE_TYPE, b->default_type);
}

int pprof_finish(pprof_builder *b, unsigned char **out, size_t *outlen)
{
    struct sink s;
    char note[160];
    size_t drop_len = 0;

    if (!b || !out || !outlen || b->failed)
        return -1;
    memset(&s, 0, sizeof s);
    s.b = b;
    if (b->dropped) {
        int n = snprintf(note, sizeof note,
                         "pprof: %zu samples dropped by the encoder's caps (max_samples %zu, "
                         "max_bytes %zu)",
                         b->dropped, b->max_samples, b->max_bytes);
        drop_len = n > 0 ? ((size_t)n < sizeof note ? (size_t)n : sizeof note - 1) : 0;
    }
    s.buf = b->alloc(b->actx, NULL, SINK_BUF_SIZE);
    if (!s.buf)
        return -1;
    s.z.zalloc = z_alloc;
    s.z.zfree = z_free;
    s.z.opaque = b;
    /* windowBits 15 + 16: a gzip wrapper, which is what pprof files carry. */
    if (deflateInit2(&s.z, b->level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
        b->alloc(b->actx, s.buf, 0);
        return -1;
    }
    write_tables(&s, note, drop_len);
    write_trailer(&s, drop_len);
    sink_flush(&s);
    if (!s.err && deflate_bytes(&s, NULL, 0, 1))
        s.err = 1;
    size_t used = s.out ? (size_t)(s.z.next_out - s.out) : 0;
    deflateEnd(&s.z);
    b->alloc(b->actx, s.buf, 0);
    if (s.err) {
        if (s.out)
            b->alloc(b->actx, s.out, 0);
        return -1;
    }
    *out = s.out;
    *outlen = used;
    return 0;
}
