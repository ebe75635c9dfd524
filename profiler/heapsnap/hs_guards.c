/* hs_guards.c - what a heap snapshot may take, checked before it takes it: the GC heap's size
 * against CLRSCOPE_DUMP_MAX_HEAP_MB and the memory a snapshot needs against what is available
 * (at the request, on the civetweb worker that asks, which may wait for the runtime's allocation
 * counter's next interval: its period + 1.5 s at most, under a second at the default), the dump directory (on clrscope-heap before
 * the dump GC) and the disk space for the file (on clrscope-heap before writing it). Reads
 * /proc, the cgroup's files and the runtime's generation bounds; no state of its own. */
#include "hs_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "prof_alloc.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_files.h"
#include "prof_gc.h"
#include "prof_log.h"

/* Per-object cost of a snapshot, measured with bench/gcdump_bench.sh (bench/results.md):
 * the estimate of the extra memory a snapshot needs is heap bytes * NEED_PER_HEAP_BYTE + slack. */
#define NEED_PER_HEAP_BYTE 1.2
#define NEED_SLACK (64ll << 20)

static int64_t read_meminfo_kb(const char *key)
{
    FILE *f = fopen("/proc/meminfo", "re");
    if (!f)
        return -1;
    char line[256];
    int64_t v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, key, kl) && line[kl] == ':') {
            v = strtoll(line + kl + 1, NULL, 10);
            break;
        }
    }
    fclose(f);
    return v;
}

static int64_t read_number_file(const char *path)
{
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    char buf[64] = "";
    int64_t v = -1;
    if (fgets(buf, sizeof buf, f) && buf[0] >= '0' && buf[0] <= '9')
        v = strtoll(buf, NULL, 10);
    fclose(f);
    return v;
}

/* Free memory under the limit of cgroup `rel`'s memory files (limit, usage) below `root`, or
 * under the limit of the hierarchy's root (inside a container the cgroup root is the limit);
 * -1 when there is none. */
static int64_t cgroup_files_headroom(const char *root, const char *rel, const char *limit_file,
                                     const char *usage_file)
{
    char p1[800], p2[800];
    for (int up = 0; up < 2; up++) {
        const char *r = up ? "" : rel;
        snprintf(p1, sizeof p1, "%s%s/%s", root, r, limit_file);
        snprintf(p2, sizeof p2, "%s%s/%s", root, r, usage_file);
        int64_t limit = read_number_file(p1), usage = read_number_file(p2);
        if (limit > 0 && limit < (1ll << 60) && usage >= 0)
            return limit > usage ? limit - usage : 0;
    }
    return -1;
}

/* Free memory under this process's cgroup limit, or -1 when there is no limit. A host may mount
 * both hierarchies (the memory controller in v1, the v2 tree beside it, "0::/" in
 * /proc/self/cgroup): each is read, and the smaller headroom counts. */
static int64_t cgroup_headroom(void)
{
    FILE *f = fopen("/proc/self/cgroup", "re");
    if (!f)
        return -1;
    char line[600], rel1[600] = "", rel2[600] = "";
    int v1 = 0, v2 = 0;
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\n")] = 0;
        if (!strncmp(line, "0::", 3)) {
            snprintf(rel2, sizeof rel2, "%s", line + 3);
            v2 = 1;
        } else {
            const char *m = strstr(line, ":memory:");
            if (m) {
                snprintf(rel1, sizeof rel1, "%s", m + 8);
                v1 = 1;
            }
        }
    }
    fclose(f);
    int64_t a = v2 ? cgroup_files_headroom("/sys/fs/cgroup", rel2, "memory.max",
                                           "memory.current") : -1;
    int64_t b = v1 ? cgroup_files_headroom("/sys/fs/cgroup/memory", rel1,
                                           "memory.limit_in_bytes", "memory.usage_in_bytes") : -1;
    return a < 0 ? b : b < 0 ? a : a < b ? a : b;
}

static int64_t memory_headroom(void)
{
    int64_t avail = read_meminfo_kb("MemAvailable");
    if (avail >= 0)
        avail *= 1024;
    int64_t cg = cgroup_headroom();
    if (cg >= 0 && (avail < 0 || cg < avail))
        avail = cg;
    return avail;
}

int64_t hs_rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f)
        return -1;
    long size = 0, res = 0;
    int ok = fscanf(f, "%ld %ld", &size, &res) == 2;
    fclose(f);
    return ok ? (int64_t)res * sysconf(_SC_PAGESIZE) : -1;
}

