/* prof_heapsnap.c - see prof_heapsnap.h.
 *
 * A snapshot, step by step:
 *   1. request (civetweb worker): guards (hs_guards.c: heap size vs CLRSCOPE_DUMP_MAX_HEAP_MB,
 *      memory headroom vs. the estimated need), a record in the list, the clrscope-heap thread started.
 *   2. clrscope-heap: dump directory checked, address space reserved (hs_capture), state ARMED,
 *      then a short-lived clrscope-heapgc thread starts the runtime session with the GCHeapDump |
 *      GCHeapCollect keywords. The runtime runs a blocking gen2 GC inside that call and fires the
 *      bulk events synchronously on its GC thread(s); prof_heapsnap_on_event recognises the dump
 *      GC by its GCStart (Induced, depth 2, not background) and GCEnd (same count). The session is
 *      stopped from clrscope-heapgc after the GC, never from a callback; prof_events then resets
 *      the provider with a throw-away copy of each of its sessions (dotnet/runtime#121462). The
 *      session call runs on its own thread because the runtime may attach a runtime Thread object
 *      to the caller, after which SYNC profiler calls (type names) would be refused on that
 *      thread.
 *   3. clrscope-heap: graph, dominators, paths (hs_graph), type names (prof_symbols), the
 *      .gcdump file (hs_gcdump, to a temporary name, then renamed), the per-type summary.
 */
#include "prof_heapsnap.h"
#include "hs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <uchar.h>
#include <unistd.h>

#include "hs_capture.h"
#include "hs_gcdump.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_events.h"
#include "prof_files.h"
#include "prof_log.h"
#include "prof_symbols.h"
#include "prof_unload.h"

#define KW_GC 0x1ull
#define KW_GCHEAPDUMP 0x100000ull
#define KW_GCHEAPCOLLECT 0x800000ull
#define GC_REASON_INDUCED 1u
#define GC_TYPE_BACKGROUND 1u

enum cap_state { ST_IDLE, ST_ARMED, ST_CAPTURING, ST_DONE };

/* ---- shared with the GC-thread callback (atomics only) ---- */
static int g_state = ST_IDLE;
static int g_inflight;
static struct heap_capture *g_cap;
static uint32_t g_gc_count;
static int64_t g_gc_start_ns, g_gc_end_ns;

/* ---- the list ---- */
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static struct hs_snapshot **g_snaps; /* oldest first */
static int g_nsnaps, g_cap_snaps;
static int g_next_id = 1;
static struct hs_snapshot *g_running;
static pthread_t g_worker;
static int g_worker_live;
static int g_abort;
static int g_inited;

static const char16_t g_provider[] = u"Microsoft-Windows-DotNETRuntime";

/* ---------------------------------------------------------------- GC-thread side */

void prof_heapsnap_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len)
{
    int st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
    if (st != ST_ARMED && st != ST_CAPTURING)
        return;
    __atomic_fetch_add(&g_inflight, 1, __ATOMIC_ACQ_REL);
    st = __atomic_load_n(&g_state, __ATOMIC_ACQUIRE);
    struct heap_capture *c = __atomic_load_n(&g_cap, __ATOMIC_ACQUIRE);
    if (!c || (st != ST_ARMED && st != ST_CAPTURING))
        goto out;
    if (id == 1) {
        uint32_t count, depth, reason, type;
        if (st == ST_ARMED && hc_parse_gc_start(data, len, &count, &depth, &reason, &type) &&
            depth == 2 && reason == GC_REASON_INDUCED && type != GC_TYPE_BACKGROUND) {
            __atomic_store_n(&g_gc_count, count, __ATOMIC_RELAXED);
            __atomic_store_n(&g_gc_start_ns, prof_now_ns(), __ATOMIC_RELAXED);
            int expect = ST_ARMED;
            __atomic_compare_exchange_n(&g_state, &expect, ST_CAPTURING, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_ACQUIRE);
        }
    } else if (id == 2) {
        uint32_t count, depth;
        if (st == ST_CAPTURING && hc_parse_gc_end(data, len, &count, &depth) &&
            count == __atomic_load_n(&g_gc_count, __ATOMIC_RELAXED)) {
            /* An induced gen2 GC of the app's own that came first has no heap events: keep
             * waiting for ours (as dotnet-gcdump does). */
            int next = __atomic_load_n(&c->n_nodes, __ATOMIC_RELAXED) ? ST_DONE : ST_ARMED;
            __atomic_store_n(&g_gc_end_ns, prof_now_ns(), __ATOMIC_RELAXED);
            __atomic_store_n(&g_state, next, __ATOMIC_RELEASE);
        }
    } else if (st == ST_CAPTURING) {
        hc_on_event(c, id, version, data, len);
    }
out:
    __atomic_fetch_sub(&g_inflight, 1, __ATOMIC_ACQ_REL);
}

