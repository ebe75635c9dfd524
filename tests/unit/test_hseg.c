/*
 * test_hseg.c - the history's segments (prof_hseg):
 *   - a minute of the store's per-second rows, merged and encoded, decodes to the same paths,
 *     threads, labels and sums, kind by kind; a label filter keeps only its rows; marks come back;
 *   - two segments merged with the store's own view of a later window give the sums of all three;
 *   - a segment cut at every byte offset, or with any one byte changed, is refused with a reason
 *     and adds nothing (a crash mid-write, a torn file, a disk that flipped a bit);
 *   - payloads that lie (a parent after its child, indexes past the tables, counts larger than
 *     the bytes, trailing bytes) are refused by the payload decoder itself, checksum aside;
 *   - the accumulator's node cap cuts a path where the tree ends and counts it;
 *   - the GC's per-second records and collections come back to the microsecond, and only when
 *     asked for;
 *   - file names parse back to their span, and nothing else parses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zlib.h>

#include "prof_hseg.h"
#include "prof_store.h"

#include "unit_check.h"

static int64_t T0;

static void add(int kind, int64_t sec, const char *a, const char *b, uint32_t tid,
                const char *label, int64_t value)
{
    const char *frames[2] = {a, b};
    int64_t v[PROF_NVALUES] = {value, value * 10, 1};
    prof_store_add(kind, (double)sec + 0.5, frames, b ? 2 : 1, tid, label, v);
}

/* The sum of v[slot] over the rows whose path is a;b (b NULL: a alone) and label `label`. */
static int64_t sum_path(const struct prof_view *v, const char *a, const char *b,
                        const char *label, int slot)
{
    int64_t s = 0;
    for (size_t r = 0; r < v->nrows; r++) {
        uint32_t n = v->rows[r].node;
        const char *leaf = v->name[n];
        uint32_t p = v->parent[n];
        int match = b ? (!strcmp(leaf, b) && p && !strcmp(v->name[p], a) && v->parent[p] == 0)
                      : (!strcmp(leaf, a) && p == 0);
        if (match && (!label || !strcmp(v->rows[r].label, label)))
            s += v->rows[r].v[slot];
    }
    return s;
}

static int encode_window(int64_t from, int64_t to, const struct prof_mark *marks, size_t nm,
                         struct prof_scratch *m, unsigned char **buf, size_t *len)
{
    struct prof_hacc acc;
    prof_hacc_init(&acc, 10000);
    for (int k = 0; k < PK_COUNT; k++) {
        struct prof_view v;
        if (prof_store_view_range(k, from, to - 1, NULL, &v))
            return -1;
        if (v.nrows)
            prof_hacc_add_view(&acc, &v, NULL);
        prof_view_free(&v);
    }
    int rc = prof_hseg_encode(&acc, from, to, 4242, marks, nm, m, buf, len);
    prof_hacc_free(&acc);
    return rc;
}

