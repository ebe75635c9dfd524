/*
 * test_pprof.c - the pprof encoder (profiler/export/pprof_encoder.c): a gunzip + protobuf decoder of its own
 * checks the profile.proto invariants (string_table[0] == "", non-zero and resolvable ids,
 * leaf-first stacks, labels, caps, allocation failures); when `go` is on PATH, `go tool pprof
 * -raw/-top` must read the file and show the expected names, values and labels.
 */
#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

#include "pprof_encoder.h"

#include "unit_check.h"

#include "pprof_decode.h"

/* ---- the sample profile used by several tests ---- */

static const pprof_value_type g_types[] = {{"samples", "count"}, {"cpu", "nanoseconds"}};
static const pprof_value_type g_period = {"cpu", "nanoseconds"};

static const char *const g_stack_compute[] = {"MyApp.Orders.Widget.Compute",
                                              "MyApp.Orders.Service.Handle", "MyApp.Program.Main"};
static const char *const g_stack_libc[] = {"libc.so.6", "MyApp.Orders.Service.Handle",
                                           "MyApp.Program.Main"};
static const char *const g_stack_odd[] = {NULL, "", "MyApp.<>c.<Main>b__0_0",
                                          "System.Collections.Generic.List`1.Add"};

/* Adds the four demo samples; returns the first non-zero pprof_add_sample* result. */
static int add_demo_samples(pprof_builder *b)
{
    static const char *const k1[] = {"thread_id", "thread_name"};
    static const char *const s1[] = {"1234", "worker-1"};
    static const char *const k2[] = {"thread_id", "alloc_bytes"};
    static const char *const s2[] = {"5678", NULL};
    static const int64_t n2[] = {0, 4096};
    static const char *const u2[] = {NULL, "bytes"};
    int64_t v1[] = {30, 300000000}, v2[] = {10, 100000000}, v3[] = {2, 20000000};
    int64_t v4[] = {1, 10000000};
    int rc, first = 0;

    rc = pprof_add_sample(b, g_stack_compute, 3, v1, k1, s1, NULL, 2);
    first = first ? first : rc;
    rc = pprof_add_sample_ex(b, g_stack_libc, 3, v2, k2, s2, n2, u2, 2);
    first = first ? first : rc;
    rc = pprof_add_sample(b, g_stack_odd, 4, v3, NULL, NULL, NULL, 0);
    first = first ? first : rc;
    rc = pprof_add_sample(b, NULL, 0, v4, NULL, NULL, NULL, 0);
    return first ? first : rc;
}

static pprof_builder *demo_builder(void)
{
    pprof_builder *b = pprof_new(g_types, 2, g_period, 10000000);
    if (!b)
        return NULL;
    pprof_set_time(b, 1700000000123456789LL, 5000000000LL);
    pprof_set_default_sample_type(b, "cpu");
    pprof_add_comment(b, "clrscope test profile");
    if (add_demo_samples(b)) {
        pprof_free(b);
        return NULL;
    }
    return b;
}

/* The four samples of add_demo_samples(), as decoded. */
static void check_demo_samples(const struct profile *pr)
{
    CHECK(pr->nsamples == 4, "samples %zu", pr->nsamples);
    if (pr->nsamples != 4)
        return;
    const struct dsample *s = &pr->samples[0];
    CHECK(s->nlocs == 3 && !strcmp(loc_name(pr, s->locs[0]), g_stack_compute[0]) &&
              !strcmp(loc_name(pr, s->locs[2]), "MyApp.Program.Main"),
          "sample 0 is leaf-first");
    CHECK(s->vals[0] == 30 && s->vals[1] == 300000000, "sample 0 values");
    CHECK(s->nlabels == 2 && label_str(pr, s, "thread_id") &&
              !strcmp(label_str(pr, s, "thread_id"), "1234") &&
              !strcmp(label_str(pr, s, "thread_name"), "worker-1"),
          "sample 0 string labels");
    s = &pr->samples[1];
    const struct dlabel *l = label_of(pr, s, "alloc_bytes");
    CHECK(l && l->str == 0 && l->num == 4096 && !strcmp(str_at(pr, l->unit), "bytes"),
          "numeric label with unit");
    CHECK(s->locs[1] == pr->samples[0].locs[1] && s->locs[2] == pr->samples[0].locs[2],
          "shared frames share one location");
    s = &pr->samples[2];
    CHECK(s->nlocs == 4 && s->locs[0] == s->locs[1] &&
              !strcmp(loc_name(pr, s->locs[0]), PPROF_UNKNOWN_FRAME) &&
              !strcmp(loc_name(pr, s->locs[2]), "MyApp.<>c.<Main>b__0_0") &&
              !strcmp(loc_name(pr, s->locs[3]), "System.Collections.Generic.List`1.Add"),
          "NULL and empty frames become [unknown]");
    s = &pr->samples[3];
    CHECK(s->nlocs == 1 && !strcmp(loc_name(pr, s->locs[0]), PPROF_UNKNOWN_FRAME),
          "an empty stack becomes [unknown]");
}

