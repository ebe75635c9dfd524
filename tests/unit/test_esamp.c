/*
 * test_esamp - the event sampler shared by the exception and lock profiles (prof_esamp.h) and the
 * windowed table (prof_wtab): the per-second cap holds, every group gets its first event of each
 * second sampled, heavy events are favoured, upscaling by "weight since the previous sample"
 * adds up exactly, and the table windows, filters, caps and folds as documented.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prof_core.h"
#include "prof_esamp.h"
#include "prof_wtab.h"

static int g_pass, g_fail;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            g_pass++;                                                                              \
        } else {                                                                                   \
            g_fail++;                                                                              \
            printf("FAIL %s:%d: ", __FILE__, __LINE__);                                            \
            printf(__VA_ARGS__);                                                                   \
            printf("\n");                                                                          \
        }                                                                                          \
    } while (0)

#define NSLOTS 64

/* A storm type (5000/s), a steady type (200/s) and a rare type (1 every 3 s), for 10 seconds,
 * at 50 samples/s: the cap holds, the rare type is never missed, the upscaled sums are exact. */
static void test_cap_fairness_upscaling(void)
{
    static struct esamp_slot slots[NSLOTS + 1];
    struct esamp_global g = {0};
    memset(slots, 0, sizeof slots);
    const uint64_t keys[3] = {11, 22, 33};
    const int per_s[3] = {5000, 200, 0};
    uint64_t events[3] = {0}, samples[3] = {0}, attributed[3] = {0}, est[3] = {0};
    int rare_seconds = 0, rare_sampled = 0, max_per_s = 0, overflows = 0;
    for (int64_t sec = 1; sec <= 10; sec++) {
        int taken = 0;
        int n0 = per_s[0], n1 = per_s[1], n2 = sec % 3 == 0;
        rare_seconds += n2;
        /* interleave the types through the second */
        for (int i = 0; i < n0 + n1 + n2; i++) {
            int k = n2 && i == (n0 + n1) / 2 ? 2 : (i % 26 == 0 && n1-- > 0) ? 1 : 0;
            if (k == 0 && n0-- <= 0)
                continue;
            int ov = 0;
            struct esamp_slot *s = esamp_slot_for(slots, NSLOTS, keys[k], &ov);
            overflows += ov;
            uint64_t count, wsum;
            int d = esamp_decide(&g, s, 1, 50, sec, &count, &wsum);
            events[k]++;
            if (d != ESAMP_NO) {
                taken++;
                samples[k]++;
                est[k] += count - attributed[k]; /* the aggregator's upscaling */
                attributed[k] = count;
                if (k == 2)
                    rare_sampled++;
            }
        }
        if (taken > max_per_s)
            max_per_s = taken;
    }
    /* the tail after the last sample, as prof_*_tick attributes it */
    for (int k = 0; k < 3; k++) {
        int ov = 0;
        struct esamp_slot *s = esamp_slot_for(slots, NSLOTS, keys[k], &ov);
        est[k] += s->count - attributed[k];
        CHECK(est[k] == events[k], "type %d: estimate %llu, events %llu", k,
              (unsigned long long)est[k], (unsigned long long)events[k]);
    }
    CHECK(!overflows, "no overflow");
    CHECK(max_per_s <= 50 + 3, "cap: %d samples in one second", max_per_s);
    CHECK(rare_sampled == rare_seconds, "rare: %d of %d sampled", rare_sampled, rare_seconds);
    CHECK(samples[1] >= 10, "steady type sampled %llu times", (unsigned long long)samples[1]);
    CHECK(samples[0] >= 100 && samples[0] < events[0] / 10, "storm sampled %llu of %llu",
          (unsigned long long)samples[0], (unsigned long long)events[0]);
}

/* Lock waits: a long wait is far likelier to be sampled than a short one. */
static void test_weight_bias(void)
{
    static struct esamp_slot slots[NSLOTS + 1];
    struct esamp_global g = {0};
    memset(slots, 0, sizeof slots);
    int ov = 0;
    struct esamp_slot *s = esamp_slot_for(slots, NSLOTS, 7, &ov);
    int long_taken = 0, short_taken = 0, longs = 0, shorts = 0;
    for (int64_t sec = 1; sec <= 20; sec++) {
        for (int i = 0; i < 1000; i++) {
            uint64_t w = i % 50 == 0 ? 50000000 : 100000; /* 50 ms vs 0.1 ms */
            uint64_t c, ws;
            int d = esamp_decide(&g, s, w, 20, sec, &c, &ws);
            if (sec < 3)
                continue; /* let the rate settle */
            if (w > 1000000) {
                longs++;
                long_taken += d != ESAMP_NO;
            } else {
                shorts++;
                short_taken += d != ESAMP_NO;
            }
        }
    }
    double pl = (double)long_taken / longs, ps = (double)short_taken / shorts;
    CHECK(pl > 20 * ps, "long waits sampled at %.4f, short at %.4f", pl, ps);
}

