/*
 * prof_live_types.c - prof_live's clrscope-agg side: attaches each tracked object's type, thread
 * and stack to its slot (from the REC_LIVE records prof_alloc's row hands on), counts the deaths
 * the GC callbacks found, keeps a row per live type with 15 minutes of history, and judges every
 * 10 seconds which types look like leaks.
 *
 * Runs on clrscope-agg, with g_live.agg.lock held (the readers in prof_live_read.c take it too);
 * the summaries (live_collect, live_summarize) serve the readers as well, under the same lock;
 * live_types_start runs once, at Initialize.
 */
#include "prof_live.h"
#include "prof_live_int.h"

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_log.h"
#include "prof_typename.h"

#define HIST_STEP_S 10 /* seconds between two points of a type's history */

static uint32_t str_hash(const char *s)
{
    uint32_t h = 2166136261u;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 16777619u;
    return h;
}

/* g_live.agg.lock held: puts type idx (named) in the name index. */
static void type_hash_put(uint32_t idx)
{
    uint32_t h = str_hash(g_live.agg.types[idx].name) & (TYPE_HASH - 1);
    for (uint32_t i = 0; i < TYPE_HASH; i++) {
        uint32_t k = (h + i) & (TYPE_HASH - 1);
        if (!g_live.agg.type_hash[k]) {
            g_live.agg.type_hash[k] = idx + 1;
            return;
        }
    }
}

/* Row 0, "[other types]", shared by the types past MAX_TYPES. prof_live_init, before the module
 * is enabled. */
void live_types_start(void)
{
    g_live.agg.types[0].name = "[other types]";
    g_live.agg.ntypes = 1;
    type_hash_put(0); /* prof_typename's own "[other types]" is this row too */
}

/* g_live.agg.lock held. */
static uint32_t type_index(const char *name)
{
    uint32_t h = str_hash(name) & (TYPE_HASH - 1);
    for (uint32_t i = 0; i < TYPE_HASH; i++) {
        uint32_t k = (h + i) & (TYPE_HASH - 1);
        uint32_t v = g_live.agg.type_hash[k];
        if (!v) {
            uint32_t idx = g_live.agg.ntypes;
            if (idx >= MAX_TYPES) /* a row history_step gave back */
                for (idx = 1; idx < g_live.agg.ntypes && g_live.agg.types[idx].name; idx++)
                    ;
            if (idx >= MAX_TYPES)
                break;
            if (idx == g_live.agg.ntypes)
                g_live.agg.ntypes++;
            g_live.agg.types[idx].name = name;
            g_live.agg.type_hash[k] = idx + 1;
            return idx;
        }
        if (!strcmp(g_live.agg.types[v - 1].name, name))
            return v - 1;
    }
    prof_log_once(g_live.agg.types_full_logged, LOG_WARN, "more than %d live types at once; new "
                  "ones are shown as [other types] until idle types give their rows back",
                  MAX_TYPES - 1);
    return 0;
}

/* A slot's meta describes an object that is gone: count the death and free the stack. */
static void retire_meta(uint32_t i)
{
    struct live_meta *m = &g_live.agg.meta[i];
    struct live_slot *s = &g_live.tab.slots[i];
    int evicted = LD(&s->ended_seq) == m->seq && LD(&s->ended_reason) == END_EVICTED;
    if (!evicted) {
        g_live.agg.types[m->type].deaths++;
        g_live.agg.deaths++;
    }
    free(m->frames);
    memset(m, 0, sizeof *m);
}

static prof_live_factor_fn factor_fn; /* atomic: set once, at Initialize */

void prof_live_set_factor(prof_live_factor_fn fn)
{
    __atomic_store_n(&factor_fn, fn, __ATOMIC_RELEASE);
}

double live_mult(uint32_t i)
{
    struct live_meta *m = &g_live.agg.meta[i];
    const struct live_slot *s = &g_live.tab.slots[i];
    double mult = ldexp(1.0, (int)LD(&s->shift));
    if (m->factor > 0)
        return mult * m->factor;
    prof_live_factor_fn fn = __atomic_load_n(&factor_fn, __ATOMIC_ACQUIRE);
    double f = 1;
    if (fn && fn(LD(&s->t_alloc_ms) / 1000, &f))
        m->factor = f; /* (settled: the history tick's read keeps it within 10 s) */
    return mult * f;
}