static void test_pprof_demo_profile_decodes(void)
{
    pprof_builder *b = demo_builder();
    unsigned char *gz = NULL;
    size_t gzlen = 0;
    struct profile pr = {0};

    CHECK(b != NULL, "demo builder");
    if (!b)
        return;
    CHECK(pprof_finish(b, &gz, &gzlen) == 0, "finish");
    CHECK(gz && gzlen > 20 && gz[0] == 0x1f && gz[1] == 0x8b, "gzip magic");
    CHECK(gz && decode(gz, gzlen, &pr) == 0, "decode");
    if (!gz || pr.nstr == 0) {
        pprof_free(b);
        free(gz);
        return;
    }
    CHECK(check_invariants(&pr) == 0, "invariants");
    CHECK(!strcmp(pr.strs[0], ""), "string_table[0] is \"\", got \"%s\"", pr.strs[0]);
    for (size_t i = 0; i < pr.nstr; i++)
        for (size_t j = i + 1; j < pr.nstr; j++)
            CHECK(strcmp(pr.strs[i], pr.strs[j]), "string %zu == %zu (%s)", i, j, pr.strs[i]);
    CHECK(pr.ntypes == 2 && !strcmp(str_at(&pr, pr.st_type[0]), "samples") &&
              !strcmp(str_at(&pr, pr.st_unit[0]), "count") &&
              !strcmp(str_at(&pr, pr.st_type[1]), "cpu") &&
              !strcmp(str_at(&pr, pr.st_unit[1]), "nanoseconds"),
          "sample types");
    CHECK(!strcmp(str_at(&pr, pr.maps[0].filename), PPROF_MAPPING_FILE), "mapping filename");
    /* 7 distinct names: Compute, Handle, Main, libc.so.6, [unknown], <Main>b__0_0, List`1.Add */
    CHECK(pr.nfuncs == 7 && pr.nlocs == 7, "functions %zu locations %zu", pr.nfuncs, pr.nlocs);
    check_demo_samples(&pr);
    CHECK(pr.time_nanos == 1700000000123456789LL && pr.duration_nanos == 5000000000LL, "time");
    CHECK(pr.period == 10000000 && !strcmp(str_at(&pr, pr.period_type[0]), "cpu") &&
              !strcmp(str_at(&pr, pr.period_type[1]), "nanoseconds"),
          "period");
    CHECK(!strcmp(str_at(&pr, pr.default_type), "cpu"), "default_sample_type");
    CHECK(pr.ncomments == 1 && has_comment(&pr, "clrscope test profile"), "comment");

    /* finish does not consume the builder */
    unsigned char *gz2 = NULL;
    size_t gzlen2 = 0;
    CHECK(pprof_finish(b, &gz2, &gzlen2) == 0 && gzlen2 == gzlen && !memcmp(gz, gz2, gzlen),
          "second finish gives the same bytes");
    free(gz2);
    profile_free(&pr);
    free(gz);
    pprof_free(b);
}

