/* dd_profile.c - see dd_profile.h. */
#include "dd_profile.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "pprof_encoder.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_live.h"
#include "prof_pprof.h"
#include "prof_store.h"

#define MAX_PPROF_BYTES ((size_t)64 << 20) /* builder memory per profile */

#if defined(__x86_64__)
#define ARCH "x64"
#define TRIPLE "x86_64-unknown-linux-gnu"
#elif defined(__aarch64__)
#define ARCH "arm64"
#define TRIPLE "aarch64-unknown-linux-gnu"
#else
#define ARCH "unknown"
#define TRIPLE "unknown-linux-gnu"
#endif

/* One source of the combined pprof: a store kind (or -1 = live objects) and where its value
 * slots go; Datadog's names, from libdatadog's list of sample types. */
struct source {
    unsigned bit;
    int kind;
    const char *label_key;
    int nslots;
    struct {
        int slot;
        pprof_value_type type;
    } cols[2];
};

static const struct source g_sources[] = {
    {PROFILE_CPU, PK_CPU, NULL, 2,
     {{0, {"cpu-samples", "count"}}, {1, {"cpu", "nanoseconds"}}}},
    {PROFILE_WALL, PK_WALL, NULL, 1, {{1, {"wall", "nanoseconds"}}}},
    {PROFILE_ALLOC, PK_ALLOC, "allocation class", 2,
     {{0, {"alloc-samples", "count"}}, {1, {"alloc-size", "bytes"}}}},
    {PROFILE_EXCEPTIONS, PK_EXC, "exception type", 1, {{0, {"exception", "count"}}}},
    {PROFILE_LOCK, PK_LOCK, NULL, 2,
     {{0, {"lock-count", "count"}}, {1, {"lock-time", "nanoseconds"}}}},
    {PROFILE_LIVE, -1, "allocation class", 2,
     {{0, {"inuse-objects", "count"}}, {1, {"inuse-space", "bytes"}}}},
};
#define NSOURCES ((int)(sizeof g_sources / sizeof g_sources[0]))

/* Datadog's names for the profiler_list tag, in its order. */
static void profiler_list(unsigned on, char *out, size_t cap)
{
    static const struct {
        unsigned bit;
        const char *name;
    } names[] = {{PROFILE_WALL, "walltime"},     {PROFILE_CPU, "cpu"},
                 {PROFILE_EXCEPTIONS, "exceptions"}, {PROFILE_ALLOC, "allocations"},
                 {PROFILE_LOCK, "lock"},         {PROFILE_LIVE, "heap"}};
    size_t len = 0;
    out[0] = 0;
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (on & names[i].bit) {
            int w = snprintf(out + len, cap - len, "%s%s", len ? "_" : "", names[i].name);
            if (w < 0 || (size_t)w >= cap - len)
                break;
            len += (size_t)w;
        }
}

/* Replaces v->name by Datadog's structured frame names (one conversion per distinct name), in
 * the view's own memory. 0, or -1 (names left as they were) when out of memory. */
static int structure_names(struct prof_view *v)
{
    size_t cap = 16;
    while (cap < v->nnodes * 2)
        cap <<= 1;
    const char **keys = prof_scratch_calloc(&v->mem, cap, sizeof *keys);
    const char **vals = prof_scratch_calloc(&v->mem, cap, sizeof *vals);
    const char **names = prof_scratch_alloc(&v->mem, v->nnodes * sizeof *names);
    size_t total = 0;
    for (size_t i = 1; i < v->nnodes; i++)
        total += dd_frame_structured(v->name[i], NULL, 0) + 1;
    char *arena = prof_scratch_alloc(&v->mem, total + 1);
    if (!keys || !vals || !names || !arena) {
        prof_scratch_free(&v->mem, keys);
        prof_scratch_free(&v->mem, vals);
        prof_scratch_free(&v->mem, names);
        prof_scratch_free(&v->mem, arena);
        return -1;
    }
    size_t used = 0;
    names[0] = v->name[0];
    for (size_t i = 1; i < v->nnodes; i++) {
        const char *key = v->name[i];
        size_t h = ((uintptr_t)key >> 3) * 0x9E3779B97F4A7C15ull & (cap - 1);
        while (keys[h] && keys[h] != key)
            h = (h + 1) & (cap - 1);
        if (!keys[h]) {
            keys[h] = key;
            vals[h] = arena + used;
            used += dd_frame_structured(key, arena + used, total + 1 - used) + 1;
        }
        names[i] = vals[h];
    }
    prof_scratch_free(&v->mem, keys);
    prof_scratch_free(&v->mem, vals);
    v->name = names; /* the store's names stay in the view's memory until prof_view_free */
    return 0;
}

/* Adds one source's view; returns its number of rows, -1 on failure. */
static long add_source(pprof_builder *b, const struct source *s, int ncols, int first_col,
                       int64_t from_s, int64_t to_s, int structured)
{
    struct prof_view v;
    int rc = s->kind < 0 ? prof_live_view(NULL, &v)
                         : prof_store_view_range(s->kind, from_s, to_s, NULL, &v);
    if (rc)
        return -1;
    int map[PROF_NVALUES] = {-1, -1, -1};
    for (int k = 0; k < s->nslots; k++)
        map[s->cols[k].slot] = first_col + k;
    long rows = (long)v.nrows;
    if (v.nrows) {
        if (structured)
            structure_names(&v); /* failing, the names stay as they are */
        if (prof_pprof_add_view(b, &v, ncols, map, s->label_key) < 0)
            rows = -1;
    }
    prof_view_free(&v);
    return rows;
}

