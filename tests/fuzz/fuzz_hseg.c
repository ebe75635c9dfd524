/*
 * fuzz_hseg - the history's segment reader (prof_hseg), which reads files a crash, a full disk
 * or another program may have left: the input is a payload (after inflate) decoded for each kind,
 * with and without a label filter, into an accumulator with a small node cap; and the same bytes
 * as a whole segment file (header, checksum, inflate). Reads stay inside the input (ASan); a
 * refused payload adds nothing; an accepted one gives a view whose every parent comes before its
 * node, whose rows point at its nodes, and which encodes and decodes again to the same sums.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuzz_input.h"
#include "prof_hseg.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int64_t total(const struct prof_view *v, int slot)
{
    int64_t s = 0;
    for (size_t i = 0; i < v->nrows; i++)
        s = s > INT64_MAX - v->rows[i].v[slot] ? INT64_MAX : s + v->rows[i].v[slot];
    return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t *p = malloc(size ? size : 1); /* exact size for ASan */
    if (!p)
        abort();
    memcpy(p, data, size);
    char why[160];
    for (int kind = 0; kind < PK_COUNT; kind++) {
        struct prof_hacc acc;
        prof_hacc_init(&acc, 64);
        struct prof_mark marks[4];
        size_t nm = 0;
        int rc = prof_hseg_decode_payload(p, size, kind, kind == PK_ALLOC ? "a" : NULL, &acc,
                                          marks, 4, &nm, NULL, why, sizeof why);
        if (rc) {
            FUZZ_CHECK(acc.k[kind].nrows == 0 || acc.oom, "a refused payload added rows");
            prof_hacc_free(&acc);
            continue;
        }
        FUZZ_CHECK(nm <= 4, "%zu marks", nm);
        for (size_t i = 0; i < nm; i++)
            FUZZ_CHECK(memchr(marks[i].label, 0, sizeof marks[i].label), "mark unterminated");
        struct prof_view v;
        if (prof_hacc_take_view(&acc, kind, &v)) {
            prof_hacc_free(&acc);
            continue;
        }
        FUZZ_CHECK(v.nnodes >= 1 && v.nnodes <= 64, "%zu nodes", v.nnodes);
        for (size_t i = 1; i < v.nnodes; i++)
            FUZZ_CHECK(v.parent[i] < i && v.name[i], "node %zu", i);
        for (size_t i = 0; i < v.nrows; i++)
            FUZZ_CHECK(v.rows[i].node < v.nnodes && v.rows[i].label, "row %zu", i);
        /* encoded again and read back: the same sums */
        struct prof_hacc again;
        prof_hacc_init(&again, 64);
        prof_hacc_add_view(&again, &v, NULL);
        struct prof_scratch m = {0};
        unsigned char *seg;
        size_t len;
        if (!prof_hseg_encode(&again, 1, 2, 3, NULL, 0, &m, &seg, &len)) {
            struct prof_hacc back;
            prof_hacc_init(&back, 64);
            FUZZ_CHECK(!prof_hseg_decode(seg, len, kind, NULL, &back, NULL, 0, NULL, NULL, why,
                                         sizeof why), "own segment refused: %s", why);
            struct prof_view w;
            if (!prof_hacc_take_view(&back, kind, &w)) {
                for (int s = 0; s < PROF_NVALUES; s++)
                    FUZZ_CHECK(total(&w, s) == total(&v, s), "slot %d: %lld vs %lld", s,
                               (long long)total(&w, s), (long long)total(&v, s));
                prof_view_free(&w);
            }
            prof_hacc_free(&back);
        }
        prof_scratch_release(&m);
        prof_hacc_free(&again);
        prof_view_free(&v);
        prof_hacc_free(&acc);
    }
    /* the runtime counters' points: finite values, strings of their own; encoded again and
     * read back, the same points */
    {
        struct prof_hacc acc;
        prof_hacc_init(&acc, 64);
        if (prof_hseg_decode_payload(p, size, PROF_HSEG_COUNTERS, NULL, &acc, NULL, 0, NULL, NULL,
                                     why, sizeof why)) {
            FUZZ_CHECK(acc.ncpt == 0 || acc.oom, "a refused payload added counter points");
        } else {
            for (uint32_t i = 0; i < acc.ncpt; i++)
                FUZZ_CHECK(acc.cpt[i].name && acc.cpt[i].units && isfinite(acc.cpt[i].value),
                           "counter point %u", i);
            struct prof_hacc again;
            prof_hacc_init(&again, 64);
            prof_hacc_add_counters(&again, acc.cpt, acc.ncpt);
            struct prof_scratch m = {0};
            unsigned char *seg;
            size_t len;
            if (!again.oom && !prof_hseg_encode(&again, 1, 2, 3, NULL, 0, &m, &seg, &len)) {
                struct prof_hacc back;
                prof_hacc_init(&back, 64);
                FUZZ_CHECK(!prof_hseg_decode(seg, len, PROF_HSEG_COUNTERS, NULL, &back, NULL, 0,
                                             NULL, NULL, why, sizeof why),
                           "own segment refused: %s", why);
                FUZZ_CHECK(back.ncpt == acc.ncpt, "%u points back of %u", back.ncpt, acc.ncpt);
                for (uint32_t i = 0; i < back.ncpt && i < acc.ncpt; i++)
                    FUZZ_CHECK(back.cpt[i].value == acc.cpt[i].value &&
                               !strcmp(back.cpt[i].name, acc.cpt[i].name),
                               "counter point %u changed", i);
                prof_hacc_free(&back);
            }
            prof_scratch_release(&m);
            prof_hacc_free(&again);
        }
        prof_hacc_free(&acc);
    }
    /* the same bytes as a file */
    struct prof_hacc acc;
    prof_hacc_init(&acc, 64);
    if (prof_hseg_decode(p, size, PK_CPU, NULL, &acc, NULL, 0, NULL, NULL, why, sizeof why))
        FUZZ_CHECK(acc.k[PK_CPU].nrows == 0, "a refused segment added rows");
    prof_hacc_free(&acc);
    free(p);
    return 0;
}