static void test_pprof_extreme_values(void)
{
    pprof_builder *b = pprof_new(g_types, 2, g_period, 1);
    const char *frame = "Leaf";
    int64_t v1[] = {INT64_MIN, INT64_MAX}, v2[] = {-5, 0};
    static const char *const keys[] = {"neg", "", "big", NULL};
    static const int64_t nums[] = {-7, 1, INT64_MAX, 2};
    unsigned char *gz = NULL;
    size_t gzlen;
    struct profile pr = {0};

    CHECK(b != NULL, "new");
    if (!b)
        return;
    CHECK(pprof_add_sample(b, &frame, 1, v1, keys, NULL, nums, 4) == 0, "add 1");
    CHECK(pprof_add_sample(b, &frame, 1, v2, NULL, NULL, NULL, 0) == 0, "add 2");
    CHECK(pprof_finish(b, &gz, &gzlen) == 0 && decode(gz, gzlen, &pr) == 0, "finish + decode");
    if (gz && pr.nsamples == 2) {
        CHECK(check_invariants(&pr) == 0, "invariants");
        CHECK(pr.samples[0].vals[0] == INT64_MIN && pr.samples[0].vals[1] == INT64_MAX,
              "int64 extremes");
        CHECK(pr.samples[1].vals[0] == -5 && pr.samples[1].vals[1] == 0, "negative and zero");
        CHECK(pr.samples[0].nlabels == 2 && label_of(&pr, &pr.samples[0], "neg")->num == -7 &&
                  label_of(&pr, &pr.samples[0], "big")->num == INT64_MAX,
              "numeric labels; labels without a key are skipped");
        CHECK(pr.default_type == 0 && pr.ncomments == 0 && pr.time_nanos == 0, "no defaults set");
        profile_free(&pr);
    }
    free(gz);
    pprof_free(b);
}

static void test_pprof_bad_arguments(void)
{
    int64_t v[] = {1, 2};
    const char *frame = "f";
    unsigned char *gz = NULL;
    size_t len = 0;

    CHECK(pprof_new(NULL, 1, g_period, 1) == NULL, "NULL types");
    CHECK(pprof_new(g_types, 0, g_period, 1) == NULL, "zero types");
    CHECK(pprof_new(g_types, PPROF_MAX_TYPES + 1, g_period, 1) == NULL, "too many types");
    CHECK(pprof_add_sample(NULL, &frame, 1, v, NULL, NULL, NULL, 0) == -1, "NULL builder");
    CHECK(pprof_finish(NULL, &gz, &len) == -1 && gz == NULL, "finish NULL");
    pprof_free(NULL);
    pprof_add_comment(NULL, "x");
    pprof_set_time(NULL, 1, 1);
    pprof_set_default_sample_type(NULL, "cpu");

    pprof_builder *b = pprof_new(g_types, 2, (pprof_value_type){NULL, NULL}, 0);
    CHECK(b != NULL, "NULL period strings are allowed");
    if (!b)
        return;
    CHECK(pprof_add_sample(b, NULL, 1, v, NULL, NULL, NULL, 0) == -1, "NULL frames, n=1");
    CHECK(pprof_add_sample(b, &frame, -1, v, NULL, NULL, NULL, 0) == -1, "negative nframes");
    CHECK(pprof_add_sample(b, &frame, 1, NULL, NULL, NULL, NULL, 0) == -1, "NULL values");
    CHECK(pprof_add_sample(b, &frame, 1, v, NULL, NULL, NULL, 1) == -1, "NULL label keys");
    pprof_set_default_sample_type(b, "wall"); /* not a sample type: ignored */
    pprof_add_comment(b, NULL);
    struct pprof_stats st;
    pprof_get_stats(b, &st);
    CHECK(st.samples == 0 && st.dropped == 0 && st.functions == 0, "nothing added");
    CHECK(pprof_finish(b, &gz, &len) == 0, "finish an empty profile");
    struct profile pr = {0};
    if (gz && decode(gz, len, &pr) == 0) {
        CHECK(check_invariants(&pr) == 0, "empty profile invariants");
        CHECK(pr.nsamples == 0 && pr.default_type == 0 && pr.period_type[0] == 0,
              "empty profile contents");
        profile_free(&pr);
    } else {
        CHECK(0, "empty profile decodes");
    }
    free(gz);
    pprof_free(b);
}

