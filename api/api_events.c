/*
 * api_events.c - the event-based tables: GET /api/v1/exceptions (thrown exceptions by type and
 * message, estimated counts) and GET /api/v1/locks (lock contention: totals, wait histogram, per
 * lock and owner thread). Stacks come from the windowed store (PK_EXC, PK_LOCK); the flame graphs
 * of the same data are /api/v1/flamegraph?type=exceptions|lock-time.
 *
 * The events counted since a type's (a lock's) last sample reach the table and the store at the
 * aggregator's next tick, up to a second later; these handlers add them to what they read
 * (prof_exc_read, prof_lock_read), so that the figures are those of now, and change nothing.
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "prof_config.h"
#include "prof_history.h"
#include "prof_core.h"
#include "prof_exc.h"
#include "prof_lock.h"
#include "prof_store.h"
#include "prof_wtab.h"

#define MAX_STACKS 10
#define MAX_FRAMES 256

/* ---- shared: counts no sample carries yet ---- */

/* What the aggregator's next tick adds for one type or lock (prof_exc_unattributed,
 * prof_lock_unattributed), in one shape for both tables: to the table row (a, b, n), and to the
 * stack `frames` in the store. */
struct unattributed {
    const char *a, *b, *extra;
    uint64_t n;
    int64_t v[WTAB_NV];
    const char *const *frames;
    int nframes;
    int64_t sv[PROF_NVALUES];
};

/* rows (prof_wtab_sum's) with u added as the tick adds them: to the row of the same key, or as
 * a row of its own. A new array (free()); its strings point into rows' block and u's. NULL when
 * out of memory. */
static struct prof_wtab_row *with_unattributed(const struct prof_wtab_row *rows, size_t n,
                                               const struct unattributed *u, size_t nu,
                                               size_t *nout)
{
    struct prof_wtab_row *all = malloc((n + nu ? n + nu : 1) * sizeof *all);
    if (!all)
        return NULL;
    if (n)
        memcpy(all, rows, n * sizeof *all);
    size_t m = n;
    for (size_t k = 0; k < nu; k++) {
        size_t i = 0;
        while (i < m && (all[i].n != u[k].n || strcmp(all[i].a, u[k].a) || strcmp(all[i].b, u[k].b)))
            i++;
        if (i == m) {
            memset(&all[m], 0, sizeof all[m]);
            all[m].a = u[k].a;
            all[m].b = u[k].b;
            all[m].extra = u[k].extra;
            all[m].n = u[k].n;
            m++;
        }
        for (int j = 0; j < WTAB_NV; j++)
            all[i].v[j] += u[k].v[j];
    }
    *nout = m;
    return all;
}

/* ---- shared: the heaviest stacks of a store view ---- */

struct stack_sum {
    uint32_t node;             /* in the view; UINT32_MAX: a stack the view does not have yet */
    const char *const *frames; /* then its frames, root first */
    int nframes;
    int64_t v[PROF_NVALUES];
};

static int cmp_stack(const void *a, const void *b, int slot)
{
    int64_t x = ((const struct stack_sum *)a)->v[slot], y = ((const struct stack_sum *)b)->v[slot];
    return x < y ? 1 : x > y ? -1 : 0;
}

static int cmp_stack0(const void *a, const void *b)
{
    return cmp_stack(a, b, 0);
}

static int cmp_stack1(const void *a, const void *b)
{
    return cmp_stack(a, b, 1);
}

/* Whether stack s is `frames` (root first). */
static int same_stack(const struct prof_view *v, const struct stack_sum *s,
                      const char *const *frames, int nframes)
{
    if (s->node == UINT32_MAX) {
        if (s->nframes != nframes)
            return 0;
        for (int i = 0; i < nframes; i++)
            if (strcmp(s->frames[i], frames[i]))
                return 0;
        return 1;
    }
    uint32_t node = s->node;
    int i = nframes - 1;
    while (node != 0 && node < v->nnodes && i >= 0 && !strcmp(v->name[node], frames[i])) {
        node = v->parent[node];
        i--;
    }
    return node == 0 && i < 0;
}

/* t_from, t_to: the span the window covers (from the profiler's start when it reaches further) */
static void add_span(cJSON *o, struct prof_wtab *t, double seconds)
{
    double from, to;
    prof_wtab_span(t, seconds, &from, &to);
    cJSON_AddNumberToObject(o, "t_from", from);
    cJSON_AddNumberToObject(o, "t_to", to);
}

