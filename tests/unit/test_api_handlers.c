/*
 * test_api_handlers - every endpoint's handler called as the server calls it, without a server
 * (api_call.h): a runtime stand-in that answers nothing (fuzz_runtime.h) and a store holding
 * known profiles. Good requests give their status, content type and JSON (or text, pprof,
 * HTML) with the figures the store holds; bad ones (unknown type, values out of range, not
 * numbers, too long, not UTF-8, a wrong method, an unknown snapshot or profile) give the 4xx and
 * the error the server sends. The pprof waits: a client that leaves ends its wait with no reply,
 * a third wait is refused while two run, a HEAD does not wait.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "unit_check.h"

#include "api_call.h"
#include "fuzz_runtime.h"
#include "prof_gc.h"
#include "prof_heapsnap.h"
#include "prof_live.h"

static void add_profiles(void)
{
    /* CPU: 3 samples (3 ms) in Main > Work > Leaf, 1 (1 ms) in Main > Other */
    static const char *const work[] = {"App.Main", "App.Work", "App.Leaf"};
    static const char *const other[] = {"App.Main", "App.Other"};
    double now = prof_unix_now();
    int64_t v3[PROF_NVALUES] = {3, 3000000, 0}, v1[PROF_NVALUES] = {1, 1000000, 0};
    prof_store_add(PK_CPU, now - 1, work, 3, 101, NULL, v3);
    prof_store_add(PK_CPU, now - 2, other, 2, 102, NULL, v1);
    /* allocations by type: 10 strings of 40 bytes, 2 arrays of 1000 */
    int64_t s[PROF_NVALUES] = {10, 400, 1}, a[PROF_NVALUES] = {2, 2000, 1};
    prof_store_add(PK_ALLOC_TYPE, now - 1, NULL, 0, 0, "System.String", s);
    prof_store_add(PK_ALLOC_TYPE, now - 1, NULL, 0, 0, "System.Byte[]", a);
}

static const cJSON *child(const cJSON *node, const char *name)
{
    const cJSON *c;
    cJSON_ArrayForEach(c, cJSON_GetObjectItem(node, "children"))
        if (!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(c, "name")), name))
            return c;
    return NULL;
}

static void test_status_and_metrics(void)
{
    g_call_extras.guard = (struct api_guard_stats){.guarded = 1, .spare_held = 1, .refused = 7,
                                                   .resets = 2};
    cJSON *j = api_json("GET", "/api/v1/status", 200);
    CHECK(jnum(j, "pid", NULL) == (double)g_core.pid, "status: pid");
    CHECK(jnum(j, "history_s", NULL) == g_cfg.history_s, "status: history_s");
    CHECK(cJSON_IsTrue(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "dashboard"), "fd_guard")),
          "status: the server's guard");
    CHECK(jnum(j, "dashboard", "refused_out_of_fds") == 7 &&
              jnum(j, "dashboard", "queue_resets_out_of_fds") == 2,
          "status: the guard's figures as the server gave them");
    CHECK(jnum(j, "pprof_waits", "waiting") == 0, "status: no pprof wait");
    cJSON_Delete(j);
    g_call_extras.guard = (struct api_guard_stats){0};
    j = api_json("HEAD", "/api/v1/status/", 200); /* HEAD: the handler answers as for GET */
    cJSON_Delete(j);

    struct api_reply r;
    CHECK(api_call("GET", "/metrics", &r) == 200, "metrics: 200");
    CHECK(r.content_type && !strcmp(r.content_type, "text/plain; version=0.0.4; charset=utf-8"),
          "metrics: Prometheus text");
    CHECK(r.body && strstr(r.body, "clrscope_build_info{version=\"") &&
              strstr(r.body, "# TYPE clrscope_gc_collections_total counter"),
          "metrics: the families");
    api_reply_free(&r);
    cJSON_Delete(api_json("GET", "/api/v1/counters", 200));
    CHECK(api_call("POST", "/metrics", &r) == -405, "metrics: POST refused by the table");
    api_reply_free(&r);
}

