/*
 * test_tree.c - prof_tree over hand-made views:
 *   - two windows merge by frame names from the root (the views number their nodes differently
 *     and hold their own copies of the names): each path's value in each window, a path in one
 *     window only with zero in the other, the same name under another parent a path of its own;
 *   - the functions whose self share changed most come first, gains and losses alike, and a
 *     function never at the top of a stack is left out;
 *   - a tree trimmed so hard that a parent has no room left for its "[other]" node keeps every
 *     inclusive value what it is (the folded children go to the parent's self, counted once);
 *   - native frames grouped by kind (the runtime, the JIT, stubs, system libraries);
 *   - native frames folded into their managed callers: their time becomes the caller's own,
 *     paths that then meet are merged, native frames nearer the root than any other stay.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_tree.h"

#include "unit_check.h"

static struct prof_view view(size_t nnodes, const uint32_t *parent, const char **name,
                             size_t nrows, struct prof_row *rows)
{
    struct prof_view v = {.kind = PK_CPU, .nnodes = nnodes, .parent = (uint32_t *)parent,
                          .name = name, .nrows = nrows, .rows = rows};
    return v;
}

/* The kept node at path names[0..n) below the root, or -1. */
static long find(const struct prof_tree *t, const char *const *names, int n)
{
    uint32_t node = 0;
    for (int i = 0; i < n; i++) {
        uint32_t c = t->first_child[node];
        while (c != UINT32_MAX && strcmp(t->name[c], names[i]))
            c = t->next_sibling[c];
        if (c == UINT32_MAX)
            return -1;
        node = c;
    }
    return node;
}

static void test_diff(void)
{
    /* a: Main/Hot1 30, Main/Steady 10 */
    uint32_t pa[] = {0, 0, 1, 1};
    const char *na[] = {"all", "Main", "Hot1", "Steady"};
    struct prof_row ra[] = {{.node = 2, .v = {30, 30}}, {.node = 3, .v = {10, 10}}};
    /* b, numbered otherwise, names copied: Main/Steady 20, Main/Hot2 60, Hot1 20 (at the root) */
    char *main_b = strdup("Main"), *steady_b = strdup("Steady"), *hot1_b = strdup("Hot1");
    uint32_t pb[] = {0, 0, 0, 2, 2};
    const char *nb[] = {"all", hot1_b, main_b, steady_b, "Hot2"};
    struct prof_row rb[] = {{.node = 3, .v = {20, 20}}, {.node = 4, .v = {60, 60}},
                            {.node = 1, .v = {20, 20}}};
    struct prof_view a = view(4, pa, na, 2, ra), b = view(5, pb, nb, 3, rb);
    struct prof_tree t;
    CHECK(!prof_tree_build_diff(&a, &b, 1, 100, &t), "diff built");
    CHECK(t.total == 100 && t.base_total == 40, "totals %lld %lld", (long long)t.total,
          (long long)t.base_total);
    struct {
        const char *path[2];
        int n;
        int64_t value, base;
    } want[] = {{{"Main"}, 1, 80, 40},          {{"Main", "Hot1"}, 2, 0, 30},
                {{"Main", "Steady"}, 2, 20, 10}, {{"Main", "Hot2"}, 2, 60, 0},
                {{"Hot1"}, 1, 20, 0}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        long k = find(&t, want[i].path, want[i].n);
        CHECK(k > 0, "path %s/%s kept", want[i].path[0], want[i].n > 1 ? want[i].path[1] : "");
        if (k > 0)
            CHECK(t.value[k] == want[i].value && t.base[k] == want[i].base,
                  "%s/%s: value %lld base %lld, want %lld %lld", want[i].path[0],
                  want[i].n > 1 ? want[i].path[1] : "", (long long)t.value[k],
                  (long long)t.base[k], (long long)want[i].value, (long long)want[i].base);
    }
    CHECK(t.n == 6, "the union's 5 paths and the root (%zu)", t.n);
    prof_tree_free(&t);

    struct prof_top_diff top;
    CHECK(!prof_tree_top_diff(&a, &b, 1, 0, &top), "top diff");
    struct prof_top_diff_row *rows = top.rows;
    size_t n = top.n;
    CHECK(n == 3, "Hot2, Hot1, Steady; Main never at the top (%zu rows)", n);
    if (n == 3) {
        CHECK(!strcmp(rows[0].name, "Hot2") && rows[0].self == 60 && rows[0].base_self == 0,
              "first %s", rows[0].name);
        CHECK(!strcmp(rows[1].name, "Hot1") && rows[1].self == 20 && rows[1].base_self == 30,
              "second %s (-0.55 of its share)", rows[1].name);
        CHECK(!strcmp(rows[2].name, "Steady"), "third %s (-0.05)", rows[2].name);
    }
    prof_top_diff_free(&top);

    /* a window against itself: every node the same in both */
    CHECK(!prof_tree_build_diff(&b, &b, 1, 100, &t), "self diff built");
    for (size_t i = 0; i < t.n; i++)
        CHECK(t.value[i] == t.base[i] && t.self[i] == t.base_self[i], "node %zu differs", i);
    prof_tree_free(&t);
    free(main_b);
    free(steady_b);
    free(hot1_b);
}