/* ---------------------------------------------------------------- helpers */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static void copy_str(char *dst, size_t cap, const char *src)
{
    size_t n = strlen(src);
    if (n >= cap)
        n = cap - 1;
    memcpy(dst, src, n);
    dst[n] = 0;
}

static void snap_fail(struct hs_snapshot *s, const char *msg)
{
    pthread_mutex_lock(&g_lock);
    copy_str(s->error, sizeof s->error, msg);
    s->phase = "failed";
    s->duration_s = prof_unix_now() - s->t;
    __atomic_store_n(&s->status, HS_FAILED, __ATOMIC_RELEASE);
    if (g_running == s)
        g_running = NULL;
    pthread_mutex_unlock(&g_lock);
    prof_log(LOG_WARN, "heap snapshot %d failed: %s", s->id, s->error);
}

static void set_phase(struct hs_snapshot *s, const char *phase, unsigned permille)
{
    pthread_mutex_lock(&g_lock);
    s->phase = phase;
    pthread_mutex_unlock(&g_lock);
    __atomic_store_n(&s->progress, permille, __ATOMIC_RELAXED);
}

static void snapshot_free(struct hs_snapshot *s)
{
    if (!s)
        return;
    prof_scratch_release(&s->mem); /* rows, paths and the strings they own */
    free(s);
}

/* ---------------------------------------------------------------- the session (clrscope-heapgc) */

struct gcjob {
    HRESULT hr_start, hr_force, hr_stop;
    int forced_gc;
};

static void *gc_thread(void *arg)
{
    struct gcjob *j = arg;
    prof_name_thread("heapgc");
    ICorProfilerInfo15 *info = g_core.info;
    UINT64 kw = KW_GCHEAPDUMP | KW_GCHEAPCOLLECT;
    if (prof_events_state() != 1 || !(g_core.profiles & PROFILE_HEAP))
        kw |= KW_GC; /* no main session to deliver GCStart/GCEnd */
    COR_PRF_EVENTPIPE_PROVIDER_CONFIG cfg = {
        .providerName = (const WCHAR *)g_provider, .keywords = kw,
        .loggingLevel = EP_LEVEL_VERBOSE, .filterData = NULL};
    EVENTPIPE_SESSION session = 0;
    j->hr_start = info->vt->EventPipeStartSession(info, 1, &cfg, 0, &session);
    if (j->hr_start < 0)
        return NULL;
    if (__atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == ST_ARMED) {
        /* This runtime did not collect on enable: ask for the GC with the session open. */
        j->forced_gc = 1;
        j->hr_force = info->vt->ForceGC(info);
    }
    for (int i = 0; i < 200 && __atomic_load_n(&g_state, __ATOMIC_ACQUIRE) == ST_CAPTURING; i++)
        sleep_ms(10);
    j->hr_stop = info->vt->EventPipeStopSession(info, session);
    prof_events_reapply_sessions();
    return NULL;
}

/* ---------------------------------------------------------------- analysis (clrscope-heap) */

struct filectx {
    const struct heap_graph *g;
    const char **tnames;       /* object type names, by hg type index */
    const char **tmods;        /* their modules' files (NULL: none known) */
    uint32_t ncat;             /* category pseudo nodes */
    uint32_t cats[HG_CAT_COUNT];
    uint32_t nstat;            /* static-variable pseudo nodes */
    char **stat_names;
    uint32_t *cat_start, *cat_kids; /* children of each category node (file indices) */
    uint32_t *stat_kid;        /* object index per static node */
    uint32_t root_kids[HG_CAT_COUNT];
    uint32_t base;             /* file index of object 0 */
    struct prof_scratch mem;   /* the tables above; file_layout_free gives them back */
};

/* File types: 1 = [.NET Roots], 2.. = one per category node, then one per static node, then the
 * object types. File nodes: 0 = root, 1..ncat categories, then statics, then objects. */
static const char *file_type_name(void *ctx, uint32_t t)
{
    struct filectx *f = ctx;
    if (t == 1)
        return "[.NET Roots]";
    t -= 2;
    if (t < f->ncat)
        return hg_cat_name(f->cats[t]);
    t -= f->ncat;
    if (t < f->nstat)
        return f->stat_names[t];
    t -= f->nstat;
    return f->tnames[t];
}

static const char *file_type_module(void *ctx, uint32_t t)
{
    struct filectx *f = ctx;
    if (!f->tmods || t < 2 + f->ncat + f->nstat)
        return NULL; /* the pseudo types have no module */
    return f->tmods[t - 2 - f->ncat - f->nstat];
}