/* Adds "stacks": the `max` heaviest leaf stacks of view `v` (NULL: none) with the counts of u
 * added, by v[slot], each with the values named in keys (NULL = skip that slot). Frames root
 * first. The view is taken before u is read, so that no count is in both. */
static void add_stacks(cJSON *o, const struct prof_view *v, int slot,
                       const char *const keys[PROF_NVALUES], int max,
                       const struct unattributed *u, size_t nu)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "stacks");
    if (!v)
        return;
    struct stack_sum *sums = calloc(v->nrows + nu ? v->nrows + nu : 1, sizeof *sums);
    uint32_t *pos = calloc(v->nnodes ? v->nnodes : 1, sizeof *pos); /* node -> index + 1 */
    const char **frames = malloc(MAX_FRAMES * sizeof *frames);
    if (!sums || !pos || !frames)
        goto out;
    size_t n = 0;
    for (size_t i = 0; i < v->nrows; i++) {
        const struct prof_row *r = &v->rows[i];
        if (r->node >= v->nnodes)
            continue;
        if (!pos[r->node]) {
            sums[n].node = r->node;
            pos[r->node] = (uint32_t)++n;
        }
        struct stack_sum *s = &sums[pos[r->node] - 1];
        for (int k = 0; k < PROF_NVALUES; k++)
            s->v[k] += r->v[k];
    }
    for (size_t k = 0; k < nu; k++) {
        size_t i = 0;
        while (i < n && !same_stack(v, &sums[i], u[k].frames, u[k].nframes))
            i++;
        if (i == n) {
            sums[n].node = UINT32_MAX;
            sums[n].frames = u[k].frames;
            sums[n].nframes = u[k].nframes;
            n++;
        }
        for (int j = 0; j < PROF_NVALUES; j++)
            sums[i].v[j] += u[k].sv[j];
    }
    qsort(sums, n, sizeof *sums, slot == 0 ? cmp_stack0 : cmp_stack1);
    for (size_t i = 0; i < n && (int)i < max; i++) {
        if (sums[i].v[slot] <= 0)
            break;
        int nf = 0;
        if (sums[i].node == UINT32_MAX) /* leaf first, as walked below */
            for (int f = sums[i].nframes - 1; f >= 0 && nf < MAX_FRAMES; f--)
                frames[nf++] = sums[i].frames[f];
        else
            for (uint32_t node = sums[i].node; node != 0 && nf < MAX_FRAMES;
                 node = v->parent[node])
                frames[nf++] = v->name[node];
        cJSON *st = cJSON_CreateObject();
        cJSON *fa = cJSON_AddArrayToObject(st, "frames");
        for (int f = nf - 1; f >= 0; f--)
            cJSON_AddItemToArray(fa, cJSON_CreateString(frames[f]));
        for (int k = 0; k < PROF_NVALUES; k++)
            if (keys[k])
                cJSON_AddNumberToObject(st, keys[k], (double)sums[i].v[k]);
        cJSON_AddItemToArray(arr, st);
    }
out:
    free(sums);
    free(pos);
    free(frames);
}

/* ---- /api/v1/exceptions ---- */

static int cmp_row_v0(const void *a, const void *b)
{
    const struct prof_wtab_row *x = a, *y = b;
    if (x->v[0] != y->v[0])
        return x->v[0] < y->v[0] ? 1 : -1;
    if (x->v[1] != y->v[1])
        return x->v[1] < y->v[1] ? 1 : -1;
    int c = strcmp(x->a, y->a);
    return c ? c : strcmp(x->b, y->b);
}

struct type_sum {
    const char *type;
    int64_t count, samples, messages, rethrown;
};

static int cmp_type_sum(const void *a, const void *b)
{
    const struct type_sum *x = a, *y = b;
    if (x->count != y->count)
        return x->count < y->count ? 1 : -1;
    return strcmp(x->type, y->type);
}

/* "by_type": the rows (sorted by count) summed per type. */
static void add_by_type(cJSON *o, const struct prof_wtab_row *rows, size_t n)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "by_type");
    struct type_sum *t = calloc(n ? n : 1, sizeof *t);
    if (!t)
        return;
    size_t nt = 0;
    for (size_t i = 0; i < n; i++) {
        size_t j = 0;
        while (j < nt && strcmp(t[j].type, rows[i].a))
            j++;
        if (j == nt)
            t[nt++].type = rows[i].a;
        t[j].count += rows[i].v[0];
        t[j].samples += rows[i].v[1];
        t[j].rethrown += rows[i].v[2];
        t[j].messages++;
    }
    qsort(t, nt, sizeof *t, cmp_type_sum);
    for (size_t j = 0; j < nt; j++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", t[j].type);
        cJSON_AddNumberToObject(e, "count", (double)t[j].count);
        cJSON_AddNumberToObject(e, "samples", (double)t[j].samples);
        cJSON_AddNumberToObject(e, "messages", (double)t[j].messages);
        cJSON_AddNumberToObject(e, "rethrown", (double)t[j].rethrown);
        cJSON_AddItemToArray(arr, e);
    }
    free(t);
}

