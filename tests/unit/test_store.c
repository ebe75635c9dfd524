/*
 * test_store.c - prof_store's call-path trie at its cap (CLRSCOPE_MAX_STACK_NODES):
 *   - paths that no bucket within the history uses any more are dropped when the trie is 7/8
 *     full, and new paths get their whole stacks again (a trie that only grew would cut every
 *     new path after days);
 *   - a stack that finds no room is cut where the trie ends, never grafted onto an ancestor
 *     (looking the frames after the missing one up under the ancestor would show a sample of
 *     p -> q as q, a path that never ran);
 *   - after the wall clock is set back further than the history, samples are stored again at
 *     once (not dropped until the clock catches up with the old buckets);
 *   - names (frames, labels) past 7/8 of their cap are copied, those still in use only, into a
 *     new generation: new names are stored again instead of "[overflow]" (names that only grew
 *     would stay "[overflow]"), and a view taken before keeps its names readable until it is freed
 *     (under ASan a freed name read here fails the test); no copy is made when it would free
 *     little (all in use: ~0.1 s under the lock at 16 MiB, for nothing);
 *   - a kind with a per-second scale (the allocation governor's measured shares) is read at it:
 *     the chosen values of each second's rows, in views and totals, the others as added.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "prof_store.h"

#include "unit_check.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static void add(double t, const char *a, const char *b, int64_t value)
{
    const char *frames[2] = {a, b};
    int64_t v[PROF_NVALUES] = {value, value, 0};
    prof_store_add(PK_CPU, t, frames, b ? 2 : 1, 1, NULL, v);
}

/* The value of the view's rows whose path is exactly names[0..n) from the root. */
static int64_t at_path(const struct prof_view *v, const char *const *names, int n)
{
    int64_t sum = 0;
    for (size_t r = 0; r < v->nrows; r++) {
        uint32_t path[8];
        int depth = 0;
        for (uint32_t k = v->rows[r].node; k && depth < 8; k = v->parent[k])
            path[depth++] = k;
        if (depth != n)
            continue;
        int same = 1;
        for (int i = 0; i < n; i++)
            same &= !strcmp(v->name[path[n - 1 - i]], names[i]);
        if (same)
            sum += v->rows[r].v[0];
    }
    return sum;
}

static const char *label_of(const struct prof_view *v, const char *frame)
{
    for (size_t r = 0; r < v->nrows; r++)
        if (!strcmp(v->name[v->rows[r].node], frame))
            return v->rows[r].label;
    return NULL;
}

static void add_lock(double t, const char *frame, const char *label, int64_t value)
{
    const char *frames[1] = {frame};
    int64_t v[PROF_NVALUES] = {value, value, 1};
    prof_store_add(PK_LOCK, t, frames, 1, 1, label, v);
}

/* A thread's next stack takes its root side from the last one it added (the path cache): a path
 * that leaves it (R>D>B after R>A>...) gets its own nodes, not those of the same names under the
 * old prefix, interleaved threads do not mix theirs, and a compaction (new node ids) leaves no
 * stale node behind. */
static void add_path(double t, uint32_t tid, const char *path)
{
    const char *frames[8];
    char buf[64];
    int n = 0;
    snprintf(buf, sizeof buf, "%s", path);
    for (char *save = NULL, *f = strtok_r(buf, ">", &save); f && n < 8;
         f = strtok_r(NULL, ">", &save))
        frames[n++] = f;
    int64_t v[PROF_NVALUES] = {1, 1, 0};
    prof_store_add(PK_CPU, t, frames, n, tid, NULL, v);
}