static void test_no_room_for_other(void)
{
    /* 20 callers C<i> of one leaf D each, 1 each: more kept candidates than max_nodes */
    enum { N = 20 };
    uint32_t parent[1 + 2 * N];
    const char *name[1 + 2 * N];
    struct prof_row rows[N];
    char names[2 * N][8];
    parent[0] = 0;
    name[0] = "all";
    for (int i = 0; i < N; i++) {
        snprintf(names[2 * i], 8, "C%02d", i);
        snprintf(names[2 * i + 1], 8, "D");
        parent[1 + 2 * i] = 0;
        name[1 + 2 * i] = names[2 * i];
        parent[2 + 2 * i] = 1 + 2 * i;
        name[2 + 2 * i] = names[2 * i + 1];
        rows[i] = (struct prof_row){.node = 2 + 2 * i, .v = {1, 1}};
    }
    struct prof_view v = view(1 + 2 * N, parent, name, N, rows);
    struct prof_tree t;
    CHECK(!prof_tree_build(&v, 1, 16, &t), "tree built");
    CHECK(t.value[0] == N, "root %lld", (long long)t.value[0]);
    int64_t self = 0;
    for (size_t i = 1; i < t.n; i++) {
        int64_t kids = 0;
        for (uint32_t c = t.first_child[i]; c != UINT32_MAX; c = t.next_sibling[c])
            kids += t.value[c];
        CHECK(t.value[i] <= 1, "%s: %lld, more than it ran", t.name[i], (long long)t.value[i]);
        CHECK(t.value[i] == kids + t.self[i], "%s: value = children + self", t.name[i]);
        self += t.self[i];
    }
    CHECK(self + t.self[0] == N, "every sample once: %lld", (long long)(self + t.self[0]));
    prof_tree_free(&t);
}