int api_exceptions(const struct api_req *q, struct api_reply *out)
{
    double seconds;
    long limit;
    char *type = malloc(512);
    if (!type)
        return api_reply_error(out, 503, "out of memory");
    int has_type;
    if (api_query_seconds(q, &seconds, out) < 0 ||
        api_query_long(q, "limit", 200, 1, 100000, &limit, out) < 0 ||
        (has_type = api_query_str(q, "type", type, 512, out)) < 0) {
        free(type);
        return 400;
    }
    has_type = has_type > 0 && type[0];
    /* the drill-down's stacks: the view before the counts no sample carries yet */
    struct prof_view view;
    int have_view = has_type && !prof_history_view(PK_EXC, seconds, type, &view, NULL);
    struct prof_wtab_row *table = NULL, *rows = NULL;
    struct prof_exc_unattributed *eu = NULL;
    size_t nt = 0, neu = 0, n = 0;
    struct unattributed *u = NULL;
    if (!prof_exc_read(seconds, has_type ? type : NULL, &table, &nt, &eu, &neu) &&
        (u = calloc(neu ? neu : 1, sizeof *u))) {
        for (size_t i = 0; i < neu; i++)
            u[i] = (struct unattributed){.a = eu[i].type, .b = eu[i].message,
                                         .extra = eu[i].site,
                                         .v = {eu[i].count, 0, eu[i].rethrown},
                                         .frames = eu[i].frames, .nframes = eu[i].nframes,
                                         .sv = {eu[i].count, 0, 0}};
        rows = with_unattributed(table, nt, u, neu, &n);
    }
    if (!rows) {
        free(table);
        free(eu);
        free(u);
        if (have_view)
            prof_view_free(&view);
        free(type);
        return api_reply_error(out, 503, "out of memory");
    }
    qsort(rows, n, sizeof *rows, cmp_row_v0);
    struct prof_exc_stats st;
    prof_exc_get_stats(&st);

    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "seconds", seconds);
    add_span(o, prof_exc_table(), seconds);
    cJSON_AddBoolToObject(o, "enabled", (g_core.profiles & PROFILE_EXCEPTIONS) != 0);
    int64_t total = 0, sampled = 0, rethrown = 0;
    for (size_t i = 0; i < n; i++) {
        total += rows[i].v[0];
        sampled += rows[i].v[1];
        rethrown += rows[i].v[2];
    }
    cJSON_AddNumberToObject(o, "total", (double)total);
    cJSON_AddNumberToObject(o, "sampled", (double)sampled);
    cJSON_AddNumberToObject(o, "rethrown", (double)rethrown);
    cJSON *types = cJSON_AddArrayToObject(o, "types");
    for (size_t i = 0; i < n && (long)i < limit; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "type", rows[i].a);
        cJSON_AddStringToObject(e, "message", rows[i].b);
        cJSON_AddNumberToObject(e, "count", (double)rows[i].v[0]);
        cJSON_AddNumberToObject(e, "samples", (double)rows[i].v[1]);
        cJSON_AddNumberToObject(e, "rethrown", (double)rows[i].v[2]);
        cJSON_AddStringToObject(e, "method", rows[i].extra);
        cJSON_AddItemToArray(types, e);
    }
    add_by_type(o, rows, n);
    cJSON_AddNumberToObject(o, "dropped", (double)(st.dropped + st.table_dropped));
    cJSON *d = cJSON_AddObjectToObject(o, "profiler");
    cJSON_AddNumberToObject(d, "events", (double)st.events);
    cJSON_AddNumberToObject(d, "samples", (double)st.sampled);
    cJSON_AddNumberToObject(d, "dropped_samples", (double)st.dropped);
    cJSON_AddNumberToObject(d, "dropped_table_entries", (double)st.table_dropped);
    cJSON_AddNumberToObject(d, "types", (double)st.types);
    cJSON_AddNumberToObject(d, "overflow_events", (double)st.overflow_events);
    cJSON_AddNumberToObject(d, "table_resets", (double)st.table_resets);
    cJSON_AddNumberToObject(d, "samples_without_message", (double)st.no_message);
    cJSON_AddStringToObject(d, "source", prof_exc_uses_events() ? "events" : "callback");
    cJSON_AddNumberToObject(d, "samples_per_s", g_cfg.exception_rate);
    if (has_type) {
        cJSON_AddStringToObject(o, "filter", type);
        static const char *const keys[PROF_NVALUES] = {"count", "samples", NULL};
        add_stacks(o, have_view ? &view : NULL, 0, keys, MAX_STACKS, u, neu);
    }
    if (have_view)
        prof_view_free(&view);
    free(rows);
    free(table);
    free(eu);
    free(u);
    free(type);
    return api_reply_json(out, 200, o);
}