static void test_thread_paths(void)
{
    CHECK(!prof_store_init(5, 1000, 1u << 20), "init (paths)");
    double t = now();
    static const struct {
        uint32_t tid;
        const char *path;
    } seq[] = {{1, "R>A>B"}, {1, "R>A>C"}, {2, "R>A>B"}, {1, "R>A"},   {1, "R>D>B"},
               {2, "R>A>B>E"}, {1, "R>A>B"}, {2, "R>D"}, {1, "R>D>B>E"}, {2, "R>A>B>E"}};
    for (int round = 0; round < 2; round++)
        for (size_t i = 0; i < sizeof seq / sizeof seq[0]; i++)
            add_path(t, seq[i].tid, seq[i].path);
    struct prof_view v;
    CHECK(!prof_store_view(PK_CPU, 5, NULL, &v), "view (paths)");
    static const struct {
        const char *path[4];
        int n;
        int64_t want;
    } rows[] = {{{"R", "A", "B"}, 3, 6}, {{"R", "A", "C"}, 3, 2}, {{"R", "A"}, 2, 2},
                {{"R", "D", "B"}, 3, 2}, {{"R", "A", "B", "E"}, 4, 4}, {{"R", "D"}, 2, 2},
                {{"R", "D", "B", "E"}, 4, 2}};
    int64_t sum = 0;
    for (size_t r = 0; r < sizeof rows / sizeof rows[0]; r++) {
        int64_t got = at_path(&v, rows[r].path, rows[r].n);
        sum += got;
        CHECK(got == rows[r].want, "path %zu: %lld samples, %lld added", r, (long long)got,
              (long long)rows[r].want);
    }
    CHECK(sum == 20, "every sample on its own path (%lld of 20)", (long long)sum);
    prof_view_free(&v);
    prof_store_free();
}

static void test_names(void)
{
    CHECK(!prof_store_init(5, 100000, 64u << 10), "init with 64 KiB of names");
    double t = floor(now()), old = t - 60;
    add_lock(t, "Live.Keep", "lock 0xkeep", 3);
    struct prof_view before;
    CHECK(!prof_store_view(PK_LOCK, 5, NULL, &before), "view before");
    const char *kept_frame = before.nnodes > 1 ? before.name[1] : "";
    const char *kept_label = label_of(&before, "Live.Keep");

    /* 1,400 x 75 bytes of names a minute old (outside the history): one compaction at 56 KiB
     * frees them, the rest fit after it */
    char f[64], l[64];
    for (int i = 0; i < 1400; i++) {
        snprintf(f, sizeof f, "Old.Generated.Method_%05d", i);
        snprintf(l, sizeof l, "lock 0x%08x", 0x10000000 + i);
        add_lock(old, f, l, 1);
    }
    struct prof_store_stats st;
    prof_store_get_stats(&st);
    CHECK(st.name_compactions == 1, "one names compaction (%llu)",
          (unsigned long long)st.name_compactions);
    CHECK(st.freed_names > 1000, "it freed the old names (%llu)", (unsigned long long)st.freed_names);
    CHECK(st.dropped_strings == 0, "no name refused (%llu)", (unsigned long long)st.dropped_strings);
    CHECK(st.string_bytes <= st.string_cap && st.string_cap == 64u << 10, "within the cap (%llu)",
          (unsigned long long)st.string_bytes);

    /* the view taken before still reads its names */
    CHECK(kept_label && !strcmp(kept_label, "lock 0xkeep"), "the old view's label");
    CHECK(!strcmp(kept_frame, "Live.Keep"), "the old view's frame (%s)", kept_frame);
    prof_view_free(&before);

    /* new names now, and the live one kept with its label, findable by it */
    for (int i = 0; i < 200; i++) {
        snprintf(f, sizeof f, "New.Method_%d", i);
        snprintf(l, sizeof l, "lock 0xnew%d", i);
        add_lock(t, f, l, 1);
    }
    struct prof_view v;
    CHECK(!prof_store_view(PK_LOCK, 5, NULL, &v), "view");
    int named = 0, overflow = 0;
    for (size_t r = 0; r < v.nrows; r++) {
        const char *name = v.name[v.rows[r].node];
        overflow += !strcmp(name, "[overflow]") || !strcmp(v.rows[r].label, "[overflow]");
        if (!strncmp(name, "New.Method_", 11)) {
            snprintf(l, sizeof l, "lock 0xnew%s", name + 11);
            named += !strcmp(v.rows[r].label, l);
        }
    }
    CHECK(named == 200 && overflow == 0, "200 new frames with their labels (%d, %d overflow)",
          named, overflow);
    const char *keep = label_of(&v, "Live.Keep");
    CHECK(keep && !strcmp(keep, "lock 0xkeep"), "the live row kept its label");
    prof_view_free(&v);
    CHECK(!prof_store_view(PK_LOCK, 5, "lock 0xkeep", &v), "filtered view");
    CHECK(v.nrows == 1 && v.rows[0].v[0] == 3, "the filter finds the live row (%zu rows)", v.nrows);
    prof_view_free(&v);
    prof_store_free();

    /* names all in use (this second): a copy would free nothing, so none is made; past the cap
     * the new names are "[overflow]", counted */
    CHECK(!prof_store_init(5, 100000, 64u << 10), "init again");
    prof_store_get_stats(&st); /* the counters run on over a new init */
    uint64_t compactions0 = st.name_compactions, dropped0 = st.dropped_strings;
    for (int i = 0; i < 1000; i++) {
        snprintf(f, sizeof f, "Live.Generated.Method_%05d", i);
        snprintf(l, sizeof l, "lock 0x%08x", 0x20000000 + i);
        add_lock(t, f, l, 1);
    }
    prof_store_get_stats(&st);
    CHECK(st.name_compactions == compactions0, "no copy that would free nothing (%llu)",
          (unsigned long long)(st.name_compactions - compactions0));
    CHECK(st.dropped_strings > dropped0 && st.string_bytes <= 64u << 10,
          "past the cap: dropped (%llu)", (unsigned long long)(st.dropped_strings - dropped0));
    prof_store_free();
}

