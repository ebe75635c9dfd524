/*
 * test_live_types.c - prof_live's table of live types (512 rows) over a long run: types whose
 * objects all died and that had no new sample for a while give their rows back once the table
 * is 3/4 full, so a type first seen late gets a row of its own (rows that were never given back
 * would make every type after the 511th "[other types]" for the process's life, and a leak in
 * it would never be flagged). The runtime is played by a fake ICorProfilerInfo: weak handles
 * are the objects' addresses, and an object is collected when the test says so.
 * Under the overhead governor each object's estimate is weighed by its allocation second's planned
 * / on factor (prof_live_set_factor), kept once that second is settled.
 * And prof_typename's TypeID -> name cache (6,144 types): full, it starts again, instead of naming
 * every later type "[other types]".
 */
#include <stdio.h>
#include <string.h>

#include "prof_alloc.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_live.h"
#include "prof_ring.h"
#include "prof_typename.h"

#include "unit_check.h"

#define NOBJ 700
static int dead[NOBJ + 1];

static uintptr_t addr_of(int i)
{
    return 0x100000 + (uintptr_t)i * 64;
}

static HRESULT create_handle(void *self, ObjectID obj, COR_PRF_HANDLE_TYPE type, ObjectHandleID *h)
{
    (void)self;
    (void)type;
    *h = (ObjectHandleID)obj;
    return 0;
}

static HRESULT destroy_handle(void *self, ObjectHandleID h)
{
    (void)self;
    (void)h;
    return 0;
}

static HRESULT object_of(void *self, ObjectHandleID h, ObjectID *obj)
{
    (void)self;
    int i = (int)(((uintptr_t)h - 0x100000) / 64);
    *obj = i >= 0 && i <= NOBJ && dead[i] ? 0 : (ObjectID)h;
    return 0;
}

/* One sampled object of type `name` (TypeID i + 1) at addr_of(i), tracked and consumed. */
static int track(int i, const char *name, double t)
{
    uint32_t seq = 0;
    int slot = prof_live_track(addr_of(i), 64, 0, 1.0, 64.0, t, &seq);
    if (slot < 0)
        return -1;
    static struct prof_rec rec;
    memset(&rec, 0, sizeof rec);
    rec.kind = REC_LIVE;
    rec.a = (uint64_t)i + 1;
    rec.d = ((uint64_t)(uint32_t)slot + 1) | (uint64_t)seq << 32;
    rec.t_unix = t;
    rec.os_tid = 1;
    snprintf(rec.text, sizeof rec.text, "%s", name);
    const char *frames[1] = {"App.Main"};
    prof_live_consume(&rec, frames, 1);
    return 0;
}

static void gc(void)
{
    BOOL collected[3] = {1, 1, 1};
    prof_live_gc_started(3, collected);
    prof_live_gc_finished();
}

static int has_type(const struct prof_live_report *r, const char *name)
{
    for (size_t i = 0; i < r->ntypes; i++)
        if (!strcmp(r->types[i].type, name))
            return 1;
    return 0;
}

static double count_of(const char *name)
{
    struct prof_live_report r;
    double c = -1;
    if (prof_live_report(&r))
        return -1;
    for (size_t i = 0; i < r.ntypes; i++)
        if (!strcmp(r.types[i].type, name))
            c = r.types[i].count;
    prof_live_report_free(&r);
    return c;
}

/* The governor's notes, as prof_alloc keeps them: seconds up to `settled_to` are settled, at
 * `factor_a` for second `sec_a` and `factor_b` for the others. */
static int64_t settled_to, sec_a;
static double factor_a, factor_b;
static int fake_factor(int64_t sec, double *factor)
{
    *factor = sec == sec_a ? factor_a : factor_b;
    if (sec > settled_to)
        *factor = 1;
    return sec <= settled_to;
}

int main(void)
{
    static ICorProfilerInfo15Vtbl vt;
    static ICorProfilerInfo15 info = {.vt = &vt};
    vt.CreateHandle = create_handle;
    vt.DestroyHandle = destroy_handle;
    vt.GetObjectIDFromHandle = object_of;
    g_core.info = &info;
    g_core.info_version = 15;
    g_core.active = 1;
    g_core.profiles = PROFILE_LIVE;
    g_cfg.live_max = 4096;
    prof_live_init();

    double t = prof_unix_now();
    char name[64];
    /* 600 types, one object each, all collected */
    for (int i = 0; i < 600; i++) {
        snprintf(name, sizeof name, "App.Old%d", i);
        CHECK(!track(i, name, t), "track %d", i);
        dead[i] = 1;
    }
    gc();
    /* a minute and more of history with none of them */
    for (int k = 0; k <= 9; k++)
        prof_live_tick(t + 10.0 * k + 0.5);

    /* a type first seen now, alive */
    CHECK(!track(650, "App.Fresh", t + 95), "track the new type");
    struct prof_live_report r;
    CHECK(!prof_live_report(&r), "report");
    CHECK(r.tracked == 1, "one object tracked (%u)", r.tracked);
    CHECK(has_type(&r, "App.Fresh"), "the new type has a row of its own (%s)",
          r.ntypes ? r.types[0].type : "none");
    CHECK(!has_type(&r, "[other types]"), "nothing under [other types]");
    CHECK(r.types_recycled > 0, "rows given back (%llu)", (unsigned long long)r.types_recycled);
    prof_live_report_free(&r);

    /* a type with a live object keeps its row through the same */
    CHECK(!track(651, "App.Kept", t + 96), "track a kept type");
    for (int k = 10; k <= 20; k++)
        prof_live_tick(t + 10.0 * k + 0.5);
    CHECK(!prof_live_report(&r), "report");
    CHECK(has_type(&r, "App.Kept") && has_type(&r, "App.Fresh"), "live types keep their rows");
    prof_live_report_free(&r);

    /* under the governor: object A's second settled at planned / on = 2 (the events flowed half
     * the time planned), B's not yet (weighed 1 meanwhile) */
    double ta = t + 230.2, tb = t + 232.2;
    sec_a = (int64_t)(ta * 1000) / 1000;
    settled_to = sec_a;
    factor_a = 2.0;
    factor_b = 1.5;
    prof_live_set_factor(fake_factor);
    CHECK(!track(660, "App.Governed", ta) && !track(661, "App.Governed", tb), "track two");
    double c = count_of("App.Governed");
    CHECK(c > 2.99 && c < 3.01, "A weighs 2, unsettled B 1 (%.3f)", c);
    /* B's second settles; A's factor is kept as it was when settled */
    settled_to = sec_a + 5;
    factor_a = 4.0;
    c = count_of("App.Governed");
    CHECK(c > 3.49 && c < 3.51, "A kept at 2, B settled at 1.5 (%.3f)", c);
    prof_live_set_factor(NULL);

    int named = 0;
    for (int i = 0; i < 7000; i++) {
        snprintf(name, sizeof name, "App.Many%d", i);
        named += !strcmp(prof_typename_of(0x7000000 + (uint64_t)i * 8, name), name);
    }
    CHECK(named == 7000, "7,000 allocated types each named (%d)", named);

    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