/* ---- /api/v1/locks ---- */

struct lock_sum {
    const char *name, *site;
    int64_t v[PROF_NVALUES];
    size_t first, nrows; /* its rows in the (name-sorted) row array */
};

static int cmp_row_lock(const void *a, const void *b)
{
    const struct prof_wtab_row *x = a, *y = b;
    int c = strcmp(x->a, y->a);
    if (c)
        return c;
    return x->v[1] < y->v[1] ? 1 : x->v[1] > y->v[1] ? -1 : 0;
}

static int cmp_lock_sum(const void *a, const void *b)
{
    const struct lock_sum *x = a, *y = b;
    if (x->v[1] != y->v[1])
        return x->v[1] < y->v[1] ? 1 : -1;
    return strcmp(x->name, y->name);
}

static void add_histogram(cJSON *o, const struct prof_lock_window *w)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "histogram");
    for (int i = 0; i < PROF_LOCK_NHIST; i++) {
        cJSON *e = cJSON_CreateObject();
        char label[32];
        if (i < PROF_LOCK_NHIST - 1) {
            cJSON_AddNumberToObject(e, "le_ms", prof_lock_hist_le_ms[i]);
            snprintf(label, sizeof label, "<= %g ms", prof_lock_hist_le_ms[i]);
        } else {
            cJSON_AddNullToObject(e, "le_ms");
            snprintf(label, sizeof label, "> %g ms", prof_lock_hist_le_ms[i - 1]);
        }
        cJSON_AddStringToObject(e, "label", label);
        cJSON_AddNumberToObject(e, "count", (double)w->hist[i]);
        cJSON_AddItemToArray(arr, e);
    }
}

static void add_locks(cJSON *o, struct prof_wtab_row *rows, size_t n, long limit)
{
    cJSON *arr = cJSON_AddArrayToObject(o, "locks");
    qsort(rows, n, sizeof *rows, cmp_row_lock);
    struct lock_sum *ls = calloc(n ? n : 1, sizeof *ls);
    if (!ls)
        return;
    size_t nl = 0;
    for (size_t i = 0; i < n; i++) {
        if (!nl || strcmp(ls[nl - 1].name, rows[i].a)) {
            ls[nl].name = rows[i].a;
            ls[nl].site = rows[i].extra;
            ls[nl].first = i;
            nl++;
        }
        struct lock_sum *l = &ls[nl - 1];
        l->nrows++;
        for (int k = 0; k < PROF_NVALUES; k++)
            l->v[k] += rows[i].v[k];
    }
    qsort(ls, nl, sizeof *ls, cmp_lock_sum);
    for (size_t i = 0; i < nl && (long)i < limit; i++) {
        cJSON *e = cJSON_CreateObject();
        cJSON_AddStringToObject(e, "name", ls[i].name);
        cJSON_AddStringToObject(e, "site", ls[i].site);
        cJSON_AddNumberToObject(e, "wait_ns", (double)ls[i].v[1]);
        cJSON_AddNumberToObject(e, "count", (double)ls[i].v[0]);
        cJSON_AddNumberToObject(e, "samples", (double)ls[i].v[2]);
        cJSON *owners = cJSON_AddArrayToObject(e, "owners");
        for (size_t j = 0; j < ls[i].nrows && j < 32; j++) {
            const struct prof_wtab_row *row = &rows[ls[i].first + j];
            cJSON *ow = cJSON_CreateObject();
            char tid[24];
            snprintf(tid, sizeof tid, "%llu", (unsigned long long)row->n);
            cJSON_AddStringToObject(ow, "thread",
                                    row->b[0] ? row->b : row->n ? tid : "[unknown]");
            cJSON_AddNumberToObject(ow, "tid", (double)row->n);
            cJSON_AddNumberToObject(ow, "wait_ns", (double)row->v[1]);
            cJSON_AddNumberToObject(ow, "count", (double)row->v[0]);
            cJSON_AddItemToArray(owners, ow);
        }
        cJSON_AddItemToArray(arr, e);
    }
    free(ls);
}

