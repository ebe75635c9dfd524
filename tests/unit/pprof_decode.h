/*
 * pprof_decode.h - a minimal gunzip + profile.proto decoder and the invariants every pprof reader
 * relies on; shared by the encoder's unit test and its fuzz target (tests/fuzz/fuzz_pprof.c).
 */
#ifndef PPROF_DECODE_H
#define PPROF_DECODE_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* ---- a minimal profile.proto decoder ---- */

struct dlabel {
    uint64_t key, str, unit;
    int64_t num;
};

struct dsample {
    uint64_t locs[64];
    size_t nlocs;
    int64_t vals[8];
    size_t nvals;
    struct dlabel labels[8];
    size_t nlabels;
};

struct dloc {
    uint64_t id, mapping_id, function_id;
    size_t nlines;
};

struct dfunc {
    uint64_t id, name, system_name, filename;
};

struct dmapping {
    uint64_t id, filename, has_functions;
};

struct profile {
    char **strs;
    size_t nstr;
    uint64_t st_type[8], st_unit[8];
    size_t ntypes;
    struct dsample *samples;
    size_t nsamples;
    struct dloc *locs;
    size_t nlocs;
    struct dfunc *funcs;
    size_t nfuncs;
    struct dmapping maps[4];
    size_t nmaps;
    int64_t time_nanos, duration_nanos, period;
    uint64_t period_type[2];
    uint64_t comments[16];
    size_t ncomments;
    uint64_t default_type;
};

struct reader {
    const unsigned char *p, *end;
    int err;
};

static inline uint64_t rd_varint(struct reader *r)
{
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            r->err = 1;
            return 0;
        }
        unsigned char c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
    }
    r->err = 1;
    return 0;
}

/* Reads one field: for varints *v, for length-delimited fields a sub-reader in *sub. */
static inline int rd_field(struct reader *r, int *field, int *wt, uint64_t *v, struct reader *sub)
{
    uint64_t key = rd_varint(r);
    if (r->err)
        return -1;
    *field = (int)(key >> 3);
    *wt = (int)(key & 7);
    if (*wt == 0) {
        *v = rd_varint(r);
    } else if (*wt == 2) {
        uint64_t len = rd_varint(r);
        if (r->err || len > (uint64_t)(r->end - r->p)) {
            r->err = 1;
            return -1;
        }
        sub->p = r->p;
        sub->end = r->p + len;
        sub->err = 0;
        r->p += len;
    } else {
        r->err = 1; /* the encoder only writes wire types 0 and 2 */
    }
    return r->err ? -1 : 0;
}

/* A repeated varint field, packed (wt 2) or not (wt 0). */
static inline int rd_repeated(int wt, uint64_t v, struct reader *sub, uint64_t *dst, size_t *n, size_t cap)
{
    if (wt == 0) {
        if (*n >= cap)
            return -1;
        dst[(*n)++] = v;
        return 0;
    }
    while (sub->p < sub->end) {
        uint64_t x = rd_varint(sub);
        if (sub->err || *n >= cap)
            return -1;
        dst[(*n)++] = x;
    }
    return 0;
}

/* A message of varint fields: f[k] = the last value of field k < nf; length-delimited fields
 * are skipped, except that *nsub counts field `sub_field` and *sub holds its last payload. */
static inline int dec_flat(struct reader *r, uint64_t *f, int nf, int sub_field, size_t *nsub,
                    struct reader *sub)
{
    int field, wt;
    uint64_t v = 0;
    struct reader tmp = {0};
    memset(f, 0, (size_t)nf * sizeof *f);
    while (r->p < r->end) {
        if (rd_field(r, &field, &wt, &v, &tmp))
            return -1;
        if (wt == 0 && field < nf)
            f[field] = v;
        if (wt == 2 && field == sub_field && nsub) {
            (*nsub)++;
            *sub = tmp;
        }
    }
    return 0;
}

static inline int dec_value_type(struct reader *r, uint64_t *type, uint64_t *unit)
{
    uint64_t f[3];
    int rc = dec_flat(r, f, 3, 0, NULL, NULL);
    *type = f[1];
    *unit = f[2];
    return rc;
}

