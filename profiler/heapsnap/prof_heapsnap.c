/* prof_heapsnap.c - see prof_heapsnap.h: the request, the list of snapshots and its lock, and
 * clrscope-heap, which takes one snapshot through its steps and publishes what each step found
 * under that lock (the files it calls never take it).
 *
 * A snapshot, step by step:
 *   1. request (civetweb worker): one at a time and one per CLRSCOPE_DUMP_MIN_INTERVAL_S, the
 *      guards (hs_guards.c: heap size vs CLRSCOPE_DUMP_MAX_HEAP_MB, memory headroom vs. the
 *      estimated need), a record in the list, clrscope-heap started.
 *   2. clrscope-heap: dump directory checked and opened (hs_guards.c), address space reserved
 *      and the dump GC run with the heap-dump session open, its events collected on the GC
 *      threads (hs_session.c, hs_capture.c).
 *   3. clrscope-heap: graph, dominators, paths (hs_graph.c), type names (prof_symbols), the
 *      .gcdump file (hs_file.c, hs_gcdump.c), the per-type summary (hs_summary.c); then the files
 *      of exited processes (hs_tidy.c) and of this one's older snapshots (CLRSCOPE_DUMP_KEEP).
 */
#include "prof_heapsnap.h"
#include "hs_int.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "hs_capture.h"
#include "hs_graph.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_log.h"
#include "prof_scratch.h"
#include "prof_symbols.h"
#include "prof_unload.h"

/* The module's state: the list of snapshots and the thread that takes them. `lock` guards every
 * field but `abort` and `inited`; civetweb workers take it (the request, the delete, the readers
 * through prof_heapsnap_lock), clrscope-heap to publish, Shutdown in prof_heapsnap_stop, and no
 * runtime callback ever does. */
static struct heapsnap_state {
    pthread_mutex_t lock;
    struct hs_snapshot **snaps;  /* oldest first; freed only by the keep rule and delete */
    int nsnaps, cap_snaps;
    int next_id;                 /* the id of the next snapshot a request accepts, from 1 */
    struct hs_snapshot *running; /* claimed by a request, cleared when clrscope-heap publishes the
                                    snapshot done or failed (or the request is refused) */
    int64_t last_start_ns;       /* CLOCK_MONOTONIC of the latest accepted request, 0 = none */
    pthread_t worker;            /* the latest clrscope-heap */
    int worker_live;             /* `worker` still to be joined: by the next request, or by stop */
    int abort;                   /* atomic: set by prof_heapsnap_stop, read by the analysis */
    int inited;                  /* set by prof_heapsnap_init at Initialize, read by requests */
} heapsnap = {.lock = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

/* ---------------------------------------------------------------- helpers */

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
    pthread_mutex_lock(&heapsnap.lock);
    copy_str(s->error, sizeof s->error, msg);
    s->phase = "failed";
    s->duration_s = prof_unix_now() - s->t;
    __atomic_store_n(&s->status, HS_FAILED, __ATOMIC_RELEASE);
    if (heapsnap.running == s)
        heapsnap.running = NULL;
    int id = s->id; /* once unlocked, a new request's CLRSCOPE_DUMP_KEEP may free `s` */
    pthread_mutex_unlock(&heapsnap.lock);
    prof_log(LOG_WARN, "heap snapshot %d failed: %s", id, msg);
}

static void set_phase(struct hs_snapshot *s, const char *phase, unsigned permille)
{
    pthread_mutex_lock(&heapsnap.lock);
    s->phase = phase;
    pthread_mutex_unlock(&heapsnap.lock);
    __atomic_store_n(&s->progress, permille, __ATOMIC_RELAXED);
}

static void snapshot_free(struct hs_snapshot *s)
{
    if (!s)
        return;
    prof_scratch_release(&s->mem); /* rows, paths and the strings they own */
    free(s);
}

/* Whether a reader asked for `s` within HS_IN_USE_S of `now`. */
static int in_use(const struct hs_snapshot *s, int64_t now)
{
    return s->last_read_ns && now - s->last_read_ns < (int64_t)HS_IN_USE_S * 1000000000;
}

/* CLRSCOPE_DUMP_KEEP: while more are kept, the oldest snapshot no reader asked for in the last
 * HS_IN_USE_S goes; when every one was read as recently, the one read longest ago. The running
 * one stays. */