static void test_round_trip(void)
{
    struct prof_mark marks[2] = {{.id = 1, .t = (double)T0 + 3.25}, {.id = 2, .t = (double)T0 + 7}};
    strcpy(marks[0].label, "deploy 42");
    strcpy(marks[1].label, "");
    struct prof_scratch m = {0};
    unsigned char *buf;
    size_t len;
    CHECK(!encode_window(T0, T0 + 10, marks, 2, &m, &buf, &len), "encode");
    /* cpu: main;work on two threads over several seconds, main alone once */
    struct prof_hacc acc;
    prof_hacc_init(&acc, 10000);
    struct prof_mark back[4];
    size_t nback = 0;
    struct prof_hseg_info info;
    char why[120] = "";
    CHECK(!prof_hseg_decode(buf, len, PK_CPU, NULL, &acc, back, 4, &nback, &info, why,
                            sizeof why), "decode: %s", why);
    CHECK(info.t_from == T0 && info.t_to == T0 + 10 && info.pid == 4242, "info %lld %lld %u",
          (long long)info.t_from, (long long)info.t_to, info.pid);
    CHECK(info.nkinds == 3, "kinds %u", info.nkinds);
    CHECK(nback == 2 && !strcmp(back[0].label, "deploy 42") && back[0].t == (double)T0 + 3.25 &&
              back[1].label[0] == 0 && back[1].t == (double)T0 + 7,
          "marks %zu '%s' %f", nback, back[0].label, back[0].t);
    struct prof_view v;
    CHECK(!prof_hacc_take_view(&acc, PK_CPU, &v), "take");
    CHECK(v.t_from == (double)T0 && v.t_to == (double)(T0 + 10), "span %f %f", v.t_from, v.t_to);
    CHECK(sum_path(&v, "main", "work", NULL, 0) == 3 * 7 + 2 * 5, "cpu main;work %lld",
          (long long)sum_path(&v, "main", "work", NULL, 0));
    CHECK(sum_path(&v, "main", "work", NULL, 1) == 10 * (3 * 7 + 2 * 5), "v1");
    CHECK(sum_path(&v, "main", NULL, NULL, 0) == 9, "cpu main");
    int threads = 0;
    for (size_t r = 0; r < v.nrows; r++)
        threads += v.rows[r].tid == 7 || v.rows[r].tid == 8;
    CHECK(threads >= 2, "rows keep their threads (%d)", threads);
    CHECK(v.nrows == 3, "per-second rows merged: %zu rows", v.nrows);
    prof_view_free(&v);
    /* allocations with labels; a filter keeps one */
    prof_hacc_init(&acc, 10000);
    CHECK(!prof_hseg_decode(buf, len, PK_ALLOC, "System.String", &acc, NULL, 0, NULL, &info,
                            why, sizeof why), "decode alloc: %s", why);
    CHECK(!prof_hacc_take_view(&acc, PK_ALLOC, &v), "take alloc");
    CHECK(sum_path(&v, "main", "alloc", "System.String", 0) == 40, "strings %lld",
          (long long)sum_path(&v, "main", "alloc", "System.String", 0));
    CHECK(sum_path(&v, "main", "alloc", "System.Byte[]", 0) == 0, "filtered out");
    prof_view_free(&v);
    /* a kind the segment does not hold: an empty view of it */
    prof_hacc_init(&acc, 10000);
    CHECK(!prof_hseg_decode(buf, len, PK_LOCK, NULL, &acc, NULL, 0, NULL, &info, why, sizeof why),
          "decode lock");
    CHECK(!prof_hacc_take_view(&acc, PK_LOCK, &v) && v.nrows == 0 && v.nnodes == 1,
          "empty lock view");
    prof_view_free(&v);
    prof_scratch_release(&m);
}

