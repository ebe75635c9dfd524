/*
 * api_profiles.c - the windowed profiles as flame graphs (/api/v1/flamegraph), top tables
 * (/api/v1/top) and pprof downloads (the /debug/pprof endpoints, as Go serves them).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "api_flame.h"
#include "api_json.h"
#include "prof_alloc.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_history.h"
#include "prof_live.h"
#include "prof_log.h"
#include "prof_pprof.h"
#include "prof_store.h"
#include "prof_tree.h"

struct flame_type {
    const char *name;
    int kind; /* PK_* or -1 = live objects */
    int slot;
    const char *unit;
    int samples_slot; /* an estimate's samples (prof_store.h), each node's "samples"; -1: none */
};

static const struct flame_type g_types[] = {
    {"cpu", PK_CPU, 1, "nanoseconds", -1},      {"wall", PK_WALL, 1, "nanoseconds", -1},
    {"alloc-bytes", PK_ALLOC, 1, "bytes", 2},   {"alloc-count", PK_ALLOC, 0, "count", 2},
    {"live-bytes", -1, 1, "bytes", -1},         {"live-count", -1, 0, "count", -1},
    {"exceptions", PK_EXC, 0, "count", 1},      {"lock-time", PK_LOCK, 1, "nanoseconds", 2},
    {"lock-count", PK_LOCK, 0, "count", 2},     {"cpu-samples", PK_CPU, 0, "count", -1},
};

static const struct flame_type *find_type(const char *name)
{
    for (size_t i = 0; i < sizeof g_types / sizeof g_types[0]; i++)
        if (!strcmp(g_types[i].name, name))
            return &g_types[i];
    return NULL;
}

/* Parses type, seconds and filter; NULL with a 400 in `out` on bad input. */
static const struct flame_type *parse_common(const struct api_req *q, struct api_reply *out,
                                             double *seconds, char *filter, size_t fcap,
                                             int *has_filter)
{
    char tname[32];
    int rc = api_query_str(q, "type", tname, sizeof tname, out);
    if (rc < 0)
        return NULL;
    if (rc == 0)
        snprintf(tname, sizeof tname, "cpu");
    const struct flame_type *t = find_type(tname);
    if (!t) {
        api_reply_error(out, 400, "unknown type '%.31s' (one of cpu, wall, alloc-bytes, "
                        "alloc-count, live-bytes, live-count, exceptions, lock-time, lock-count)",
                        tname);
        return NULL;
    }
    if (api_query_seconds(q, seconds, out) < 0)
        return NULL;
    rc = api_query_str(q, "filter", filter, fcap, out);
    if (rc < 0)
        return NULL;
    *has_filter = rc > 0 && filter[0];
    return t;
}

/* native=keep (the default), fold (native frames folded into their managed callers:
 * prof_view_fold_native) or group (native frames named by their group: prof_view_group_native).
 * *mode: NATIVE_KEEP, NATIVE_FOLD or NATIVE_GROUP. 0, or -1 with a 400 in `out`. */
enum { NATIVE_KEEP, NATIVE_FOLD, NATIVE_GROUP };
static const char *const native_modes[] = {"keep", "fold", "group"};

static int parse_native(const struct api_req *q, int *mode, struct api_reply *out)
{
    char s[8];
    int rc = api_query_str(q, "native", s, sizeof s, out);
    *mode = NATIVE_KEEP;
    if (rc < 0)
        return -1;
    if (rc == 0)
        return 0;
    for (int i = 0; i < 3; i++)
        if (!strcmp(s, native_modes[i])) {
            *mode = i;
            return 0;
        }
    api_reply_error(out, 400, "native must be keep, fold or group");
    return -1;
}

/* Folds or groups a view's native frames as asked; returns the mode applied: a view that
 * cannot be rebuilt (out of memory) stays whole, which the reply says ("native": "keep"). */