static void enforce_keep_locked(void)
{
    int keep = g_cfg.dump_keep > 0 ? g_cfg.dump_keep : 1;
    int64_t now = prof_now_ns();
    while (heapsnap.nsnaps > keep) {
        int victim = -1, lru = -1;
        for (int i = 0; i < heapsnap.nsnaps && victim < 0; i++) {
            const struct hs_snapshot *c = heapsnap.snaps[i];
            if (c == heapsnap.running)
                continue;
            if (!in_use(c, now))
                victim = i;
            else if (lru < 0 || c->last_read_ns < heapsnap.snaps[lru]->last_read_ns)
                lru = i;
        }
        if (victim < 0)
            victim = lru;
        if (victim < 0)
            return;
        struct hs_snapshot *s = heapsnap.snaps[victim];
        memmove(heapsnap.snaps + victim, heapsnap.snaps + victim + 1,
                (size_t)(heapsnap.nsnaps - victim - 1) * sizeof *heapsnap.snaps);
        heapsnap.nsnaps--;
        hs_file_remove(s);
        snapshot_free(s);
    }
}

/* ---------------------------------------------------------------- clrscope-heap */

/* Step 3: graph, names, file (in the dump directory open as `dirfd`, status `dst`), summary.
 * Takes over `cap`. 1 when the snapshot is done, 0 when it failed. */
static int analyse(struct hs_snapshot *s, struct heap_capture *cap, int dirfd,
                    const struct stat *dst)
{
    set_phase(s, "analyzing", 400);
    struct heap_graph *g = calloc(1, sizeof *g);
    if (!g) {
        hc_release(cap);
        snap_fail(s, "out of memory");
        return 0;
    }
    int64_t t0 = prof_now_ns();
    int rc = hg_index(g, cap, &heapsnap.abort, &s->progress, 400, 550);
    int64_t t1 = prof_now_ns();
    if (!rc)
        rc = hg_dominators(g, &heapsnap.abort, &s->progress, 550, 750);
    int64_t t2 = prof_now_ns();
    if (!rc)
        rc = hg_paths(g, &heapsnap.abort);
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
        return 0;
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
    char path[sizeof s->file];
    struct stat fst;
    int frc = hs_file_write(s, dirfd, g, tnames, tmods, path, sizeof path, &fst, ferr,
                            sizeof ferr);
    if (!frc) {
        pthread_mutex_lock(&heapsnap.lock); /* handlers read the name (prof_heapsnap_lock) */
        s->file_bytes = (uint64_t)fst.st_size;
        s->file_dev = (uint64_t)fst.st_dev;
        s->file_ino = (uint64_t)fst.st_ino;
        s->file_mtime_ns = (int64_t)fst.st_mtim.tv_sec * 1000000000 + fst.st_mtim.tv_nsec;
        s->dir_dev = (uint64_t)dst->st_dev;
        s->dir_ino = (uint64_t)dst->st_ino;
        snprintf(s->file, sizeof s->file, "%s", path);
        pthread_mutex_unlock(&heapsnap.lock);
    }
    int64_t t5 = prof_now_ns();
    int src = hs_summary_build(s, g, tnames);
    s->ms_write = (double)(t5 - t4) / 1e6;
    s->ms_summary = (double)(prof_now_ns() - t5) / 1e6;
    hg_free(g); /* tnames and tmods too */
    free(g);
    if (src || frc) {
        snap_fail(s, src ? "out of memory while summarising" : ferr);
        return 0;
    }
    /* The directory is tidied before the snapshot is published: a reader who sees "done"
     * finds the directory as CLRSCOPE_DUMP_KEEP leaves it. */
    hs_tidy_exited(dirfd, dst);
    pthread_mutex_lock(&heapsnap.lock);
    s->phase = "done";
    s->duration_s = prof_unix_now() - s->t;
    __atomic_store_n(&s->progress, 1000u, __ATOMIC_RELAXED);
    __atomic_store_n(&s->status, HS_DONE, __ATOMIC_RELEASE);
    heapsnap.running = NULL;
    enforce_keep_locked();
    prof_log(LOG_INFO, "heap snapshot %d: %llu objects, %.1f MB, written to %s in %.1f s", s->id,
             (unsigned long long)s->objects, (double)s->bytes / 1048576.0, s->file,
             s->duration_s); /* (under the lock: once unlocked, `s` may be freed) */
    pthread_mutex_unlock(&heapsnap.lock);
    return 1;
}

/* Steps 2 and 3; leaves the dump directory open in *dirfd (status *dst) when it could be had.
 * 1 when the snapshot is done. */
