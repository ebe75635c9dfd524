/*
 * api_gc.c - GET /api/v1/gc?seconds=N[&limit=M]: the garbage collector's share of CPU over the
 * window, its pauses, a per-second series (CPU, pause, heap sizes per generation), one record
 * per GC (the newest `limit`, default 1000) and totals since clrscope started.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "api.h"
#include "api_json.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_events.h"
#include "prof_gc.h"
#include "prof_history.h"

#define REPLY_MAX (64u << 20)

/* A number with at most `dec` decimals and no trailing zeros ("0.25", "12", "0"). */
static void num(struct jbuf *b, double v, int dec)
{
    if (!isfinite(v)) {
        jb_lit(b, "null");
        return;
    }
    char tmp[48];
    int n = snprintf(tmp, sizeof tmp, "%.*f", dec, v);
    if (n <= 0 || n >= (int)sizeof tmp) {
        jb_num(b, v);
        return;
    }
    if (memchr(tmp, '.', (size_t)n)) {
        while (n > 1 && tmp[n - 1] == '0')
            n--;
        if (tmp[n - 1] == '.')
            n--;
    }
    const char *p = tmp;
    if (n == 2 && !memcmp(tmp, "-0", 2)) { /* -0.0001 rounded */
        p++;
        n--;
    }
    jb_raw(b, p, (size_t)n);
}

/* A literal chosen at run time (jb_lit needs a string literal for its sizeof). */
static void put(struct jbuf *b, const char *s)
{
    jb_raw(b, s, strlen(s));
}

static void key(struct jbuf *b, const char *k)
{
    jb_str(b, k);
    jb_lit(b, ":");
}

static double share(double part, double whole)
{
    double s = whole > 0 ? part / whole : 0;
    return s < 0 ? 0 : s > 1 ? 1 : s;
}

static void emit_heap(struct jbuf *b, const uint64_t *heap)
{
    static const char *const names[GC_NHEAPS] = {"gen0", "gen1", "gen2", "loh", "poh"};
    jb_lit(b, "{");
    for (int g = 0; g < GC_NHEAPS; g++) {
        if (g)
            jb_lit(b, ",");
        key(b, names[g]);
        jb_int(b, (int64_t)heap[g]);
    }
    jb_lit(b, "}");
}

static void emit_gens(struct jbuf *b, const uint64_t *v)
{
    jb_lit(b, "{\"gen0\":");
    jb_int(b, (int64_t)v[0]);
    jb_lit(b, ",\"gen1\":");
    jb_int(b, (int64_t)v[1]);
    jb_lit(b, ",\"gen2\":");
    jb_int(b, (int64_t)v[2]);
    jb_lit(b, "}");
}

static void emit_series(struct jbuf *b, const struct prof_gc_view *v)
{
    jb_lit(b, ",\"series\":[");
    for (size_t i = 0; i < v->nseconds; i++) {
        const struct prof_gc_second *s = &v->seconds[i];
        put(b, i ? ",{\"t\":" : "{\"t\":");
        num(b, s->t, 3);
        jb_lit(b, ",\"dt\":");
        num(b, s->dt, 3);
        jb_lit(b, ",\"gc_cpu_share\":");
        num(b, share(s->gc_cpu_s, s->process_cpu_s), 4);
        jb_lit(b, ",\"process_cpu_s\":");
        num(b, s->process_cpu_s, 6);
        jb_lit(b, ",\"gc_cpu_s\":");
        num(b, s->gc_cpu_s, 6);
        jb_lit(b, ",\"gc_threads_cpu_s\":");
        num(b, s->gc_threads_cpu_s, 6);
        jb_lit(b, ",\"gc_user_cpu_s\":");
        num(b, s->gc_user_cpu_s, 6);
        jb_lit(b, ",\"pause_ms\":");
        num(b, s->pause_s * 1e3, 3);
        jb_lit(b, ",\"pause_share\":");
        num(b, share(s->pause_s, s->dt), 4);
        jb_lit(b, ",\"collections\":");
        uint64_t c[3] = {s->collections[0], s->collections[1], s->collections[2]};
        emit_gens(b, c);
        jb_lit(b, ",\"heap\":");
        emit_heap(b, s->heap);
        jb_lit(b, "}");
    }
    jb_lit(b, "]");
}