static void test_profiles(void)
{
    cJSON *j = api_json("GET", "/api/v1/flamegraph?type=cpu&seconds=60", 200);
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "unit")), "nanoseconds"),
          "flamegraph: unit");
    CHECK(jnum(j, "total", NULL) == 4000000, "flamegraph: total %g", jnum(j, "total", NULL));
    const cJSON *root = cJSON_GetObjectItem(j, "root");
    const cJSON *leaf = child(child(child(root, "App.Main"), "App.Work"), "App.Leaf");
    CHECK(leaf && jnum(leaf, "self", NULL) == 3000000, "flamegraph: Main > Work > Leaf 3 ms");
    cJSON_Delete(j);
    j = api_json("GET", "/api/v1/flamegraph?type=cpu-samples&filter=", 200);
    CHECK(jnum(j, "total", NULL) == 4 && !cJSON_GetObjectItem(j, "filter"),
          "flamegraph: samples, an empty filter is none");
    cJSON_Delete(j);

    j = api_json("GET", "/api/v1/top?type=cpu&limit=1", 200);
    const cJSON *f = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "functions"), 0);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "functions")) == 1 &&
              !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(f, "name")), "App.Leaf") &&
              jnum(f, "self", NULL) == 3000000,
          "top: the heaviest function first, limit 1");
    cJSON_Delete(j);

    api_refused("GET", "/api/v1/flamegraph?type=nope", 400, "unknown type 'nope'");
    api_refused("GET", "/api/v1/flamegraph?seconds=abc", 400, "'seconds' must be a number");
    api_refused("GET", "/api/v1/flamegraph?seconds=0", 400, "'seconds' must be a number");
    api_refused("GET", "/api/v1/flamegraph?seconds=1e9", 400, "'seconds' must be a number");
    api_refused("GET", "/api/v1/flamegraph?max_nodes=15", 400,
                "'max_nodes' must be a whole number from 16 to 200000");
    api_refused("GET", "/api/v1/flamegraph?filter=%FF", 400, "'filter' is not valid UTF-8");
    char longq[700];
    snprintf(longq, sizeof longq, "/api/v1/flamegraph?filter=%0600d", 0);
    api_refused("GET", longq, 400, "'filter' is too long (max 511 bytes)");
    api_refused("GET", "/api/v1/top?limit=0", 400, "'limit' must be a whole number from 1");
    api_refused("GET", "/api/v1/top?type=%FF%FE", 400, "'type' is not valid UTF-8");
    struct api_reply r;
    CHECK(api_call("DELETE", "/api/v1/flamegraph", &r) == -405, "flamegraph: DELETE refused");
    api_reply_free(&r);
}

static void test_alloc_gc_live(void)
{
    cJSON *j = api_json("GET", "/api/v1/allocations?seconds=60", 200);
    const cJSON *t0 = cJSON_GetArrayItem(cJSON_GetObjectItem(j, "types"), 0);
    CHECK(jnum(j, "total", "bytes") == 2400 && jnum(j, "total", "count") == 12,
          "allocations: totals");
    CHECK(t0 && !strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(t0, "type")), "System.Byte[]") &&
              jnum(t0, "share", NULL) > 0.83 && jnum(t0, "share", NULL) < 0.84,
          "allocations: the heaviest type first, its share");
    cJSON_Delete(j);
    api_refused("GET", "/api/v1/allocations?limit=100001", 400, "'limit' must be a whole number");

    j = api_json("GET", "/api/v1/gc?seconds=10&limit=5", 200);
    CHECK(jnum(j, "seconds", NULL) == 10 && cJSON_IsArray(cJSON_GetObjectItem(j, "collections")),
          "gc: the window and its collections");
    cJSON_Delete(j);
    api_refused("GET", "/api/v1/gc?limit=-1", 400, "'limit' must be a whole number from 0");
    unsigned p = g_core.profiles;
    g_core.profiles &= ~(unsigned)PROFILE_GC;
    api_refused("GET", "/api/v1/gc", 404, "the gc profile is off");
    g_core.profiles = p;

    j = api_json("GET", "/api/v1/live", 200);
    CHECK(cJSON_IsArray(cJSON_GetObjectItem(j, "types")) && jnum(j, "types_total", NULL) == 0,
          "live: no object tracked");
    cJSON_Delete(j);
    api_refused("GET", "/api/v1/live?limit=x", 400, "'limit' must be a whole number");
}