int api_locks(const struct api_req *q, struct api_reply *out)
{
    double seconds;
    long limit;
    char *lock = malloc(128);
    if (!lock)
        return api_reply_error(out, 503, "out of memory");
    int has_lock;
    if (api_query_seconds(q, &seconds, out) < 0 ||
        api_query_long(q, "limit", 100, 1, 100000, &limit, out) < 0 ||
        (has_lock = api_query_str(q, "lock", lock, 128, out)) < 0) {
        free(lock);
        return 400;
    }
    has_lock = has_lock > 0 && lock[0];
    /* the stacks: the view before the counts no sample carries yet */
    struct prof_view view;
    int have_view = !prof_history_view(PK_LOCK, seconds, has_lock ? lock : NULL, &view, NULL);
    struct prof_wtab_row *table = NULL, *rows = NULL;
    struct prof_lock_unattributed *lu = NULL;
    size_t nt = 0, nlu = 0, n = 0;
    struct unattributed *u = NULL;
    if (!prof_lock_read(seconds, has_lock ? lock : NULL, &table, &nt, &lu, &nlu) &&
        (u = calloc(nlu ? nlu : 1, sizeof *u))) {
        for (size_t i = 0; i < nlu; i++)
            u[i] = (struct unattributed){.a = lu[i].lock, .b = lu[i].owner_name,
                                         .extra = lu[i].site, .n = lu[i].owner,
                                         .v = {lu[i].count, lu[i].wait_ns, 0},
                                         .frames = lu[i].frames, .nframes = lu[i].nframes,
                                         .sv = {lu[i].count, lu[i].wait_ns, 0}};
        rows = with_unattributed(table, nt, u, nlu, &n);
    }
    if (!rows) {
        free(table);
        free(lu);
        free(u);
        if (have_view)
            prof_view_free(&view);
        free(lock);
        return api_reply_error(out, 503, "out of memory");
    }
    struct prof_lock_window w;
    prof_lock_window(seconds, &w);
    struct prof_lock_stats st;
    prof_lock_get_stats(&st);

    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "seconds", seconds);
    add_span(o, prof_lock_table(), seconds);
    cJSON_AddBoolToObject(o, "enabled", (g_core.profiles & PROFILE_LOCK) != 0);
    cJSON_AddNumberToObject(o, "total_wait_ns", (double)w.wait_ns);
    cJSON_AddNumberToObject(o, "count", (double)w.count);
    int64_t samples = 0;
    for (size_t i = 0; i < n; i++)
        samples += rows[i].v[2];
    cJSON_AddNumberToObject(o, "samples", (double)samples);
    add_histogram(o, &w);
    add_locks(o, rows, n, limit);
    static const char *const keys[PROF_NVALUES] = {"count", "wait_ns", "samples"};
    add_stacks(o, have_view ? &view : NULL, 1, keys, MAX_STACKS, u, nlu);
    cJSON_AddNumberToObject(o, "dropped", (double)(st.dropped + st.table_dropped));
    cJSON *d = cJSON_AddObjectToObject(o, "profiler");
    cJSON_AddNumberToObject(d, "events", (double)st.events);
    cJSON_AddNumberToObject(d, "samples", (double)st.sampled);
    cJSON_AddNumberToObject(d, "dropped_samples", (double)st.dropped);
    cJSON_AddNumberToObject(d, "dropped_table_entries", (double)st.table_dropped);
    cJSON_AddNumberToObject(d, "locks", (double)st.locks);
    cJSON_AddNumberToObject(d, "overflow_events", (double)st.overflow);
    cJSON_AddNumberToObject(d, "table_resets", (double)st.table_resets);
    cJSON_AddNumberToObject(d, "unmatched_stops", (double)st.unmatched);
    cJSON_AddNumberToObject(d, "waits_not_remembered", (double)st.slots_full);
    cJSON_AddNumberToObject(d, "samples_per_s", g_cfg.lock_rate);
    if (has_lock)
        cJSON_AddStringToObject(o, "filter", lock);
    if (have_view)
        prof_view_free(&view);
    free(rows);
    free(table);
    free(lu);
    free(u);
    free(lock);
    return api_reply_json(out, 200, o);
}