static int native_view(struct prof_view *v, int mode)
{
    size_t n;
    if (mode == NATIVE_FOLD)
        return prof_view_fold_native(v, &n) == 0 ? NATIVE_FOLD : NATIVE_KEEP;
    if (mode == NATIVE_GROUP)
        return prof_view_group_native(v, &n) == 0 ? NATIVE_GROUP : NATIVE_KEEP;
    return NATIVE_KEEP;
}

static int get_view(const struct flame_type *t, double seconds, const char *filter,
                    struct prof_view *v, uint32_t *from_disk)
{
    if (t->kind < 0)
        return prof_live_view(filter, v);
    return prof_history_view(t->kind, seconds, filter, v, from_disk);
}

static int reply_jbuf(struct api_reply *out, struct jbuf *b)
{
    return api_reply_jbuf(out, 200, API_JSON, b, "reply too large; lower max_nodes");
}

/* Depth-first, iterative: "stack" holds the next sibling to visit at each open level. */
void api_flame_emit(struct jbuf *b, const struct prof_tree *t)
{
    uint32_t *stack = prof_scratch_alloc(&b->mem, (t->n + 1) * sizeof *stack);
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
        if (t->base) {
            jb_lit(b, ",\"base\":");
            jb_int(b, t->base[node]);
            jb_lit(b, ",\"base_self\":");
            jb_int(b, t->base_self[node]);
        }
        if (t->samples) {
            jb_lit(b, ",\"samples\":");
            jb_int(b, t->samples[node]);
        }
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
    prof_scratch_free(&b->mem, stack);
}

/* A window [from, to) in the store's whole seconds: both ends rounded to the nearest second, so
 * two windows that meet at a moment share no second; at least one second. */
static void whole_seconds(double from, double to, int64_t *from_s, int64_t *to_s)
{
    *from_s = (int64_t)llround(from);
    *to_s = (int64_t)llround(to) - 1;
    if (*to_s < *from_s)
        *to_s = *from_s;
}

/* The view a flame graph or top answers: `from`/`to` (a past window by its ends, reaching into
 * the history on disk), else the last `seconds` (*seconds becomes the window's length). 0, or the
 * error status with its reply in `out`. */
static int window_view(const struct api_req *q, const struct flame_type *t, double *seconds,
                       const char *filter, struct prof_view *v, uint32_t *from_disk,
                       struct api_reply *out)
{
    double now = prof_unix_now(), from, to;
    int hf = api_query_time(q, "from", now, &from, out);
    int ht = hf < 0 ? -1 : api_query_time(q, "to", now, &to, out);
    if (hf < 0 || ht < 0)
        return 400;
    if (!hf && !ht) {
        if (get_view(t, *seconds, filter, v, from_disk))
            return api_reply_error(out, 503, "profile data unavailable (out of memory)");
        return 0;
    }
    if (!ht)
        to = now;
    if (!hf)
        from = to - *seconds;
    int64_t reach = prof_history_reach_s();
    const char *bad = t->kind < 0 ? "live objects are a state, not a window: no from/to"
                      : to <= from ? "the window ends (to) before it starts (from)"
                      : to - from > (double)reach + 1.0 ? "from..to is longer than the history "
                                                         "kept"
                                                       : NULL;
    if (bad)
        return api_reply_error(out, 400, "%s (%lld s: CLRSCOPE_HISTORY_S, or "
                               "CLRSCOPE_HISTORY_MAX_AGE on disk)", bad, (long long)reach);
    int64_t from_s, to_s;
    whole_seconds(from, to, &from_s, &to_s);
    *seconds = (double)(to_s - from_s + 1);
    if (prof_history_view_range(t->kind, from_s, to_s, filter, v, from_disk))
        return api_reply_error(out, 503, "profile data unavailable (out of memory)");
    return 0;
}