static void file_node(void *ctx, uint32_t i, struct gd_node *out)
{
    struct filectx *f = ctx;
    memset(out, 0, sizeof *out);
    if (i == 0) {
        out->type = 1;
        out->kids = f->root_kids;
        out->nkids = f->ncat;
        return;
    }
    if (i <= f->ncat) {
        uint32_t c = i - 1;
        out->type = 2 + c;
        out->kids = f->cat_kids + f->cat_start[c];
        out->nkids = f->cat_start[c + 1] - f->cat_start[c];
        return;
    }
    if (i < f->base) {
        uint32_t s = i - 1 - f->ncat;
        out->type = 2 + f->ncat + s;
        out->kids = &f->stat_kid[s];
        out->nkids = 1;
        out->kid_bias = f->base;
        return;
    }
    const struct hg_node *nd = &f->g->nodes[i - f->base];
    out->type = 2 + f->ncat + f->nstat + nd->type;
    out->size = nd->size;
    out->addr = nd->addr;
    out->kids = f->g->edges + nd->first;
    out->nkids = nd->nedges;
    out->kid_bias = f->base;
}

/* "[static var NAME]": the event's TypeID is the value's type on current runtimes, not the
 * declaring type, so only the field name is shown; the path's next element is the value's type. */
static char *static_label(struct prof_scratch *mem, const struct heap_graph *g, uint32_t s)
{
    size_t n = strlen(g->statics[s].field) + 32;
    char *out = prof_scratch_alloc(mem, n);
    if (out)
        snprintf(out, n, "[%sstatic var %s]", (g->statics[s].flags & 1) ? "thread " : "",
                 g->statics[s].field);
    return out;
}

/* Builds the file's pseudo-node tables. Returns 0 or -1 (out of memory). */
static int file_layout(struct filectx *f, const struct heap_graph *g)
{
    memset(f->cats, 0xff, sizeof f->cats);
    uint32_t catnode[HG_CAT_COUNT];
    for (unsigned c = 0; c < HG_CAT_COUNT; c++) {
        catnode[c] = HG_NONE;
        if (c == HG_CAT_UNREACHABLE || !(g->root_cats & (1u << c)))
            continue;
        catnode[c] = f->ncat;
        f->cats[f->ncat] = c;
        f->root_kids[f->ncat] = f->ncat + 1;
        f->ncat++;
    }
    f->nstat = g->nstatics;
    f->base = 1 + f->ncat + f->nstat;
    f->stat_names = prof_scratch_calloc(&f->mem, f->nstat + 1, sizeof *f->stat_names);
    f->stat_kid = prof_scratch_calloc(&f->mem, f->nstat + 1, sizeof *f->stat_kid);
    f->cat_start = prof_scratch_calloc(&f->mem, f->ncat + 2, sizeof *f->cat_start);
    f->cat_kids = prof_scratch_calloc(&f->mem, (size_t)g->nroots + f->nstat + 1,
                                      sizeof *f->cat_kids);
    if (!f->stat_names || !f->stat_kid || !f->cat_start || !f->cat_kids)
        return -1;
    for (uint32_t s = 0; s < f->nstat; s++) {
        f->stat_names[s] = static_label(&f->mem, g, s);
        if (!f->stat_names[s])
            return -1;
        f->stat_kid[s] = g->statics[s].node;
    }
    /* children per category: the objects rooted there; for the two static categories, every
     * static-variable node (each holding its object) */
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t r = 0; r < g->nroots + f->nstat; r++) {
            uint32_t c, kid;
            if (r < g->nroots) {
                c = g->roots[r].label;
                if (c >= HG_CAT_COUNT)
                    continue; /* listed through its static node below */
                kid = f->base + g->roots[r].node;
            } else {
                uint32_t s = r - g->nroots;
                c = (g->statics[s].flags & 1) ? HG_CAT_THREAD_STATICS : HG_CAT_STATICS;
                kid = 1 + f->ncat + s;
            }
            uint32_t cn = catnode[c];
            if (cn == HG_NONE)
                continue;
            if (pass == 0)
                f->cat_start[cn + 1]++;
            else
                f->cat_kids[f->cat_start[cn]++] = kid;
        }
        if (pass == 0) {
            for (uint32_t c = 0; c < f->ncat; c++)
                f->cat_start[c + 1] += f->cat_start[c];
        } else {
            for (uint32_t c = f->ncat; c > 0; c--)
                f->cat_start[c] = f->cat_start[c - 1];
            f->cat_start[0] = 0;
        }
    }
    return 0;
}

static void file_layout_free(struct filectx *f)
{
    prof_scratch_release(&f->mem);
}

