/*
 * fuzz_query - the route table, query-string parsing and the API handlers behind them. Each input
 * is a request (method, path, query string): the path is a route's pattern with its {id} and
 * {name} parts filled from the input, or the input's own bytes; it goes through api_route_match
 * exactly as web_server's router sends it, and a match's handler runs with a store that holds a
 * few profiles. What is fuzzed is the matcher, every parameter parser (api_query_str/long/
 * double/seconds, type, filter, limit, max_nodes, ids, diff a/b, wait) and the code each value
 * steers; each reply must be whole (a status, a body of its length, JSON that parses when it
 * says JSON). The api_query_* accessors are also checked directly: a value they accept is within
 * its bounds and NUL-terminated in its buffer, and a value they refuse leaves a 400 JSON reply.
 *
 * /debug/pprof/profile and /wall wait for the next N seconds unless wait=0: the fuzzer puts
 * "wait=0&" first on every /debug/pprof path (the first occurrence of a parameter wins) so an
 * input cannot sleep. GET and HEAD only: POST and DELETE (snapshots, which need a runtime) are
 * not fuzzed here.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_routes.h"
#include "fuzz_input.h"
#include "fuzz_runtime.h"
#include "prof_gc.h"
#include "prof_heapsnap.h"
#include "prof_live.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

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

/* A refused value: a 400 whose body is {"error": "..."}. */
static void check_refusal(struct api_reply *err, const char *what)
{
    FUZZ_CHECK(err->status == 400, "%s refused with %d", what, err->status);
    cJSON *j = cJSON_ParseWithLength(err->body, err->len);
    FUZZ_CHECK(j && cJSON_IsString(cJSON_GetObjectItem(j, "error")), "%s: bad error body", what);
    cJSON_Delete(j);
    api_reply_free(err);
}

static void direct(const struct api_req *q)
{
    static const char *names[] = {"seconds", "type", "limit", "max_nodes", "filter", "a", "b",
                                  "wait", "token", "x"};
    struct api_reply err;
    api_reply_init(&err);
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        char buf[40];
        memset(buf, 'Z', sizeof buf);
        int rc = api_query_str(q, names[i], buf, 16, &err);
        FUZZ_CHECK(rc >= -1 && rc <= 1, "api_query_str rc %d", rc);
        FUZZ_CHECK(memchr(buf, 0, 16) != NULL, "value not terminated in its buffer");
        FUZZ_CHECK(buf[16] == 'Z', "api_query_str wrote past its buffer");
        if (rc < 0)
            check_refusal(&err, names[i]);
        long l = 0;
        rc = api_query_long(q, names[i], 7, -5, 1000, &l, &err);
        FUZZ_CHECK(rc == 1 ? l >= -5 && l <= 1000 : l == 7, "api_query_long %d -> %ld", rc, l);
        if (rc < 0)
            check_refusal(&err, names[i]);
        double d = 0;
        rc = api_query_double(q, names[i], 60, 1, 900, &d, &err);
        FUZZ_CHECK(rc == 1 ? isfinite(d) && d >= 1 && d <= 900 : d == 60,
                   "api_query_double %d -> %g", rc, d);
        if (rc < 0)
            check_refusal(&err, names[i]);
        FUZZ_CHECK(err.status == 0 && !err.owned, "an accepted value left a reply");
    }
    double s = 0;
    int rc = api_query_seconds(q, &s, &err);
    FUZZ_CHECK(rc == 1 ? s >= 1 && s <= g_cfg.history_s : s == 60, "seconds %d -> %g", rc, s);
    if (rc < 0)
        check_refusal(&err, "seconds");
}

/* The path: a route's pattern with {id} and {name} from the input, or the input's bytes.
 * flags: 2 = {id} a small number (often no such snapshot) instead of the input's text,
 * 4 = a trailing slash. */
static char *make_path(struct fin *in, unsigned flags)
{
    uint8_t pick = fin_u8(in);
    char *part = fin_str(in, 64);
    if (pick >= api_nroutes * 2) {
        char *p = malloc(strlen(part) + 2);
        if (!p)
            abort();
        snprintf(p, strlen(part) + 2, "%s%s", part[0] == '/' ? "" : "/", part);
        free(part);
        return p;
    }
    const char *pat = api_routes[pick % api_nroutes].pattern;
    size_t cap = strlen(pat) + strlen(part) + 16;
    char *p = malloc(cap), *w = p;
    if (!p)
        abort();
    for (const char *s = pat; *s;) {
        if (!strncmp(s, "{id}", 4)) {
            if (flags & 2)
                w += snprintf(w, 12, "%u", (unsigned)(part[0] & 0x1f));
            else
                w = stpcpy(w, part);
            s += 4;
        } else if (!strncmp(s, "{name}", 6)) {
            w = stpcpy(w, part);
            s += 6;
        } else {
            *w++ = *s++;
        }
    }
    *w = 0;
    if (flags & 4)
        strcat(p, "/");
    free(part);
    return p;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fin in = {data, size};
    unsigned flags = fin_u8(&in);
    const char *method = flags & 1 ? "HEAD" : "GET";
    char *path = make_path(&in, flags);
    char *query = fin_str(&in, 4096);
    char *q = malloc(strlen(query) + 16);
    if (!q)
        abort();
    int pprof = !strncmp(path, "/debug/pprof", 12);
    snprintf(q, strlen(query) + 16, "%s%s", pprof ? "wait=0&" : "", query);
    struct api_match m;
    enum api_match_result res = api_route_match(method, path, &m);
    FUZZ_CHECK(res >= API_ROUTE_NONE && res <= API_ROUTE_FOUND, "match %d", (int)res);
    FUZZ_CHECK(res == API_ROUTE_NONE || m.scope, "%s: a route without a scope", path);
    FUZZ_CHECK(res != API_ROUTE_FOUND || (m.route && (m.route->methods & API_GET)),
               "%s: matched a row that does not take GET", path);
    FUZZ_CHECK(!m.name || (m.name >= path && m.name + m.name_len <= path + strlen(path)),
               "%s: {name} outside the path", path);
    struct api_req r = {.method = method, .path = path, .query = query[0] || pprof ? q : NULL,
                        .id = m.id, .name = m.name, .name_len = m.name_len};
    direct(&r);
    if (res == API_ROUTE_FOUND) {
        struct api_reply out;
        api_reply_init(&out);
        int status = m.route->handler(&r, &out);
        FUZZ_CHECK(status >= 200 && status < 600 && status == out.status, "%s?%s: status %d/%d",
                   path, q, status, out.status);
        FUZZ_CHECK(out.len == 0 || out.body, "%s: %zu bytes of no body", path, out.len);
        if (out.content_type && !strcmp(out.content_type, API_JSON)) {
            cJSON *j = cJSON_ParseWithLength(out.body, out.len);
            FUZZ_CHECK(j != NULL, "%s?%s: %d reply is not JSON", path, q, status);
            cJSON_Delete(j);
        }
        api_reply_free(&out);
    }
    free(path);
    free(q);
    free(query);
    return 0;
}
