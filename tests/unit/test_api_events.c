/*
 * test_api_events - /api/v1/exceptions and /api/v1/locks show the figures of now without
 * changing the aggregator's state. With one sample a second, most events are counted in their
 * type's (lock's) slot but carried by no sample until the aggregator's next tick: the handlers
 * must add them (prof_exc_read, prof_lock_read) to the rows and the drill-down stacks, exactly,
 * leave the tables as they were, and show the same figures once the tick has run.
 */
#include <stdio.h>
#include <string.h>

#include "unit_check.h"

#include "api_call.h"
#include "fuzz_runtime.h"
#include "prof_exc.h"
#include "prof_lock.h"
#include "prof_walk.h"
#include "prof_wtab.h"

#define THROWN 50
#define CONTENDED 40
#define WAIT_NS 1000

/* What clrscope-agg does with the ring: each sample to its module. */
static void drain(void)
{
    const char *names[REC_MAX_FRAMES + 2];
    struct prof_rec *r;
    while ((r = prof_ring_peek(prof_agg_ring()))) {
        int n = prof_walk_names(r->frames, (int)r->nframes, (int)r->truncated, names,
                                REC_MAX_FRAMES + 2);
        if (r->kind == REC_EXCEPTION)
            prof_exc_consume(r, names, n);
        else if (r->kind == REC_LOCK)
            prof_lock_consume(r, names, n);
        prof_ring_release(prof_agg_ring());
    }
}

/* The table's own sums of v[k] over the last minute. */
static int64_t table_sum(struct prof_wtab *t, int k)
{
    struct prof_wtab_row *rows = NULL;
    size_t n = 0;
    int64_t sum = 0;
    if (!prof_wtab_sum(t, 60, NULL, &rows, &n))
        for (size_t i = 0; i < n; i++)
            sum += rows[i].v[k];
    free(rows);
    return sum;
}

static double stacks_sum(const cJSON *o, const char *key)
{
    double sum = 0;
    const cJSON *s;
    cJSON_ArrayForEach(s, cJSON_GetObjectItem(o, "stacks"))
        sum += jnum(s, key, NULL);
    return sum;
}

static void check_exceptions(const char *when)
{
    cJSON *j = api_json("GET", "/api/v1/exceptions?seconds=60", 200);
    const cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "types"), 0);
    const cJSON *b0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "by_type"), 0);
    CHECK(jnum(j, "total", NULL) == THROWN, "%s: total %g, thrown %d", when, jnum(j, "total", NULL),
          THROWN);
    CHECK(t0 && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t0, "type")), "App.BoomException") &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t0, "message")), "boom \xc3\xa9") &&
              jnum(t0, "count", NULL) == THROWN && jnum(t0, "samples", NULL) >= 1,
          "%s: the type's row holds every throw", when);
    CHECK(b0 && jnum(b0, "count", NULL) == THROWN, "%s: by type", when);
    CHECK(jnum(j, "profiler", "events") == THROWN, "%s: events", when);
    cJSON_Delete(j);
    j = api_json("GET", "/api/v1/exceptions?seconds=60&type=App.BoomException", 200);
    CHECK(jnum(j, "total", NULL) == THROWN && stacks_sum(j, "count") == THROWN,
          "%s: the drill-down's stacks add up to every throw (%g)", when, stacks_sum(j, "count"));
    cJSON_Delete(j);
}