int live_meta_current(uint32_t i)
{
    struct live_slot *s = &g_live.tab.slots[i];
    return g_live.agg.meta[i].seq && __atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == S_LIVE &&
           LD(&s->seq) == g_live.agg.meta[i].seq;
}

void prof_live_consume(const struct prof_rec *rec, const char **names, int n)
{
    if (!g_live.enabled || !rec->d)
        return;
    uint32_t slot = (uint32_t)(rec->d & 0xffffffffu) - 1;
    uint32_t seq = (uint32_t)(rec->d >> 32);
    if (slot >= g_live.cap)
        return;
    const char *label = prof_typename_of(rec->a, rec->text);
    const char **frames = n > 0 ? malloc((size_t)n * sizeof *frames) : NULL;
    if (frames)
        memcpy(frames, names, (size_t)n * sizeof *frames);
    pthread_mutex_lock(&g_live.agg.lock);
    uint32_t type = type_index(label);
    struct live_meta *m = &g_live.agg.meta[slot];
    if (m->seq)
        retire_meta(slot); /* the slot's previous object */
    g_live.agg.types[type].births++;
    struct live_slot *s = &g_live.tab.slots[slot];
    if (__atomic_load_n(&s->state, __ATOMIC_ACQUIRE) == S_LIVE && LD(&s->seq) == seq) {
        m->seq = seq;
        m->tid = rec->os_tid;
        m->type = type;
        m->frames = frames;
        m->nframes = frames ? (uint32_t)n : 0;
        frames = NULL;
    } else if (!(LD(&s->ended_seq) == seq && LD(&s->ended_reason) == END_EVICTED)) {
        g_live.agg.types[type].deaths++; /* collected before we got here */
        g_live.agg.deaths++;
    }
    pthread_mutex_unlock(&g_live.agg.lock);
    free(frames);
}

/* g_live.agg.lock held. Collects the current live objects (optionally of one type name). */
size_t live_collect(struct live_obj *out, double now, const char *filter)
{
    size_t n = 0;
    for (uint32_t i = 0; i < g_live.cap; i++) {
        if (!live_meta_current(i))
            continue;
        struct live_meta *m = &g_live.agg.meta[i];
        if (filter && strcmp(g_live.agg.types[m->type].name, filter))
            continue;
        struct live_slot *s = &g_live.tab.slots[i];
        double mult = live_mult(i);
        double t_alloc = (double)LD(&s->t_alloc_ms) / 1000.0;
        int64_t seen_ms = LD(&s->t_seen_ms);
        struct live_obj *o = &out[n];
        o->slot = i;
        o->type = m->type;
        o->age = now - t_alloc > 0 ? now - t_alloc : 0;
        o->seen = seen_ms ? (double)seen_ms / 1000.0 - t_alloc : 0;
        if (o->seen < 0)
            o->seen = 0;
        o->cw = ld_d(&s->count_w) * mult;
        o->bw = ld_d(&s->bytes_w) * mult;
        o->gcs = LD(&s->gcs);
        if (LD(&s->seq) != m->seq) /* reused while we read it */
            continue;
        n++;
    }
    return n;
}