int prof_heapsnap_write_graph(FILE *f, const struct heap_graph *g, const char **tnames,
                              const char **tmods, const struct gd_meta *meta, char *err,
                              size_t errcap)
{
    struct filectx fc = {.g = g, .tnames = tnames, .tmods = tmods};
    int rc = file_layout(&fc, g);
    if (rc) {
        snprintf(err, errcap, "out of memory while writing the file");
    } else {
        struct gd_source src = {.ctx = &fc,
                                .ntypes = 1 + fc.ncat + fc.nstat + g->ntypes,
                                .type_name = file_type_name,
                                .type_module = file_type_module,
                                .nnodes = fc.base + g->n,
                                .root = 0,
                                .node = file_node};
        rc = gcdump_write(f, &src, meta, err, errcap);
    }
    file_layout_free(&fc);
    return rc;
}

static int write_file(struct hs_snapshot *s, const struct heap_graph *g, const char **tnames,
                      const char **tmods, char *err, size_t errcap)
{
    char e[128];
    char dir[sizeof g_cfg.dump_dir];
    snprintf(dir, sizeof dir, "%s", g_cfg.dump_dir);
    uint64_t need = (uint64_t)g->n * 14 + g->ne * 2 + (1u << 20);
    if (hs_disk_room(dir, need, err, errcap))
        return -1;
    char path[600], tmp[620];
    snprintf(path, sizeof path, "%.500s/clrscope-%d-%d.gcdump", dir, (int)g_core.pid, s->id);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int fd = prof_files_create(tmp, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        hs_errtext(errno, e, sizeof e);
        snprintf(err, errcap, "cannot write %.140s: %.90s", tmp, e);
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        return -1;
    }
    struct prof_scratch mem = {0}; /* the stream's buffer */
    char *iobuf = prof_scratch_alloc(&mem, 1 << 20);
    if (iobuf)
        setvbuf(f, iobuf, _IOFBF, 1 << 20);
    char host[128] = "";
    gethostname(host, sizeof host - 1);
    char log[200];
    snprintf(log, sizeof log, "clrscope in-process heap snapshot %d of pid %d", s->id,
             (int)g_core.pid);
    int64_t rss = hs_rss_bytes();
    struct gd_meta meta = {.process_name = g_core.process_name, .pid = (int32_t)g_core.pid,
                           .unix_time = s->t, .machine = host, .commit = rss > 0 ? rss : 0,
                           .working_set = rss > 0 ? rss : 0, .log = log, .tool = "clrscope"};
    int rc = prof_heapsnap_write_graph(f, g, tnames, tmods, &meta, err, errcap);
    if (fclose(f) && !rc) {
        hs_errtext(errno, e, sizeof e);
        snprintf(err, errcap, "cannot write %.140s: %.90s", tmp, e);
        rc = -1;
    }
    prof_scratch_release(&mem);
    if (!rc && rename(tmp, path)) {
        hs_errtext(errno, e, sizeof e);
        snprintf(err, errcap, "cannot rename %.140s: %.90s", tmp, e);
        rc = -1;
    }
    if (rc) {
        unlink(tmp);
        return -1;
    }
    struct stat st;
    int have = !stat(path, &st);
    pthread_mutex_lock(&g_lock); /* handlers read the name (prof_heapsnap_lock) */
    if (have)
        s->file_bytes = (uint64_t)st.st_size;
    snprintf(s->file, sizeof s->file, "%s", path);
    pthread_mutex_unlock(&g_lock);
    return 0;
}

struct namerow {
    const char *name;
    uint32_t t;
};

static int cmp_namerow(const void *a, const void *b)
{
    const struct namerow *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->t > y->t) - (x->t < y->t);
}

static int cmp_retained(const void *a, const void *b)
{
    const struct hs_row *x = a, *y = b;
    if (x->retained != y->retained)
        return x->retained < y->retained ? 1 : -1;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return strcmp(x->type, y->type);
}

