/*
 * test_api_routes - the route table and its matching (api_routes), as web_server asks it: every
 * row is reached by a path of its pattern and one of its methods; a method its scope does not
 * take, a method its resource does not take (with the row's own message) and a path no route
 * has are told apart as the server's 405s, 404s and pages need; trailing slashes, the slashes
 * after a scope and /debug/pprof's own rules; {id} takes 1 to 9 digits above 0 only, {name}
 * the rest of the path.
 */
#include <stdio.h>
#include <string.h>

#include "api_routes.h"

#include "unit_check.h"

/* A path of the pattern: {id} -> 12, {name} -> n/m. */
static void path_of(const char *pat, char *out, size_t cap)
{
    size_t j = 0;
    for (const char *s = pat; *s && j + 4 < cap;) {
        if (!strncmp(s, "{id}", 4)) {
            j += (size_t)snprintf(out + j, cap - j, "12");
            s += 4;
        } else if (!strncmp(s, "{name}", 6)) {
            j += (size_t)snprintf(out + j, cap - j, "n/m");
            s += 6;
        } else {
            out[j++] = *s++;
        }
    }
    out[j] = 0;
}

static void test_every_row(void)
{
    CHECK(api_nroutes >= 30, "the table has its rows (%zu)", api_nroutes);
    for (size_t i = 0; i < api_nroutes; i++) {
        const struct api_route *rt = &api_routes[i];
        char path[128];
        path_of(rt->pattern, path, sizeof path);
        const char *method = rt->methods & API_GET    ? "GET"
                             : rt->methods & API_POST ? "POST"
                                                      : "DELETE";
        struct api_match m;
        enum api_match_result res = api_route_match(method, path, &m);
        CHECK(res == API_ROUTE_FOUND && m.route == rt, "%s %s: row %zu reached (got %d, row %td)",
              method, path, i, (int)res, m.route ? m.route - api_routes : -1);
        CHECK(rt->pattern[0] == '/' && rt->handler, "row %zu: a path and a handler", i);
        if (strstr(rt->pattern, "{id}"))
            CHECK(m.id == 12, "%s: {id} 12, got %d", path, m.id);
        if (strstr(rt->pattern, "{name}"))
            CHECK(m.name && m.name_len == 3 && !strncmp(m.name, "n/m", 3), "%s: {name}", path);
        if (rt->methods & API_GET) {
            res = api_route_match("HEAD", path, &m);
            CHECK(res == API_ROUTE_FOUND && m.route == rt, "HEAD %s: as GET", path);
        }
    }
}

static void match(const char *method, const char *path, enum api_match_result want,
                  api_handler handler, const char *scope)
{
    struct api_match m;
    enum api_match_result res = api_route_match(method, path, &m);
    CHECK(res == want, "%s %s: %d, want %d", method, path, (int)res, (int)want);
    if (res != want)
        return;
    if (handler)
        CHECK(m.route && m.route->handler == handler, "%s %s: another handler", method, path);
    if (scope)
        CHECK(m.scope && !strcmp(m.scope, scope), "%s %s: scope %s, want %s", method, path,
              m.scope ? m.scope : "(none)", scope);
}

static void not_allowed(const char *method, const char *path, const char *message)
{
    struct api_match m;
    enum api_match_result res = api_route_match(method, path, &m);
    CHECK(res == API_ROUTE_METHOD && m.route && m.route->not_allowed &&
              !strcmp(m.route->not_allowed, message),
          "%s %s: %d '%s', want 405 '%s'", method, path, (int)res,
          m.route && m.route->not_allowed ? m.route->not_allowed : "", message);
}

static void test_methods(void)
{
    /* a method the scope does not take: "method X not allowed on <scope>" */
    match("POST", "/api/v1/status", API_ROUTE_SCOPE_METHOD, NULL, "/api/v1/status");
    match("DELETE", "/metrics/", API_ROUTE_SCOPE_METHOD, NULL, "/metrics");
    match("PUT", "/api/v1/gcdump/3", API_ROUTE_SCOPE_METHOD, NULL, "/api/v1/gcdump");
    match("PATCH", "/api/v1/gcdump", API_ROUTE_SCOPE_METHOD, NULL, "/api/v1/gcdump");
    match("POST", "/debug/pprof/heap", API_ROUTE_SCOPE_METHOD, NULL, "/debug/pprof");
    match("POST", "/debug/pprof", API_ROUTE_SCOPE_METHOD, NULL, "/debug/pprof");
    match("get", "/api/v1/status", API_ROUTE_SCOPE_METHOD, NULL, "/api/v1/status");
    /* one the scope takes and the resource does not: its own message (after the Origin) */
    not_allowed("DELETE", "/api/v1/gcdump", "use GET or POST on /api/v1/gcdump");
    not_allowed("POST", "/api/v1/gcdump/diff", "use GET on /api/v1/gcdump/diff");
    not_allowed("POST", "/api/v1/gcdump/3", "use GET or DELETE on a snapshot");
    not_allowed("DELETE", "/api/v1/gcdump/3/file", "use GET on a snapshot's file");
    not_allowed("POST", "/api/v1/gcdump/3/paths", "use GET on a snapshot's paths");
    /* the resources' methods */
    match("GET", "/api/v1/gcdump", API_ROUTE_FOUND, api_gcdump_list, "/api/v1/gcdump");
    match("HEAD", "/api/v1/gcdump", API_ROUTE_FOUND, api_gcdump_list, NULL);
    match("POST", "/api/v1/gcdump", API_ROUTE_FOUND, api_gcdump_create, NULL);
    match("GET", "/api/v1/gcdump/3", API_ROUTE_FOUND, api_gcdump_details, NULL);
    match("DELETE", "/api/v1/gcdump/3", API_ROUTE_FOUND, api_gcdump_delete, NULL);
    /* no snapshot id, no resource: the 404 of the scope, whatever the method */
    match("POST", "/api/v1/gcdump/abc", API_ROUTE_FOUND, api_gcdump_unknown, NULL);
    match("DELETE", "/api/v1/gcdump/3/nope", API_ROUTE_FOUND, api_gcdump_unknown, NULL);
}