static void test_samples(void)
{
    /* an estimated profile: v0 the estimate, v2 the samples behind it.
     * 1 Main                       (self 0)
     * 2   Big      900 from 30 samples
     * 3   Small1     5 from  1
     * ...
     * 22  Small20    5 from  1     (20 small callees: too many to keep in 16 nodes) */
    enum { N = 20 };
    uint32_t parent[3 + N];
    const char *name[3 + N];
    char names[N][12];
    struct prof_row rows[1 + N];
    parent[0] = 0;
    name[0] = "all";
    parent[1] = 0;
    name[1] = "Main";
    parent[2] = 1;
    name[2] = "Big";
    rows[0] = (struct prof_row){.node = 2, .v = {900, 0, 30}};
    for (int i = 0; i < N; i++) {
        snprintf(names[i], sizeof names[i], "Small%02d", i);
        parent[3 + i] = 1;
        name[3 + i] = names[i];
        rows[1 + i] = (struct prof_row){.node = 3 + (uint32_t)i, .v = {5, 0, 1}};
    }
    struct prof_view v = view(3 + N, parent, name, 1 + N, rows);
    struct prof_tree t;
    CHECK(!prof_tree_build(&v, 0, 16, &t), "tree built");
    CHECK(t.samples == NULL, "no samples asked, none given");
    prof_tree_free(&t);
    CHECK(!prof_tree_build_sampled(&v, 0, 2, 16, &t), "sampled tree built");
    CHECK(t.samples && t.samples[0] == 30 + N, "root: every sample, %lld",
          t.samples ? (long long)t.samples[0] : -1);
    const char *big[] = {"Main", "Big"}, *main_[] = {"Main"}, *other[] = {"Main", "[other]"};
    long n = find(&t, big, 2);
    CHECK(n >= 0 && t.samples[n] == 30 && t.value[n] == 900, "Big: its own 30 samples");
    n = find(&t, main_, 1);
    CHECK(n >= 0 && t.samples[n] == 30 + N, "Main: inclusive samples");
    /* the kept small callees and "[other]" share the rest: samples follow values */
    int64_t small_samples = 0, small_value = 0;
    long m = find(&t, main_, 1);
    for (uint32_t c = m >= 0 ? t.first_child[m] : UINT32_MAX; c != UINT32_MAX;
         c = t.next_sibling[c]) {
        if (!strcmp(t.name[c], "Big"))
            continue;
        small_samples += t.samples[c];
        small_value += t.value[c];
        CHECK(t.value[c] == 5 * t.samples[c], "%s: %lld for %lld samples", t.name[c],
              (long long)t.value[c], (long long)t.samples[c]);
    }
    CHECK(find(&t, other, 2) >= 0, "the small callees folded into [other]");
    CHECK(small_samples == N && small_value == 5 * N, "the folded callees' samples kept: %lld",
          (long long)small_samples);
    prof_tree_free(&t);
    CHECK(!prof_tree_build_sampled(&v, 0, PROF_NVALUES, 16, &t) && !t.samples,
          "a slot past the values: no samples");
    prof_tree_free(&t);
}

static void test_fold_native(void)
{
    /* 1 [native libcoreclr.so] (a thread's start)
     * 2   Main
     * 3     Work                                   5
     * 4       [native libclrjit.so]
     * 5         [native libc.so.6]                 10
     * 6     [native code]
     * 7       Helper                               3
     * 8     Helper                                 2
     * 9 Garbage Collector
     * 10  [native libcoreclr.so]                   4
     * 11  [native libc.so.6]                       1  (under 1: no managed frame above it) */
    uint32_t parent[] = {0, 0, 1, 2, 3, 4, 2, 6, 2, 0, 9, 1};
    const char *name[] = {"all", "[native libcoreclr.so]", "Main", "Work", "[native libclrjit.so]",
                          "[native libc.so.6]", "[native code]", "Helper", "Helper",
                          "Garbage Collector", "[native libcoreclr.so]", "[native libc.so.6]"};
    struct prof_row rows[] = {{.node = 3, .v = {5, 5}}, {.node = 5, .v = {10, 10}},
                              {.node = 7, .v = {3, 3}}, {.node = 8, .v = {2, 2}},
                              {.node = 10, .v = {4, 4}}, {.node = 11, .v = {1, 1}}};
    struct prof_view v = view(12, parent, name, 6, rows);
    size_t folded = 0;
    CHECK(!prof_view_fold_native(&v, &folded), "folded");
    CHECK(folded == 4, "4 native frames folded: %zu", folded);
    CHECK(v.nnodes == 7, "7 nodes left: %zu", v.nnodes);
    for (size_t i = 1; i < v.nnodes; i++)
        CHECK(v.parent[i] < i, "node %zu: parent %u", i, v.parent[i]);
    struct prof_tree t;
    CHECK(!prof_tree_build(&v, 1, 100, &t), "tree built");
    CHECK(t.total == 25, "total kept: %lld", (long long)t.total);
    const char *work[] = {"[native libcoreclr.so]", "Main", "Work"};
    long n = find(&t, work, 3);
    CHECK(n >= 0 && t.self[n] == 15 && t.first_child[n] == UINT32_MAX,
          "Work's own time holds the JIT's and libc's: %lld", n >= 0 ? (long long)t.self[n] : -1);
    const char *helper[] = {"[native libcoreclr.so]", "Main", "Helper"};
    n = find(&t, helper, 3);
    CHECK(n >= 0 && t.value[n] == 5, "the stub's path and the direct call merged: %lld",
          n >= 0 ? (long long)t.value[n] : -1);
    const char *main_[] = {"[native libcoreclr.so]", "Main"};
    n = find(&t, main_, 2);
    CHECK(n >= 0 && t.self[n] == 0 && t.value[n] == 20, "Main: 20 in all, none its own");
    const char *gc[] = {"Garbage Collector"};
    n = find(&t, gc, 1);
    CHECK(n >= 0 && t.self[n] == 4 && t.first_child[n] == UINT32_MAX, "the GC's runtime time");
    const char *start[] = {"[native libcoreclr.so]", "[native libc.so.6]"};
    n = find(&t, start, 2);
    CHECK(n >= 0 && t.self[n] == 1, "native frames without a managed caller stay");
    prof_tree_free(&t);
    prof_scratch_release(&v.mem);
}