/* The per-type table (types with the same name merged) and its root paths. */
static int build_summary(struct hs_snapshot *s, const struct heap_graph *g, const char **tnames)
{
    struct prof_scratch tmp = {0}; /* this function's own tables */
    struct namerow *nr = prof_scratch_calloc(&tmp, (size_t)g->ntypes + 1, sizeof *nr);
    s->rows = prof_scratch_calloc(&s->mem, (size_t)g->ntypes + 1, sizeof *s->rows);
    /* path strings: labels and type names; static labels are copied into `owned` */
    size_t owned_cap = 1, npv = 0;
    for (uint32_t t = 0; t < g->ntypes; t++)
        for (uint32_t k = 0; k < g->types[t].npaths; k++)
            npv += g->paths[g->types[t].path_at[k]];
    for (uint32_t i = 0; i < g->nstatics; i++)
        owned_cap += strlen(g->statics[i].field) + 300;
    s->pathv = prof_scratch_calloc(&s->mem, npv + 1, sizeof *s->pathv);
    s->owned = prof_scratch_alloc(&s->mem, owned_cap);
    /* static labels, once each */
    const char **slabel = prof_scratch_calloc(&tmp, g->nstatics + 1, sizeof *slabel);
    if (!nr || !s->rows || !s->pathv || !s->owned || !slabel) {
        prof_scratch_release(&tmp);
        return -1;
    }
    size_t used = 0;
    for (uint32_t i = 0; i < g->nstatics; i++) {
        char *l = static_label(&tmp, g, i);
        if (!l)
            continue;
        size_t n = strlen(l) + 1;
        if (used + n <= owned_cap) {
            memcpy(s->owned + used, l, n);
            slabel[i] = s->owned + used;
            used += n;
        }
    }
    for (uint32_t t = 0; t < g->ntypes; t++)
        nr[t] = (struct namerow){tnames[t], t};
    qsort(nr, g->ntypes, sizeof *nr, cmp_namerow);
    uint32_t nrows = 0;
    for (uint32_t i = 0; i < g->ntypes; i++) {
        const struct hg_type *ty = &g->types[nr[i].t];
        struct hs_row *row;
        if (nrows && !strcmp(s->rows[nrows - 1].type, nr[i].name)) {
            row = &s->rows[nrows - 1];
        } else {
            row = &s->rows[nrows++];
            row->type = nr[i].name;
        }
        row->count += ty->count;
        row->bytes += ty->bytes;
        row->retained += ty->retained;
        for (uint32_t k = 0; k < ty->npaths && row->npaths < HG_MAX_PATHS; k++) {
            const uint32_t *p = g->paths + ty->path_at[k];
            uint32_t len = p[0];
            struct hs_path *hp = &row->paths[row->npaths++];
            hp->at = s->npathv;
            hp->len = len;
            for (uint32_t e = 0; e < len; e++) {
                uint32_t v = p[1 + e];
                const char *str;
                if (e == 0)
                    str = v < HG_CAT_COUNT ? hg_cat_name(v)
                          : (v - HG_CAT_COUNT < g->nstatics && slabel[v - HG_CAT_COUNT])
                              ? slabel[v - HG_CAT_COUNT]
                              : "[static var]";
                else if (v == HG_PATH_ELLIPSIS)
                    str = "...";
                else
                    str = v < g->ntypes ? tnames[v] : "?";
                s->pathv[s->npathv++] = str;
            }
        }
    }
    prof_scratch_release(&tmp);
    qsort(s->rows, nrows, sizeof *s->rows, cmp_retained);
    s->nrows = nrows;
    return 0;
}

static void enforce_keep_locked(void)
{
    int keep = g_cfg.dump_keep > 0 ? g_cfg.dump_keep : 1;
    while (g_nsnaps > keep) {
        int victim = -1;
        for (int i = 0; i < g_nsnaps && victim < 0; i++)
            if (g_snaps[i] != g_running)
                victim = i;
        if (victim < 0)
            return;
        struct hs_snapshot *s = g_snaps[victim];
        memmove(g_snaps + victim, g_snaps + victim + 1,
                (size_t)(g_nsnaps - victim - 1) * sizeof *g_snaps);
        g_nsnaps--;
        if (s->file[0])
            unlink(s->file);
        snapshot_free(s);
    }
}

static int wait_inflight(void)
{
    for (int i = 0; i < 5000; i++) {
        if (!__atomic_load_n(&g_inflight, __ATOMIC_ACQUIRE))
            return 0;
        sleep_ms(1);
    }
    return -1;
}

static int reserve_for(struct heap_capture *cap, int64_t heap)
{
    /* Address space only (pages are committed when written): be generous. The generation
     * bounds can under-count (server GC); the resident set bounds the heap from above. */
    int64_t rss = hs_rss_bytes();
    uint64_t h = heap > 0 ? (uint64_t)heap : (uint64_t)g_cfg.dump_max_heap;
    if (rss > 0 && (uint64_t)rss > h)
        h = (uint64_t)rss;
    h += h / 2 + (64u << 20);
    uint64_t nodes = h / 24 + (1u << 20), edges = h / 8 + (4u << 20);
    if (nodes > 0x7ffffff0u)
        nodes = 0x7ffffff0u;
    if (edges > 0xfffffff0u)
        edges = 0xfffffff0u;
    return hc_reserve(cap, nodes, edges, 4u << 20, 32u << 20);
}

