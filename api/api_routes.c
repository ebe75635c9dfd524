/* api_routes.c - see api_routes.h. */
#include "api_routes.h"

#include <string.h>

#define GPD (API_GET | API_POST | API_DELETE)

/* Every route of the API, one a line; a resource's rows (one pattern, several methods) side by
 * side, and a pattern before those that would also match its paths ({name} last). */
const struct api_route api_routes[] = {
    {API_GET, "/api/v1/status", api_status, NULL, 1},
    {API_GET, "/api/v1/flamegraph", api_flamegraph, NULL, 1},
    {API_GET, "/api/v1/flamegraph/diff", api_flamegraph_diff, NULL, 1},
    {API_GET, "/api/v1/top", api_top, NULL, 1},
    {API_GET, "/api/v1/gc", api_gc, NULL, 1},
    {API_GET, "/api/v1/allocations", api_allocations, NULL, 1},
    {API_GET, "/api/v1/live", api_live, NULL, 0},
    {API_GET, "/api/v1/exceptions", api_exceptions, NULL, 1},
    {API_GET, "/api/v1/locks", api_locks, NULL, 1},
    {API_GET, "/api/v1/counters", api_counters, NULL, 1},
    {API_GET, "/api/v1/threads", api_threads, NULL, 0},
    {API_GET, "/api/v1/budget", api_budget, NULL, 0},
    {API_GET, "/api/v1/marks", api_marks_list, "use GET or POST on /api/v1/marks", 1},
    {API_POST, "/api/v1/marks", api_marks_create, "use GET or POST on /api/v1/marks", 0},
    {API_GET, "/api/v1/gcdump", api_gcdump_list, "use GET or POST on /api/v1/gcdump", 0},
    {API_POST, "/api/v1/gcdump", api_gcdump_create, "use GET or POST on /api/v1/gcdump", 0},
    {API_GET, "/api/v1/gcdump/diff", api_gcdump_diff, "use GET on /api/v1/gcdump/diff", 0},
    {API_GET, "/api/v1/gcdump/{id}", api_gcdump_details, "use GET or DELETE on a snapshot", 0},
    {API_DELETE, "/api/v1/gcdump/{id}", api_gcdump_delete, "use GET or DELETE on a snapshot", 0},
    {API_GET, "/api/v1/gcdump/{id}/file", api_gcdump_file, "use GET on a snapshot's file", 0},
    {API_GET, "/api/v1/gcdump/{id}/paths", api_gcdump_paths, "use GET on a snapshot's paths", 0},
    {GPD, "/api/v1/gcdump/{name}", api_gcdump_unknown, NULL, 0},
    {API_GET, "/debug/pprof", api_pprof_redirect, NULL, 1},
    {API_GET, "/debug/pprof/", api_pprof_index, NULL, 1},
    {API_GET, "/debug/pprof/profile", api_pprof_profile, NULL, 1},
    {API_GET, "/debug/pprof/wall", api_pprof_profile, NULL, 1},
    {API_GET, "/debug/pprof/allocs", api_pprof_profile, NULL, 1},
    {API_GET, "/debug/pprof/heap", api_pprof_profile, NULL, 0},
    {API_GET, "/debug/pprof/exceptions", api_pprof_profile, NULL, 1},
    {API_GET, "/debug/pprof/lock", api_pprof_profile, NULL, 1},
    {API_GET, "/debug/pprof/mutex", api_pprof_profile, NULL, 1},
    {API_GET, "/debug/pprof/block", api_pprof_profile, NULL, 1},
    {API_GET, "/debug/pprof/threads", api_pprof_threads, NULL, 0},
    {API_GET, "/debug/pprof/goroutine", api_pprof_threads, NULL, 0},
    {API_GET, "/debug/pprof/{name}", api_pprof_unknown, NULL, 1},
    {API_GET, "/metrics", api_metrics, NULL, 0},
};
const size_t api_nroutes = sizeof api_routes / sizeof api_routes[0];

#define PPROF "/debug/pprof"

unsigned api_method_bit(const char *m)
{
    if (!strcmp(m, "GET") || !strcmp(m, "HEAD"))
        return API_GET;
    if (!strcmp(m, "POST"))
        return API_POST;
    if (!strcmp(m, "DELETE"))
        return API_DELETE;
    return 0;
}