static void test_pprof_drops_past_max_samples(void)
{
    struct pprof_opts opts = {.max_samples = 3};
    pprof_builder *b = pprof_new_opts(g_types, 2, g_period, 1, &opts);
    const char *frames[] = {"A", "B"};
    int64_t v[] = {1, 1};
    int rcs[5];
    struct pprof_stats st;
    unsigned char *gz = NULL;
    size_t len;
    struct profile pr = {0};

    CHECK(b != NULL, "new");
    if (!b)
        return;
    for (int i = 0; i < 5; i++)
        rcs[i] = pprof_add_sample(b, frames, 2, v, NULL, NULL, NULL, 0);
    CHECK(rcs[0] == 0 && rcs[2] == 0 && rcs[3] == 1 && rcs[4] == 1, "the 4th and 5th are dropped");
    pprof_get_stats(b, &st);
    CHECK(st.samples == 3 && st.dropped == 2, "stats %zu/%zu", st.samples, st.dropped);
    pprof_set_max_samples(b, 4);
    CHECK(pprof_add_sample(b, frames, 2, v, NULL, NULL, NULL, 0) == 0, "raised cap");
    CHECK(pprof_finish(b, &gz, &len) == 0 && decode(gz, len, &pr) == 0, "finish + decode");
    if (gz && pr.nstr) {
        CHECK(check_invariants(&pr) == 0, "invariants");
        CHECK(pr.nsamples == 4, "4 samples kept, got %zu", pr.nsamples);
        CHECK(has_comment(&pr, "2 samples dropped"), "the drop count is a comment");
        profile_free(&pr);
    }
    free(gz);
    pprof_free(b);
}

static void test_pprof_drops_past_max_bytes(void)
{
    const size_t cap = 64 << 10;
    struct pprof_opts opts = {.max_bytes = cap};
    pprof_builder *b = pprof_new_opts(g_types, 2, g_period, 1, &opts);
    char name[200];
    const char *frames[] = {name, "Root"};
    int64_t v[] = {1, 1};
    int added = 0, dropped = 0, errors = 0;
    struct pprof_stats st;
    unsigned char *gz = NULL;
    size_t len;
    struct profile pr = {0};

    CHECK(b != NULL, "new");
    if (!b)
        return;
    for (int i = 0; i < 5000; i++) {
        snprintf(name, sizeof name, "Namespace.Type%05d.Method_with_a_rather_long_name_%05d", i, i);
        int rc = pprof_add_sample(b, frames, 2, v, NULL, NULL, NULL, 0);
        added += rc == 0;
        dropped += rc == 1;
        errors += rc < 0;
    }
    pprof_get_stats(b, &st);
    CHECK(errors == 0 && dropped > 0 && added > 100, "added %d dropped %d errors %d", added,
          dropped, errors);
    CHECK(st.bytes <= cap && st.samples == (size_t)added && st.dropped == (size_t)dropped,
          "bytes %zu <= %zu", st.bytes, cap);
    CHECK(pprof_finish(b, &gz, &len) == 0 && decode(gz, len, &pr) == 0, "finish + decode");
    if (gz && pr.nstr) {
        CHECK(check_invariants(&pr) == 0, "invariants");
        CHECK(pr.nsamples == (size_t)added, "kept samples");
        CHECK(has_comment(&pr, "samples dropped"), "drop comment");
        profile_free(&pr);
    }
    free(gz);
    pprof_free(b);
}

