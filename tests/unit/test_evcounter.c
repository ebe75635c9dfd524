/*
 * test_evcounter - evc_parse on EventCounters events laid out as EventPipe delivers them for the
 * System.Runtime EventSource (metadata V1 with a nested "Payload" struct), on the other payload
 * shape (mean counters), and on hostile input: every truncation, wrong names, unsupported types,
 * nesting too deep, and random mutations (no crash, no read outside the buffers under ASan).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "evcounter.h"
#include "unit_check.h"

struct buf {
    uint8_t b[4096];
    size_t n;
};

static void put(struct buf *b, const void *p, size_t n)
{
    memcpy(b->b + b->n, p, n);
    b->n += n;
}
static void u32(struct buf *b, uint32_t v) { put(b, &v, 4); }
static void u64(struct buf *b, uint64_t v) { put(b, &v, 8); }
static void f64(struct buf *b, double v) { put(b, &v, 8); }
static void f32(struct buf *b, float v) { put(b, &v, 4); }
static void str(struct buf *b, const char *s)
{
    for (; *s; s++) {
        uint16_t c = (uint8_t)*s;
        put(b, &c, 2);
    }
    uint16_t z = 0;
    put(b, &z, 2);
}

enum { OBJ = 1, I32 = 9, F32 = 13, F64 = 14, STR = 18 };

struct field {
    uint32_t tc;
    const char *name;
};

/* Metadata header + one top-level struct param holding a nested "Payload" struct. */
static void meta_for(struct buf *m, const char *event, const struct field *f, int n)
{
    m->n = 0;
    u32(m, 0);
    str(m, event);
    u64(m, 0);
    u32(m, 0);
    u32(m, 0);
    u32(m, 1);   /* one parameter */
    u32(m, OBJ); /* the wrapper type */
    u32(m, 1);
    u32(m, OBJ); /* its Payload property */
    u32(m, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        u32(m, f[i].tc);
        str(m, f[i].name);
    }
    str(m, "Payload");
    str(m, ""); /* the top-level struct's empty name */
}

static const struct field INCR[] = {
    {STR, "Name"}, {STR, "DisplayName"}, {STR, "DisplayRateTimeScale"}, {F64, "Increment"},
    {F32, "IntervalSec"}, {STR, "Metadata"}, {STR, "Series"}, {STR, "CounterType"},
    {STR, "DisplayUnits"}};

static void incr_data(struct buf *d, const char *name, double inc, float interval)
{
    d->n = 0;
    str(d, name);
    str(d, "Allocation Rate");
    str(d, "00:00:01");
    f64(d, inc);
    f32(d, interval);
    str(d, "");
    str(d, "Interval=1000");
    str(d, "Sum");
    str(d, "B");
}

static const struct field MEAN[] = {
    {STR, "Name"}, {STR, "DisplayName"}, {F64, "Mean"}, {F64, "StandardDeviation"},
    {I32, "Count"}, {F64, "Min"}, {F64, "Max"}, {F32, "IntervalSec"}, {STR, "Series"},
    {STR, "CounterType"}, {STR, "Metadata"}, {STR, "DisplayUnits"}};

static void mean_data(struct buf *d, double mean)
{
    d->n = 0;
    str(d, "working-set");
    str(d, "Working Set");
    f64(d, mean);
    f64(d, 0);
    u32(d, 1);
    f64(d, mean);
    f64(d, mean);
    f32(d, 1.0f);
    str(d, "Interval=1000");
    str(d, "Mean");
    str(d, "");
    str(d, "MB");
}