/* A full table sends new groups to the overflow slot. */
static void test_overflow(void)
{
    static struct esamp_slot slots[4 + 1];
    memset(slots, 0, sizeof slots);
    int ov = 0;
    for (uint64_t k = 1; k <= 4; k++) {
        struct esamp_slot *s = esamp_slot_for(slots, 4, k * 977, &ov);
        CHECK(s < &slots[4] && !ov, "key %llu gets a slot", (unsigned long long)k);
    }
    CHECK(esamp_slot_for(slots, 4, 977, &ov) == esamp_slot_for(slots, 4, 977, &ov) && !ov,
          "same key, same slot");
    struct esamp_slot *s = esamp_slot_for(slots, 4, 5 * 977, &ov);
    CHECK(s == &slots[4] && ov, "fifth key overflows");
}

/* Emptying a full table (what clrscope-agg does when it overflows): every slot is free again and
 * new keys get slots of their own; the events of a slot that no consumed sample stood for are
 * kept, once, for the first stale sample; a slot that had one keeps nothing (the tick charged
 * its events to that sample). */
static void test_reset(void)
{
    static struct esamp_slot slots[4 + 1];
    memset(slots, 0, sizeof slots);
    struct esamp_global g = {0};
    int ov = 0;
    uint64_t count, wsum;
    for (uint64_t k = 1; k <= 5; k++)
        for (int i = 0; i < 3; i++)
            esamp_decide(&g, esamp_slot_for(slots, 4, k * 977, &ov), 10, 100, 1, &count, &wsum);
    CHECK(ov && slots[4].count == 3, "overflow slot: %llu events",
          (unsigned long long)slots[4].count);
    struct esamp_orphan kept[4 + 1];
    for (int i = 0; i <= 4; i++) {
        /* slot 0 had a sample consumed with 1 event attributed (the tick then did the rest) */
        esamp_orphan_keep(&kept[i], &slots[i], i == 0, i == 0 ? 1 : 0, i == 0 ? 10 : 0);
        esamp_slot_clear(&slots[i]);
    }
    CHECK(kept[0].count == 0 && kept[0].wsum == 0, "a sampled slot keeps nothing");
    CHECK(kept[2].count == 3 && kept[2].wsum == 30, "an unsampled slot keeps %llu / %llu",
          (unsigned long long)kept[2].count, (unsigned long long)kept[2].wsum);
    esamp_orphan_take(&kept[2], &count, &wsum);
    CHECK(count == 3 && wsum == 30, "the first stale sample takes them");
    esamp_orphan_take(&kept[2], &count, &wsum);
    CHECK(count == 0 && wsum == 0, "the next takes nothing");
    ov = 0;
    for (uint64_t k = 6; k <= 9; k++)
        CHECK(esamp_slot_for(slots, 4, k * 977, &ov) < &slots[4] && !ov,
              "after the reset key %llu gets a slot", (unsigned long long)k);
    CHECK(slots[0].count == 0 && slots[4].count == 0, "counts start again");

    /* when: new overflow since the last reset, and a minute since it */
    struct esamp_reset r = {0};
    int64_t t = 5000000000LL;
    CHECK(!esamp_reset_due(&r, 0, t), "no overflow, no reset");
    CHECK(esamp_reset_due(&r, 3, t) && r.resets == 1, "the first overflow: at once");
    CHECK(!esamp_reset_due(&r, 3, t + ESAMP_RESET_GAP_NS), "no new overflow, no reset");
    CHECK(!esamp_reset_due(&r, 9, t + ESAMP_RESET_GAP_NS / 2), "new overflow within the minute");
    CHECK(esamp_reset_due(&r, 9, t + ESAMP_RESET_GAP_NS) && r.resets == 2, "a minute later");
}