static void test_events(void)
{
    cJSON *j = api_json("GET", "/api/v1/exceptions?seconds=30", 200);
    CHECK(jnum(j, "total", NULL) == 0 && jnum(j, "seconds", NULL) == 30, "exceptions: none");
    cJSON_Delete(j);
    char longq[700];
    snprintf(longq, sizeof longq, "/api/v1/exceptions?type=%0600d", 0);
    api_refused("GET", longq, 400, "'type' is too long");
    api_refused("GET", "/api/v1/exceptions?limit=0", 400, "'limit'");
    j = api_json("GET", "/api/v1/locks", 200);
    CHECK(jnum(j, "count", NULL) == 0 && cJSON_GetArraySize(cJSON_GetObjectItem(j, "histogram")) ==
                                             16,
          "locks: none, the histogram's buckets");
    cJSON_Delete(j);
    api_refused("GET", "/api/v1/locks?lock=%D0", 400, "'lock' is not valid UTF-8");
    api_refused("GET", "/api/v1/locks?seconds=-1", 400, "'seconds'");
}

static void test_threads(void)
{
    /* no sampler thread here: no dump to take */
    api_refused("GET", "/api/v1/threads", 503, "no thread dump: thread dumps need");
    api_refused("GET", "/debug/pprof/goroutine?debug=1", 503, "no thread dump");
    api_refused("GET", "/debug/pprof/threads?debug=3", 400,
                "'debug' must be a whole number from 0 to 2");
}