static inline int dec_label(struct reader *r, struct dlabel *l)
{
    uint64_t f[5];
    int rc = dec_flat(r, f, 5, 0, NULL, NULL);
    *l = (struct dlabel){.key = f[1], .str = f[2], .num = (int64_t)f[3], .unit = f[4]};
    return rc;
}

static inline int dec_location(struct reader *r, struct dloc *l)
{
    uint64_t f[3], line[2] = {0, 0};
    struct reader sub = {0};
    memset(l, 0, sizeof *l);
    if (dec_flat(r, f, 3, 4, &l->nlines, &sub) || (l->nlines && dec_flat(&sub, line, 2, 0, NULL, NULL)))
        return -1;
    l->id = f[1];
    l->mapping_id = f[2];
    l->function_id = line[1];
    return 0;
}

static inline int dec_function(struct reader *r, struct dfunc *fn)
{
    uint64_t f[5];
    int rc = dec_flat(r, f, 5, 0, NULL, NULL);
    *fn = (struct dfunc){.id = f[1], .name = f[2], .system_name = f[3], .filename = f[4]};
    return rc;
}

static inline int dec_mapping(struct reader *r, struct dmapping *m)
{
    uint64_t f[8];
    int rc = dec_flat(r, f, 8, 0, NULL, NULL);
    *m = (struct dmapping){.id = f[1], .filename = f[5], .has_functions = f[7]};
    return rc;
}

static inline int dec_sample(struct reader *r, struct dsample *s)
{
    int f, wt;
    uint64_t v = 0, vals[8];
    struct reader sub = {0};
    memset(s, 0, sizeof *s);
    while (r->p < r->end) {
        if (rd_field(r, &f, &wt, &v, &sub))
            return -1;
        if (f == 1 && rd_repeated(wt, v, &sub, s->locs, &s->nlocs, NELEM(s->locs)))
            return -1;
        if (f == 2) {
            size_t before = s->nvals;
            if (rd_repeated(wt, v, &sub, vals, &s->nvals, NELEM(vals)))
                return -1;
            for (size_t i = before; i < s->nvals; i++)
                s->vals[i] = (int64_t)vals[i];
        }
        if (f == 3 && (s->nlabels >= NELEM(s->labels) || dec_label(&sub, &s->labels[s->nlabels++])))
            return -1;
    }
    return 0;
}

/* Makes room in arr (n elements of `size` bytes, allocated by this function) for element n,
 * zeroed; geometric growth, so that decoding stays linear (under ASan too). */
static inline void *grow_one(void *arr, size_t n, size_t size)
{
    char *na = arr;
    if (n == 0 || !(n & (n - 1))) { /* capacity doubles at powers of two: n + 1 fits */
        na = realloc(arr, (n ? 2 * n : 1) * size);
        if (!na)
            return NULL;
    }
    memset(na + n * size, 0, size);
    return na;
}

static inline void profile_free(struct profile *pr)
{
    for (size_t i = 0; i < pr->nstr; i++)
        free(pr->strs[i]);
    free(pr->strs);
    free(pr->samples);
    free(pr->locs);
    free(pr->funcs);
    memset(pr, 0, sizeof *pr);
}