int dd_profile_build(int64_t from_s, int64_t to_s, double t_end, unsigned on, int structured,
                     struct prof_scratch *mem, unsigned char **out, size_t *len)
{
    pprof_value_type types[2 * NSOURCES];
    int ncols = 0;
    for (int i = 0; i < NSOURCES; i++)
        if (on & g_sources[i].bit)
            for (int k = 0; k < g_sources[i].nslots; k++)
                types[ncols++] = g_sources[i].cols[k].type;
    if (!ncols)
        return 1;
    int64_t period = 1000000000LL / (g_cfg.sampling_hz > 0 ? g_cfg.sampling_hz : 100);
    struct pprof_opts opts = {.max_bytes = MAX_PPROF_BYTES, .alloc = prof_scratch_resize,
                              .alloc_ctx = mem};
    pprof_builder *b = pprof_new_opts(types, ncols, (pprof_value_type){"RealTime", "Nanoseconds"},
                                      period, &opts);
    if (!b)
        return -1;
    /* the span event.json gives: to the end of to_s, or to t_end when the window is cut short
     * (the final one, at stop) */
    double end = t_end > (double)from_s && t_end < (double)(to_s + 1) ? t_end : (double)(to_s + 1);
    pprof_set_time(b, from_s * 1000000000LL, (int64_t)llround((end - (double)from_s) * 1e9));
    long rows = 0;
    int rc = 0;
    for (int i = 0, col = 0; i < NSOURCES; i++) {
        if (!(on & g_sources[i].bit))
            continue;
        long r = add_source(b, &g_sources[i], ncols, col, from_s, to_s, structured);
        if (r < 0)
            rc = -1;
        else
            rows += r;
        col += g_sources[i].nslots;
    }
    if (rc == 0 && rows == 0)
        rc = 1;
    if (rc == 0) {
        char comment[160];
        snprintf(comment, sizeof comment, "clrscope %s export of pid %d, runtime %s",
                 CLRSCOPE_VERSION, (int)g_core.pid, g_core.runtime_version);
        pprof_add_comment(b, comment);
        rc = pprof_finish(b, out, len);
    }
    pprof_free(b);
    return rc;
}

static int cpu_cores(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* tags_profiler, in libdatadog's order: fixed tags, user tags, per-upload tags, platform. */
static char *tags_profiler(const struct dd_config *c, unsigned on, uint64_t seq)
{
    size_t cap = 4096 + sizeof c->user_tags;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    char list[128];
    profiler_list(on, list, sizeof list);
    snprintf(t, cap,
             "language:dotnet,profiler_version:%s,process_architecture:" ARCH
             ",process_id:%d,host:%s,profiler_list:%s,runtime_os:linux%s%s,env:%s,version:%s,"
             "service:%s,runtime-id:%s,profile_seq:%llu,number_of_cpu_cores:%d,"
             "runtime_version:%s,runtime_platform:" TRIPLE,
             CLRSCOPE_VERSION, (int)g_core.pid, c->host, list, c->user_tags[0] ? "," : "",
             c->user_tags, c->env, c->version, c->service, c->runtime_id,
             (unsigned long long)seq, cpu_cores(),
             g_core.runtime_version[0] ? g_core.runtime_version : "unknown");
    return t;
}

char *dd_event_json(const struct dd_config *c, double t_from, double t_to, unsigned on,
                    uint64_t seq)
{
    char *tags = tags_profiler(c, on, seq);
    cJSON *e = cJSON_CreateObject();
    if (!tags || !e) {
        free(tags);
        cJSON_Delete(e);
        return NULL;
    }
    char ts[48];
    cJSON *att = cJSON_AddArrayToObject(e, "attachments");
    cJSON_AddItemToArray(att, cJSON_CreateString("profile.pprof"));
    cJSON_AddStringToObject(e, "tags_profiler", tags);
    free(tags);
    dd_rfc3339(t_from, ts, sizeof ts);
    cJSON_AddStringToObject(e, "start", ts);
    dd_rfc3339(t_to, ts, sizeof ts);
    cJSON_AddStringToObject(e, "end", ts);
    cJSON_AddStringToObject(e, "family", "dotnet");
    cJSON_AddStringToObject(e, "version", "4");
    cJSON *internal = cJSON_AddObjectToObject(e, "internal");
    cJSON_AddStringToObject(internal, "clrscope_version", CLRSCOPE_VERSION);
    cJSON *info = cJSON_AddObjectToObject(e, "info");
    cJSON *prof = cJSON_AddObjectToObject(info, "profiler");
    cJSON_AddStringToObject(prof, "name", "clrscope");
    cJSON_AddStringToObject(prof, "version", CLRSCOPE_VERSION);
    cJSON_AddStringToObject(prof, "activation", c->auto_enabled ? "auto" : "manual");
    cJSON *ssi = cJSON_AddObjectToObject(prof, "ssi");
    cJSON_AddStringToObject(ssi, "mechanism", "none");
    cJSON *rt = cJSON_AddObjectToObject(info, "runtime");
    cJSON_AddStringToObject(rt, "engine", ".NET");
    cJSON_AddStringToObject(rt, "version", g_core.runtime_version);
    cJSON_AddStringToObject(rt, "os", "linux");
    cJSON_AddStringToObject(rt, "runtime-id", c->runtime_id);
    dd_rfc3339(g_core.start_unix, ts, sizeof ts);
    cJSON_AddStringToObject(rt, "start_time", ts);
    char *s = cJSON_PrintUnformatted(e);
    cJSON_Delete(e);
    return s;
}