static int run_snapshot(struct hs_snapshot *s, int *dirfd, struct stat *dst)
{
    char err[256];
    char msg[400];
    *dirfd = hs_dump_dir_ready(dst, msg, sizeof msg);
    if (*dirfd < 0) {
        snap_fail(s, msg);
        return 0;
    }
    struct heap_capture *cap = hs_session_reserve((int64_t)s->heap_estimate);
    if (!cap) {
        hs_errtext(errno, err, sizeof err);
        snprintf(msg, sizeof msg, "cannot reserve address space for the snapshot: %.200s", err);
        snap_fail(s, msg);
        return 0;
    }
    set_phase(s, "collecting", 20);
    prof_unload_consumer(PROF_UNLOAD_HEAP, 1); /* until the types are named (analyse) */
    s->unload_epoch = prof_unload_epoch();
    if (hs_session_collect(s, cap, msg, sizeof msg)) { /* (the capture is gone) */
        prof_unload_consumer(PROF_UNLOAD_HEAP, 0);
        snap_fail(s, msg);
        return 0;
    }
    int done = analyse(s, cap, *dirfd, dst); /* hg_index takes the pages over, zeroes *cap */
    prof_unload_consumer(PROF_UNLOAD_HEAP, 0); /* (analyse may have failed before naming) */
    free(cap);
    return done;
}

static void *worker(void *arg)
{
    prof_name_thread("heap");
    int dirfd = -1;
    struct stat dst;
    int done = run_snapshot(arg, &dirfd, &dst); /* (`arg` may be freed once it is over) */
    if (dirfd >= 0) {
        if (!done) /* (a snapshot that failed for want of space frees some) */
            hs_tidy_exited(dirfd, &dst);
        close(dirfd);
    }
    if (!done) {
        pthread_mutex_lock(&heapsnap.lock);
        enforce_keep_locked();
        pthread_mutex_unlock(&heapsnap.lock);
    }
    return NULL;
}

/* ---------------------------------------------------------------- API side */

void prof_heapsnap_init(void)
{
    hs_session_init();
    heapsnap.inited = 1;
}

void prof_heapsnap_stop(void)
{
    __atomic_store_n(&heapsnap.abort, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&heapsnap.lock);
    int live = heapsnap.worker_live;
    pthread_t w = heapsnap.worker;
    heapsnap.worker_live = 0;
    pthread_mutex_unlock(&heapsnap.lock);
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
    if (!g_core.active || !heapsnap.inited || !(g_core.profiles & PROFILE_HEAP) ||
        g_core.info_version < 12 || prof_core_stopping()) {
        why->reason = HS_UNAVAILABLE;
        snprintf(why->message, sizeof why->message, "%s",
                 !(g_core.profiles & PROFILE_HEAP)
                     ? "heap snapshots are off (CLRSCOPE_PROFILES does not include heap)"
                     : "heap snapshots need a .NET 5+ runtime with clrscope active");
        return 0;
    }
    pthread_mutex_lock(&heapsnap.lock);
    if (heapsnap.running) {
        why->reason = HS_BUSY;
        why->running_id = heapsnap.running->id;
        if (heapsnap.running->id)
            snprintf(why->message, sizeof why->message, "heap snapshot %d is still running",
                     heapsnap.running->id);
        else
            snprintf(why->message, sizeof why->message, "a heap snapshot is starting");
        pthread_mutex_unlock(&heapsnap.lock);
        return 0;
    }
    int64_t now = prof_now_ns(), gap = (int64_t)g_cfg.dump_min_interval_s * 1000000000;
    if (heapsnap.last_start_ns && now - heapsnap.last_start_ns < gap) {
        int64_t wait = heapsnap.last_start_ns + gap - now;
        why->reason = HS_RATE_LIMITED;
        why->retry_after_s = (int)((wait + 999999999) / 1000000000);
        snprintf(why->message, sizeof why->message,
                 "at most one heap snapshot per %d s (CLRSCOPE_DUMP_MIN_INTERVAL_S): the last one "
                 "started %.0f s ago; the next may start in %d s", g_cfg.dump_min_interval_s,
                 (double)(now - heapsnap.last_start_ns) / 1e9, why->retry_after_s);
        pthread_mutex_unlock(&heapsnap.lock);
        return 0;
    }
    /* claim the slot before the (slow) guards so two requests cannot both pass */
    struct hs_snapshot *s = calloc(1, sizeof *s);
    if (!s) {
        pthread_mutex_unlock(&heapsnap.lock);
        why->reason = HS_UNAVAILABLE;
        snprintf(why->message, sizeof why->message, "out of memory");
        return 0;
    }
    s->status = HS_RUNNING;
    s->phase = "starting";
    s->t = prof_unix_now();
    s->forced = force;
    heapsnap.running = s;
    /* The previous worker has published its result but may still be on its way out, waiting
     * for the lock to apply CLRSCOPE_DUMP_KEEP: it is joined here, without the lock (joined
     * under it, a request made the moment the previous snapshot was done would deadlock). The
     * claimed slot keeps every other request from joining it too. */
    int join = heapsnap.worker_live;
    pthread_t prev = heapsnap.worker;
    heapsnap.worker_live = 0;
    pthread_mutex_unlock(&heapsnap.lock);
    if (join)
        pthread_join(prev, NULL);

    int64_t heap = 0;
    int refused = hs_guards_check(force, why, &heap);
    pthread_mutex_lock(&heapsnap.lock);
    if (!refused && __atomic_load_n(&heapsnap.abort, __ATOMIC_RELAXED)) { /* stop ran meanwhile */
        refused = 1;
        why->reason = HS_UNAVAILABLE;
        snprintf(why->message, sizeof why->message, "the process is shutting down");
    }
    if (refused) {
        heapsnap.running = NULL;
        pthread_mutex_unlock(&heapsnap.lock);
        free(s);
        return 0;
    }
    s->heap_estimate = (uint64_t)heap;
    s->id = heapsnap.next_id++;
    heapsnap.last_start_ns = prof_now_ns();
    if (heapsnap.nsnaps == heapsnap.cap_snaps) {
        int nc = heapsnap.cap_snaps ? heapsnap.cap_snaps * 2 : 8;
        struct hs_snapshot **ns = realloc(heapsnap.snaps, (size_t)nc * sizeof *ns);
        if (!ns) {
            heapsnap.running = NULL;
            pthread_mutex_unlock(&heapsnap.lock);
            free(s);
            why->reason = HS_UNAVAILABLE;
            snprintf(why->message, sizeof why->message, "out of memory");
            return 0;
        }
        heapsnap.snaps = ns;
        heapsnap.cap_snaps = nc;
    }
    heapsnap.snaps[heapsnap.nsnaps++] = s;
    enforce_keep_locked();
    if (pthread_create(&heapsnap.worker, NULL, worker, s)) {
        snprintf(s->error, sizeof s->error, "cannot start the snapshot thread");
        s->phase = "failed";
        s->status = HS_FAILED;
        heapsnap.running = NULL;
    } else {
        heapsnap.worker_live = 1;
    }
    int id = s->id;
    pthread_mutex_unlock(&heapsnap.lock);
    return id;
}