static void test_exceptions(void)
{
    /* ExceptionThrown_V1: type and message, UTF-16z (the rest is not read) */
    static const char type[] = "App.BoomException", msg[] = "boom \xc3\xa9";
    BYTE payload[128];
    size_t len = 0;
    for (const char *s = type; *s; s++, len += 2)
        payload[len] = (BYTE)*s, payload[len + 1] = 0;
    payload[len++] = 0, payload[len++] = 0;
    const uint16_t units[] = {'b', 'o', 'o', 'm', ' ', 0xe9, 0};
    for (size_t i = 0; i < sizeof units / sizeof units[0]; i++, len += 2)
        memcpy(payload + len, &units[i], 2);
    for (int i = 0; i < THROWN; i++)
        prof_exc_on_event(80, 1, payload, (ULONG)len);
    drain();
    struct prof_exc_stats st;
    prof_exc_get_stats(&st);
    CHECK(st.events == THROWN && st.sampled >= 1 && st.sampled < THROWN,
          "%llu thrown, %llu sampled", (unsigned long long)st.events,
          (unsigned long long)st.sampled);
    int64_t before = table_sum(prof_exc_table(), 0);
    CHECK(before >= 1 && before < THROWN, "the table holds what the samples carried (%lld)",
          (long long)before);

    check_exceptions("before the tick");
    CHECK(table_sum(prof_exc_table(), 0) == before, "the handler changed nothing (%lld, %lld)",
          (long long)table_sum(prof_exc_table(), 0), (long long)before);
    struct prof_wtab_row *rows = NULL;
    struct prof_exc_unattributed *u = NULL;
    size_t nrows = 0, nu = 0;
    CHECK(!prof_exc_read(60, NULL, &rows, &nrows, &u, &nu) && nu == 1 &&
              u[0].count == THROWN - before && !strcmp(u[0].type, type) &&
              !strcmp(u[0].message, msg),
          "read: the throws no sample carries, with their type and message");
    free(rows);
    free(u);
    CHECK(!prof_exc_read(60, "Other.Type", &rows, &nrows, &u, &nu) && nu == 0 && nrows == 0,
          "read: another type's filter");
    free(rows);
    free(u);

    prof_exc_tick(prof_unix_now()); /* the aggregator's */
    CHECK(table_sum(prof_exc_table(), 0) == THROWN, "the tick attributes them");
    CHECK(!prof_exc_read(60, NULL, &rows, &nrows, &u, &nu) && nu == 0, "nothing left after it");
    free(rows);
    free(u);
    check_exceptions("after the tick");
}

static void check_locks(const char *when)
{
    cJSON *j = api_json("GET", "/api/v1/locks?seconds=60", 200);
    const cJSON *l0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "locks"), 0);
    CHECK(jnum(j, "count", NULL) == CONTENDED && jnum(j, "total_wait_ns", NULL) == CONTENDED * WAIT_NS,
          "%s: the window's totals", when);
    CHECK(l0 && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(l0, "name")), "[unknown lock]") &&
              jnum(l0, "count", NULL) == CONTENDED && jnum(l0, "wait_ns", NULL) == CONTENDED * WAIT_NS,
          "%s: the lock's row holds every contention (%g)", when, l0 ? jnum(l0, "count", NULL) : -1);
    CHECK(stacks_sum(j, "count") == CONTENDED && stacks_sum(j, "wait_ns") == CONTENDED * WAIT_NS,
          "%s: the stacks add up (%g)", when, stacks_sum(j, "count"));
    cJSON_Delete(j);
    j = api_json("GET", "/api/v1/locks?seconds=60&lock=%5Bunknown%20lock%5D", 200);
    CHECK(stacks_sum(j, "count") == CONTENDED &&
          !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "filter")), "[unknown lock]"),
          "%s: one lock's stacks", when);
    cJSON_Delete(j);
}

static void test_locks(void)
{
    /* ContentionStop_V1: flags, ClrInstanceID, DurationNs (no start: a lock of unknown id) */
    BYTE payload[11] = {0};
    double dur = WAIT_NS;
    memcpy(payload + 3, &dur, 8);
    for (int i = 0; i < CONTENDED; i++)
        prof_lock_on_event(91, 1, payload, sizeof payload);
    drain();
    int64_t before = table_sum(prof_lock_table(), 0);
    CHECK(before >= 1 && before < CONTENDED, "the table holds what the samples carried (%lld)",
          (long long)before);
    check_locks("before the tick");
    CHECK(table_sum(prof_lock_table(), 0) == before, "the handler changed nothing");
    prof_lock_tick(prof_unix_now());
    CHECK(table_sum(prof_lock_table(), 0) == CONTENDED, "the tick attributes them");
    check_locks("after the tick");
}

int main(void)
{
    setenv("CLRSCOPE_EXCEPTION_SAMPLES_PER_S", "1", 1); /* one sample a second */
    setenv("CLRSCOPE_LOCK_SAMPLES_PER_S", "1", 1);
    fuzz_runtime_init(PROFILE_ALL);
    prof_agg_use_ring(prof_ring_new(256));
    test_exceptions();
    test_locks();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