int api_parse_id(const char *s, size_t n)
{
    if (n == 0 || n > 9)
        return -1;
    int v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return -1;
        v = v * 10 + (s[i] - '0');
    }
    return v > 0 ? v : -1;
}

/* Whether pattern `pat` continues the n bytes of `scope` with a '/'. */
static int under(const char *pat, const char *scope, size_t n)
{
    return !strncmp(pat, scope, n) && pat[n] == '/';
}

static int in_scope(const char *pat, const char *scope, size_t n)
{
    return !strcmp(pat, scope) || under(pat, scope, n);
}

/* Matches what follows a pattern's scope (pat) against s[0..len), capturing into m. */
static int match_rest(const char *pat, const char *s, size_t len, struct api_match *m)
{
    size_t i = 0;
    while (*pat) {
        if (!strncmp(pat, "{id}", 4)) {
            size_t j = i;
            while (j < len && s[j] != '/')
                j++;
            int id = api_parse_id(s + i, j - i);
            if (id < 0)
                return 0;
            m->id = id;
            i = j;
            pat += 4;
        } else if (!strncmp(pat, "{name}", 6)) {
            if (i >= len)
                return 0;
            m->name = s + i;
            m->name_len = len - i;
            i = len;
            pat += 6;
        } else {
            if (i >= len || s[i] != *pat)
                return 0;
            i++;
            pat++;
        }
    }
    return i == len;
}

enum api_match_result api_route_match(const char *method, const char *path, struct api_match *m)
{
    memset(m, 0, sizeof *m);
    int pprof = !strncmp(path, PPROF, strlen(PPROF));
    size_t plen = strlen(path);
    while (!pprof && plen > 1 && path[plen - 1] == '/')
        plen--; /* "/api/v1/status/" == "/api/v1/status" */

    /* the scope: the shortest pattern without placeholders that is the path or a prefix of it
     * with rows under it */
    const char *scope = NULL;
    size_t n = 0;
    for (size_t i = 0; i < api_nroutes; i++) {
        const char *p = api_routes[i].pattern;
        size_t pn = strlen(p);
        if (strchr(p, '{') || (scope && pn >= n) || pn > plen || strncmp(path, p, pn))
            continue;
        if (pn == plen) {
            scope = p;
            n = pn;
            continue;
        }
        if (path[pn] != '/')
            continue;
        for (size_t k = 0; k < api_nroutes; k++)
            if (under(api_routes[k].pattern, p, pn)) {
                scope = p;
                n = pn;
                break;
            }
    }
    if (!scope)
        return API_ROUTE_NONE;
    m->scope = scope;

    /* what follows the scope: past one '/' (under /debug/pprof) or the run of them */
    const char *rest = path + plen;
    size_t rest_len = 0;
    if (plen > n) {
        size_t r = n + 1;
        while (!pprof && r < plen && path[r] == '/')
            r++;
        rest = path + r;
        rest_len = plen - r;
    }
    unsigned all = 0;
    const struct api_route *res = NULL;
    struct api_match got = {0};
    for (size_t i = 0; i < api_nroutes; i++) {
        const struct api_route *rt = &api_routes[i];
        if (!in_scope(rt->pattern, scope, n))
            continue;
        all |= rt->methods;
        if (res)
            continue;
        struct api_match try = {0};
        int ok = plen == n ? !strcmp(rt->pattern, scope)
                           : under(rt->pattern, scope, n) &&
                                 match_rest(rt->pattern + n + 1, rest, rest_len, &try);
        if (ok) {
            res = rt;
            got = try;
        }
    }
    unsigned bit = api_method_bit(method);
    if (!(all & bit))
        return API_ROUTE_SCOPE_METHOD;
    if (!res)
        return API_ROUTE_NONE; /* a path under a scope that none of its patterns matches */
    m->route = res;
    m->id = got.id;
    m->name = got.name;
    m->name_len = got.name_len;
    for (const struct api_route *rt = res; rt < api_routes + api_nroutes; rt++)
        if (!strcmp(rt->pattern, res->pattern) && (rt->methods & bit)) {
            m->route = rt;
            return API_ROUTE_FOUND;
        }
    return API_ROUTE_METHOD;
}