static int64_t scaled_sec;

/* half of second scaled_sec's values; the other seconds' stand */
static double half_one_second(int64_t sec)
{
    return sec == scaled_sec ? 0.5 : 1;
}

static void test_scale(void)
{
    CHECK(!prof_store_init(5, 1000, 16u << 20), "init (scale)");
    double t = floor(now());
    scaled_sec = (int64_t)t - 1;
    prof_store_set_scale(PK_ALLOC, 3, half_one_second); /* v0, v1: not v2 */
    const char *frames[1] = {"Alloc.Site"};
    int64_t v[PROF_NVALUES] = {1000, 4000, 7};
    prof_store_add(PK_ALLOC, (double)scaled_sec + 0.5, frames, 1, 1, "T", v);
    prof_store_add(PK_ALLOC, t + 0.1, frames, 1, 1, "T", v);
    prof_store_add(PK_CPU, (double)scaled_sec + 0.5, frames, 1, 1, NULL, v);
    int64_t tot[PROF_NVALUES];
    prof_store_totals(PK_ALLOC, 5, tot);
    CHECK(tot[0] == 1500 && tot[1] == 6000 && tot[2] == 14, "totals: %lld %lld %lld",
          (long long)tot[0], (long long)tot[1], (long long)tot[2]);
    prof_store_totals(PK_CPU, 5, tot);
    CHECK(tot[0] == 1000 && tot[1] == 4000, "another kind unscaled: %lld %lld",
          (long long)tot[0], (long long)tot[1]);
    struct prof_view vw;
    CHECK(!prof_store_view_range(PK_ALLOC, scaled_sec, scaled_sec, NULL, &vw), "view range");
    int64_t s0 = 0, s1 = 0, s2 = 0;
    for (size_t i = 0; i < vw.nrows; i++) {
        s0 += vw.rows[i].v[0];
        s1 += vw.rows[i].v[1];
        s2 += vw.rows[i].v[2];
    }
    CHECK(s0 == 500 && s1 == 2000 && s2 == 7, "the scaled second's row: %lld %lld %lld",
          (long long)s0, (long long)s1, (long long)s2);
    prof_view_free(&vw);
    prof_store_set_scale(PK_ALLOC, 0, NULL);
    prof_store_free();
}