static void test_gc_records(void)
{
    struct prof_hacc acc;
    prof_hacc_init(&acc, 100);
    struct prof_gc_second g[2] = {{.t = (double)T0 + 1, .dt = 1, .process_cpu_s = 0.9,
                                   .gc_cpu_s = 0.25, .gc_threads_cpu_s = 0.2,
                                   .gc_user_cpu_s = 0.05, .pause_s = 0.012,
                                   .heap = {1, 2, 3, 4, 5}, .collections = {7, 1, 0}},
                                  {.t = (double)T0 + 2, .dt = 1.001, .gc_cpu_s = 0.5}};
    struct prof_gc_collection c = {.number = 42, .generation = 2, .reason = 1, .type = 1,
                                   .complete = 1, .t = (double)T0 + 1.5, .duration_ms = 12.5,
                                   .pause_ms = 3.25, .heap_before = 1000, .heap_after = 600,
                                   .promoted = 300};
    CHECK(!prof_hacc_add_gc(&acc, g, 2, &c, 1), "add");
    acc.gcoll_omitted = 1234;
    struct prof_scratch m = {0};
    unsigned char *buf;
    size_t len;
    CHECK(!prof_hseg_encode(&acc, T0, T0 + 10, 1, NULL, 0, &m, &buf, &len), "encode");
    prof_hacc_free(&acc);
    char why[120] = "";
    /* a profile kind does not take them; PROF_HSEG_GC takes them alone */
    prof_hacc_init(&acc, 100);
    CHECK(!prof_hseg_decode(buf, len, PK_CPU, NULL, &acc, NULL, 0, NULL, NULL, why, sizeof why) &&
              acc.ngsec == 0 && acc.gcoll_omitted == 0, "cpu takes no GC record: %s", why);
    prof_hacc_free(&acc);
    prof_hacc_init(&acc, 100);
    CHECK(!prof_hseg_decode(buf, len, PROF_HSEG_GC, NULL, &acc, NULL, 0, NULL, NULL, why,
                            sizeof why), "decode gc: %s", why);
    CHECK(acc.ngsec == 2 && acc.ngcoll == 1 && acc.k[PK_CPU].nnodes == 0, "gc only: %u %u %u",
          acc.ngsec, acc.ngcoll, acc.k[PK_CPU].nnodes);
    CHECK(acc.gcoll_omitted == 1234, "omitted collections back: %llu",
          (unsigned long long)acc.gcoll_omitted);
    const struct prof_gc_second *b = acc.gsec;
    CHECK(b[0].t == (double)T0 + 1 && b[0].process_cpu_s == 0.9 && b[0].gc_cpu_s == 0.25 &&
              b[0].gc_user_cpu_s == 0.05 && b[0].pause_s == 0.012 && b[0].heap[4] == 5 &&
              b[0].collections[0] == 7 && b[1].dt == 1.001,
          "seconds back (to the microsecond): %f %f %f", b[0].t, b[0].pause_s, b[1].dt);
    const struct prof_gc_collection *cb = acc.gcoll;
    CHECK(cb->number == 42 && cb->generation == 2 && cb->type == 1 && cb->complete &&
              cb->t == (double)T0 + 1.5 && cb->duration_ms == 12.5 && cb->pause_ms == 3.25 &&
              cb->heap_before == 1000 && cb->heap_after == 600 && cb->promoted == 300,
          "collection back: %llu %f %f", (unsigned long long)cb->number, cb->t, cb->pause_ms);
    prof_hacc_free(&acc);
    prof_scratch_release(&m);
}