static void test_gcdump(void)
{
    cJSON *j = api_json("GET", "/api/v1/gcdump", 200);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(j, "snapshots")) == 0 &&
              cJSON_IsNull(cJSON_GetObjectItem(j, "running")) &&
              jnum(j, "keep", NULL) == g_cfg.dump_keep,
          "gcdump: an empty list");
    cJSON_Delete(j);

    /* refusals: their reason mapped to a status and a reason string */
    int64_t max = g_cfg.dump_max_heap;
    g_cfg.dump_max_heap = 1; /* any process is bigger */
    j = api_json("POST", "/api/v1/gcdump", 413);
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "reason")), "heap_too_large") &&
              jnum(j, "limit_bytes", NULL) == 1 && jnum(j, "heap_bytes", NULL) > 1 &&
              strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "error")), "force=1"),
          "gcdump: a heap above CLRSCOPE_DUMP_MAX_HEAP_MB is 413 heap_too_large");
    cJSON_Delete(j);
    g_cfg.dump_max_heap = max;
    unsigned p = g_core.profiles;
    g_core.profiles &= ~(unsigned)PROFILE_HEAP;
    j = api_json("POST", "/api/v1/gcdump?force=1", 503);
    CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItem(j, "reason")), "unavailable") &&
              strstr(cJSON_GetStringValue(cJSON_GetObjectItem(j, "error")), "heap snapshots are off"),
          "gcdump: snapshots off is 503 unavailable");
    cJSON_Delete(j);
    g_core.profiles = p;
    api_refused("POST", "/api/v1/gcdump?force=%FF", 400, "'force' is not valid UTF-8");

    api_refused("GET", "/api/v1/gcdump/7", 404, "no heap snapshot 7");
    api_refused("GET", "/api/v1/gcdump/7?limit=x", 400, "'limit'");
    api_refused("GET", "/api/v1/gcdump/7?sort=size", 400, "sort must be retained, bytes, count or type");
    api_refused("DELETE", "/api/v1/gcdump/7", 404, "no heap snapshot 7");
    api_refused("GET", "/api/v1/gcdump/7/file", 404, "no heap snapshot 7");
    api_refused("HEAD", "/api/v1/gcdump/7/file", 404, "no heap snapshot 7");
    api_refused("GET", "/api/v1/gcdump/7/paths", 400, "query parameter 'type' is required");
    api_refused("GET", "/api/v1/gcdump/7/paths?type=X", 404, "no heap snapshot 7");
    api_refused("GET", "/api/v1/gcdump/diff", 400, "'a' and 'b' (snapshot ids) are required");
    api_refused("GET", "/api/v1/gcdump/diff?a=x&b=1", 400, "'a' must be a whole number");
    api_refused("GET", "/api/v1/gcdump/diff?a=1&b=2", 404, "no heap snapshot 1");
    api_refused("GET", "/api/v1/gcdump/abc", 404, "no such heap snapshot: 'abc'");
    api_refused("POST", "/api/v1/gcdump/0/file", 404, "no such heap snapshot: '0'");
    api_refused("GET", "/api/v1/gcdump/"
                       "0123456789012345678901234567890123456789012345",
                404, "no such heap snapshot: '0123456789012345678901234567890123456789'");
    api_refused("DELETE", "/api/v1/gcdump/3/nope", 404, "no such heap snapshot resource");
    struct api_reply r;
    CHECK(api_call("POST", "/api/v1/gcdump/3", &r) == -405, "gcdump: POST on a snapshot");
    api_reply_free(&r);
}

static int header(const struct api_reply *r, const char *name, const char *value)
{
    for (int i = 0; i < r->nheaders; i++)
        if (!strcmp(r->header_name[i], name))
            return !value || !strcmp(r->header_value[i], value);
    return 0;
}

static void test_pprof(void)
{
    struct api_reply r;
    CHECK(api_call("GET", "/debug/pprof?token=abc", &r) == 301 && r.verbatim && r.len == 0 &&
              header(&r, "Location", "/debug/pprof/?token=abc") &&
              header(&r, "Content-Length", "0") && header(&r, "Cache-Control", "no-store"),
          "pprof: a redirect to /debug/pprof/, the query kept");
    api_reply_free(&r);
    CHECK(api_call("GET", "/debug/pprof", &r) == 301 && header(&r, "Location", "/debug/pprof/"),
          "pprof: a redirect without a query");
    api_reply_free(&r);
    CHECK(api_call("GET", "/debug/pprof/", &r) == 200 &&
              !strcmp(r.content_type, "text/html; charset=utf-8") &&
              strstr(r.body, "go tool pprof"),
          "pprof: the index");
    api_reply_free(&r);
    static const char *const profiles[] = {"heap", "allocs?seconds=5", "exceptions", "lock",
                                           "mutex", "block", "profile?wait=0&seconds=5",
                                           "wall?wait=0"};
    for (size_t i = 0; i < sizeof profiles / sizeof profiles[0]; i++) {
        char target[96], disp[96];
        snprintf(target, sizeof target, "/debug/pprof/%s", profiles[i]);
        snprintf(disp, sizeof disp, "attachment; filename=\"%.*s.pb.gz\"",
                 (int)strcspn(profiles[i], "?"), profiles[i]);
        int st = api_call("GET", target, &r);
        CHECK(st == 200 && !strcmp(r.content_type, "application/octet-stream") &&
                  header(&r, "Content-Disposition", disp) && r.len > 2 &&
                  (unsigned char)r.body[0] == 0x1f && (unsigned char)r.body[1] == 0x8b,
              "%s: a gzip'd profile, %d", target, st);
        api_reply_free(&r);
    }
    api_refused("GET", "/debug/pprof/nope", 404, "unknown profile 'nope' (profile, wall");
    api_refused("GET", "/debug/pprof/heap/", 404, "unknown profile 'heap/'");
    api_refused("GET", "/debug/pprof/allocs?seconds=0", 400, "'seconds' must be a number");
    api_refused("GET", "/debug/pprof/profile?wait=2", 400, "'wait' must be a whole number from 0");
    CHECK(api_call("POST", "/debug/pprof/heap", &r) == -405, "pprof: POST refused");
    api_reply_free(&r);
}