/* Steps 1-2: the dump GC and its events into `cap`. Returns 0, or -1 after failing `s`. */
static int collect(struct hs_snapshot *s, struct heap_capture *cap)
{
    char err[256];
    set_phase(s, "collecting", 20);
    prof_unload_consumer(PROF_UNLOAD_HEAP, 1); /* until the types are named (analyse) */
    s->unload_epoch = prof_unload_epoch();
    __atomic_store_n(&g_cap, cap, __ATOMIC_RELEASE);
    __atomic_store_n(&g_state, ST_ARMED, __ATOMIC_RELEASE);
    struct gcjob job = {0};
    pthread_t th;
    int started = !pthread_create(&th, NULL, gc_thread, &job);
    while (started) {
        /* progress while the world is stopped: bytes reported so far vs. the estimate */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 100 * 1000000L;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        if (!pthread_timedjoin_np(th, NULL, &ts))
            break;
        uint64_t b = __atomic_load_n(&cap->bytes, __ATOMIC_RELAXED);
        double frac = s->heap_estimate ? (double)b / (double)s->heap_estimate : 0;
        __atomic_store_n(&s->progress, 20 + (unsigned)(380 * (frac > 1 ? 1 : frac)),
                         __ATOMIC_RELAXED);
    }
    int st = __atomic_exchange_n(&g_state, ST_IDLE, __ATOMIC_ACQ_REL);
    if (wait_inflight()) {
        /* a callback is stuck inside the capture: leak it rather than free it under its feet */
        snap_fail(s, "the runtime's event callback did not finish; snapshot abandoned");
        return -1;
    }
    __atomic_store_n(&g_cap, NULL, __ATOMIC_RELEASE);
    s->gc_pause_ms = st == ST_DONE ? (double)(g_gc_end_ns - g_gc_start_ns) / 1e6 : 0;
    if (started && job.hr_start >= 0 && st == ST_DONE) {
        prof_log(LOG_DEBUG, "heap snapshot %d: %llu objects, %llu references, %llu roots (%llu "
                 "weak skipped), %llu statics, %llu other events, GC %.1f ms%s", s->id,
                 (unsigned long long)cap->n_nodes, (unsigned long long)cap->n_edges,
                 (unsigned long long)cap->n_roots, (unsigned long long)cap->weak_roots,
                 (unsigned long long)cap->n_statics, (unsigned long long)cap->other_events,
                 s->gc_pause_ms, job.forced_gc ? " (ForceGC)" : "");
        return 0;
    }
    if (!started)
        snprintf(err, sizeof err, "cannot start a thread");
    else if (job.hr_start < 0)
        snprintf(err, sizeof err, "the runtime refused the heap-dump session (0x%08x)",
                 (unsigned)job.hr_start);
    else if (st == ST_CAPTURING)
        snprintf(err, sizeof err, "the heap-dump GC did not finish");
    else
        snprintf(err, sizeof err, "the runtime ran no heap-dump GC (ForceGC 0x%08x)",
                 (unsigned)job.hr_force);
    snap_fail(s, err);
    return -1;
}