int api_flamegraph(const struct api_req *q, struct api_reply *out)
{
    double seconds;
    int has_filter;
    char *filter = malloc(512);
    if (!filter)
        return api_reply_error(out, 503, "out of memory");
    const struct flame_type *t = parse_common(q, out, &seconds, filter, 512, &has_filter);
    long max_nodes;
    int native;
    if (!t || api_query_long(q, "max_nodes", 8192, 16, 200000, &max_nodes, out) < 0 ||
        parse_native(q, &native, out) < 0) {
        free(filter);
        return 400;
    }
    struct prof_view v;
    uint32_t from_disk = 0;
    int st = window_view(q, t, &seconds, has_filter ? filter : NULL, &v, &from_disk, out);
    if (st) {
        free(filter);
        return st;
    }
    native = native_view(&v, native);
    struct prof_tree tree; /* its names point into the view's: freed after the reply is written */
    int rc = prof_tree_build_sampled(&v, t->slot, t->samples_slot, (size_t)max_nodes, &tree);
    double t_from = v.t_from, t_to = v.t_to;
    if (rc) {
        prof_view_free(&v);
        free(filter);
        return api_reply_error(out, 503, "out of memory building the tree");
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
    jb_lit(&b, ",\"from_disk\":");
    jb_int(&b, (int64_t)from_disk);
    if (has_filter) {
        jb_lit(&b, ",\"filter\":");
        jb_str(&b, filter);
    }
    jb_lit(&b, ",\"native\":");
    jb_str(&b, native_modes[native]);
    if (t->kind == PK_ALLOC) {
        /* the share of the window the overhead governor had the allocation events on (the
         * values are already weighted by its inverse), as /api/v1/allocations says it */
        jb_lit(&b, ",\"coverage\":");
        jb_num(&b, prof_alloc_coverage((int64_t)floor(t_from), (int64_t)floor(t_to)));
    }
    jb_lit(&b, ",\"root\":");
    api_flame_emit(&b, &tree);
    jb_lit(&b, "}");
    prof_tree_free(&tree);
    prof_view_free(&v);
    free(filter);
    return reply_jbuf(out, &b);
}

/* ---- /api/v1/flamegraph/diff ---- */

static void emit_window(struct jbuf *b, const char *key, int64_t from_s, int64_t to_s,
                        const struct prof_view *v, int64_t total)
{
    jb_lit(b, ",\"");
    jb_raw(b, key, strlen(key));
    jb_lit(b, "\":{\"from\":");
    jb_int(b, from_s);
    jb_lit(b, ",\"to\":");
    jb_int(b, to_s + 1);
    jb_lit(b, ",\"t_from\":");
    jb_num(b, v->t_from);
    jb_lit(b, ",\"t_to\":");
    jb_num(b, v->t_to);
    jb_lit(b, ",\"total\":");
    jb_int(b, total);
    jb_lit(b, "}");
}

/* Two windows a (the base) and b of one profile: `a` and `b` as FROM,TO; b defaults to the last
 * 300 s, a to the window of b's length just before b. */
static int diff_windows(const struct api_req *q, struct api_reply *out, double now, double *af,
                        double *at, double *bf, double *bt)
{
    int ha = api_query_span(q, "a", now, af, at, out);
    if (ha < 0)
        return -1;
    int hb = api_query_span(q, "b", now, bf, bt, out);
    if (hb < 0)
        return -1;
    if (!hb) {
        if (ha && *at < now - 0.5) { /* a given: b from its end until now */
            *bf = *at;
            *bt = now;
        } else if (ha) {
            api_reply_error(out, 400, "window a ends now: give b too (b=FROM,TO)");
            return -1;
        } else {
            *bf = now - 300;
            *bt = now;
        }
    }
    if (!ha) {
        *af = *bf - (*bt - *bf);
        *at = *bf;
    }
    double reach = (double)prof_history_reach_s();
    if (*bt - *bf > reach + 1.0 || *at - *af > reach + 1.0) {
        api_reply_error(out, 400, "a window is longer than the history kept (%.0f s: "
                        "CLRSCOPE_HISTORY_S, or CLRSCOPE_HISTORY_MAX_AGE on disk)", reach);
        return -1;
    }
    return 0;
}

int api_flamegraph_diff(const struct api_req *q, struct api_reply *out)
{
    char tname[32];
    int rc = api_query_str(q, "type", tname, sizeof tname, out);
    if (rc < 0)
        return 400;
    if (rc == 0)
        snprintf(tname, sizeof tname, "cpu");
    const struct flame_type *t = find_type(tname);
    if (!t || t->kind < 0)
        return api_reply_error(out, 400, "type '%.31s' has no windows to compare (one of cpu, "
                               "wall, cpu-samples, alloc-bytes, alloc-count, exceptions, "
                               "lock-time, lock-count; compare live objects with "
                               "/api/v1/gcdump/diff)", tname);
    double now = prof_unix_now(), af, at, bf, bt;
    long max_nodes, limit;
    int native;
    if (diff_windows(q, out, now, &af, &at, &bf, &bt) < 0 ||
        api_query_long(q, "max_nodes", 8192, 16, 200000, &max_nodes, out) < 0 ||
        api_query_long(q, "limit", 20, 0, 10000, &limit, out) < 0 ||
        parse_native(q, &native, out) < 0)
        return 400;
    char *filter = malloc(512);
    if (!filter)
        return api_reply_error(out, 503, "out of memory");
    rc = api_query_str(q, "filter", filter, 512, out);
    if (rc < 0) {
        free(filter);
        return 400;
    }
    int has_filter = rc > 0 && filter[0];
    int64_t a0, a1, b0, b1;
    whole_seconds(af, at, &a0, &a1);
    whole_seconds(bf, bt, &b0, &b1);
    struct prof_view va, vb;
    if (prof_history_view_range(t->kind, a0, a1, has_filter ? filter : NULL, &va, NULL)) {
        free(filter);
        return api_reply_error(out, 503, "profile data unavailable (out of memory)");
    }
    if (prof_history_view_range(t->kind, b0, b1, has_filter ? filter : NULL, &vb, NULL)) {
        prof_view_free(&va);
        free(filter);
        return api_reply_error(out, 503, "profile data unavailable (out of memory)");
    }
    if (native != NATIVE_KEEP) { /* both or neither: the two trees must be cut alike */
        struct prof_view *vs[2] = {&va, &vb};
        for (int i = 0; i < 2; i++)
            if (native_view(vs[i], native) != native) {
                prof_view_free(&va);
                prof_view_free(&vb);
                free(filter);
                return api_reply_error(out, 503, "out of memory folding native frames");
            }
    }
    struct prof_tree tree; /* its names point into both views: freed after the reply */
    struct prof_top_diff top;
    int built = !prof_tree_build_diff(&va, &vb, t->slot, (size_t)max_nodes, &tree);
    if (!built || prof_tree_top_diff(&va, &vb, t->slot, (size_t)limit, &top)) {
        if (built) {
            prof_tree_free(&tree);
            prof_top_diff_free(&top);
        }
        prof_view_free(&va);
        prof_view_free(&vb);
        free(filter);
        return api_reply_error(out, 503, "out of memory building the tree");
    }
    struct jbuf b;
    jb_init(&b, 64u << 20);
    jb_lit(&b, "{\"type\":");
    jb_str(&b, t->name);
    jb_lit(&b, ",\"unit\":");
    jb_str(&b, t->unit);
    emit_window(&b, "a", a0, a1, &va, tree.base_total);
    emit_window(&b, "b", b0, b1, &vb, tree.total);
    jb_lit(&b, ",\"nodes\":");
    jb_int(&b, (int64_t)tree.n);
    jb_lit(&b, ",\"trimmed\":");
    jb_int(&b, (int64_t)tree.trimmed);
    if (has_filter) {
        jb_lit(&b, ",\"filter\":");
        jb_str(&b, filter);
    }
    jb_lit(&b, ",\"functions\":[");
    for (size_t i = 0; i < top.n; i++) {
        const struct prof_top_diff_row *r = &top.rows[i];
        if (i)
            jb_lit(&b, ",");
        jb_lit(&b, "{\"name\":");
        jb_str(&b, r->name);
        jb_lit(&b, ",\"self\":");
        jb_int(&b, r->self);
        jb_lit(&b, ",\"total\":");
        jb_int(&b, r->total);
        jb_lit(&b, ",\"base_self\":");
        jb_int(&b, r->base_self);
        jb_lit(&b, ",\"base_total\":");
        jb_int(&b, r->base_total);
        jb_lit(&b, ",\"delta_share\":");
        double sb = tree.total > 0 ? (double)r->self / (double)tree.total : 0;
        double sa =
            tree.base_total > 0 ? (double)r->base_self / (double)tree.base_total : 0;
        jb_num(&b, sb - sa);
        jb_lit(&b, "}");
    }
    jb_lit(&b, "],\"root\":");
    api_flame_emit(&b, &tree);
    jb_lit(&b, "}");
    prof_top_diff_free(&top);
    prof_tree_free(&tree);
    prof_view_free(&va);
    prof_view_free(&vb);
    free(filter);
    return reply_jbuf(out, &b);
}

int api_top(const struct api_req *q, struct api_reply *out)
{
    double seconds;
    int has_filter;
    char *filter = malloc(512);
    if (!filter)
        return api_reply_error(out, 503, "out of memory");
    const struct flame_type *t = parse_common(q, out, &seconds, filter, 512, &has_filter);
    long limit;
    int native;
    if (!t || api_query_long(q, "limit", 50, 1, 10000, &limit, out) < 0 ||
        parse_native(q, &native, out) < 0) {
        free(filter);
        return 400;
    }
    struct prof_view v;
    uint32_t from_disk = 0;
    int st = window_view(q, t, &seconds, has_filter ? filter : NULL, &v, &from_disk, out);
    if (st) {
        free(filter);
        return st;
    }
    native = native_view(&v, native);
    struct prof_top top;
    int rc = prof_tree_top(&v, t->slot, (size_t)limit, &top);
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
    jb_lit(&b, ",\"from_disk\":");
    jb_int(&b, (int64_t)from_disk);
    jb_lit(&b, ",\"native\":");
    jb_str(&b, native_modes[native]);
    jb_lit(&b, ",\"functions\":[");
    for (size_t i = 0; rc == 0 && i < top.n; i++) {
        if (i)
            jb_lit(&b, ",");
        jb_lit(&b, "{\"name\":");
        jb_str(&b, top.rows[i].name);
        jb_lit(&b, ",\"self\":");
        jb_int(&b, top.rows[i].self);
        jb_lit(&b, ",\"total\":");
        jb_int(&b, top.rows[i].total);
        jb_lit(&b, "}");
    }
    jb_lit(&b, "]}");
    prof_top_free(&top);
    prof_view_free(&v);
    free(filter);
    return reply_jbuf(out, &b);
}

/* ---- /debug/pprof ---- */

/* The longest window a waiting profile may take: each wait holds a worker, and two at most run
 * at once (a page of another site can start one with an <img>). */
#define PPROF_WAIT_MAX_S 120

static struct {
    int waiting;        /* profile requests waiting out their window now (atomic) */
    uint64_t abandoned; /* waits ended early because their client went away (atomic) */
} pprof_waits;

void api_pprof_waits(int *waiting, uint64_t *abandoned)
{
    *waiting = __atomic_load_n(&pprof_waits.waiting, __ATOMIC_ACQUIRE);
    *abandoned = __atomic_load_n(&pprof_waits.abandoned, __ATOMIC_ACQUIRE);
}

/* The index's links are relative: from /debug/pprof they would miss, as in Go. */
int api_pprof_redirect(const struct api_req *q, struct api_reply *out)
{
    char loc[1040];
    int qn = q->query ? (int)strlen(q->query) : 0;
    snprintf(loc, sizeof loc, "/debug/pprof/%s%s", qn && qn < 1024 ? "?" : "",
             qn && qn < 1024 ? q->query : ""); /* (a ?token= kept) */
    api_reply_static(out, 301, NULL, "", 0);
    out->verbatim = 1;
    api_reply_header(out, "Location", loc);
    api_reply_header(out, "Content-Length", "0");
    api_reply_header(out, "Cache-Control", "no-store");
    return 301;
}

int api_pprof_index(const struct api_req *q, struct api_reply *out)
{
    (void)q;
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
    return api_reply_static(out, 200, "text/html; charset=utf-8", page, sizeof page - 1);
}

int api_pprof_unknown(const struct api_req *q, struct api_reply *out)
{
    int n = q->name_len > 60 ? 60 : (int)q->name_len;
    return api_reply_error(out, 404, "unknown profile '%.*s' (profile, wall, allocs, heap, "
                           "exceptions, lock, threads)", n, q->name ? q->name : "");
}

enum wait_end { WAITED, STOPPING, CLIENT_GONE };

/* Sleeps until unix time `until`, waking every 100 ms to notice shutdown and a client that went
 * away: a `go tool pprof` stopped with ^C gives its place back at once instead of holding one of
 * the two waits for the rest of its window. */
static enum wait_end wait_window(const struct api_req *q, double until)
{
    double seconds = until - prof_unix_now();
    int64_t end = prof_now_ns() + (int64_t)((seconds > 0 ? seconds : 0) * 1e9);
    while (prof_now_ns() < end) {
        if (prof_core_stopping())
            return STOPPING;
        if (q->client_gone && q->client_gone(q->client_ctx))
            return CLIENT_GONE;
        struct timespec ts = {0, 100 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return WAITED;
}

/* A second's samples are all in the store this long after it ended (the samplers hand theirs
 * over every 50 ms, clrscope-agg drains them at least as often). */
#define PPROF_SETTLE_S 0.25

/* The window of a pprof, in the store's whole seconds: `seconds` asked, rounded up (n). Waiting,
 * the n seconds from the next whole second (the wait lasts up to 1.25 s longer than asked), so
 * that the profile covers exactly the window asked for. Otherwise the window that ends now: the
 * n whole seconds before the current one and the current one so far, which hold every sample of
 * the last `seconds` (and up to a second more, which the duration says). */
static void pprof_window(double seconds, int wait, double now, int64_t *from_s, int64_t *to_s)
{
    int64_t n = (int64_t)ceil(seconds);
    if (n < 1)
        n = 1;
    if (wait) {
        *from_s = (int64_t)ceil(now);
        *to_s = *from_s + n - 1;
    } else {
        *to_s = (int64_t)floor(now);
        *from_s = *to_s - n;
    }
}

static const struct pprof_path {
    const char *path, *spec;
    double def_seconds;
    int waits;
} pprof_paths[] = {
    {"profile", "cpu", 30, 1},   {"wall", "wall", 30, 1}, {"allocs", "alloc", 60, 0},
    {"heap", "heap", 0, 0},      {"exceptions", "exceptions", 60, 0},
    {"lock", "lock", 60, 0},     {"mutex", "lock", 60, 0}, {"block", "lock", 60, 0},
};

int api_pprof_profile(const struct api_req *q, struct api_reply *out)
{
    const char *slash = strrchr(q->path, '/');
    const char *sub = slash ? slash + 1 : q->path;
    const struct pprof_path *pp = NULL;
    for (size_t i = 0; i < sizeof pprof_paths / sizeof pprof_paths[0] && !pp; i++)
        if (!strcmp(sub, pprof_paths[i].path))
            pp = &pprof_paths[i];
    if (!pp) {
        struct api_req named = *q;
        named.name = sub;
        named.name_len = strlen(sub);
        return api_pprof_unknown(&named, out);
    }
    const struct prof_pprof_spec *spec = prof_pprof_spec(pp->spec);
    double seconds;
    if (api_query_double(q, "seconds", pp->def_seconds ? pp->def_seconds : 60, 1,
                         g_cfg.history_s, &seconds, out) < 0)
        return 400;
    long wait;
    if (api_query_long(q, "wait", pp->waits, 0, 1, &wait, out) < 0)
        return 400;
    if (!strcmp(q->method, "HEAD"))
        wait = 0; /* no body follows: the headers of the past window, at once */
    if (g_core.post_mortem)
        wait = 0; /* the history of an exited process: no next seconds to wait for */
    if (wait && seconds > PPROF_WAIT_MAX_S)
        return api_reply_error(out, 400, "seconds=%g: a profile of the next seconds waits %d s "
                               "at most (add wait=0 for the past %g s)", seconds,
                               PPROF_WAIT_MAX_S, seconds);
    /* from/to: a past window by its ends (for `go tool pprof -diff_base` on two downloads) */
    double now = prof_unix_now(), from, to;
    int hf = api_query_time(q, "from", now, &from, out);
    int ht = hf < 0 ? -1 : api_query_time(q, "to", now, &to, out);
    if (hf < 0 || ht < 0)
        return 400;
    int64_t from_s, to_s;
    if (hf || ht) {
        if (!ht)
            to = now;
        if (!hf)
            from = to - seconds;
        if (to <= from)
            return api_reply_error(out, 400, "the window ends (to) before it starts (from)");
        if (to - from > (double)prof_history_reach_s() + 1.0)
            return api_reply_error(out, 400, "from..to is longer than the history kept (%lld s: "
                                   "CLRSCOPE_HISTORY_S, or CLRSCOPE_HISTORY_MAX_AGE on disk)",
                                   (long long)prof_history_reach_s());
        wait = 0;
        whole_seconds(from, to, &from_s, &to_s);
    } else {
        pprof_window(seconds, (int)wait, now, &from_s, &to_s);
    }
    if (wait) {
        if (__atomic_add_fetch(&pprof_waits.waiting, 1, __ATOMIC_RELAXED) > 2) {
            __atomic_sub_fetch(&pprof_waits.waiting, 1, __ATOMIC_RELAXED);
            return api_reply_error(out, 429, "two profiles are already being collected; "
                                   "retry later or use wait=0 for the past window");
        }
        enum wait_end how = wait_window(q, (double)(to_s + 1) + PPROF_SETTLE_S);
        if (how == CLIENT_GONE) /* counted before the wait is given back: a reader of both
                                 * never sees the wait gone and not yet counted */
            __atomic_fetch_add(&pprof_waits.abandoned, 1, __ATOMIC_RELEASE);
        __atomic_sub_fetch(&pprof_waits.waiting, 1, __ATOMIC_RELEASE);
        if (how == STOPPING)
            return api_reply_error(out, 503, "the process is shutting down");
        if (how == CLIENT_GONE) { /* nobody to answer: no reply, the connection is closed */
            prof_log(LOG_DEBUG, "web: %s abandoned by its client during its window", q->path);
            out->status = API_NO_REPLY;
            return API_NO_REPLY;
        }
    }
    unsigned char *buf = NULL;
    size_t len = 0;
    struct prof_scratch mem = {0}; /* the encoder's memory and the file: released once sent */
    if (prof_pprof_build(spec, from_s, to_s, &mem, &buf, &len)) {
        prof_scratch_release(&mem);
        return api_reply_error(out, 503, "could not build the profile (out of memory)");
    }
    if (api_reply_scratch(out, 200, "application/octet-stream", buf, len, &mem) != 200)
        return out->status;
    char disp[96];
    snprintf(disp, sizeof disp, "attachment; filename=\"%s.pb.gz\"", pp->path);
    api_reply_header(out, "Content-Disposition", disp);
    return 200;
}