static void emit_collections(struct jbuf *b, const struct prof_gc_view *v)
{
    char rbuf[24];
    jb_lit(b, ",\"collections\":[");
    for (size_t i = 0; i < v->ncollections; i++) {
        const struct prof_gc_collection *c = &v->collections[i];
        put(b, i ? ",{\"number\":" : "{\"number\":");
        jb_int(b, (int64_t)c->number);
        jb_lit(b, ",\"generation\":");
        jb_int(b, c->generation);
        jb_lit(b, ",\"reason\":");
        jb_str(b, prof_gc_reason_name(c->reason, rbuf, sizeof rbuf));
        jb_lit(b, ",\"type\":");
        jb_str(b, prof_gc_type_name(c->type));
        jb_lit(b, ",\"t\":");
        num(b, c->t, 6);
        jb_lit(b, ",\"duration_ms\":");
        num(b, c->duration_ms, 3);
        jb_lit(b, ",\"pause_ms\":");
        num(b, c->pause_ms, 3);
        jb_lit(b, ",\"heap_before\":");
        jb_int(b, (int64_t)c->heap_before);
        jb_lit(b, ",\"heap_after\":");
        jb_int(b, (int64_t)c->heap_after);
        jb_lit(b, ",\"promoted\":");
        jb_int(b, (int64_t)c->promoted);
        jb_lit(b, ",\"complete\":");
        put(b, c->complete ? "true" : "false");
        jb_lit(b, "}");
    }
    jb_lit(b, "]");
}

static void emit_totals(struct jbuf *b, const struct prof_gc_totals *t)
{
    jb_lit(b, ",\"totals\":{\"gen0\":");
    jb_int(b, (int64_t)t->collection_count[0]);
    jb_lit(b, ",\"gen1\":");
    jb_int(b, (int64_t)t->collection_count[1]);
    jb_lit(b, ",\"gen2\":");
    jb_int(b, (int64_t)t->collection_count[2]);
    jb_lit(b, ",\"by_generation\":");
    emit_gens(b, t->by_depth);
    jb_lit(b, ",\"in_progress\":");
    emit_gens(b, t->in_progress);
    jb_lit(b, ",\"collections\":");
    jb_int(b, (int64_t)t->collections);
    jb_lit(b, ",\"background\":");
    jb_int(b, (int64_t)t->background);
    jb_lit(b, ",\"induced\":");
    jb_int(b, (int64_t)t->induced);
    jb_lit(b, ",\"first_number\":");
    jb_int(b, (int64_t)t->first_number);
    jb_lit(b, ",\"pause_ms_total\":");
    num(b, t->pause_s * 1e3, 3);
    jb_lit(b, ",\"gc_cpu_s_total\":");
    num(b, t->gc_threads_cpu_s + t->gc_user_cpu_s, 6);
    jb_lit(b, ",\"gc_threads_cpu_s_total\":");
    num(b, t->gc_threads_cpu_s, 6);
    jb_lit(b, ",\"gc_user_cpu_s_total\":");
    num(b, t->gc_user_cpu_s, 6);
    jb_lit(b, ",\"process_cpu_s_total\":");
    num(b, t->process_cpu_s, 6);
    jb_lit(b, "}");
}