static inline int dec_top_field(struct profile *pr, int f, int wt, uint64_t v, struct reader *sub)
{
    switch (f) {
    case 1:
        if (pr->ntypes >= NELEM(pr->st_type))
            return -1;
        return dec_value_type(sub, &pr->st_type[pr->ntypes], &pr->st_unit[pr->ntypes]) ||
               !(++pr->ntypes);
    case 2: {
        void *na = grow_one(pr->samples, pr->nsamples, sizeof *pr->samples);
        if (!na)
            return -1;
        pr->samples = na;
        return dec_sample(sub, &pr->samples[pr->nsamples++]);
    }
    case 3:
        if (pr->nmaps >= NELEM(pr->maps))
            return -1;
        return dec_mapping(sub, &pr->maps[pr->nmaps++]);
    case 4: {
        void *na = grow_one(pr->locs, pr->nlocs, sizeof *pr->locs);
        if (!na)
            return -1;
        pr->locs = na;
        return dec_location(sub, &pr->locs[pr->nlocs++]);
    }
    case 5: {
        void *na = grow_one(pr->funcs, pr->nfuncs, sizeof *pr->funcs);
        if (!na)
            return -1;
        pr->funcs = na;
        return dec_function(sub, &pr->funcs[pr->nfuncs++]);
    }
    case 6: {
        size_t len = (size_t)(sub->end - sub->p);
        char *str = malloc(len + 1);
        void *na = str ? grow_one(pr->strs, pr->nstr, sizeof *pr->strs) : NULL;
        if (!na) {
            free(str);
            return -1;
        }
        pr->strs = na;
        memcpy(str, sub->p, len);
        str[len] = 0;
        pr->strs[pr->nstr++] = str;
        return 0;
    }
    case 9: pr->time_nanos = (int64_t)v; return 0;
    case 10: pr->duration_nanos = (int64_t)v; return 0;
    case 11: return dec_value_type(sub, &pr->period_type[0], &pr->period_type[1]);
    case 12: pr->period = (int64_t)v; return 0;
    case 13: return rd_repeated(wt, v, sub, pr->comments, &pr->ncomments, NELEM(pr->comments));
    case 14: pr->default_type = v; return 0;
    default: return 0;
    }
}

static inline int gunzip(const unsigned char *in, size_t inlen, unsigned char **out, size_t *outlen)
{
    z_stream z;
    size_t cap = inlen * 4 + 1024, len = 0;
    unsigned char *buf = malloc(cap);
    int rc;

    memset(&z, 0, sizeof z);
    if (!buf || inflateInit2(&z, 15 + 16) != Z_OK) {
        free(buf);
        return -1;
    }
    z.next_in = (unsigned char *)in;
    z.avail_in = (uInt)inlen;
    do {
        if (len == cap) {
            unsigned char *nb = realloc(buf, cap * 2);
            if (!nb)
                break;
            buf = nb;
            cap *= 2;
        }
        z.next_out = buf + len;
        z.avail_out = (uInt)(cap - len);
        rc = inflate(&z, Z_NO_FLUSH);
        len = cap - z.avail_out;
    } while (rc == Z_OK);
    inflateEnd(&z);
    if (rc != Z_STREAM_END || z.avail_in) {
        free(buf);
        return -1;
    }
    *out = buf;
    *outlen = len;
    return 0;
}

/* gunzips and decodes a whole profile; 0 on success. */
static inline int decode(const unsigned char *gz, size_t gzlen, struct profile *pr)
{
    unsigned char *raw;
    size_t rawlen;
    struct reader r, sub = {0};
    int f, wt, rc = 0;
    uint64_t v = 0;

    memset(pr, 0, sizeof *pr);
    if (gzlen < 2 || gz[0] != 0x1f || gz[1] != 0x8b || gunzip(gz, gzlen, &raw, &rawlen))
        return -1;
    r.p = raw;
    r.end = raw + rawlen;
    r.err = 0;
    while (!rc && r.p < r.end) {
        rc = rd_field(&r, &f, &wt, &v, &sub);
        if (!rc)
            rc = dec_top_field(pr, f, wt, v, &sub);
    }
    free(raw);
    if (rc)
        profile_free(pr);
    return rc ? -1 : 0;
}

/* ---- lookups over a decoded profile ---- */

static inline const char *str_at(const struct profile *pr, uint64_t i)
{
    return i < pr->nstr ? pr->strs[i] : "<bad string index>";
}

static inline const struct dfunc *func_by_id(const struct profile *pr, uint64_t id)
{
    for (size_t i = 0; i < pr->nfuncs; i++)
        if (pr->funcs[i].id == id)
            return &pr->funcs[i];
    return NULL;
}