int main(void)
{
    static struct buf m, d;
    struct evc_value v;

    meta_for(&m, "EventCounters", INCR, 9);
    incr_data(&d, "alloc-rate", 123456789.0, 0.9998f);
    CHECK(evc_parse(m.b, m.n, d.b, d.n, &v) == 0, "incrementing payload parses");
    CHECK(!strcmp(v.name, "alloc-rate"), "name %s", v.name);
    CHECK(v.value == 123456789.0 && v.incrementing, "increment %f", v.value);
    CHECK(!strcmp(v.units, "B"), "units %s", v.units);
    CHECK(v.interval_s > 0.99 && v.interval_s < 1.0, "interval %f", v.interval_s);

    /* every truncation of either buffer is refused without reading past it */
    int bad = 0;
    for (size_t n = 0; n < m.n; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, m.b, n);
        bad += evc_parse(copy, n, d.b, d.n, &v) == 0;
        free(copy);
    }
    CHECK(bad == 0, "%d truncated metadata accepted", bad);
    bad = 0;
    for (size_t n = 0; n < d.n; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, d.b, n);
        bad += evc_parse(m.b, m.n, copy, n, &v) == 0;
        free(copy);
    }
    CHECK(bad == 0, "%d truncated payloads accepted", bad);

    meta_for(&m, "EventCounters", MEAN, 12);
    mean_data(&d, 64.5);
    CHECK(evc_parse(m.b, m.n, d.b, d.n, &v) == 0, "mean payload parses");
    CHECK(!strcmp(v.name, "working-set") && v.value == 64.5 && !v.incrementing,
          "mean %s %f %d", v.name, v.value, v.incrementing);
    CHECK(!strcmp(v.units, "MB"), "units %s", v.units);

    meta_for(&m, "SomethingElse", MEAN, 12);
    CHECK(evc_parse(m.b, m.n, d.b, d.n, &v) == -1, "other events are refused");
    CHECK(evc_parse(NULL, 0, d.b, d.n, &v) == -1, "no metadata is refused");

    /* a Boolean (width ambiguous) and an unknown type code are refused */
    struct field withbool[] = {{STR, "Name"}, {3, "Flag"}, {F64, "Mean"}};
    meta_for(&m, "EventCounters", withbool, 3);
    d.n = 0;
    str(&d, "x");
    u32(&d, 1);
    f64(&d, 1);
    CHECK(evc_parse(m.b, m.n, d.b, d.n, &v) == -1, "boolean refused");
    struct field unknown[] = {{STR, "Name"}, {99, "What"}, {F64, "Mean"}};
    meta_for(&m, "EventCounters", unknown, 3);
    CHECK(evc_parse(m.b, m.n, d.b, d.n, &v) == -1, "unknown type refused");

    /* no value field: refused */
    struct field noval[] = {{STR, "Name"}};
    meta_for(&m, "EventCounters", noval, 1);
    d.n = 0;
    str(&d, "x");
    CHECK(evc_parse(m.b, m.n, d.b, d.n, &v) == -1, "payload without a value refused");

    /* nesting deeper than the parser allows */
    m.n = 0;
    u32(&m, 0);
    str(&m, "EventCounters");
    u64(&m, 0);
    u32(&m, 0);
    u32(&m, 0);
    u32(&m, 1);
    for (int i = 0; i < 20; i++) {
        u32(&m, OBJ);
        u32(&m, 1);
    }
    CHECK(evc_parse(m.b, m.n, d.b, d.n, &v) == -1, "deep nesting refused");

    /* a huge field count must not loop for long */
    meta_for(&m, "EventCounters", INCR, 9);
    incr_data(&d, "alloc-rate", 1, 1);
    struct buf big = m;
    size_t count_at = 4 + 2 * 14 + 8 + 4 + 4 + 4 + 4 + 4 + 4; /* the Payload's field count */
    uint32_t huge = 0xffffffffu;
    memcpy(big.b + count_at, &huge, 4);
    CHECK(evc_parse(big.b, big.n, d.b, d.n, &v) == -1, "huge field count refused");

    /* random mutations of a valid event: any answer, never a crash */
    uint64_t x = 88172645463325252ull;
    int ok = 0;
    for (int round = 0; round < 200000; round++) {
        struct buf mm = m, dd = d;
        int flips = 1 + round % 4;
        for (int k = 0; k < flips; k++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            struct buf *t = (x & 1) ? &mm : &dd;
            t->b[(x >> 8) % t->n] = (uint8_t)(x >> 32);
        }
        size_t mn = (x >> 40) % 8 == 0 ? (x >> 20) % (mm.n + 1) : mm.n;
        ok += evc_parse(mm.b, mn, dd.b, dd.n, &v) == 0;
        CHECK(strlen(v.name) < sizeof v.name, "name terminated");
    }
    CHECK(ok > 0, "some mutations still parse (%d)", ok);

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
