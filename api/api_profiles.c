/*
 * api_profiles.c - the windowed profiles as flame graphs (/api/v1/flamegraph), top tables
 * (/api/v1/top) and pprof downloads (the /debug/pprof endpoints, as Go serves them).
 */
#include <civetweb.h>
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "api_flame.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_live.h"
#include "prof_log.h"
#include "prof_pprof.h"
#include "prof_store.h"
#include "prof_tree.h"
#include "api_json.h"
#include "web_peer.h"

struct flame_type {
    const char *name;
    int kind; /* PK_* or -1 = live objects */
    int slot;
    const char *unit;
};

static const struct flame_type g_types[] = {
    {"cpu", PK_CPU, 1, "nanoseconds"},      {"wall", PK_WALL, 1, "nanoseconds"},
    {"alloc-bytes", PK_ALLOC, 1, "bytes"},  {"alloc-count", PK_ALLOC, 0, "count"},
    {"live-bytes", -1, 1, "bytes"},         {"live-count", -1, 0, "count"},
    {"exceptions", PK_EXC, 0, "count"},     {"lock-time", PK_LOCK, 1, "nanoseconds"},
    {"lock-count", PK_LOCK, 0, "count"},    {"cpu-samples", PK_CPU, 0, "count"},
};

static const struct flame_type *find_type(const char *name)
{
    for (size_t i = 0; i < sizeof g_types / sizeof g_types[0]; i++)
        if (!strcmp(g_types[i].name, name))
            return &g_types[i];
    return NULL;
}

/* Parses type, seconds and filter; replies 400 itself on bad input (returns NULL then). */
static const struct flame_type *parse_common(const struct web_req *r, double *seconds,
                                             char *filter, size_t fcap, int *has_filter)
{
    char tname[32];
    int rc = web_query_str(r, "type", tname, sizeof tname);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        snprintf(tname, sizeof tname, "cpu");
    const struct flame_type *t = find_type(tname);
    if (!t) {
        web_reply_error(r->conn, 400, "unknown type '%.31s' (one of cpu, wall, alloc-bytes, "
                        "alloc-count, live-bytes, live-count, exceptions, lock-time, lock-count)",
                        tname);
        return NULL;
    }
    if (web_query_seconds(r, seconds) < 0)
        return NULL;
    rc = web_query_str(r, "filter", filter, fcap);
    if (rc < 0)
        return NULL;
    *has_filter = rc > 0 && filter[0];
    return t;
}

static int get_view(const struct flame_type *t, double seconds, const char *filter,
                    struct prof_view *v)
{
    if (t->kind < 0)
        return prof_live_view(filter, v);
    return prof_store_view(t->kind, seconds, filter, v);
}

static int reply_jbuf(struct mg_connection *c, struct jbuf *b)
{
    if (b->overflow)
        return web_reply_error(c, 500, "reply too large; lower max_nodes");
    return web_reply_bytes(c, 200, "application/json; charset=utf-8", b->p, b->len, NULL);
}

/* Depth-first, iterative: "stack" holds the next sibling to visit at each open level. */
void api_flame_emit(struct jbuf *b, const struct prof_tree *t)
{
    uint32_t *stack = malloc((t->n + 1) * sizeof *stack);
    if (!stack) {
        b->overflow = 1;
        return;
    }
    size_t sp = 0;
    uint32_t node = 0;
    for (;;) {
        jb_lit(b, "{\"name\":");
        jb_str(b, t->name[node]);
        jb_lit(b, ",\"value\":");
        jb_int(b, t->value[node]);
        jb_lit(b, ",\"self\":");
        jb_int(b, t->self[node]);
        jb_lit(b, ",\"children\":[");
        if (t->first_child[node] != UINT32_MAX) {
            stack[sp++] = t->next_sibling[t->first_child[node]];
            node = t->first_child[node];
            continue;
        }
        jb_lit(b, "]}");
        /* close finished levels, then move to the next sibling */
        for (;;) {
            if (sp == 0)
                goto done;
            uint32_t next = stack[sp - 1];
            if (next != UINT32_MAX) {
                stack[sp - 1] = t->next_sibling[next];
                jb_lit(b, ",");
                node = next;
                break;
            }
            sp--;
            jb_lit(b, "]}");
        }
    }
done:
    free(stack);
}