/* Bytes in use in the GC heap as of the last GC (all generations, free space included; the
 * runtime updates the generation table at the end of each GC), -1 if unknown. */
static int64_t gc_heap_bytes(void)
{
    ICorProfilerInfo15 *info = g_core.info;
    if (!info || !info->vt->GetGenerationBounds)
        return -1;
    ULONG cap = 256, count = 0;
    COR_PRF_GC_GENERATION_RANGE *r = NULL;
    for (int attempt = 0; attempt < 3; attempt++) {
        free(r);
        r = malloc((size_t)cap * sizeof *r);
        if (!r)
            return -1;
        HRESULT hr = info->vt->GetGenerationBounds(info, cap, &count, r);
        if (hr < 0) {
            static int logged;
            prof_log_once(logged, LOG_DEBUG, "GetGenerationBounds failed (0x%08x)", (unsigned)hr);
            free(r);
            return -1;
        }
        if (count <= cap)
            break;
        cap = count + 64;
    }
    int64_t total = 0;
    for (ULONG i = 0; i < count && i < cap; i++)
        total += (int64_t)r[i].rangeLength;
    free(r);
    return total > 0 ? total : -1; /* all zero before the first GC */
}

static void fmt_mb(char *out, size_t cap, int64_t bytes)
{
    snprintf(out, cap, "%.0f MB", (double)bytes / 1048576.0);
}

/* The upper end of the sampled estimate's 95 % interval for from_s..to_s; 0 when there is none
 * (the alloc profile off, or a runtime without AllocationSampled). */
static int64_t sampled_high(int64_t from_s, int64_t to_s)
{
    double lo = 0, hi = 0;
    uint64_t n = 0;
    if (from_s > to_s || prof_alloc_total_ci(from_s, to_s, &lo, &hi, &n) != 0 || !(hi > 0))
        return 0;
    return (int64_t)hi;
}

/* Bytes allocated over the unix seconds from_s..to_s from the per-second records: the runtime's
 * count for the seconds its counter covers, the upper end of the sampled estimate's 95 % interval
 * for the others. */
static int64_t allocated_seconds(int64_t from_s, int64_t to_s)
{
    if (from_s > to_s)
        return 0;
    int64_t a = from_s, b = to_s, exact = 0;
    if (prof_counters_allocated(&a, &b, &exact) != 0 || exact < 0)
        return sampled_high(from_s, to_s);
    return exact + sampled_high(from_s, a - 1) + sampled_high(b + 1, to_s);
}

/* Bytes allocated since the newest GC recorded began (or since start), never less than the
 * truth as far as the records go: every interval of the runtime's allocation counter that ended
 * after the GC began, each counted whole; before the oldest interval kept, the per-second
 * records; after the newest, the upper end of the sampled estimate (the governor may have the
 * allocation events off, and the counter's next interval is up to a second away: see
 * hs_guards_check, which waits for it). A GC newer than the records
 * makes this larger than the truth, which errs on the side of the guard. Large arrays
 * allocated since the last GC are in the heap but not yet in its generation bounds. */
static int64_t allocated_since_gc(double *covered_to)
{
    double g = prof_gc_last_start(); /* the GC's start; recorded ~1 s after it ended */
    if (g <= 0)
        g = (double)g_core.start_unix;
    int64_t to = (int64_t)prof_unix_now(), bytes = 0;
    double oldest = 0;
    *covered_to = 0;
    if (prof_counters_allocated_after(g, &bytes, covered_to, &oldest) != 0)
        return allocated_seconds((int64_t)g, to);
    int64_t head = oldest > g ? allocated_seconds((int64_t)g, (int64_t)oldest) : 0;
    return head + bytes + sampled_high((int64_t)*covered_to, to);
}