static void test_pprof_many_names_grow_the_tables(void)
{
    enum { N = 20000 };
    pprof_builder *b = pprof_new(g_types, 2, g_period, 1);
    char name[64];
    const char *frames[] = {name, "Root"};
    int64_t v[2];
    int rc = 0;
    unsigned char *gz = NULL;
    size_t len;
    struct profile pr = {0};

    CHECK(b != NULL, "new");
    if (!b)
        return;
    for (int i = 0; i < N && !rc; i++) {
        snprintf(name, sizeof name, "Ns.T%d.M", i % (N / 2)); /* each name twice */
        v[0] = i;
        v[1] = 1;
        rc = pprof_add_sample(b, frames, 2, v, NULL, NULL, NULL, 0);
    }
    CHECK(rc == 0, "adds");
    CHECK(pprof_finish(b, &gz, &len) == 0 && decode(gz, len, &pr) == 0, "finish + decode");
    if (gz && pr.nsamples == N) {
        CHECK(pr.nfuncs == N / 2 + 1, "functions %zu", pr.nfuncs);
        int wrong = 0;
        for (size_t i = 0; i < N; i += 997) {
            snprintf(name, sizeof name, "Ns.T%zu.M", i % (N / 2));
            wrong += strcmp(loc_name(&pr, pr.samples[i].locs[0]), name) != 0 ||
                     pr.samples[i].vals[0] != (int64_t)i ||
                     strcmp(loc_name(&pr, pr.samples[i].locs[1]), "Root") != 0;
        }
        CHECK(wrong == 0, "%d samples resolve to the wrong name", wrong);
        CHECK(pr.samples[0].locs[0] == pr.samples[N / 2].locs[0], "a repeated name is deduped");
        profile_free(&pr);
    }
    free(gz);
    pprof_free(b);
}

/* ---- allocation failures: fail the Nth allocation, N = 1, 2, ... ---- */

struct fault_alloc {
    long calls, fail_at, live;
};

static void *fault_alloc(void *ctx, void *ptr, size_t size)
{
    struct fault_alloc *fa = ctx;
    if (!size) {
        if (ptr)
            fa->live--;
        free(ptr);
        return NULL;
    }
    if (++fa->calls == fa->fail_at)
        return NULL;
    void *np = realloc(ptr, size);
    if (np && !ptr)
        fa->live++;
    return np;
}

/* One full run with the Nth allocation failing; returns 1 when nothing failed. */
static int fault_run(long n, int *bad)
{
    struct fault_alloc fa = {.fail_at = n};
    struct pprof_opts opts = {.alloc = fault_alloc, .alloc_ctx = &fa};
    pprof_builder *b = pprof_new_opts(g_types, 2, g_period, 1, &opts);
    unsigned char *gz = NULL;
    size_t len = 0;
    int clean = b != NULL;

    if (b) {
        pprof_set_default_sample_type(b, "cpu");
        pprof_add_comment(b, "fault injection");
        int rc = add_demo_samples(b);
        if (rc)
            clean = 0;
        if (rc != 0 && rc != -1) {
            (*bad)++;
            printf("N=%ld: add returned %d\n", n, rc);
        }
        if (pprof_finish(b, &gz, &len)) {
            clean = 0;
        } else {
            struct profile pr = {0};
            if (decode(gz, len, &pr) || check_invariants(&pr)) {
                (*bad)++;
                printf("N=%ld: a profile finished after a failure does not decode\n", n);
            } else {
                profile_free(&pr);
            }
            fault_alloc(&fa, gz, 0);
        }
        pprof_free(b);
    }
    if (fa.live != 0) {
        (*bad)++;
        printf("N=%ld: %ld blocks leaked\n", n, fa.live);
    }
    return clean;
}

static void test_pprof_survives_every_allocation_failure(void)
{
    int bad = 0;
    long n;
    for (n = 1; n < 10000; n++)
        if (fault_run(n, &bad))
            break;
    CHECK(n > 5 && n < 10000, "a run without failure after %ld injected failures", n - 1);
    CHECK(bad == 0, "%d bad runs", bad);
}

/* ---- go tool pprof ---- */

static char g_tmpdir[PATH_MAX];

static int rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

static int on_path(const char *prog)
{
    const char *path = getenv("PATH");
    char buf[PATH_MAX];
    while (path && *path) {
        size_t n = strcspn(path, ":");
        if (n && (size_t)snprintf(buf, sizeof buf, "%.*s/%s", (int)n, path, prog) < sizeof buf &&
            access(buf, X_OK) == 0)
            return 1;
        path += n + (path[n] == ':');
    }
    return 0;
}