static uint32_t get32(const unsigned char *b)
{
    return (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
}

static void put32(unsigned char *b, uint32_t x)
{
    for (int i = 0; i < 4; i++)
        b[i] = (unsigned char)(x >> (8 * i));
}

/* Adds the store's one CPU row of T0 + 12 (main > later) to a fresh accumulator. */
static void add_one_cpu_row(struct prof_hacc *acc)
{
    prof_hacc_init(acc, 100);
    struct prof_view v;
    CHECK(!prof_store_view_range(PK_CPU, T0 + 12, T0 + 12, NULL, &v) && v.nrows == 1,
          "one row at T0 + 12");
    prof_hacc_add_view(acc, &v, NULL);
    prof_view_free(&v);
}

/* The segment in buf re-made as version 1: its payload without version 2's end (the last two
 * bytes: no collection omitted, no counters), the header's version 1. The bytes in *out
 * (malloc'd). */
static size_t as_version_1(const unsigned char *buf, size_t len, unsigned char **out)
{
    uLongf raw = get32(buf + 12);
    unsigned char *p = malloc(raw), *z = malloc(compressBound(raw) + PROF_HSEG_HEADER);
    CHECK(p && z && uncompress(p, &raw, buf + PROF_HSEG_HEADER, len - PROF_HSEG_HEADER) == Z_OK &&
              raw > 1 && p[raw - 1] == 0 && p[raw - 2] == 0, "inflate");
    uLongf zn = compressBound(raw);
    CHECK(compress2(z + PROF_HSEG_HEADER, &zn, p, raw - 2, 6) == Z_OK, "deflate");
    memcpy(z, buf, PROF_HSEG_HEADER);
    z[8] = 1;
    put32(z + 12, (uint32_t)(raw - 2));
    put32(z + 16, (uint32_t)zn);
    put32(z + 20, (uint32_t)crc32(0L, z + PROF_HSEG_HEADER, (uInt)zn));
    free(p);
    *out = z;
    return PROF_HSEG_HEADER + zn;
}

static void test_counters(void)
{
    struct prof_hacc acc;
    struct prof_counter_point pt[3] = {
        {.name = "alloc-rate", .units = "B", .incrementing = 1, .t_unix = (double)T0 + 1.25,
         .value = 123456789.0, .interval_s = 1},
        {.name = "alloc-rate", .units = "B", .incrementing = 1, .t_unix = (double)T0 + 2.25,
         .value = 0.5, .interval_s = 1},
        {.name = "working-set", .units = "MB", .incrementing = 0, .t_unix = (double)T0 + 1.3,
         .value = 61.75, .interval_s = 1}};
    add_one_cpu_row(&acc);
    CHECK(!prof_hacc_add_counters(&acc, pt, 3) && acc.ncpt == 3, "add");
    struct prof_scratch m = {0};
    unsigned char *buf;
    size_t len;
    CHECK(!prof_hseg_encode(&acc, T0, T0 + 10, 1, NULL, 0, &m, &buf, &len), "encode");
    prof_hacc_free(&acc);
    char why[120] = "";
    prof_hacc_init(&acc, 100);
    CHECK(!prof_hseg_decode(buf, len, PK_CPU, NULL, &acc, NULL, 0, NULL, NULL, why, sizeof why) &&
              acc.ncpt == 0 && acc.k[PK_CPU].nrows == 1, "cpu takes no counter: %s", why);
    prof_hacc_free(&acc);
    prof_hacc_init(&acc, 100);
    CHECK(!prof_hseg_decode(buf, len, PROF_HSEG_COUNTERS, NULL, &acc, NULL, 0, NULL, NULL, why,
                            sizeof why), "decode counters: %s", why);
    CHECK(acc.ncpt == 3 && acc.k[PK_CPU].nnodes == 0, "counters only: %u", acc.ncpt);
    for (int i = 0; i < 3 && i < (int)acc.ncpt; i++)
        CHECK(!strcmp(acc.cpt[i].name, pt[i].name) && !strcmp(acc.cpt[i].units, pt[i].units) &&
                  acc.cpt[i].incrementing == pt[i].incrementing &&
                  acc.cpt[i].value == pt[i].value && acc.cpt[i].t_unix == pt[i].t_unix &&
                  acc.cpt[i].interval_s == pt[i].interval_s,
              "point %d back: %s %f at %f", i, acc.cpt[i].name, acc.cpt[i].value, acc.cpt[i].t_unix);
    prof_hacc_free(&acc);
    /* PROF_HSEG_ALL takes them with the rest */
    prof_hacc_init(&acc, 100);
    CHECK(!prof_hseg_decode(buf, len, PROF_HSEG_ALL, NULL, &acc, NULL, 0, NULL, NULL, why,
                            sizeof why) && acc.ncpt == 3 && acc.k[PK_CPU].nrows == 1,
          "all: %u points", acc.ncpt);
    prof_hacc_free(&acc);
    prof_scratch_release(&m);
    /* a version 1 segment (no counters' section) is read, with none */
    add_one_cpu_row(&acc);
    CHECK(!prof_hseg_encode(&acc, T0, T0 + 10, 1, NULL, 0, &m, &buf, &len), "encode cpu");
    prof_hacc_free(&acc);
    unsigned char *old;
    size_t olen = as_version_1(buf, len, &old);
    prof_hacc_init(&acc, 100);
    CHECK(!prof_hseg_decode(old, olen, PROF_HSEG_ALL, NULL, &acc, NULL, 0, NULL, NULL, why,
                            sizeof why) && acc.ncpt == 0 && acc.k[PK_CPU].nrows == 1,
          "version 1 read: %s", why);
    prof_hacc_free(&acc);
    old[8] = 3;
    CHECK(prof_hseg_decode(old, olen, PROF_HSEG_ALL, NULL, NULL, NULL, 0, NULL, NULL, why,
                           sizeof why) && strstr(why, "version 3"), "version 3 refused: '%s'", why);
    free(old);
    prof_scratch_release(&m);
    /* a value that is not a number is refused, the whole segment with it */
    prof_hacc_init(&acc, 100);
    struct prof_counter_point bad = pt[2];
    CHECK(!prof_hacc_add_counters(&acc, &bad, 1), "add");
    CHECK(!prof_hseg_encode(&acc, T0, T0 + 10, 1, NULL, 0, &m, &buf, &len), "encode");
    prof_hacc_free(&acc);
    unsigned char *nan;
    {
        /* the value's bits are the payload's last LEB128 number: replace them with a NaN's */
        uLongf raw = get32(buf + 12);
        unsigned char *p = malloc(raw + 16);
        CHECK(p && uncompress(p, &raw, buf + PROF_HSEG_HEADER, len - PROF_HSEG_HEADER) == Z_OK,
              "inflate");
        size_t end = raw - 1;
        while (end > 0 && (p[end - 1] & 0x80))
            end--;
        uint64_t bits = 0x7ff8000000000001ull;
        size_t at = end;
        do {
            p[at++] = (unsigned char)((bits & 0x7f) | (bits > 0x7f ? 0x80 : 0));
            bits >>= 7;
        } while (bits);
        prof_hacc_init(&acc, 100);
        CHECK(prof_hseg_decode_payload(p, at, PROF_HSEG_COUNTERS, NULL, &acc, NULL, 0, NULL, NULL,
                                       why, sizeof why) && acc.ncpt == 0 &&
                  strstr(why, "counter"), "a NaN accepted: '%s'", why);
        prof_hacc_free(&acc);
        nan = p;
    }
    free(nan);
    prof_scratch_release(&m);
}

static void test_merge_with_memory(void)
{
    struct prof_scratch m = {0};
    unsigned char *b1, *b2;
    size_t l1, l2;
    CHECK(!encode_window(T0, T0 + 5, NULL, 0, &m, &b1, &l1), "encode 1");
    CHECK(!encode_window(T0 + 5, T0 + 10, NULL, 0, &m, &b2, &l2), "encode 2");
    struct prof_hacc acc;
    prof_hacc_init(&acc, 10000);
    char why[120];
    CHECK(!prof_hseg_decode(b1, l1, PK_CPU, NULL, &acc, NULL, 0, NULL, NULL, why, sizeof why),
          "1");
    CHECK(!prof_hseg_decode(b2, l2, PK_CPU, NULL, &acc, NULL, 0, NULL, NULL, why, sizeof why),
          "2");
    struct prof_view mem;
    CHECK(!prof_store_view_range(PK_CPU, T0 + 10, T0 + 19, NULL, &mem), "memory view");
    prof_hacc_add_view(&acc, &mem, NULL);
    prof_view_free(&mem);
    struct prof_view v, whole;
    CHECK(!prof_hacc_take_view(&acc, PK_CPU, &v), "take");
    CHECK(!prof_store_view_range(PK_CPU, T0, T0 + 19, NULL, &whole), "whole");
    CHECK(sum_path(&v, "main", "work", NULL, 0) == sum_path(&whole, "main", "work", NULL, 0) &&
              sum_path(&v, "main", "later", NULL, 0) == 11 &&
              sum_path(&v, "main", NULL, NULL, 0) == sum_path(&whole, "main", NULL, NULL, 0),
          "disk + memory = the whole window (%lld vs %lld)",
          (long long)sum_path(&v, "main", "work", NULL, 0),
          (long long)sum_path(&whole, "main", "work", NULL, 0));
    CHECK(v.t_from == (double)T0 && v.t_to >= (double)(T0 + 19), "span %f..%f", v.t_from,
          v.t_to);
    prof_view_free(&v);
    prof_view_free(&whole);
    prof_scratch_release(&m);
}

static void test_torn_and_altered(void)
{
    struct prof_scratch m = {0};
    unsigned char *buf;
    size_t len;
    CHECK(!encode_window(T0, T0 + 10, NULL, 0, &m, &buf, &len), "encode");
    int accepted = 0, added = 0;
    char why[120];
    for (size_t cut = 0; cut < len; cut++) {
        struct prof_hacc acc;
        prof_hacc_init(&acc, 10000);
        why[0] = 0;
        accepted += !prof_hseg_decode(buf, cut, PK_CPU, NULL, &acc, NULL, 0, NULL, NULL, why,
                                      sizeof why);
        added += acc.k[PK_CPU].nrows > 0;
        if (cut == len / 2)
            CHECK(strstr(why, "torn") != NULL, "a cut file says torn: '%s'", why);
        prof_hacc_free(&acc);
    }
    CHECK(accepted == 0 && added == 0, "cut segments: %d accepted, %d added rows", accepted,
          added);
    accepted = added = 0;
    unsigned char *copy = malloc(len);
    for (size_t i = 0; i < len; i++) {
        memcpy(copy, buf, len);
        copy[i] ^= 0x20;
        struct prof_hacc acc;
        prof_hacc_init(&acc, 10000);
        accepted += !prof_hseg_decode(copy, len, PK_CPU, NULL, &acc, NULL, 0, NULL, NULL, why,
                                      sizeof why);
        added += acc.k[PK_CPU].nrows > 0;
        prof_hacc_free(&acc);
    }
    /* bytes 9-11 are padding the reader ignores */
    CHECK(accepted <= 3 && added <= 3, "altered segments: %d accepted", accepted);
    free(copy);
    prof_scratch_release(&m);
}

static int decode_payload(const unsigned char *p, size_t n, char *why, size_t cap)
{
    struct prof_hacc acc;
    prof_hacc_init(&acc, 100);
    int rc = prof_hseg_decode_payload(p, n, PK_CPU, NULL, &acc, NULL, 0, NULL, NULL, why, cap);
    int rows = (int)acc.k[PK_CPU].nrows;
    prof_hacc_free(&acc);
    return rc ? -1 : rows;
}

static void test_lying_payloads(void)
{
    char why[120];
    /* t_from t_to pid | nstr: "" "a" | nkinds 1: kind 0, 2 nodes (node 1: parent 0, name 1),
     * 1 row (node 1, tid 5, label 0, 1 2 3) | no marks | no GC seconds | no collections */
    const unsigned char good[] = {10, 20, 1, 2, 0, 1, 'a', 1, 0, 2, 0, 1, 1, 1, 5, 0, 1, 2, 3,
                                  0, 0, 0};
    CHECK(decode_payload(good, sizeof good, why, sizeof why) == 1, "good payload: %s", why);
    unsigned char bad[sizeof good];
    struct {
        size_t at;
        unsigned char to;
        const char *what;
    } lies[] = {
        {1, 5, "span backwards"},   {3, 200, "more strings than bytes"},
        {10, 1, "parent not before its child"}, {11, 9, "name past the strings"},
        {13, 4, "row's node past the nodes"},   {15, 7, "row's label past the strings"},
        {8, 9, "kind past the kinds"},          {7, 7, "more kinds than exist"},
    };
    for (size_t i = 0; i < sizeof lies / sizeof lies[0]; i++) {
        memcpy(bad, good, sizeof good);
        bad[lies[i].at] = lies[i].to;
        why[0] = 0;
        CHECK(decode_payload(bad, sizeof bad, why, sizeof why) < 0, "%s accepted", lies[i].what);
    }
    /* two bytes more are version 2's end (no collection omitted, no counters); one is half of
     * it, three one too many */
    unsigned char longer[sizeof good + 3];
    memcpy(longer, good, sizeof good);
    longer[sizeof good] = longer[sizeof good + 1] = longer[sizeof good + 2] = 0;
    CHECK(decode_payload(longer, sizeof good + 2, why, sizeof why) == 1, "version 2's end: %s",
          why);
    CHECK(decode_payload(longer, sizeof good + 1, why, sizeof why) < 0, "half of its end");
    CHECK(decode_payload(longer, sizeof longer, why, sizeof why) < 0 && strstr(why, "after"),
          "trailing bytes: '%s'", why);
    for (size_t cut = 0; cut < sizeof good; cut++)
        CHECK(decode_payload(good, cut, why, sizeof why) < 0, "payload cut at %zu accepted", cut);
    /* a NUL inside a name */
    unsigned char nul[sizeof good];
    memcpy(nul, good, sizeof good);
    nul[6] = 0;
    CHECK(decode_payload(nul, sizeof nul, why, sizeof why) < 0, "NUL in a name accepted");
}

static void test_node_cap(void)
{
    struct prof_hacc acc;
    prof_hacc_init(&acc, 3); /* root + 2 */
    struct prof_view v;
    CHECK(!prof_store_view_range(PK_CPU, T0, T0 + 19, NULL, &v), "view");
    prof_hacc_add_view(&acc, &v, NULL);
    int64_t total = 0;
    for (size_t r = 0; r < v.nrows; r++)
        total += v.rows[r].v[0];
    prof_view_free(&v);
    CHECK(acc.k[PK_CPU].nnodes == 3 && acc.cut_paths > 0, "cap: %u nodes, %llu cut",
          acc.k[PK_CPU].nnodes, (unsigned long long)acc.cut_paths);
    CHECK(!prof_hacc_take_view(&acc, PK_CPU, &v), "take");
    int64_t kept = 0;
    for (size_t r = 0; r < v.nrows; r++)
        kept += v.rows[r].v[0];
    CHECK(kept == total, "a cut path keeps its samples on its deepest node (%lld of %lld)",
          (long long)kept, (long long)total);
    prof_view_free(&v);
}

static void test_names(void)
{
    char name[64];
    int64_t f, t;
    prof_hseg_name(name, sizeof name, 1796041722, 1796041782);
    CHECK(!strcmp(name, "1796041722-1796041782.clrh"), "%s", name);
    CHECK(!prof_hseg_name_span(name, &f, &t) && f == 1796041722 && t == 1796041782, "parse");
    const char *bad[] = {"", ".clrh", "1-2.clrh.tmp", ".1-2.clrh.tmp", "2-1.clrh", "1-2.clr",
                         "a-2.clrh", "1-b.clrh", "1--2.clrh", "1-2", "1234567890123-2.clrh",
                         "process.json"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        CHECK(prof_hseg_name_span(bad[i], &f, &t) < 0, "'%s' parsed", bad[i]);
}

int main(void)
{
    T0 = (int64_t)time(NULL) - 30;
    if (prof_store_init(120, 10000, 1 << 20)) {
        printf("store init failed\n");
        return 1;
    }
    for (int s = 0; s < 7; s++)
        add(PK_CPU, T0 + s, "main", "work", 7, NULL, 3);
    for (int s = 0; s < 5; s++)
        add(PK_CPU, T0 + 2 + s, "main", "work", 8, NULL, 2);
    add(PK_CPU, T0 + 4, "main", NULL, 7, NULL, 9);
    add(PK_CPU, T0 + 12, "main", "later", 7, NULL, 11);
    add(PK_CPU, T0 + 13, "main", "deeper", 7, NULL, 1);
    for (int s = 0; s < 4; s++)
        add(PK_ALLOC, T0 + s, "main", "alloc", 7, "System.String", 10);
    add(PK_ALLOC, T0 + 1, "main", "alloc", 7, "System.Byte[]", 99);
    add(PK_EXC, T0 + 1, "main", "throw", 7, "System.Exception", 1);
    test_round_trip();
    test_gc_records();
    test_counters();
    test_merge_with_memory();
    test_torn_and_altered();
    test_lying_payloads();
    test_node_cap();
    test_names();
    prof_store_free();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