static void test_wtab(void)
{
    double made = prof_unix_now();
    struct prof_wtab *t = prof_wtab_new(60, 4, 3);
    CHECK(t != NULL, "wtab created");
    if (!t)
        return;
    double now = prof_unix_now();
    int64_t v[WTAB_NV] = {5, 1, 0};
    prof_wtab_add(t, now, "A", "m1", 0, "site-a", v);
    prof_wtab_add(t, now, "A", "m1", 0, "ignored", v);
    prof_wtab_add(t, now - 30, "A", "m2", 0, NULL, v);
    prof_wtab_add(t, now - 1000, "A", "m1", 0, NULL, v); /* older than the history */
    struct prof_wtab_row *rows;
    size_t n;
    CHECK(prof_wtab_sum(t, 10, NULL, &rows, &n) == 0 && n == 1, "10 s window: %zu rows", n);
    if (n == 1) {
        CHECK(rows[0].v[0] == 10 && rows[0].v[1] == 2, "sums %lld %lld", (long long)rows[0].v[0],
              (long long)rows[0].v[1]);
        CHECK(!strcmp(rows[0].extra, "site-a"), "extra is the first one: %s", rows[0].extra);
    }
    free(rows);
    CHECK(prof_wtab_sum(t, 60, "A", &rows, &n) == 0 && n == 2, "60 s window: %zu rows", n);
    free(rows);
    CHECK(prof_wtab_sum(t, 60, "B", &rows, &n) == 0 && n == 0, "filter");
    free(rows);
    /* a table made just now covers just now, whatever the window; the span ends now */
    double from, to;
    prof_wtab_span(t, 60, &from, &to);
    CHECK(from >= made && to >= from && to - from < 5, "span of a new table: %.3f..%.3f (made %.3f)",
          from, to, made);
    prof_wtab_span(NULL, 60, &from, &to);
    CHECK(from == to, "no table: an empty span");
    /* 4 keys max ("[other]" + 3): the 4th and later fold into [other] */
    prof_wtab_add(t, now, "B", "", 0, NULL, v);
    prof_wtab_add(t, now, "C", "", 0, NULL, v);
    prof_wtab_add(t, now, "D", "", 9, NULL, v);
    uint64_t keys, dropped;
    prof_wtab_stats(t, &keys, &dropped);
    CHECK(keys == 4, "keys %llu", (unsigned long long)keys);
    CHECK(dropped >= 2, "dropped %llu", (unsigned long long)dropped);
    CHECK(prof_wtab_sum(t, 5, NULL, &rows, &n) == 0, "sum");
    int64_t total = 0, other = 0;
    for (size_t i = 0; i < n; i++) {
        total += rows[i].v[0];
        if (!strcmp(rows[i].a, "[other]"))
            other += rows[i].v[0];
    }
    CHECK(total == 25, "nothing lost: %lld", (long long)total);
    CHECK(other >= 5, "folded into [other]: %lld", (long long)other);
    free(rows);
    prof_wtab_free(t);
}

/* Keys that aged out of the history are reclaimed when the key table runs full. */
static void test_wtab_reclaim(void)
{
    struct prof_wtab *t = prof_wtab_new(2, 3, 8);
    if (!t) {
        CHECK(0, "wtab created");
        return;
    }
    int64_t v[WTAB_NV] = {1, 0, 0};
    prof_wtab_add(t, prof_unix_now(), "X", "", 0, NULL, v);
    prof_wtab_add(t, prof_unix_now(), "Y", "", 0, NULL, v);
    struct timespec ts = {2, 300000000};
    nanosleep(&ts, NULL);
    prof_wtab_add(t, prof_unix_now(), "Z", "", 0, NULL, v);
    struct prof_wtab_row *rows;
    size_t n;
    CHECK(prof_wtab_sum(t, 2, NULL, &rows, &n) == 0 && n == 1, "one row: %zu", n);
    if (n == 1)
        CHECK(!strcmp(rows[0].a, "Z"), "Z kept its own key: %s", rows[0].a);
    free(rows);
    uint64_t keys, dropped;
    prof_wtab_stats(t, &keys, &dropped);
    CHECK(keys == 2 && dropped == 0, "keys %llu dropped %llu", (unsigned long long)keys,
          (unsigned long long)dropped);
    prof_wtab_free(t);
}

/* The wall clock set back further than the history: the bucket a second maps to holds a second
 * "from the future", which is taken over (not every entry dropped until the clock catches
 * up). */
static void test_wtab_clock_step_back(void)
{
    struct prof_wtab *t = prof_wtab_new(10, 8, 8);
    if (!t) {
        CHECK(0, "wtab created");
        return;
    }
    int64_t v[WTAB_NV] = {3, 0, 0};
    double now = floor(prof_unix_now());
    prof_wtab_add(t, now + 1000, "Before", "", 0, NULL, v); /* 1000 % 10: now's bucket */
    prof_wtab_add(t, now, "After", "", 0, NULL, v);
    struct prof_wtab_row *rows;
    size_t n;
    CHECK(prof_wtab_sum(t, 10, NULL, &rows, &n) == 0 && n == 1, "one row after the step: %zu", n);
    if (n == 1)
        CHECK(!strcmp(rows[0].a, "After") && rows[0].v[0] == 3, "the entry after the step: %s",
              rows[0].a);
    free(rows);
    prof_wtab_free(t);
}

int main(void)
{
    test_cap_fairness_upscaling();
    test_weight_bias();
    test_overflow();
    test_reset();
    test_wtab();
    test_wtab_reclaim();
    test_wtab_clock_step_back();
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