static void test_paths(void)
{
    /* no route: a page of the dashboard (or a 405 for another method) */
    static const char *const none[] = {"/", "/index.html", "/app.js", "/api/v1/nope",
                                       "/api/v1/status/x", "/api/v1/statusx", "/metricsx",
                                       "/debug/pprofx", "/debug/pprofx/", "/api", "//",
                                       "/api/v1/gcdumpx"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        match("GET", none[i], API_ROUTE_NONE, NULL, NULL);
        match("POST", none[i], API_ROUTE_NONE, NULL, NULL);
    }
    /* trailing slashes, and a run of them after the scope */
    match("GET", "/api/v1/status/", API_ROUTE_FOUND, api_status, NULL);
    match("GET", "/api/v1/status///", API_ROUTE_FOUND, api_status, NULL);
    match("GET", "/api/v1/gcdump/", API_ROUTE_FOUND, api_gcdump_list, NULL);
    match("GET", "/api/v1/gcdump//diff/", API_ROUTE_FOUND, api_gcdump_diff, NULL);
    struct api_match m;
    CHECK(api_route_match("GET", "/api/v1/gcdump///42//", &m) == API_ROUTE_FOUND &&
              m.route->handler == api_gcdump_details && m.id == 42,
          "/api/v1/gcdump///42//: snapshot 42");
    CHECK(api_route_match("GET", "/api/v1/gcdump/42//file", &m) == API_ROUTE_FOUND &&
              m.route->handler == api_gcdump_unknown && m.name_len == 8 &&
              !strncmp(m.name, "42//file", 8),
          "/api/v1/gcdump/42//file: no resource of snapshot 42");
    CHECK(api_route_match("GET", "/api/v1/gcdump/diff/x", &m) == API_ROUTE_FOUND &&
              m.route->handler == api_gcdump_unknown && m.name_len == 6,
          "/api/v1/gcdump/diff/x: 'diff' is no snapshot id");
    /* ids */
    static const char *const bad_ids[] = {"0", "-1", "+1", "1x", "x1", "1234567890", " 1", "00"};
    for (size_t i = 0; i < sizeof bad_ids / sizeof bad_ids[0]; i++) {
        char path[64];
        snprintf(path, sizeof path, "/api/v1/gcdump/%s", bad_ids[i]);
        match("GET", path, API_ROUTE_FOUND, api_gcdump_unknown, NULL);
    }
    CHECK(api_route_match("GET", "/api/v1/gcdump/999999999/paths", &m) == API_ROUTE_FOUND &&
              m.route->handler == api_gcdump_paths && m.id == 999999999,
          "nine digits are an id");
    CHECK(api_route_match("DELETE", "/api/v1/gcdump/007", &m) == API_ROUTE_FOUND && m.id == 7,
          "leading zeros: 7");
    /* /debug/pprof: with and without its slash, and no trailing slash dropped below it */
    match("GET", "/debug/pprof", API_ROUTE_FOUND, api_pprof_redirect, "/debug/pprof");
    match("GET", "/debug/pprof/", API_ROUTE_FOUND, api_pprof_index, "/debug/pprof");
    match("GET", "/debug/pprof/heap", API_ROUTE_FOUND, api_pprof_profile, NULL);
    match("GET", "/debug/pprof/goroutine", API_ROUTE_FOUND, api_pprof_threads, NULL);
    CHECK(api_route_match("GET", "/debug/pprof/heap/", &m) == API_ROUTE_FOUND &&
              m.route->handler == api_pprof_unknown && m.name_len == 5,
          "/debug/pprof/heap/: an unknown profile 'heap/'");
    CHECK(api_route_match("GET", "/debug/pprof//", &m) == API_ROUTE_FOUND &&
              m.route->handler == api_pprof_unknown && m.name_len == 1 && m.name[0] == '/',
          "/debug/pprof//: an unknown profile '/'");
    CHECK(api_route_match("GET", "/debug/pprof/\xff\xfex", &m) == API_ROUTE_FOUND &&
              m.route->handler == api_pprof_unknown,
          "bytes of no character: an unknown profile");
}

int main(void)
{
    test_every_row();
    test_methods();
    test_paths();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