int live_cmp_obj(const void *a, const void *b)
{
    const struct live_obj *x = a, *y = b;
    if (x->type != y->type)
        return x->type < y->type ? -1 : 1;
    return x->age < y->age ? -1 : x->age > y->age;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Weighted quantiles of values[0..n) (sorted ascending) with weights w. */
static struct prof_live_quant quantiles(const double *values, const double *w, size_t n)
{
    struct prof_live_quant q = {0, 0, 0};
    if (!n)
        return q;
    double total = 0;
    for (size_t i = 0; i < n; i++)
        total += w ? w[i] : 1;
    double acc = 0;
    int got50 = 0, got90 = 0;
    for (size_t i = 0; i < n; i++) {
        acc += w ? w[i] : 1;
        if (!got50 && acc >= 0.5 * total) {
            q.p50 = values[i];
            got50 = 1;
        }
        if (!got90 && acc >= 0.9 * total) {
            q.p90 = values[i];
            got90 = 1;
        }
    }
    q.max = values[n - 1];
    return q;
}

/* Aggregates one type's run objs[0..n) (sorted by age) into t; scratch holds 3n doubles. */
void live_summarize(const struct live_obj *objs, size_t n, double *scratch,
                    struct prof_live_type *t)
{
    double *v = scratch, *w = scratch + n, *g = scratch + 2 * n;
    t->count = t->bytes = 0;
    for (size_t i = 0; i < n; i++) {
        t->count += objs[i].cw;
        t->bytes += objs[i].bw;
        v[i] = objs[i].age;
        w[i] = objs[i].cw;
    }
    t->tracked = (uint32_t)n;
    t->age_s = quantiles(v, w, n);
    for (size_t i = 0; i < n; i++)
        v[i] = objs[i].seen;
    qsort(v, n, sizeof *v, cmp_double);
    t->seen_alive_s = quantiles(v, NULL, n);
    for (size_t i = 0; i < n; i++)
        g[i] = objs[i].gcs;
    qsort(g, n, sizeof *g, cmp_double);
    t->gcs_p50 = n ? (uint32_t)g[(n - 1) / 2] : 0;
    t->gcs_max = n ? (uint32_t)g[n - 1] : 0;
}

/*
 * The leak heuristic (g_live.agg.lock held), evaluated every HIST_STEP_S seconds over the last
 * leak_window_s seconds of the type's history (at least leak_min_s of it):
 *   - evidence: at least 3 sampled objects of the type were allocated in the window;
 *   - retention: the GC collected at most 20% as many tracked objects as were allocated;
 *   - growth: the estimated live count grew by at least 20%, with at least 3 objects tracked;
 *   - aging: the oldest live object aged by at least half the window (what was live at the start
 *     is still live), and the median age grew by at least a tenth of it (new samples keep the
 *     median of a leak well below the oldest age, so this only rules out a lone immortal).
 * A cache whose entries are replaced fails retention and aging (old entries die, ages reset);
 * garbage fails retention; a stable population fails growth.
 */
static void judge(struct live_type *t)
{
    t->leak = 0;
    t->reason[0] = 0;
    if (t->n < 3)
        return;
    const struct hist_point *last = &t->hist[(t->head + HIST_N - 1) % HIST_N];
    const struct hist_point *first = NULL;
    for (int k = t->n; k >= 1; k--) {
        const struct hist_point *p = &t->hist[(t->head + HIST_N - k) % HIST_N];
        if (last->t - p->t <= g_live.leak_window_s + 1e-6) {
            first = p;
            break;
        }
    }
    if (!first)
        return;
    double span = last->t - first->t;
    if (span + 1e-6 < g_live.leak_min_s)
        return;
    uint64_t births = last->births - first->births;
    uint64_t deaths = last->deaths - first->deaths;
    int evidence = births >= 3;
    int retained = (double)deaths <= 0.2 * (double)births;
    int growth = last->count > first->count && last->count >= 1.2 * first->count &&
                 last->tracked >= 3;
    int aging = last->maxage - first->maxage >= 0.5 * span &&
                last->p50 - first->p50 >= 0.1 * span;
    t->leak = evidence && retained && growth && aging;
    snprintf(t->reason, sizeof t->reason,
             "over %.0f s: live %.0f -> %.0f (tracked %u -> %u), %llu sampled, %llu collected, "
             "oldest %.0f -> %.0f s, median age %.0f -> %.0f s",
             span, first->count, last->count, first->tracked, last->tracked,
             (unsigned long long)births, (unsigned long long)deaths, (double)first->maxage,
             (double)last->maxage, (double)first->p50, (double)last->p50);
}

/* g_live.agg.lock held. With the type table 3/4 full, gives back the rows of types that have had
 * no tracked object and no new sample for the last IDLE_POINTS history points (and that no
 * slot's stack still names): over weeks, the types an app ever allocated (generic
 * instantiations, closures, async state machines) would fill the table, and every type first
 * seen after that would be "[other types]" for the process's life, a leak in it never flagged. */
#define IDLE_POINTS 6
static void recycle_types(const struct prof_live_type *sum)
{
    if (g_live.agg.ntypes < MAX_TYPES - MAX_TYPES / 4)
        return;
    uint8_t *named = calloc(MAX_TYPES, 1);
    if (!named)
        return;
    for (uint32_t i = 0; i < g_live.cap; i++)
        if (g_live.agg.meta[i].seq)
            named[g_live.agg.meta[i].type] = 1;
    int freed = 0;
    for (uint32_t k = 1; k < g_live.agg.ntypes; k++) {
        struct live_type *t = &g_live.agg.types[k];
        if (!t->name || named[k] || sum[k].tracked || t->n < IDLE_POINTS)
            continue;
        int idle = 1;
        for (int j = 1; j <= IDLE_POINTS && idle; j++) {
            const struct hist_point *p = &t->hist[(t->head + HIST_N - j) % HIST_N];
            idle = !p->tracked && p->births == t->births;
        }
        if (!idle)
            continue;
        memset(t, 0, sizeof *t);
        freed++;
    }
    if (freed) {
        memset(g_live.agg.type_hash, 0, sizeof g_live.agg.type_hash);
        for (uint32_t k = 0; k < g_live.agg.ntypes; k++)
            if (g_live.agg.types[k].name)
                type_hash_put(k);
        g_live.agg.types_recycled += (uint64_t)freed;
    }
    free(named);
}

/* g_live.agg.lock held: appends a history point for every type and re-judges it. */
static void history_step(double now)
{
    size_t cap = g_live.cap ? g_live.cap : 1;
    struct live_obj *objs = malloc(cap * sizeof *objs);
    double *scratch = malloc(3 * cap * sizeof *scratch);
    struct prof_live_type *sum = calloc(MAX_TYPES, sizeof *sum);
    if (!objs || !scratch || !sum)
        goto out;
    size_t n = live_collect(objs, now, NULL);
    qsort(objs, n, sizeof *objs, live_cmp_obj);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j < n && objs[j].type == objs[i].type)
            j++;
        live_summarize(objs + i, j - i, scratch, &sum[objs[i].type]);
        i = j;
    }
    for (uint32_t k = 0; k < g_live.agg.ntypes; k++) {
        struct live_type *t = &g_live.agg.types[k];
        if (!t->name || (!sum[k].tracked && !t->n && !t->births))
            continue;
        struct hist_point *p = &t->hist[t->head];
        p->t = now;
        p->count = sum[k].count;
        p->tracked = sum[k].tracked;
        p->p50 = (float)sum[k].age_s.p50;
        p->maxage = (float)sum[k].age_s.max;
        p->births = t->births;
        p->deaths = t->deaths;
        t->head = (t->head + 1) % HIST_N;
        if (t->n < HIST_N)
            t->n++;
        judge(t);
    }
    recycle_types(sum);
out:
    free(objs);
    free(scratch);
    free(sum);
}

void prof_live_tick(double now_unix)
{
    if (!g_live.enabled)
        return;
    pthread_mutex_lock(&g_live.agg.lock);
    for (uint32_t i = 0; i < g_live.cap; i++)
        if (g_live.agg.meta[i].seq && !live_meta_current(i))
            retire_meta(i);
    if (!g_live.agg.next_hist)
        g_live.agg.next_hist = now_unix + HIST_STEP_S;
    if (now_unix >= g_live.agg.next_hist) {
        history_step(now_unix);
        g_live.agg.next_hist += HIST_STEP_S;
        if (g_live.agg.next_hist < now_unix)
            g_live.agg.next_hist = now_unix + HIST_STEP_S;
    }
    pthread_mutex_unlock(&g_live.agg.lock);
}