int main(void)
{
    CHECK(!prof_store_init(5, 1000, 16u << 20), "init");
    char a[32], b[32];

    /* a minute ago (outside the 5-s history): 600 two-frame paths, ~1,200 nodes, more than fit */
    double old = now() - 60;
    for (int i = 0; i < 600; i++) {
        snprintf(a, sizeof a, "Old.A%d", i);
        snprintf(b, sizeof b, "Old.B%d", i);
        add(old, a, b, 1);
    }
    struct prof_store_stats st;
    prof_store_get_stats(&st);
    CHECK(st.compactions >= 1, "the full trie was compacted (%llu)",
          (unsigned long long)st.compactions);
    uint64_t dropped_before = st.dropped_nodes;

    /* now: 300 new paths, whole */
    double t = now();
    for (int i = 0; i < 300; i++) {
        snprintf(a, sizeof a, "New.A%d", i);
        snprintf(b, sizeof b, "New.B%d", i);
        add(t, a, b, 1);
    }
    prof_store_get_stats(&st);
    CHECK(st.dropped_nodes == dropped_before, "new paths all fit after compaction (%llu -> %llu)",
          (unsigned long long)dropped_before, (unsigned long long)st.dropped_nodes);
    CHECK(st.nodes <= 1000, "under the cap (%llu)", (unsigned long long)st.nodes);
    struct prof_view v;
    CHECK(!prof_store_view(PK_CPU, 5, NULL, &v), "view");
    int whole = 0;
    for (int i = 0; i < 300; i++) {
        snprintf(a, sizeof a, "New.A%d", i);
        snprintf(b, sizeof b, "New.B%d", i);
        const char *p[2] = {a, b};
        whole += at_path(&v, p, 2) == 1;
    }
    CHECK(whole == 300, "300 new stacks whole (%d)", whole);
    prof_view_free(&v);

    /* fill the trie with live paths (no compaction can help), then p -> q, p new, q a root
     * frame already: the sample must not be shown under q */
    add(t, "Q", NULL, 1);
    for (int i = 0; i < 600; i++) {
        snprintf(a, sizeof a, "Live.A%d", i);
        snprintf(b, sizeof b, "Live.B%d", i);
        add(t, a, b, 1);
    }
    prof_store_get_stats(&st);
    CHECK(st.dropped_nodes > dropped_before, "the trie is full of live paths");
    const char *none[1] = {NULL};
    CHECK(!prof_store_view(PK_CPU, 5, NULL, &v), "view");
    int64_t root0 = at_path(&v, none, 0);
    prof_view_free(&v);
    add(t, "P.NeverSeen", "Q", 1000);
    CHECK(!prof_store_view(PK_CPU, 5, NULL, &v), "view");
    const char *q[1] = {"Q"};
    CHECK(at_path(&v, q, 1) == 1, "Q keeps its own sample only (%lld)",
          (long long)at_path(&v, q, 1));
    int64_t root = at_path(&v, none, 0) - root0;
    CHECK(root == 1000, "the cut sample stays at the root, where the trie ended (%lld)",
          (long long)root);
    prof_view_free(&v);
    prof_store_free();

    /* the clock set back by 2,000 s: buckets from "the future" are taken over, not in the way */
    CHECK(!prof_store_init(5, 1000, 16u << 20), "init again");
    double later = floor(now()) + 2000; /* 2000 % 5 == 0: the same bucket as now */
    add(later, "Before.Step", NULL, 7);
    prof_store_get_stats(&st);
    uint64_t dropped = st.dropped_entries;
    t = floor(now());
    add(t, "After.Step", NULL, 5);
    prof_store_get_stats(&st);
    CHECK(st.dropped_entries == dropped, "nothing dropped after the step (%llu)",
          (unsigned long long)(st.dropped_entries - dropped));
    CHECK(!prof_store_view(PK_CPU, 5, NULL, &v), "view");
    const char *after[1] = {"After.Step"}, *before[1] = {"Before.Step"};
    CHECK(at_path(&v, after, 1) == 5, "the sample after the step is there (%lld)",
          (long long)at_path(&v, after, 1));
    CHECK(at_path(&v, before, 1) == 0, "the one from before it is not in the window");
    prof_view_free(&v);
    prof_store_free();

    test_names();
    test_scale();
    test_thread_paths();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