int api_gc(const struct api_req *q, struct api_reply *out)
{
    double seconds;
    long limit;
    if (api_query_seconds(q, &seconds, out) < 0 ||
        api_query_long(q, "limit", 1000, 0, 1000000, &limit, out) < 0)
        return 400;
    if (!(__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_GC))
        return api_reply_error(out, 404, "the gc profile is off (CLRSCOPE_PROFILES)");
    struct prof_gc_view v;
    if (prof_history_gc_view(seconds, (size_t)limit, &v))
        return api_reply_error(out, 503, "out of memory");
    double gc = 0, proc = 0, pause = 0, span = 0;
    uint64_t in_window = v.collections_omitted + v.ncollections;
    for (size_t i = 0; i < v.nseconds; i++) {
        gc += v.seconds[i].gc_cpu_s;
        proc += v.seconds[i].process_cpu_s;
        pause += v.seconds[i].pause_s;
        span += v.seconds[i].dt;
    }
    const struct prof_gc_totals *t = &v.totals;
    double gc_share = share(gc, proc);

    struct jbuf b;
    jb_init(&b, REPLY_MAX);
    jb_lit(&b, "{\"seconds\":");
    num(&b, seconds, 3);
    jb_lit(&b, ",\"t_from\":");
    num(&b, v.t_from, 3);
    jb_lit(&b, ",\"t_to\":");
    num(&b, v.t_to, 3);
    jb_lit(&b, ",\"gc_cpu_share\":");
    num(&b, gc_share, 4);
    jb_lit(&b, ",\"pause_share\":");
    num(&b, share(pause, span), 4);
    jb_lit(&b, ",\"gc_cpu_s\":");
    num(&b, gc, 6);
    jb_lit(&b, ",\"process_cpu_s\":");
    num(&b, proc, 6);
    jb_lit(&b, ",\"pause_ms\":");
    num(&b, pause * 1e3, 3);
    jb_lit(&b, ",\"collections_in_window\":");
    jb_int(&b, (int64_t)in_window);
    jb_lit(&b, ",\"warn_threshold\":");
    num(&b, g_cfg.gc_warn, 4);
    jb_lit(&b, ",\"warn\":");
    put(&b, proc > 0 && gc_share >= g_cfg.gc_warn ? "true" : "false");
    jb_lit(&b, ",\"mode\":");
    jb_str(&b, t->server ? "server" : "workstation");
    jb_lit(&b, ",\"concurrent\":");
    put(&b, t->concurrent ? "true" : "false");
    jb_lit(&b, ",\"heap_count\":");
    jb_int(&b, t->heap_count);
    jb_lit(&b, ",\"gc_threads\":");
    jb_int(&b, t->gc_threads);
    jb_lit(&b, ",\"heap\":");
    emit_heap(&b, t->heap);
    emit_series(&b, &v);
    emit_collections(&b, &v);
    jb_lit(&b, ",\"collections_omitted\":");
    jb_int(&b, (int64_t)v.collections_omitted);
    jb_lit(&b, ",\"window\":{\"gen0\":");
    jb_int(&b, (int64_t)v.window_by_gen[0]);
    jb_lit(&b, ",\"gen1\":");
    jb_int(&b, (int64_t)v.window_by_gen[1]);
    jb_lit(&b, ",\"gen2\":");
    jb_int(&b, (int64_t)v.window_by_gen[2]);
    jb_lit(&b, ",\"max_pause_ms\":");
    num(&b, v.window_max_pause_ms, 3);
    jb_lit(&b, "}");
    emit_totals(&b, t);
    jb_lit(&b, ",\"dropped\":{\"collections\":");
    jb_int(&b, (int64_t)t->dropped_collections);
    jb_lit(&b, ",\"unpaired_callbacks\":");
    jb_int(&b, (int64_t)t->unpaired_callbacks);
    jb_lit(&b, ",\"untracked_threads\":");
    jb_int(&b, (int64_t)t->untracked_threads);
    jb_lit(&b, ",\"pauses\":");
    jb_int(&b, (int64_t)t->lost_pauses);
    jb_lit(&b, ",\"blocking_gcs\":");
    jb_int(&b, (int64_t)t->lost_blocking_gcs);
    jb_lit(&b, "},\"events\":");
    int es = prof_events_state();
    jb_str(&b, es > 0 ? "running" : es < 0 ? "refused" : "off");
    jb_lit(&b, "}");
    prof_gc_view_free(&v);

    return api_reply_jbuf(out, 200, API_JSON, &b, "reply too large; lower seconds or limit");
}