int hs_guards_check(int force, struct hs_refusal *why, int64_t *heap_out)
{
    /* The GC heap at the last GC plus what was allocated since; before the first GC, the resident
     * set bounds it from above. */
    double asked = prof_unix_now(), covered = 0;
    int64_t heap = gc_heap_bytes();
    int from_rss = heap <= 0;
    int64_t since = from_rss ? 0 : allocated_since_gc(&covered);
    int64_t estimate = from_rss ? hs_rss_bytes() : heap + since;
    /* With the counter's newest interval older than the request, what came after it is only
     * the sampled estimate's (none while the governor has the events off, and late while the
     * aggregator is behind), so the guard waits for the interval that covers the request (at
     * most the counter's period and a margin for a late poller) and counts again: the figure
     * decides the size guard, the memory guard and what a refusal says the heap holds. */
    double period = prof_counters_alloc_interval_s();
    if (!from_rss && period > 0 && covered < asked) {
        int64_t deadline = prof_now_ns() + (int64_t)((period + 1.5) * 1e9);
        while (covered < asked && prof_now_ns() < deadline && !prof_core_stopping()) {
            struct timespec nap = {0, 20 * 1000 * 1000};
            nanosleep(&nap, NULL);
            double cov = 0, oldest = 0;
            int64_t bytes = 0;
            if (prof_counters_allocated_after(asked, &bytes, &cov, &oldest) == 0)
                covered = cov;
        }
        if (prof_core_stopping()) { /* the runtime is shutting down: no more calls into it */
            why->reason = HS_UNAVAILABLE;
            snprintf(why->message, sizeof why->message, "the process is shutting down");
            return -1;
        }
        heap = gc_heap_bytes();
        since = heap > 0 ? allocated_since_gc(&covered) : 0;
        estimate = heap > 0 ? heap + since : estimate;
    }
    *heap_out = estimate > 0 ? estimate : 0;
    why->heap_bytes = estimate;
    why->limit_bytes = g_cfg.dump_max_heap;
    why->available_bytes = memory_headroom();
    why->needed_bytes = estimate > 0 ? (int64_t)((double)estimate * NEED_PER_HEAP_BYTE) + NEED_SLACK
                                     : NEED_SLACK;
    char a[32], b[32];
    if (!force && estimate > g_cfg.dump_max_heap) {
        fmt_mb(a, sizeof a, estimate);
        fmt_mb(b, sizeof b, g_cfg.dump_max_heap);
        why->reason = HS_TOO_BIG;
        snprintf(why->message, sizeof why->message,
                 "%s %s, more than CLRSCOPE_DUMP_MAX_HEAP_MB (%s); a snapshot stops the app for "
                 "a full GC and needs about as much memory again; add ?force=1 to take it anyway",
                 from_rss ? "no GC has run yet and the process holds"
                 : since ? "the GC heap holds (as of the last GC, plus what was allocated since)"
                         : "the GC heap holds", a, b);
        return -1;
    }
    if (why->available_bytes >= 0 && why->available_bytes < why->needed_bytes) {
        fmt_mb(a, sizeof a, why->needed_bytes);
        fmt_mb(b, sizeof b, why->available_bytes);
        why->reason = HS_LOW_MEMORY;
        snprintf(why->message, sizeof why->message,
                 "a snapshot of this heap needs about %s of memory and only %s is available "
                 "(MemAvailable / cgroup limit): it could get the app killed for want of memory, "
                 "so it is not taken, with ?force=1 either", a, b);
        return -1;
    }
    return 0;
}

int hs_dump_dir_ready(struct stat *dst, char *err, size_t errcap)
{
    /* the default directory lies in /tmp: it must be this user's alone; one the user named is
     * held to the rule of prof_files.h (yours or root's, no one else can replace our files); a
     * file at the name fails here, before the GC, not when the file is written */
    char why[200];
    int fd = prof_files_dir_open(g_cfg.dump_dir, g_cfg.dump_dir_default, dst, why, sizeof why);
    if (fd >= 0 && faccessat(fd, ".", W_OK, 0)) {
        hs_errtext(errno, why, sizeof why);
        close(fd);
        fd = -1;
    }
    if (fd < 0)
        snprintf(err, errcap, "cannot write snapshots to %.180s: %.200s%s", g_cfg.dump_dir, why,
                 g_cfg.dump_dir_default && errno == EPERM ? "; set CLRSCOPE_DUMP_DIR" : "");
    return fd;
}

int hs_disk_room(int dirfd, const char *dir, uint64_t need, char *err, size_t errcap)
{
    struct statvfs vfs;
    if (!fstatvfs(dirfd, &vfs) && (uint64_t)vfs.f_bavail * vfs.f_frsize < need) {
        snprintf(err, errcap, "not enough disk space in %.150s (%.0f MB needed, %.0f MB free)",
                 dir, (double)need / 1048576.0,
                 (double)vfs.f_bavail * (double)vfs.f_frsize / 1048576.0);
        return -1;
    }
    return 0;
}
