/* prof_pprof.c - see prof_pprof.h. */
#include "prof_pprof.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_history.h"
#include "prof_live.h"
#include "prof_threads.h"

#define MAX_DEPTH 1024

static const struct prof_pprof_spec g_specs[] = {
    {"cpu", PK_CPU, {{"samples", "count"}, {"cpu", "nanoseconds"}}, 2, {0, 1, -1},
     {"cpu", "nanoseconds"}, NULL},
    {"wall", PK_WALL, {{"samples", "count"}, {"wall", "nanoseconds"}}, 2, {0, 1, -1},
     {"wall", "nanoseconds"}, NULL},
    {"alloc", PK_ALLOC, {{"alloc-samples", "count"}, {"alloc-size", "bytes"}}, 2, {0, 1, -1},
     {"space", "bytes"}, "allocation class"},
    {"exceptions", PK_EXC, {{"exception", "count"}}, 1, {0, -1, -1}, {"exception", "count"},
     "exception type"},
    {"lock", PK_LOCK, {{"lock-count", "count"}, {"lock-time", "nanoseconds"}}, 2, {0, 1, -1},
     {"lock-time", "nanoseconds"}, "lock"},
    {"heap", -1, {{"inuse-objects", "count"}, {"inuse-space", "bytes"}}, 2, {0, 1, -1},
     {"space", "bytes"}, "object type"},
};

const struct prof_pprof_spec *prof_pprof_spec(const char *name)
{
    for (size_t i = 0; i < sizeof g_specs / sizeof g_specs[0]; i++)
        if (!strcmp(g_specs[i].name, name))
            return &g_specs[i];
    return NULL;
}

struct tname {
    uint32_t tid;
    char name[48];
};

int prof_pprof_add_view(pprof_builder *b, const struct prof_view *v, int ncols,
                        const int slot_to_col[PROF_NVALUES], const char *label_key)
{
    const char **frames = malloc(MAX_DEPTH * sizeof *frames);
    int64_t *vals = malloc((size_t)ncols * sizeof *vals);
    struct tname *names = calloc(256, sizeof *names); /* small cache of thread names */
    if (!frames || !vals || !names) {
        free(frames);
        free(vals);
        free(names);
        return -1;
    }
    int rc = 0;
    for (size_t i = 0; i < v->nrows; i++) {
        const struct prof_row *r = &v->rows[i];
        int n = 0;
        for (uint32_t node = r->node; node != 0 && n < MAX_DEPTH; node = v->parent[node])
            frames[n++] = v->name[node];
        memset(vals, 0, (size_t)ncols * sizeof *vals);
        int any = 0;
        for (int k = 0; k < PROF_NVALUES; k++)
            if (slot_to_col[k] >= 0 && slot_to_col[k] < ncols) {
                vals[slot_to_col[k]] += r->v[k];
                any |= r->v[k] != 0;
            }
        if (!any)
            continue;
        const char *keys[3], *strs[3];
        int64_t nums[3] = {0, 0, 0};
        int nl = 0;
        char tidbuf[16];
        if (r->tid) {
            struct tname *c = &names[r->tid & 255];
            if (c->tid != r->tid) {
                c->tid = r->tid;
                prof_threads_name_of(r->tid, c->name, sizeof c->name);
            }
            snprintf(tidbuf, sizeof tidbuf, "%u", r->tid);
            keys[nl] = "thread id";
            strs[nl++] = tidbuf;
            if (c->name[0]) {
                keys[nl] = "thread name";
                strs[nl++] = c->name;
            }
        }
        if (label_key && r->label && r->label[0]) {
            keys[nl] = label_key;
            strs[nl++] = r->label;
        }
        if (n == 0)
            frames[n++] = "[unknown]";
        if (pprof_add_sample(b, frames, n, vals, keys, strs, nums, nl) < 0)
            rc = -1;
    }
    free(frames);
    free(vals);
    free(names);
    return rc;
}

int prof_pprof_build(const struct prof_pprof_spec *spec, int64_t from_s, int64_t to_s,
                     struct prof_scratch *mem, unsigned char **out, size_t *len)
{
    struct prof_view v;
    int rc = spec->kind < 0 ? prof_live_view(NULL, &v)
                            : prof_history_view_range(spec->kind, from_s, to_s, NULL, &v, NULL);
    if (rc)
        return -1;
    int64_t period = spec->kind == PK_CPU || spec->kind == PK_WALL
                         ? 1000000000LL / g_cfg.sampling_hz
                         : 1;
    /* gzip level 1: an answer to a waiting HTTP client, faster than zlib's default for a file
     * a little larger (~8 % on the demo's allocation profile); the agent export keeps the
     * default */
    const struct pprof_opts opts = {.gzip_level = 1, .alloc = prof_scratch_resize,
                                    .alloc_ctx = mem};
    pprof_builder *b = pprof_new_opts(spec->types, spec->ntypes, spec->period_type, period, &opts);
    if (!b) {
        prof_view_free(&v);
        return -1;
    }
    double now = prof_unix_now();
    double from = spec->kind < 0 ? now : v.t_from;
    double to = spec->kind < 0 ? from : v.t_to < now ? v.t_to : now; /* the current second: so far */
    pprof_set_time(b, (int64_t)(from * 1e9), (int64_t)((to - from) * 1e9));
    if (spec->ntypes > 1)
        pprof_set_default_sample_type(b, spec->types[1].type);
    /* The live heap gets one sample per tracked object, with its age as a label. */
    rc = spec->kind < 0 ? prof_live_pprof_add(b, spec->ntypes, spec->slot_to_col, spec->label_key)
                        : prof_pprof_add_view(b, &v, spec->ntypes, spec->slot_to_col,
                                              spec->label_key);
    char comment[128];
    snprintf(comment, sizeof comment, "clrscope %s profile of pid %d, runtime %s", spec->name,
             (int)g_core.pid, g_core.runtime_version);
    pprof_add_comment(b, comment);
    prof_view_free(&v);
    if (rc == 0)
        rc = pprof_finish(b, out, len);
    pprof_free(b);
    return rc;
}
