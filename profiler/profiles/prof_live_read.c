/*
 * prof_live_read.c - prof_live's readers, on API threads: the /api/v1/live table, the call-path
 * view of the live objects' stacks and their pprof samples, each copied out under
 * g_live.agg.lock (clrscope-agg holds it only to attach records and once a second).
 */
#include "prof_live.h"
#include "prof_live_int.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_core.h"

int prof_live_report(struct prof_live_report *out)
{
    memset(out, 0, sizeof *out);
    out->enabled = g_live.enabled;
    out->disabled_reason = g_live.why_off;
    out->cap = g_live.cap;
    out->untracked = LD(&g_live.tab.untracked);
    out->overflow = LD(&g_live.tab.overflow);
    out->handle_failures = LD(&g_live.tab.handle_failures);
    out->sampling_shift = LD(&g_live.tab.shift);
    out->gcs = LD(&g_live.tab.gcs);
    out->capped = out->sampling_shift > 0 || LD(&g_live.tab.full_events) > 0 || out->overflow > 0;
    out->leak_window_s = g_live.leak_window_s;
    out->leak_min_s = g_live.leak_min_s;
    if (!g_live.enabled)
        return 0;
    double now = prof_unix_now();
    struct live_obj *objs = malloc((size_t)g_live.cap * sizeof *objs);
    double *scratch = malloc(3 * (size_t)g_live.cap * sizeof *scratch);
    out->types = calloc(MAX_TYPES, sizeof *out->types);
    if (!objs || !scratch || !out->types) {
        free(objs);
        free(scratch);
        free(out->types);
        out->types = NULL;
        return -1;
    }
    int rc = 0;
    pthread_mutex_lock(&g_live.agg.lock);
    out->deaths = g_live.agg.deaths;
    out->types_recycled = g_live.agg.types_recycled;
    size_t n = live_collect(objs, now, NULL);
    out->tracked = (uint32_t)n;
    qsort(objs, n, sizeof *objs, live_cmp_obj);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && objs[j].type == objs[i].type)
            j++;
        struct live_type *src = &g_live.agg.types[objs[i].type];
        struct prof_live_type *t = &out->types[out->ntypes++];
        t->type = src->name;
        live_summarize(objs + i, j - i, scratch, t);
        t->leak_suspect = src->leak;
        snprintf(t->leak_reason, sizeof t->leak_reason, "%s", src->reason);
        t->hist = src->n ? malloc((size_t)src->n * sizeof *t->hist) : NULL;
        if (src->n && !t->hist)
            rc = -1;
        for (int k = 0; t->hist && k < src->n; k++) {
            const struct hist_point *p = &src->hist[(src->head + HIST_N - src->n + k) % HIST_N];
            t->hist[k].t = p->t;
            t->hist[k].count = p->count;
        }
        t->nhist = t->hist ? src->n : 0;
        i = j;
    }
    pthread_mutex_unlock(&g_live.agg.lock);
    free(objs);
    free(scratch);
    /* by estimated bytes, descending (insertion sort: at most MAX_TYPES rows) */
    for (size_t i = 1; i < out->ntypes; i++) {
        struct prof_live_type key = out->types[i];
        size_t j = i;
        while (j > 0 && out->types[j - 1].bytes < key.bytes) {
            out->types[j] = out->types[j - 1];
            j--;
        }
        out->types[j] = key;
    }
    return rc;
}

void prof_live_report_free(struct prof_live_report *r)
{
    for (size_t i = 0; r->types && i < r->ntypes; i++)
        free(r->types[i].hist);
    free(r->types);
    r->types = NULL;
    r->ntypes = 0;
}

/* ---- views: a call-path trie built from the live objects' stacks ---- */

struct trie {
    uint32_t *parent;
    const char **name;
    size_t n, cap;
    uint32_t *hash; /* node + 1 */
    size_t hcap;
};

static uint32_t trie_child(struct trie *t, uint32_t parent, const char *name)
{
    uint64_t h = ((uint64_t)(uintptr_t)name * 0x9E3779B97F4A7C15ull) ^ (parent * 0xC2B2AE3Dull);
    size_t k = (size_t)(h >> 17) & (t->hcap - 1);
    for (;;) {
        uint32_t v = t->hash[k];
        if (!v)
            break;
        if (t->parent[v - 1] == parent && t->name[v - 1] == name)
            return v - 1;
        k = (k + 1) & (t->hcap - 1);
    }
    if (t->n >= t->cap)
        return parent; /* cannot happen: cap counts every frame */
    uint32_t node = (uint32_t)t->n++;
    t->parent[node] = parent;
    t->name[node] = name;
    t->hash[k] = node + 1;
    return node;
}