static inline const struct dloc *loc_by_id(const struct profile *pr, uint64_t id)
{
    for (size_t i = 0; i < pr->nlocs; i++)
        if (pr->locs[i].id == id)
            return &pr->locs[i];
    return NULL;
}

static inline const char *loc_name(const struct profile *pr, uint64_t loc_id)
{
    const struct dloc *l = loc_by_id(pr, loc_id);
    const struct dfunc *fn = l ? func_by_id(pr, l->function_id) : NULL;
    return fn ? str_at(pr, fn->name) : "<bad location>";
}

/* The string value of label `key` in s, or NULL. */
static inline const char *label_str(const struct profile *pr, const struct dsample *s, const char *key)
{
    for (size_t i = 0; i < s->nlabels; i++)
        if (!strcmp(str_at(pr, s->labels[i].key), key))
            return str_at(pr, s->labels[i].str);
    return NULL;
}

static inline const struct dlabel *label_of(const struct profile *pr, const struct dsample *s,
                                     const char *key)
{
    for (size_t i = 0; i < s->nlabels; i++)
        if (!strcmp(str_at(pr, s->labels[i].key), key))
            return &s->labels[i];
    return NULL;
}

static inline int has_comment(const struct profile *pr, const char *needle)
{
    for (size_t i = 0; i < pr->ncomments; i++)
        if (strstr(str_at(pr, pr->comments[i]), needle))
            return 1;
    return 0;
}

/* profile.proto invariants any reader relies on; returns the number of violations. */
static inline int check_invariants(const struct profile *pr)
{
    int bad = 0;
#define INV(cond, ...)                                                                             \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            bad++;                                                                                 \
            printf("invariant: ");                                                                 \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)
    INV(pr->nstr >= 1 && pr->strs[0][0] == 0, "string_table[0] must be \"\"");
    for (size_t i = 1; i < pr->nstr; i++)
        INV(pr->strs[i][0], "only string 0 may be empty (%zu)", i);
    INV(pr->ntypes >= 1, "no sample types");
    for (size_t t = 0; t < pr->ntypes; t++)
        INV(pr->st_type[t] < pr->nstr && pr->st_unit[t] < pr->nstr, "sample_type string");
    INV(pr->nmaps == 1 && pr->maps[0].id == 1 && pr->maps[0].has_functions == 1,
        "one mapping, id 1, has_functions");
    for (size_t i = 0; i < pr->nfuncs; i++) {
        const struct dfunc *fn = &pr->funcs[i];
        INV(fn->id != 0, "function id 0");
        INV(fn->name && fn->name < pr->nstr, "function name index");
        INV(fn->system_name == fn->name, "system_name == name");
        INV(func_by_id(pr, fn->id) == fn, "duplicate function id %llu", (unsigned long long)fn->id);
    }
    for (size_t i = 0; i < pr->nlocs; i++) {
        const struct dloc *l = &pr->locs[i];
        INV(l->id != 0 && loc_by_id(pr, l->id) == l, "location id");
        INV(l->mapping_id == 1, "location mapping");
        INV(l->nlines == 1 && func_by_id(pr, l->function_id), "location line -> function");
    }
    for (size_t i = 0; i < pr->nsamples; i++) {
        const struct dsample *s = &pr->samples[i];
        INV(s->nvals == pr->ntypes, "sample %zu has %zu values", i, s->nvals);
        INV(s->nlocs >= 1, "sample %zu has no location", i);
        for (size_t k = 0; k < s->nlocs; k++)
            INV(loc_by_id(pr, s->locs[k]), "sample %zu location %llu", i,
                (unsigned long long)s->locs[k]);
        for (size_t k = 0; k < s->nlabels; k++)
            INV(s->labels[k].key && s->labels[k].key < pr->nstr && s->labels[k].str < pr->nstr,
                "label strings");
    }
    for (size_t i = 0; i < pr->ncomments; i++)
        INV(pr->comments[i] < pr->nstr, "comment index");
    INV(pr->default_type < pr->nstr, "default_sample_type index");
#undef INV
    return bad;
}

#endif