/* Runs `cmd`, returns its stdout (owned) and exit status; stderr goes to g_tmpdir/stderr. */
static char *run(const char *cmd, int *status)
{
    char full[PATH_MAX * 3];
    snprintf(full, sizeof full, "%s 2>'%s/stderr'", cmd, g_tmpdir);
    FILE *f = popen(full, "r");
    size_t len = 0, cap = 4096;
    char *out = malloc(cap);
    if (!f || !out) {
        if (f)
            pclose(f);
        free(out);
        *status = -1;
        return NULL;
    }
    size_t n;
    while ((n = fread(out + len, 1, cap - len - 1, f)) > 0) {
        len += n;
        if (cap - len - 1 == 0) {
            char *no = realloc(out, cap * 2);
            if (!no)
                break;
            out = no;
            cap *= 2;
        }
    }
    out[len] = 0;
    *status = pclose(f);
    return out;
}

static char *read_small_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 65536);
    if (f && buf)
        buf[fread(buf, 1, 65535, f)] = 0;
    if (f)
        fclose(f);
    return buf;
}

/* Finds the -top row whose name is exactly `name`; stores its flat and cum columns. */
static int top_row(const char *top, const char *name, long long *flat, long long *cum)
{
    for (const char *line = top; line && *line;) {
        const char *eol = strchr(line, '\n');
        size_t n = eol ? (size_t)(eol - line) : strlen(line);
        size_t nl = strlen(name);
        int off = 0;
        if (n > nl && !memcmp(line + n - nl, name, nl) && line[n - nl - 1] == ' ' &&
            sscanf(line, "%lld %*s %*s %lld %*s%n", flat, cum, &off) == 2 && off > 0)
            return 0;
        line = eol ? eol + 1 : NULL;
    }
    return -1;
}

static void check_go_top(const char *file)
{
    char cmd[PATH_MAX * 2];
    int status;
    long long flat = -1, cum = -1;

    snprintf(cmd, sizeof cmd, "go tool pprof -top -sample_index=samples '%s'", file);
    char *top = run(cmd, &status);
    CHECK(top && status == 0, "go tool pprof -top exit status %d", status);
    if (!top || status) {
        char path[PATH_MAX + 16];
        snprintf(path, sizeof path, "%s/stderr", g_tmpdir);
        char *err = read_small_file(path);
        printf("stderr: %s\n", err ? err : "");
        free(err);
        free(top);
        return;
    }
    CHECK(strstr(top, "Type: samples") != NULL, "-top type line");
    CHECK(strstr(top, "of 43 total") != NULL, "-top total 43 (30+10+2+1)");
    CHECK(top_row(top, "MyApp.Orders.Widget.Compute", &flat, &cum) == 0 && flat == 30 && cum == 30,
          "Compute flat %lld cum %lld, want 30 30", flat, cum);
    CHECK(top_row(top, "libc.so.6", &flat, &cum) == 0 && flat == 10 && cum == 10,
          "libc.so.6 flat %lld cum %lld, want 10 10", flat, cum);
    CHECK(top_row(top, "MyApp.Orders.Service.Handle", &flat, &cum) == 0 && flat == 0 && cum == 40,
          "Handle flat %lld cum %lld, want 0 40", flat, cum);
    CHECK(top_row(top, "MyApp.Program.Main", &flat, &cum) == 0 && flat == 0 && cum == 40,
          "Main (the root) flat %lld cum %lld, want 0 40", flat, cum);
    CHECK(top_row(top, PPROF_UNKNOWN_FRAME, &flat, &cum) == 0 && flat == 3 && cum == 3,
          "[unknown] flat %lld cum %lld, want 3 3", flat, cum);
    CHECK(top_row(top, "MyApp.<>c.<Main>b__0_0", &flat, &cum) == 0 && cum == 2,
          "compiler-generated name kept verbatim");
    if (failed)
        printf("-top output:\n%s\n", top);
    free(top);

    /* without -sample_index the default_sample_type (cpu) applies */
    snprintf(cmd, sizeof cmd, "go tool pprof -top '%s'", file);
    top = run(cmd, &status);
    CHECK(top && status == 0 && strstr(top, "Type: cpu"), "default sample type is cpu");
    free(top);
}