int api_flamegraph(const struct web_req *r)
{
    double seconds;
    int has_filter;
    char *filter = malloc(512);
    if (!filter)
        return web_reply_error(r->conn, 503, "out of memory");
    const struct flame_type *t = parse_common(r, &seconds, filter, 512, &has_filter);
    long max_nodes;
    if (!t || web_query_long(r, "max_nodes", 8192, 16, 200000, &max_nodes) < 0) {
        free(filter);
        return 400;
    }
    struct prof_view v;
    if (get_view(t, seconds, has_filter ? filter : NULL, &v)) {
        free(filter);
        return web_reply_error(r->conn, 503, "profile data unavailable (out of memory)");
    }
    struct prof_tree tree; /* its names point into the view's: freed after the reply is written */
    int rc = prof_tree_build(&v, t->slot, (size_t)max_nodes, &tree);
    double t_from = v.t_from, t_to = v.t_to;
    if (rc) {
        prof_view_free(&v);
        free(filter);
        return web_reply_error(r->conn, 503, "out of memory building the tree");
    }
    struct jbuf b;
    jb_init(&b, 64u << 20);
    jb_lit(&b, "{\"type\":");
    jb_str(&b, t->name);
    jb_lit(&b, ",\"unit\":");
    jb_str(&b, t->unit);
    jb_lit(&b, ",\"total\":");
    jb_int(&b, tree.total);
    jb_lit(&b, ",\"seconds\":");
    jb_num(&b, seconds);
    jb_lit(&b, ",\"t_from\":");
    jb_num(&b, t_from);
    jb_lit(&b, ",\"t_to\":");
    jb_num(&b, t_to);
    jb_lit(&b, ",\"nodes\":");
    jb_int(&b, (int64_t)tree.n);
    jb_lit(&b, ",\"trimmed\":");
    jb_int(&b, (int64_t)tree.trimmed);
    if (has_filter) {
        jb_lit(&b, ",\"filter\":");
        jb_str(&b, filter);
    }
    jb_lit(&b, ",\"root\":");
    api_flame_emit(&b, &tree);
    jb_lit(&b, "}");
    prof_tree_free(&tree);
    prof_view_free(&v);
    free(filter);
    rc = reply_jbuf(r->conn, &b);
    jb_free(&b);
    return rc;
}

int api_top(const struct web_req *r)
{
    double seconds;
    int has_filter;
    char *filter = malloc(512);
    if (!filter)
        return web_reply_error(r->conn, 503, "out of memory");
    const struct flame_type *t = parse_common(r, &seconds, filter, 512, &has_filter);
    long limit;
    if (!t || web_query_long(r, "limit", 50, 1, 10000, &limit) < 0) {
        free(filter);
        return 400;
    }
    struct prof_view v;
    if (get_view(t, seconds, has_filter ? filter : NULL, &v)) {
        free(filter);
        return web_reply_error(r->conn, 503, "profile data unavailable (out of memory)");
    }
    struct prof_top_row *rows = NULL;
    size_t n = 0;
    int rc = prof_tree_top(&v, t->slot, (size_t)limit, &rows, &n);
    int64_t total = 0;
    for (size_t i = 0; i < v.nrows; i++)
        total += v.rows[i].v[t->slot];
    struct jbuf b;
    jb_init(&b, 16u << 20);
    jb_lit(&b, "{\"type\":");
    jb_str(&b, t->name);
    jb_lit(&b, ",\"unit\":");
    jb_str(&b, t->unit);
    jb_lit(&b, ",\"total\":");
    jb_int(&b, total);
    jb_lit(&b, ",\"seconds\":");
    jb_num(&b, seconds);
    jb_lit(&b, ",\"functions\":[");
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (i)
            jb_lit(&b, ",");
        jb_lit(&b, "{\"name\":");
        jb_str(&b, rows[i].name);
        jb_lit(&b, ",\"self\":");
        jb_int(&b, rows[i].self);
        jb_lit(&b, ",\"total\":");
        jb_int(&b, rows[i].total);
        jb_lit(&b, "}");
    }
    jb_lit(&b, "]}");
    free(rows);
    prof_view_free(&v);
    free(filter);
    rc = reply_jbuf(r->conn, &b);
    jb_free(&b);
    return rc;
}

/* ---- /debug/pprof ---- */

static int g_waiting; /* profile requests currently waiting out their window */
static uint64_t g_abandoned; /* waits ended early because their client went away */

void api_pprof_waits(int *waiting, uint64_t *abandoned)
{
    *waiting = __atomic_load_n(&g_waiting, __ATOMIC_ACQUIRE);
    *abandoned = __atomic_load_n(&g_abandoned, __ATOMIC_ACQUIRE);
}

static int pprof_index(const struct web_req *r)
{
    static const char page[] =
        "<!DOCTYPE html><html><head><meta charset=\"utf-8\"><title>/debug/pprof/</title>"
        "</head><body><h1>/debug/pprof/</h1><p>Profiles of this .NET process (clrscope):</p>"
        "<table><tr><td><a href=\"profile?seconds=30\">profile</a></td><td>CPU time of the "
        "next N seconds (waits, like Go's). Add wait=0 for the past N seconds.</td></tr>"
        "<tr><td><a href=\"wall?seconds=30\">wall</a></td><td>wall time of every managed "
        "thread, same semantics</td></tr>"
        "<tr><td><a href=\"allocs?seconds=60\">allocs</a></td><td>sampled allocations of the "
        "last N seconds</td></tr>"
        "<tr><td><a href=\"heap\">heap</a></td><td>sampled live objects now</td></tr>"
        "<tr><td><a href=\"exceptions?seconds=60\">exceptions</a></td><td>exceptions thrown in "
        "the last N seconds</td></tr>"
        "<tr><td><a href=\"lock?seconds=60\">lock</a></td><td>lock contention in the last N "
        "seconds</td></tr>"
        "<tr><td><a href=\"threads?debug=1\">threads</a></td><td>every managed thread's stack "
        "now (a thread dump; <a href=\"threads?debug=2\">one by one</a>; also as "
        "goroutine)</td></tr></table>"
        "<p>Use: <code>go tool pprof http://HOST:PORT/debug/pprof/profile?seconds=30</code></p>"
        "</body></html>";
    return web_reply_bytes(r->conn, 200, "text/html; charset=utf-8", page, sizeof page - 1, NULL);
}