/* Step 3: graph, names, file, summary. Takes over `cap`. */
static void analyse(struct hs_snapshot *s, struct heap_capture *cap)
{
    set_phase(s, "analyzing", 400);
    struct heap_graph *g = calloc(1, sizeof *g);
    if (!g) {
        hc_release(cap);
        snap_fail(s, "out of memory");
        return;
    }
    int64_t t0 = prof_now_ns();
    int rc = hg_index(g, cap, &g_abort, &s->progress, 400, 550);
    int64_t t1 = prof_now_ns();
    if (!rc)
        rc = hg_dominators(g, &g_abort, &s->progress, 550, 750);
    int64_t t2 = prof_now_ns();
    if (!rc)
        rc = hg_paths(g, &g_abort);
    int64_t t3 = prof_now_ns();
    s->ms_index = (double)(t1 - t0) / 1e6;
    s->ms_dominators = (double)(t2 - t1) / 1e6;
    s->ms_paths = (double)(t3 - t2) / 1e6;
    const char **tnames =
        rc ? NULL : prof_scratch_calloc(&g->mem, (size_t)g->ntypes + 1, sizeof *tnames);
    if (rc || !tnames) {
        snap_fail(s, rc ? g->error : "out of memory");
        hg_free(g);
        free(g);
        return;
    }
    __atomic_store_n(&s->progress, 800u, __ATOMIC_RELAXED);
    /* NULL: no modules */
    const char **tmods = prof_scratch_calloc(&g->mem, (size_t)g->ntypes + 1, sizeof *tmods);
    /* a type whose module started unloading since the GC is named from the caches only; the
     * check is per type so that an unload does not hold up behind a long naming run */
    for (uint32_t t = 0; t < g->ntypes; t++) {
        int asking = prof_unload_enter(s->unload_epoch);
        tnames[t] = prof_symbols_class((ClassID)g->types[t].id);
        if (tmods)
            tmods[t] = prof_symbols_class_module((ClassID)g->types[t].id);
        if (asking)
            prof_unload_leave();
    }
    prof_unload_consumer(PROF_UNLOAD_HEAP, 0);
    s->ms_names = (double)(prof_now_ns() - t3) / 1e6;
    s->objects = g->n;
    s->bytes = g->bytes;
    s->references = g->ne - g->unresolved_edges;
    s->roots = g->nroots;
    s->unresolved_references = g->unresolved_edges;
    s->unreachable_objects = g->unreachable;
    s->unreachable_bytes = g->unreachable_bytes;
    s->approximate = g->approximate;
    prof_log(LOG_DEBUG, "heap snapshot %d: %llu roots unresolved, %u objects unreachable (%llu "
             "bytes), dominators in %d passes", s->id, (unsigned long long)g->unresolved_roots,
             g->unreachable, (unsigned long long)g->unreachable_bytes, g->iterations);
    set_phase(s, "writing", 850);
    char ferr[256] = "";
    int64_t t4 = prof_now_ns();
    int frc = write_file(s, g, tnames, tmods, ferr, sizeof ferr);
    int64_t t5 = prof_now_ns();
    int src = build_summary(s, g, tnames);
    s->ms_write = (double)(t5 - t4) / 1e6;
    s->ms_summary = (double)(prof_now_ns() - t5) / 1e6;
    hg_free(g); /* tnames and tmods too */
    free(g);
    if (src || frc) {
        snap_fail(s, src ? "out of memory while summarising" : ferr);
        return;
    }
    pthread_mutex_lock(&g_lock);
    s->phase = "done";
    s->duration_s = prof_unix_now() - s->t;
    __atomic_store_n(&s->progress, 1000u, __ATOMIC_RELAXED);
    __atomic_store_n(&s->status, HS_DONE, __ATOMIC_RELEASE);
    g_running = NULL;
    pthread_mutex_unlock(&g_lock);
    prof_log(LOG_INFO, "heap snapshot %d: %llu objects, %.1f MB, written to %s in %.1f s", s->id,
             (unsigned long long)s->objects, (double)s->bytes / 1048576.0, s->file,
             s->duration_s);
}

static void run_snapshot(struct hs_snapshot *s)
{
    char err[256];
    char msg[400];
    if (hs_dump_dir_ready(msg, sizeof msg)) {
        snap_fail(s, msg);
        return;
    }
    struct heap_capture *cap = calloc(1, sizeof *cap);
    if (!cap || reserve_for(cap, (int64_t)s->heap_estimate)) {
        hs_errtext(errno, err, sizeof err);
        free(cap);
        snprintf(msg, sizeof msg, "cannot reserve address space for the snapshot: %.200s", err);
        snap_fail(s, msg);
        return;
    }
    if (collect(s, cap)) {
        prof_unload_consumer(PROF_UNLOAD_HEAP, 0);
        if (!__atomic_load_n(&g_cap, __ATOMIC_ACQUIRE)) {
            hc_release(cap);
            free(cap);
        }
        return;
    }
    analyse(s, cap); /* hg_index takes the capture's pages over and zeroes *cap */
    prof_unload_consumer(PROF_UNLOAD_HEAP, 0); /* (analyse may have failed before naming) */
    free(cap);
}

static void *worker(void *arg)
{
    prof_name_thread("heap");
    run_snapshot(arg);
    hs_tidy_exited();
    pthread_mutex_lock(&g_lock);
    enforce_keep_locked();
    pthread_mutex_unlock(&g_lock);
    return NULL;
}

/* ---------------------------------------------------------------- API side */

void prof_heapsnap_init(void)
{
    g_inited = 1;
}

void prof_heapsnap_stop(void)
{
    __atomic_store_n(&g_abort, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&g_lock);
    int live = g_worker_live;
    pthread_t w = g_worker;
    g_worker_live = 0;
    pthread_mutex_unlock(&g_lock);
    if (live) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 2;
        if (pthread_timedjoin_np(w, NULL, &ts))
            pthread_detach(w); /* still inside the runtime: let the process exit around it */
    }
}