void prof_heapsnap_lock(void)
{
    pthread_mutex_lock(&heapsnap.lock);
}

void prof_heapsnap_unlock(void)
{
    pthread_mutex_unlock(&heapsnap.lock);
}

int prof_heapsnap_count(void)
{
    return heapsnap.nsnaps;
}

const struct hs_snapshot *prof_heapsnap_at(int i)
{
    return i >= 0 && i < heapsnap.nsnaps ? heapsnap.snaps[heapsnap.nsnaps - 1 - i] : NULL;
}

const struct hs_snapshot *prof_heapsnap_find(int id)
{
    for (int i = 0; i < heapsnap.nsnaps; i++)
        if (heapsnap.snaps[i]->id == id)
            return heapsnap.snaps[i];
    return NULL;
}

const struct hs_snapshot *prof_heapsnap_find_read(int id)
{
    struct hs_snapshot *s = (struct hs_snapshot *)prof_heapsnap_find(id);
    if (s)
        s->last_read_ns = prof_now_ns();
    return s;
}

int prof_heapsnap_open_file(const struct hs_snapshot *s, char *why, size_t whycap)
{
    int fd = hs_file_open(s, why, whycap);
    if (fd == -2 && !s->file_refused) {
        ((struct hs_snapshot *)s)->file_refused = 1;
        prof_log(LOG_WARN, "heap snapshot %d: its file is not served: %s", s->id, why);
    }
    return fd;
}

int prof_heapsnap_delete(int id)
{
    pthread_mutex_lock(&heapsnap.lock);
    int rc = -1;
    for (int i = 0; i < heapsnap.nsnaps; i++) {
        struct hs_snapshot *s = heapsnap.snaps[i];
        if (s->id != id)
            continue;
        if (s == heapsnap.running) {
            rc = -2;
            break;
        }
        memmove(heapsnap.snaps + i, heapsnap.snaps + i + 1,
                (size_t)(heapsnap.nsnaps - i - 1) * sizeof *heapsnap.snaps);
        heapsnap.nsnaps--;
        hs_file_remove(s);
        snapshot_free(s);
        rc = 0;
        break;
    }
    pthread_mutex_unlock(&heapsnap.lock);
    return rc;
}