static void test_group_native(void)
{
    /* 1 [native libcoreclr.so]
     * 2   [native libcoreclr.so!Start]        (the same group as its parent: merged into it)
     * 3     Main
     * 4       Work                            5
     * 5         [native libclrjit.so]
     * 6           [native libc.so.6]          10
     * 7           [native ld-linux-x86-64.so.2] 4  (both "system": one node of 14)
     * 8       [native code]
     * 9         Helper                        3
     * 10        [native libnat.so]            2  (an app's own library keeps its name) */
    uint32_t parent[] = {0, 0, 1, 2, 3, 4, 5, 5, 3, 8, 4};
    const char *name[] = {"all", "[native libcoreclr.so]", "[native libcoreclr.so!Start]", "Main",
                          "Work", "[native libclrjit.so]", "[native libc.so.6]",
                          "[native ld-linux-x86-64.so.2]", "[native code]", "Helper",
                          "[native libnat.so]"};
    struct prof_row rows[] = {{.node = 4, .v = {5, 5}}, {.node = 6, .v = {10, 10}},
                              {.node = 7, .v = {4, 4}}, {.node = 9, .v = {3, 3}},
                              {.node = 10, .v = {2, 2}}};
    struct prof_view v = view(11, parent, name, 5, rows);
    size_t merged = 0;
    CHECK(!prof_view_group_native(&v, &merged), "grouped");
    CHECK(merged == 2, "2 nodes merged: %zu", merged);
    CHECK(v.nnodes == 9, "9 nodes left: %zu", v.nnodes);
    for (size_t i = 1; i < v.nnodes; i++)
        CHECK(v.parent[i] < i, "node %zu: parent %u", i, v.parent[i]);
    struct prof_tree t;
    CHECK(!prof_tree_build(&v, 1, 100, &t), "tree built");
    CHECK(t.total == 24, "total kept: %lld", (long long)t.total);
    const char *sys[] = {"[native runtime]", "Main", "Work", "[native JIT]", "[native system]"};
    long n = find(&t, sys, 5);
    CHECK(n >= 0 && t.value[n] == 14, "libc and the loader in one system node: %lld",
          n >= 0 ? (long long)t.value[n] : -1);
    const char *stub[] = {"[native runtime]", "Main", "[native stubs]", "Helper"};
    n = find(&t, stub, 4);
    CHECK(n >= 0 && t.value[n] == 3, "the stub under its group");
    const char *own[] = {"[native runtime]", "Main", "Work", "[native libnat.so]"};
    n = find(&t, own, 4);
    CHECK(n >= 0 && t.value[n] == 2, "the app's library keeps its name");
    prof_tree_free(&t);
    prof_scratch_release(&v.mem);
}

int main(void)
{
    test_fold_native();
    test_group_native();
    test_diff();
    test_no_room_for_other();
    test_samples();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