int prof_heapsnap_request(int force, struct hs_refusal *why)
{
    memset(why, 0, sizeof *why);
    why->heap_bytes = why->limit_bytes = why->available_bytes = why->needed_bytes = -1;
    if (!g_core.active || !g_inited || !(g_core.profiles & PROFILE_HEAP) || g_core.info_version < 12 ||
        prof_core_stopping()) {
        why->reason = HS_UNAVAILABLE;
        snprintf(why->message, sizeof why->message, "%s",
                 !(g_core.profiles & PROFILE_HEAP)
                     ? "heap snapshots are off (CLRSCOPE_PROFILES does not include heap)"
                     : "heap snapshots need a .NET 5+ runtime with clrscope active");
        return 0;
    }
    pthread_mutex_lock(&g_lock);
    if (g_running) {
        why->reason = HS_BUSY;
        why->running_id = g_running->id;
        if (g_running->id)
            snprintf(why->message, sizeof why->message, "heap snapshot %d is still running",
                     g_running->id);
        else
            snprintf(why->message, sizeof why->message, "a heap snapshot is starting");
        pthread_mutex_unlock(&g_lock);
        return 0;
    }
    /* claim the slot before the (slow) guards so two requests cannot both pass */
    struct hs_snapshot *s = calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_unlock(&g_lock);
        why->reason = HS_UNAVAILABLE;
        snprintf(why->message, sizeof why->message, "out of memory");
        return 0;
    }
    s->status = HS_RUNNING;
    s->phase = "starting";
    s->t = prof_unix_now();
    s->forced = force;
    g_running = s;
    /* The previous worker has published its result but may still be on its way out, waiting
     * for g_lock to apply CLRSCOPE_DUMP_KEEP: it is joined here, without the lock (joining it
     * under the lock deadlocked a request made the moment the previous snapshot was done).
     * The claimed slot keeps every other request from joining it too. */
    int join = g_worker_live;
    pthread_t prev = g_worker;
    g_worker_live = 0;
    pthread_mutex_unlock(&g_lock);
    if (join)
        pthread_join(prev, NULL);

    int64_t heap = 0;
    int refused = hs_guards_check(force, why, &heap);
    pthread_mutex_lock(&g_lock);
    if (!refused && __atomic_load_n(&g_abort, __ATOMIC_RELAXED)) { /* stop ran meanwhile */
        refused = 1;
        why->reason = HS_UNAVAILABLE;
        snprintf(why->message, sizeof why->message, "the process is shutting down");
    }
    if (refused) {
        g_running = NULL;
        pthread_mutex_unlock(&g_lock);
        free(s);
        return 0;
    }
    s->heap_estimate = (uint64_t)heap;
    s->id = g_next_id++;
    if (g_nsnaps == g_cap_snaps) {
        int nc = g_cap_snaps ? g_cap_snaps * 2 : 8;
        struct hs_snapshot **ns = realloc(g_snaps, (size_t)nc * sizeof *ns);
        if (!ns) {
            g_running = NULL;
            pthread_mutex_unlock(&g_lock);
            free(s);
            why->reason = HS_UNAVAILABLE;
            snprintf(why->message, sizeof why->message, "out of memory");
            return 0;
        }
        g_snaps = ns;
        g_cap_snaps = nc;
    }
    g_snaps[g_nsnaps++] = s;
    enforce_keep_locked();
    if (pthread_create(&g_worker, NULL, worker, s)) {
        snprintf(s->error, sizeof s->error, "cannot start the snapshot thread");
        s->phase = "failed";
        s->status = HS_FAILED;
        g_running = NULL;
    } else {
        g_worker_live = 1;
    }
    int id = s->id;
    pthread_mutex_unlock(&g_lock);
    return id;
}

void prof_heapsnap_lock(void)
{
    pthread_mutex_lock(&g_lock);
}

void prof_heapsnap_unlock(void)
{
    pthread_mutex_unlock(&g_lock);
}

int prof_heapsnap_count(void)
{
    return g_nsnaps;
}

const struct hs_snapshot *prof_heapsnap_at(int i)
{
    return i >= 0 && i < g_nsnaps ? g_snaps[g_nsnaps - 1 - i] : NULL;
}

const struct hs_snapshot *prof_heapsnap_find(int id)
{
    for (int i = 0; i < g_nsnaps; i++)
        if (g_snaps[i]->id == id)
            return g_snaps[i];
    return NULL;
}

int prof_heapsnap_delete(int id)
{
    pthread_mutex_lock(&g_lock);
    int rc = -1;
    for (int i = 0; i < g_nsnaps; i++) {
        struct hs_snapshot *s = g_snaps[i];
        if (s->id != id)
            continue;
        if (s == g_running) {
            rc = -2;
            break;
        }
        memmove(g_snaps + i, g_snaps + i + 1, (size_t)(g_nsnaps - i - 1) * sizeof *g_snaps);
        g_nsnaps--;
        if (s->file[0])
            unlink(s->file);
        snapshot_free(s);
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&g_lock);
    return rc;
}