static void check_go_raw(const char *file)
{
    char cmd[PATH_MAX * 2], path[PATH_MAX + 16];
    int status;

    snprintf(cmd, sizeof cmd, "go tool pprof -raw '%s'", file);
    char *raw = run(cmd, &status);
    CHECK(raw && status == 0, "go tool pprof -raw exit status %d", status);
    if (!raw || status) {
        free(raw);
        return;
    }
    static const char *const want[] = {
        "PeriodType: cpu nanoseconds",
        "Period: 10000000",
        "samples/count cpu/nanoseconds[dflt]",
        "30  300000000: 1 2 3 ",
        "thread_id:[1234]",
        "thread_name:[worker-1]",
        "thread_id:[5678]",
        "alloc_bytes:[4096 bytes]",
        "M=1 MyApp.Orders.Widget.Compute",
        "M=1 libc.so.6",
        "M=1 System.Collections.Generic.List`1.Add",
        "clrscope test profile",
    };
    int missing = 0;
    for (size_t i = 0; i < NELEM(want); i++) {
        CHECK(strstr(raw, want[i]) != NULL, "-raw lacks \"%s\"", want[i]);
        missing += !strstr(raw, want[i]);
    }
    if (missing)
        printf("-raw output:\n%s\n", raw);
    free(raw);

    /* has_functions on the mapping: pprof must not try to symbolize anything */
    snprintf(path, sizeof path, "%s/stderr", g_tmpdir);
    char *err = read_small_file(path);
    CHECK(err && !strstr(err, "ymboliz") && !strstr(err, "binary"),
          "no symbolization attempt, stderr: %s", err ? err : "");
    free(err);
}

static void test_pprof_go_tool_reads_it(void)
{
    char file[PATH_MAX + 16], sub[PATH_MAX + 16];
    const char *tmp = getenv("TMPDIR");
    unsigned char *gz = NULL;
    size_t len = 0;

    if (!on_path("go")) {
        printf("SKIP go tool pprof checks: go is not on PATH\n");
        return;
    }
    snprintf(g_tmpdir, sizeof g_tmpdir, "%s/test_pprof.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(g_tmpdir)) {
        CHECK(0, "mkdtemp: %s", strerror(errno));
        return;
    }
    /* go wants a writable HOME/GOCACHE; keep it all inside the temp dir */
    setenv("HOME", g_tmpdir, 1);
    snprintf(sub, sizeof sub, "%s/gocache", g_tmpdir);
    setenv("GOCACHE", sub, 1);
    snprintf(sub, sizeof sub, "%s/gopath", g_tmpdir);
    setenv("GOPATH", sub, 1);
    setenv("GOTOOLCHAIN", "local", 1);
    setenv("GOFLAGS", "", 1);
    setenv("PPROF_TMPDIR", g_tmpdir, 1);
    setenv("PPROF_BINARY_PATH", g_tmpdir, 1);

    pprof_builder *b = demo_builder();
    CHECK(b && pprof_finish(b, &gz, &len) == 0, "build");
    pprof_free(b);
    snprintf(file, sizeof file, "%s/demo.pb.gz", g_tmpdir);
    FILE *f = fopen(file, "wb");
    CHECK(f && gz && fwrite(gz, 1, len, f) == len, "write %s", file);
    if (f)
        fclose(f);
    free(gz);

    int status;
    char *probe = run("go tool -n pprof", &status);
    if (!probe || status) {
        printf("SKIP go tool pprof checks: `go tool -n pprof` failed\n");
    } else {
        check_go_top(file);
        check_go_raw(file);
    }
    free(probe);
    nftw(g_tmpdir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

int main(void)
{
    test_pprof_demo_profile_decodes();
    test_pprof_extreme_values();
    test_pprof_bad_arguments();
    test_pprof_drops_past_max_samples();
    test_pprof_drops_past_max_bytes();
    test_pprof_many_names_grow_the_tables();
    test_pprof_survives_every_allocation_failure();
    test_pprof_go_tool_reads_it();
    printf("test_pprof: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