/* The pprof waits, their client told by the server's callback. */
static int g_gone; /* atomic: what the clients of the waits below answer */

static int client_gone(void *ctx)
{
    (void)ctx;
    return __atomic_load_n(&g_gone, __ATOMIC_ACQUIRE);
}

/* A wait of its own thread, called as api_call does (without its CHECKs: they count on the
 * main thread). */
static void *wait_profile(void *arg)
{
    struct api_reply *r = arg;
    struct api_req q = g_call_extras;
    q.method = "GET";
    q.path = "/debug/pprof/profile";
    q.query = "seconds=60";
    api_reply_init(r);
    api_pprof_profile(&q, r);
    return NULL;
}

static void test_waits(void)
{
    g_call_extras.client_gone = client_gone;
    int waiting;
    uint64_t abandoned0, abandoned;
    api_pprof_waits(&waiting, &abandoned0);

    /* a client gone at once: no reply (and the server closes the connection) */
    __atomic_store_n(&g_gone, 1, __ATOMIC_RELEASE);
    struct api_reply r;
    CHECK(api_call("GET", "/debug/pprof/wall?seconds=60", &r) == API_NO_REPLY && r.len == 0,
          "a wait whose client left: no reply");
    api_reply_free(&r);
    api_pprof_waits(&waiting, &abandoned);
    CHECK(waiting == 0 && abandoned == abandoned0 + 1, "it is counted as abandoned");

    /* two waits at once, a third refused; a HEAD answers at once */
    __atomic_store_n(&g_gone, 0, __ATOMIC_RELEASE);
    struct api_reply w[2];
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, wait_profile, &w[i]);
    for (int tries = 0; tries < 500; tries++) {
        api_pprof_waits(&waiting, &abandoned);
        if (waiting == 2)
            break;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    CHECK(waiting == 2, "two waits (%d)", waiting);
    api_refused("GET", "/debug/pprof/profile?seconds=5", 429,
                "two profiles are already being collected");
    CHECK(api_call("HEAD", "/debug/pprof/profile?seconds=60", &r) == 200 && r.len > 0,
          "a HEAD does not wait");
    api_reply_free(&r);
    cJSON *j = api_json("GET", "/api/v1/status", 200);
    CHECK(jnum(j, "pprof_waits", "waiting") == 2, "status: two waits");
    cJSON_Delete(j);
    __atomic_store_n(&g_gone, 1, __ATOMIC_RELEASE); /* their clients leave */
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        CHECK(w[i].status == API_NO_REPLY, "wait %d: no reply (%d)", i, w[i].status);
        api_reply_free(&w[i]);
    }
    api_pprof_waits(&waiting, &abandoned);
    CHECK(waiting == 0 && abandoned == abandoned0 + 3, "both given back and counted");
    g_call_extras.client_gone = NULL;
}

int main(void)
{
    fuzz_runtime_init(PROFILE_ALL);
    prof_agg_use_ring(prof_ring_new(256));
    prof_gc_init();
    prof_live_init();
    prof_heapsnap_init();
    add_profiles();
    test_status_and_metrics();
    test_profiles();
    test_alloc_gc_live();
    test_events();
    test_threads();
    test_gcdump();
    test_pprof();
    test_waits();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