enum wait_end { WAITED, STOPPING, CLIENT_GONE };

/* Sleeps `seconds`, waking every 100 ms to notice shutdown and a client that went away (its
 * socket `fd`, -1 when unknown): a `go tool pprof` stopped with ^C gives its place back at
 * once instead of holding one of the two waits for the rest of its window. */
static enum wait_end wait_window(double seconds, int fd)
{
    int64_t end = prof_now_ns() + (int64_t)(seconds * 1e9);
    while (prof_now_ns() < end) {
        if (prof_core_stopping())
            return STOPPING;
        if (web_peer_gone(fd))
            return CLIENT_GONE;
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return WAITED;
}

int api_pprof(const struct web_req *r)
{
    const char *sub = r->path + strlen("/debug/pprof");
    if (!*sub) { /* the index's links are relative: from /debug/pprof they would miss, as in Go */
        char loc[1040];
        int qn = r->query ? (int)strlen(r->query) : 0;
        snprintf(loc, sizeof loc, "/debug/pprof/%s%s", qn && qn < 1024 ? "?" : "",
                 qn && qn < 1024 ? r->query : ""); /* (a ?token= kept) */
        mg_response_header_start(r->conn, 301);
        mg_response_header_add(r->conn, "Location", loc, -1);
        mg_response_header_add(r->conn, "Content-Length", "0", -1);
        mg_response_header_add(r->conn, "Cache-Control", "no-store", -1);
        mg_response_header_send(r->conn);
        return 301;
    }
    if (*sub == '/')
        sub++;
    if (!*sub)
        return pprof_index(r);
    if (!strcmp(sub, "threads") || !strcmp(sub, "goroutine"))
        return api_threads_pprof(r, sub);
    struct {
        const char *path, *spec;
        double def_seconds;
        int waits;
    } map[] = {
        {"profile", "cpu", 30, 1},   {"wall", "wall", 30, 1}, {"allocs", "alloc", 60, 0},
        {"heap", "heap", 0, 0},      {"exceptions", "exceptions", 60, 0},
        {"lock", "lock", 60, 0},     {"mutex", "lock", 60, 0}, {"block", "lock", 60, 0},
    };
    size_t i = 0;
    for (; i < sizeof map / sizeof map[0]; i++)
        if (!strcmp(sub, map[i].path))
            break;
    if (i == sizeof map / sizeof map[0])
        return web_reply_error(r->conn, 404, "unknown profile '%.60s' (profile, wall, allocs, "
                               "heap, exceptions, lock, threads)", sub);
    const struct prof_pprof_spec *spec = prof_pprof_spec(map[i].spec);
    double seconds;
    if (web_query_double(r, "seconds", map[i].def_seconds ? map[i].def_seconds : 60, 1,
                         g_cfg.history_s, &seconds) < 0)
        return 400;
    long wait;
    if (web_query_long(r, "wait", map[i].waits, 0, 1, &wait) < 0)
        return 400;
    if (!strcmp(r->method, "HEAD"))
        wait = 0; /* no body follows: the headers of the past window, at once */
    if (wait) {
        if (__atomic_add_fetch(&g_waiting, 1, __ATOMIC_RELAXED) > 2) {
            __atomic_sub_fetch(&g_waiting, 1, __ATOMIC_RELAXED);
            return web_reply_error(r->conn, 429, "two profiles are already being collected; "
                                   "retry later or use wait=0 for the past window");
        }
        enum wait_end how = wait_window(seconds, web_peer_socket(r->conn));
        if (how == CLIENT_GONE) /* counted before the wait is given back: a reader of both
                                 * never sees the wait gone and not yet counted */
            __atomic_fetch_add(&g_abandoned, 1, __ATOMIC_RELEASE);
        __atomic_sub_fetch(&g_waiting, 1, __ATOMIC_RELEASE);
        if (how == STOPPING)
            return web_reply_error(r->conn, 503, "the process is shutting down");
        if (how == CLIENT_GONE) { /* nobody to answer: the connection is closed, no reply */
            prof_log(LOG_DEBUG, "web: %s abandoned by its client during its window", r->path);
            mg_disable_connection_keep_alive(r->conn);
            return 499;
        }
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    if (prof_pprof_build(spec, seconds, &buf, &len))
        return web_reply_error(r->conn, 503, "could not build the profile (out of memory)");
    char disp[96];
    snprintf(disp, sizeof disp, "attachment; filename=\"%s.pb.gz\"", map[i].path);
    const char *extra[] = {"Content-Disposition", disp, NULL, NULL};
    int rc = web_reply_bytes(r->conn, 200, "application/octet-stream", buf, len, extra);
    free(buf);
    return rc;
}
