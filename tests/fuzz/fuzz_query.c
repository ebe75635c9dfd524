/*
 * fuzz_query - query-string parsing and the API handlers behind it. Each input is a request
 * (handler, path below its route, query string) given to the real handler exactly as
 * web_server's router would, with a store that holds a few profiles. Replies go to a NULL
 * connection, which civetweb accepts and drops: what is fuzzed is every parameter parser
 * (web_query_str/long/double/seconds, type, filter, limit, max_nodes, ids, diff a/b, wait) and
 * the code each value steers. The web_query_* helpers are also checked directly: a value they
 * accept is within its bounds and NUL-terminated in its buffer.
 *
 * /debug/pprof/profile and /wall wait for the next N seconds unless wait=0: the fuzzer puts
 * "wait=0&" first (the first occurrence of a parameter wins) so an input cannot sleep.
 * POST and DELETE (snapshots, which need a runtime) are not fuzzed here.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "fuzz_input.h"
#include "fuzz_runtime.h"
#include "prof_gc.h"
#include "prof_heapsnap.h"
#include "prof_live.h"
#include "web_util.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

struct handler {
    const char *path;
    int (*fn)(const struct web_req *r);
};

static const struct handler handlers[] = {
    {"/api/v1/status", api_status},           {"/api/v1/flamegraph", api_flamegraph},
    {"/api/v1/top", api_top},                 {"/api/v1/gc", api_gc},
    {"/api/v1/allocations", api_allocations}, {"/api/v1/live", api_live},
    {"/api/v1/exceptions", api_exceptions},   {"/api/v1/locks", api_locks},
    {"/api/v1/counters", api_counters},       {"/api/v1/gcdump", api_gcdump},
    {"/debug/pprof", api_pprof},              {"/metrics", api_metrics},
};

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_runtime_init(PROFILE_ALL);
    prof_agg_use_ring(prof_ring_new(256));
    prof_gc_init();
    prof_live_init();
    prof_heapsnap_init();
    /* a few stacks in every store kind, labelled, over the last seconds */
    static const char *const stacks[][4] = {
        {"App.Program.Main", "App.Worker.Run", "App.Worker.Compute", "System.Math.Sqrt"},
        {"App.Program.Main", "App.Worker.Run", "System.Threading.Monitor.Enter", "[native code]"},
        {"App.Program.Main", "App.Io.Read", "\xc3\xa9\"\\\n\x01", "App.Io.<Read>b__0_0"},
    };
    double now = prof_unix_now();
    for (int k = 0; k < PK_COUNT; k++)
        for (int i = 0; i < 30; i++) {
            int64_t v[PROF_NVALUES] = {1 + i, 1000 * (i + 1), 1};
            prof_store_add(k, now - i, stacks[i % 3], 2 + i % 3, (uint32_t)(100 + i % 4),
                           i % 2 ? "System.String" : "System.Byte[]", v);
        }
    return 0;
}

static void direct(const struct web_req *r)
{
    static const char *names[] = {"seconds", "type", "limit", "max_nodes", "filter", "a", "b",
                                  "wait", "token", "x"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char buf[40];
        memset(buf, 'Z', sizeof buf);
        int rc = web_query_str(r, names[i], buf, 16);
        FUZZ_CHECK(rc >= -1 && rc <= 1, "web_query_str rc %d", rc);
        FUZZ_CHECK(memchr(buf, 0, 16) != NULL, "value not terminated in its buffer");
        FUZZ_CHECK(buf[16] == 'Z', "web_query_str wrote past its buffer");
        long l = 0;
        rc = web_query_long(r, names[i], 7, -5, 1000, &l);
        FUZZ_CHECK(rc == 1 ? l >= -5 && l <= 1000 : l == 7, "web_query_long %d -> %ld", rc, l);
        double d = 0;
        rc = web_query_double(r, names[i], 60, 1, 900, &d);
        FUZZ_CHECK(rc == 1 ? isfinite(d) && d >= 1 && d <= 900 : d == 60,
                   "web_query_double %d -> %g", rc, d);
    }
    double s = 0;
    int rc = web_query_seconds(r, &s);
    FUZZ_CHECK(rc == 1 ? s >= 1 && s <= g_cfg.history_s : s == 60, "seconds %d -> %g", rc, s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fin in = {data, size};
    const struct handler *h = &handlers[fin_u8(&in) % (sizeof handlers / sizeof handlers[0])];
    char *suffix = fin_str(&in, 64);
    char *query = fin_str(&in, 4096);
    size_t plen = strlen(h->path) + strlen(suffix) + 2;
    char *path = malloc(plen);
    char *q = malloc(strlen(query) + 16);
    if (!path || !q)
        abort();
    /* prefix routes take sub-paths, others only themselves (as the router matches) */
    int prefix = h->fn == api_gcdump || h->fn == api_pprof;
    snprintf(path, plen, "%s%s%s", h->path, prefix && suffix[0] && suffix[0] != '/' ? "/" : "",
             prefix ? suffix : "");
    snprintf(q, strlen(query) + 16, "%s%s", h->fn == api_pprof ? "wait=0&" : "", query);
    struct web_req r = {.conn = NULL, .method = "GET", .path = path,
                        .query = query[0] || h->fn == api_pprof ? q : NULL};
    direct(&r);
    int status = h->fn(&r);
    FUZZ_CHECK(status >= 200 && status < 600, "%s?%s: status %d", path, q, status);
    free(path);
    free(q);
    free(suffix);
    free(query);
    return 0;
}
