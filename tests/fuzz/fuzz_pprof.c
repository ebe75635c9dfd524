/*
 * fuzz_pprof - the pprof writer round trip: samples built from the input (frame names of any
 * bytes, NULL and "" frames, empty stacks, any int64 values, string and numeric labels with and
 * without units, NULL/"" keys, comments, a default sample type, sample caps) go through
 * pprof_add_sample_ex + pprof_finish; the gzip'd profile.proto is decoded back by the unit test's
 * independent decoder (tests/unit/pprof_decode.h) and must satisfy the profile.proto invariants
 * and hold exactly the samples that were accepted, in order, with the same frames, values and
 * labels.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "pprof_encoder.h"
#include "pprof_decode.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define MAXS 64
#define MAXF 12
#define MAXL 4

struct want {
    int nframes;
    const char *frames[MAXF];
    int64_t vals[4];
    int nlabels;
    const char *keys[MAXL], *strs[MAXL], *units[MAXL];
    int64_t nums[MAXL];
};

static const char *pool_pick(struct fin *in, char **pool, int npool)
{
    uint8_t k = fin_u8(in);
    if (k == 255)
        return NULL;
    if (k == 254)
        return "";
    return pool[k % npool];
}

static const char *norm_frame(const char *f)
{
    return f && f[0] ? f : PPROF_UNKNOWN_FRAME;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fin in = {data, size};
    char *pool[8];
    for (int i = 0; i < 8; i++)
        pool[i] = fin_str(&in, 40);
    int ntypes = fin_u8(&in) % 4 + 1;
    pprof_value_type types[4];
    for (int t = 0; t < ntypes; t++) {
        types[t].type = pool[t];
        types[t].unit = pool[(t + 4) % 8];
    }
    struct pprof_opts opts = {.max_samples = fin_u8(&in) % 80, .gzip_level = fin_u8(&in) % 10};
    pprof_builder *b = pprof_new_opts(types, ntypes, types[0], (int64_t)fin_u64(&in), &opts);
    FUZZ_CHECK(b != NULL, "pprof_new_opts");
    pprof_set_time(b, (int64_t)fin_u64(&in), (int64_t)fin_u32(&in));
    static struct want want[MAXS];
    int nwant = 0, ndropped = 0, ncomments = 0;
    while (fin_more(&in) && nwant < MAXS) {
        struct want *w = &want[nwant];
        memset(w, 0, sizeof *w);
        w->nframes = fin_u8(&in) % (MAXF + 1);
        for (int k = 0; k < w->nframes; k++)
            w->frames[k] = pool_pick(&in, pool, 8);
        for (int t = 0; t < ntypes; t++)
            w->vals[t] = (int64_t)fin_u64(&in);
        w->nlabels = fin_u8(&in) % (MAXL + 1);
        for (int l = 0; l < w->nlabels; l++) {
            w->keys[l] = pool_pick(&in, pool, 8);
            uint8_t kind = fin_u8(&in);
            w->strs[l] = kind & 1 ? pool_pick(&in, pool, 8) : NULL;
            w->units[l] = kind & 2 ? pool_pick(&in, pool, 8) : NULL;
            w->nums[l] = (int64_t)fin_u64(&in);
        }
        int rc = pprof_add_sample_ex(b, w->frames, w->nframes, w->vals, w->keys, w->strs, w->nums,
                                     w->units, w->nlabels);
        FUZZ_CHECK(rc == 0 || rc == 1, "add_sample rc %d", rc);
        if (rc == 0)
            nwant++;
        else
            ndropped++;
        uint8_t op = fin_u8(&in);
        if (op == 1 && ncomments++ < 8) /* the decoder keeps 16 */
            pprof_add_comment(b, pool_pick(&in, pool, 8));
        else if (op == 2)
            pprof_set_default_sample_type(b, pool_pick(&in, pool, 8));
    }
    struct pprof_stats st;
    pprof_get_stats(b, &st);
    FUZZ_CHECK(st.samples == (size_t)nwant && st.dropped == (size_t)ndropped, "stats");
    unsigned char *out = NULL;
    size_t outlen = 0;
    FUZZ_CHECK(pprof_finish(b, &out, &outlen) == 0, "pprof_finish");
    struct profile pr;
    FUZZ_CHECK(decode(out, outlen, &pr) == 0, "decode");
    FUZZ_CHECK(check_invariants(&pr) == 0, "invariants");
    FUZZ_CHECK(pr.ntypes == (size_t)ntypes, "sample types %zu", pr.ntypes);
    for (int t = 0; t < ntypes; t++)
        FUZZ_CHECK(!strcmp(str_at(&pr, pr.st_type[t]), types[t].type) &&
                       !strcmp(str_at(&pr, pr.st_unit[t]), types[t].unit),
                   "sample type %d", t);
    FUZZ_CHECK(pr.nsamples == (size_t)nwant, "samples %zu, want %d", pr.nsamples, nwant);
    for (int i = 0; i < nwant; i++) {
        const struct want *w = &want[i];
        const struct dsample *s = &pr.samples[i];
        int nf = w->nframes ? w->nframes : 1;
        FUZZ_CHECK(s->nlocs == (size_t)nf, "sample %d frames %zu want %d", i, s->nlocs, nf);
        for (int k = 0; k < nf; k++)
            FUZZ_CHECK(!strcmp(loc_name(&pr, s->locs[k]), norm_frame(w->nframes ? w->frames[k] : NULL)),
                       "sample %d frame %d", i, k);
        FUZZ_CHECK(s->nvals == (size_t)ntypes, "sample %d values", i);
        for (int t = 0; t < ntypes; t++)
            FUZZ_CHECK(s->vals[t] == w->vals[t], "sample %d value %d", i, t);
        size_t nl = 0;
        for (int l = 0; l < w->nlabels; l++) {
            if (!w->keys[l] || !w->keys[l][0])
                continue; /* skipped, as documented */
            FUZZ_CHECK(nl < s->nlabels, "sample %d lost label %d", i, l);
            const struct dlabel *d = &s->labels[nl++];
            FUZZ_CHECK(!strcmp(str_at(&pr, d->key), w->keys[l]), "sample %d label %d key", i, l);
            if (w->strs[l]) {
                FUZZ_CHECK(!strcmp(str_at(&pr, d->str), w->strs[l]) && d->num == 0,
                           "sample %d label %d string", i, l);
            } else {
                FUZZ_CHECK(d->str == 0 && d->num == w->nums[l], "sample %d label %d number", i, l);
                FUZZ_CHECK(!strcmp(str_at(&pr, d->unit), w->units[l] ? w->units[l] : ""),
                           "sample %d label %d unit", i, l);
            }
        }
        FUZZ_CHECK(nl == s->nlabels, "sample %d has %zu labels, want %zu", i, s->nlabels, nl);
    }
    profile_free(&pr);
    free(out);
    pprof_free(b);
    for (int i = 0; i < 8; i++)
        free(pool[i]);
    return 0;
}