int prof_live_view(const char *filter, struct prof_view *out)
{
    memset(out, 0, sizeof *out);
    out->kind = -1;
    out->t_from = out->t_to = prof_unix_now();
    int rc = -1;
    struct trie t = {0};
    pthread_mutex_lock(&g_live.agg.lock);
    size_t frames = 1, objs = 0;
    for (uint32_t i = 0; g_live.enabled && i < g_live.cap; i++)
        if (live_meta_current(i)) {
            frames += g_live.agg.meta[i].nframes;
            objs++;
        }
    t.cap = frames;
    t.hcap = 16;
    while (t.hcap < 2 * frames)
        t.hcap <<= 1;
    t.parent = prof_scratch_alloc(&out->mem, t.cap * sizeof *t.parent);
    t.name = prof_scratch_alloc(&out->mem, t.cap * sizeof *t.name);
    t.hash = prof_scratch_calloc(&out->mem, t.hcap, sizeof *t.hash);
    out->rows = prof_scratch_alloc(&out->mem, (objs ? objs : 1) * sizeof *out->rows);
    if (!t.parent || !t.name || !t.hash || !out->rows)
        goto unlock;
    t.parent[0] = 0;
    t.name[0] = "all";
    t.n = 1;
    for (uint32_t i = 0; g_live.enabled && i < g_live.cap; i++) {
        if (!live_meta_current(i))
            continue;
        struct live_meta *m = &g_live.agg.meta[i];
        const char *type = g_live.agg.types[m->type].name;
        if (filter && strcmp(type, filter))
            continue;
        struct live_slot *s = &g_live.tab.slots[i];
        uint32_t node = 0;
        for (uint32_t f = 0; f < m->nframes; f++)
            node = trie_child(&t, node, m->frames[f]);
        double mult = live_mult(i);
        struct prof_row *r = &out->rows[out->nrows++];
        r->node = node;
        r->tid = m->tid;
        r->label = type;
        r->v[0] = llround(ld_d(&s->count_w) * mult);
        r->v[1] = llround(ld_d(&s->bytes_w) * mult);
        r->v[2] = 1;
    }
    rc = 0;
unlock:
    pthread_mutex_unlock(&g_live.agg.lock);
    prof_scratch_free(&out->mem, t.hash);
    if (rc) {
        prof_view_free(out);
        return -1;
    }
    out->parent = t.parent;
    out->name = t.name;
    out->nnodes = t.n;
    return 0;
}

int prof_live_pprof_add(pprof_builder *b, int ncols, const int slot_to_col[PROF_NVALUES],
                        const char *label_key)
{
    const char **leaf_first = malloc((REC_MAX_FRAMES + 2) * sizeof *leaf_first);
    int64_t *vals = calloc((size_t)(ncols > 0 ? ncols : 1), sizeof *vals);
    if (!leaf_first || !vals) {
        free(leaf_first);
        free(vals);
        return -1;
    }
    int rc = 0;
    double now = prof_unix_now();
    pthread_mutex_lock(&g_live.agg.lock);
    for (uint32_t i = 0; g_live.enabled && i < g_live.cap; i++) {
        if (!live_meta_current(i))
            continue;
        struct live_meta *m = &g_live.agg.meta[i];
        struct live_slot *s = &g_live.tab.slots[i];
        int n = 0;
        for (uint32_t f = m->nframes; f > 0 && n < REC_MAX_FRAMES + 2; f--)
            leaf_first[n++] = m->frames[f - 1];
        double mult = live_mult(i);
        int64_t v[PROF_NVALUES] = {llround(ld_d(&s->count_w) * mult),
                                   llround(ld_d(&s->bytes_w) * mult), 1};
        memset(vals, 0, (size_t)ncols * sizeof *vals);
        for (int k = 0; k < PROF_NVALUES; k++)
            if (slot_to_col[k] >= 0 && slot_to_col[k] < ncols)
                vals[slot_to_col[k]] += v[k];
        char tid[16];
        snprintf(tid, sizeof tid, "%u", m->tid);
        double age = now - (double)LD(&s->t_alloc_ms) / 1000.0;
        const char *keys[4] = {label_key ? label_key : "object type", "thread id", "age",
                               "gcs survived"};
        const char *strs[4] = {g_live.agg.types[m->type].name, tid, NULL, NULL};
        int64_t nums[4] = {0, 0, age > 0 ? (int64_t)age : 0, (int64_t)LD(&s->gcs)};
        const char *units[4] = {NULL, NULL, "seconds", "count"};
        if (pprof_add_sample_ex(b, leaf_first, n, vals, keys, strs, nums, units, 4) < 0)
            rc = -1;
    }
    pthread_mutex_unlock(&g_live.agg.lock);
    free(leaf_first);
    free(vals);
    return rc;
}
