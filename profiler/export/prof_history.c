/* prof_history.c - see prof_history.h. */
#include "prof_history.h"
#include "prof_history_read.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_files.h"
#include "prof_gc.h"
#include "prof_hseg.h"
#include "prof_log.h"
#include "prof_marks.h"
#include "prof_scratch.h"

#define WRITE_DELAY_S 2 /* a second's samples reach the store within this after it ends */
#define MAX_TIDY_FILES 200000
/* The directory is tidied after the first segment, then every TIDY_EVERY_S, or sooner once this
 * process has written TIDY_SHARE of the cap since: the tidy lists every process's segments (a
 * root with thousands of exited processes' directories costs ~150 ms), and neither the age nor
 * the cap needs minute precision. */
#define TIDY_EVERY_S 600
#define TIDY_SHARE 0.01

static struct {
    pthread_mutex_t lock; /* st, and the fields below it that readers use */
    pthread_mutex_t read_lock; /* one window read from disk at a time: its cost stays one reader's */
    struct prof_history_stats st;
    int reading;          /* segments of this process can be read back */
    int serving;          /* clrscope serve: pdir is the exited process's; the GC's from disk */
    char pdir[700];       /* this process's directory (a path) */
    pthread_t thread;
    int started;
    int dfd;              /* the history directory (writer thread only, after start) */
    int pdfd;             /* this process's directory in it */
    int shared;           /* the directory is shared with other users: only ours are deleted */
    int64_t max_bytes;
    int64_t seg_from;     /* the start of the segment being filled (writer thread only) */
    int64_t tidied_at;    /* unix s of the last tidy, 0 = none yet (writer thread only) */
    uint64_t tidied_bytes; /* st.written_bytes at the last tidy (writer thread only) */
} hist = {.lock = PTHREAD_MUTEX_INITIALIZER, .read_lock = PTHREAD_MUTEX_INITIALIZER, .dfd = -1,
          .pdfd = -1};

static int flag_write_failed, flag_read_refused, flag_tidy_failed;

/* ---- configuration ---- */

/* "90", "90s", "15m", "24h", "7d" in seconds; -1 when not one of them. */
static int64_t parse_age(const char *s)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !(v >= 0) || v > 1e9)
        return -1;
    double mul = 1;
    if (*end == 's')
        end++;
    else if (*end == 'm')
        mul = 60, end++;
    else if (*end == 'h')
        mul = 3600, end++;
    else if (*end == 'd')
        mul = 86400, end++;
    if (*end)
        return -1;
    return (int64_t)(v * mul);
}

static void off(const char *what, const char *err)
{
    pthread_mutex_lock(&hist.lock);
    hist.st.enabled = 0;
    snprintf(hist.st.off_reason, sizeof hist.st.off_reason, "%.90s: %.100s", what, err);
    pthread_mutex_unlock(&hist.lock);
    prof_log(LOG_WARN, "history: %s; the profiles are kept in memory only", hist.st.off_reason);
}

/* The process's directory name: its name made safe for a path, its pid and start. */
static void process_dir_name(char *buf, size_t cap)
{
    char name[48];
    size_t n = 0;
    for (const char *p = g_core.process_name; *p && n < sizeof name - 1; p++)
        name[n++] = ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') ||
                     (*p >= '0' && *p <= '9') || *p == '.' || *p == '_')
                        ? *p
                        : '_';
    name[n] = 0;
    snprintf(buf, cap, "%s-%d-%lld", n ? name : "dotnet", (int)g_core.pid,
             (long long)floor(g_core.start_unix));
}

/* s as the inside of a JSON string (quotes, backslashes and control bytes escaped), cut to fit. */
static void json_escape(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 7 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            out[n++] = '\\';
            out[n++] = (char)c;
        } else if (c < 0x20) {
            n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        } else {
            out[n++] = (char)c;
        }
    }
    out[n] = 0;
}

/* process.json: who wrote the segments beside it (read by `clrscope serve`). */
static void write_process_file(void)
{
    int fd = prof_files_create_at(hist.pdfd, "process.json", 0600);
    if (fd < 0)
        return;
    char buf[1600], cmd[sizeof g_core.cmdline * 2], name[sizeof g_core.process_name * 2],
        rt[sizeof g_core.runtime_version * 2];
    json_escape(g_core.cmdline, cmd, sizeof cmd);
    json_escape(g_core.process_name, name, sizeof name);
    json_escape(g_core.runtime_version, rt, sizeof rt);
    int len = snprintf(buf, sizeof buf,
                       "{\"pid\":%d,\"process\":\"%s\",\"command_line\":\"%s\","
                       "\"runtime\":\"%s\",\"start\":%.3f,\"segment_s\":%d}\n",
                       (int)g_core.pid, name, cmd, rt, g_core.start_unix, hist.st.segment_s);
    if (len > 0 && write(fd, buf, (size_t)len < sizeof buf ? (size_t)len : sizeof buf - 1) < 0) {
        /* best effort: the segments stand without it */
    }
    close(fd);
}

/* ---- writing ---- */

/* Writes all of buf to a new temporary file, fsyncs and renames it to `name`. 0, or errno. */
static int write_atomically(const char *name, const unsigned char *buf, size_t len)
{
    char tmp[96];
    snprintf(tmp, sizeof tmp, ".%s.tmp", name);
    int fd = prof_files_create_at(hist.pdfd, tmp, 0600);
    if (fd < 0)
        return errno;
    int err = 0;
    for (size_t at = 0; at < len && !err;) {
        ssize_t w = write(fd, buf + at, len - at);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            err = w < 0 ? errno : EIO;
        else
            at += (size_t)w;
    }
    if (!err && fsync(fd))
        err = errno;
    close(fd);
    if (!err && renameat(hist.pdfd, tmp, hist.pdfd, name))
        err = errno;
    if (err)
        unlinkat(hist.pdfd, tmp, 0);
    else
        fsync(hist.pdfd); /* the rename itself */
    return err;
}

/* Collections a segment lists, per second of it, at most: a server collecting a hundred times a
 * second (measured: the ASP.NET Core test server under wrk, ~90 a second) would otherwise fill
 * its segments with them, four-fifths of the bytes; the GC's per-second records keep the counts
 * and pause totals of all of them. */
#define LISTED_COLLECTIONS_PER_S 2


static int by_pause_desc(const void *a, const void *b)
{
    const struct prof_gc_collection *x = a, *y = b;
    return x->pause_ms > y->pause_ms ? -1 : x->pause_ms < y->pause_ms;
}

/* Adds the segment's collections c[0..n) (in time order) to `acc`: all of them when they are
 * few; else every gen1 and gen2 one and the gen0 ones that paused the app longest, up to
 * LISTED_COLLECTIONS_PER_S per second (at least 20), the rest counted as omitted. */
static void add_collections(struct prof_hacc *acc, const struct prof_gc_collection *c, size_t n,
                            size_t seconds)
{
    size_t cap = seconds * LISTED_COLLECTIONS_PER_S;
    if (cap < 20)
        cap = 20;
    if (n <= cap) {
        prof_hacc_add_gc(acc, NULL, 0, c, n);
        return;
    }
    struct prof_gc_collection *keep = malloc(n * sizeof *keep);
    if (!keep) {
        acc->gcoll_omitted += n;
        return;
    }
    size_t k = 0, g0 = n;
    for (size_t i = 0; i < n; i++) /* gen1 and gen2 first, in order; gen0 at the end */
        if (c[i].generation > 0)
            keep[k++] = c[i];
        else
            keep[--g0] = c[i];
    qsort(keep + g0, n - g0, sizeof *keep, by_pause_desc);
    size_t take = k < cap ? cap - k : 0;
    if (take > n - g0)
        take = n - g0;
    memmove(keep + k, keep + g0, take * sizeof *keep);
    k += take;
    qsort(keep, k, sizeof *keep, prof_gc_collection_by_t);
    prof_hacc_add_gc(acc, NULL, 0, keep, k);
    acc->gcoll_omitted += n - k;
    free(keep);
}

/* Writes the segment [from, to) (whole unix seconds). */
static void write_segment(int64_t from, int64_t to)
{
    if (to <= from)
        return;
    struct prof_hacc acc;
    prof_hacc_init(&acc, (uint32_t)g_cfg.max_stack_nodes);
    size_t rows = 0;
    for (int kind = 0; kind < PK_COUNT; kind++) {
        struct prof_view v;
        if (prof_store_view_range(kind, from, to - 1, NULL, &v))
            continue;
        if (v.nrows)
            prof_hacc_add_view(&acc, &v, NULL);
        rows += v.nrows;
        prof_view_free(&v);
    }
    /* the GC's seconds that end in the segment and its collections that started in it */
    struct prof_gc_view gv;
    if ((g_cfg.profiles & PROFILE_GC) &&
        !prof_gc_view(prof_unix_now() - (double)from + 1, (size_t)-1, &gv)) {
        size_t s0 = 0, s1 = 0, c0 = 0, c1 = 0;
        while (s0 < gv.nseconds && gv.seconds[s0].t <= (double)from)
            s0++;
        for (s1 = s0; s1 < gv.nseconds && gv.seconds[s1].t <= (double)to; s1++)
            ;
        while (c0 < gv.ncollections && gv.collections[c0].t < (double)from)
            c0++;
        for (c1 = c0; c1 < gv.ncollections && gv.collections[c1].t < (double)to; c1++)
            ;
        prof_hacc_add_gc(&acc, gv.seconds + s0, s1 - s0, NULL, 0);
        add_collections(&acc, gv.collections + c0, c1 - c0, (size_t)(to - from));
        rows += c1 - c0; /* a collection alone is worth a segment; a quiet GC second is not */
        prof_gc_view_free(&gv);
    }
    /* the runtime counters' values that came in it (alone, not worth a segment) */
    struct prof_counter_point *cp;
    size_t ncp;
    if (!prof_counters_series((double)from, (double)to, &cp, &ncp)) {
        if (ncp)
            prof_hacc_add_counters(&acc, cp, ncp);
        free(cp);
    }
    static struct prof_mark marks[PROF_MARKS_MAX]; /* this thread only */
    uint64_t dropped;
    size_t nm = prof_marks_list(marks, PROF_MARKS_MAX, &dropped), keep = 0;
    for (size_t i = 0; i < nm; i++)
        if (marks[i].t >= (double)from && marks[i].t < (double)to)
            marks[keep++] = marks[i];
    if (!rows && !keep) {
        prof_hacc_free(&acc);
        pthread_mutex_lock(&hist.lock);
        hist.st.empty_skipped++;
        pthread_mutex_unlock(&hist.lock);
        return;
    }
    struct prof_scratch m = {0};
    unsigned char *buf;
    size_t len;
    int rc = prof_hseg_encode(&acc, from, to, (uint32_t)g_core.pid, marks, keep, &m, &buf, &len);
    prof_hacc_free(&acc);
    int err = rc ? ENOMEM : 0;
    if (!rc) {
        char name[64];
        prof_hseg_name(name, sizeof name, from, to);
        err = write_atomically(name, buf, len);
    }
    prof_scratch_release(&m);
    pthread_mutex_lock(&hist.lock);
    if (!err) {
        hist.st.written++;
        hist.st.written_bytes += len;
        hist.st.disk_segments++; /* counted again at the next tidy, other processes' too */
        hist.st.disk_bytes += len;
        hist.st.last_to_s = to;
        if (!hist.st.oldest_s)
            hist.st.oldest_s = from;
    } else {
        hist.st.write_failures++;
        snprintf(hist.st.last_error, sizeof hist.st.last_error, "writing segment %lld-%lld: %s",
                 (long long)from, (long long)to, strerror(err));
    }
    pthread_mutex_unlock(&hist.lock);
    if (err == ENOSPC || err == EDQUOT)
        off("the disk is full", strerror(err));
    else if (err)
        prof_log_once(flag_write_failed, LOG_WARN, "history: cannot write a segment (%s); "
                      "counted in /api/v1/status history.write_failures", strerror(err));
}

/* ---- the caps ---- */

struct seg_file {
    int64_t t_to;
    uint64_t bytes;
    uint32_t dir; /* index into the directory names */
    char name[40];
};

static int by_end(const void *a, const void *b)
{
    const struct seg_file *x = a, *y = b;
    return x->t_to < y->t_to ? -1 : x->t_to > y->t_to;
}

/* Whether the process whose directory this is ("<name>-<pid>-<start>") has exited. A pid in use
 * again by another process keeps its directory until that one exits too: only an emptied
 * directory is removed, so nothing is lost by waiting. */
static int exited(const char *dname)
{
    const char *dash2 = strrchr(dname, '-');
    if (!dash2 || dash2 == dname)
        return 0;
    const char *dash1 = dash2 - 1;
    while (dash1 > dname && *dash1 != '-')
        dash1--;
    if (*dash1 != '-')
        return 0;
    long pid = strtol(dash1 + 1, NULL, 10);
    if (pid <= 0 || pid == g_core.pid)
        return 0;
    return kill((pid_t)pid, 0) && errno == ESRCH;
}

/* Deletes segments older than the max age, then the oldest while the directory holds more than
 * the byte cap; removes emptied directories of exited processes. */
static void tidy(void)
{
    struct prof_scratch m = {0};
    char (*dirs)[160] = NULL;
    uint32_t ndirs = 0, capdirs = 0;
    struct seg_file *f = NULL;
    size_t nf = 0, capf = 0;
    uint64_t total = 0;
    int64_t now = (int64_t)floor(prof_unix_now());
    int dfd = dup(hist.dfd);
    DIR *d = dfd >= 0 ? fdopendir(dfd) : NULL;
    if (!d) {
        if (dfd >= 0)
            close(dfd);
        prof_log_once(flag_tidy_failed, LOG_WARN, "history: cannot list %s (%s)", hist.st.dir,
                      strerror(errno));
        return;
    }
    rewinddir(d); /* the duplicate shares its offset with hist.dfd: where the last listing ended */
    uid_t me = geteuid();
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.' || strlen(e->d_name) >= sizeof dirs[0])
            continue;
        int sub = openat(hist.dfd, e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub < 0)
            continue;
        struct stat st;
        if (fstat(sub, &st) || (hist.shared && st.st_uid != me)) {
            close(sub);
            continue;
        }
        if (ndirs == capdirs) {
            uint32_t nc = capdirs ? capdirs * 2 : 16;
            void *q = prof_scratch_realloc(&m, dirs, (size_t)nc * sizeof *dirs);
            if (!q) {
                close(sub);
                break;
            }
            dirs = q;
            capdirs = nc;
        }
        snprintf(dirs[ndirs], sizeof dirs[0], "%s", e->d_name);
        DIR *sd = fdopendir(sub);
        if (!sd) {
            close(sub);
            continue;
        }
        struct dirent *g;
        while ((g = readdir(sd)) && nf < MAX_TIDY_FILES) {
            int64_t from, to;
            if (prof_hseg_name_span(g->d_name, &from, &to) || strlen(g->d_name) >= 40)
                continue;
            struct stat gs;
            if (fstatat(dirfd(sd), g->d_name, &gs, AT_SYMLINK_NOFOLLOW) || !S_ISREG(gs.st_mode))
                continue;
            if (nf == capf) {
                size_t nc = capf ? capf * 2 : 256;
                void *q = prof_scratch_realloc(&m, f, nc * sizeof *f);
                if (!q)
                    break;
                f = q;
                capf = nc;
            }
            f[nf].t_to = to;
            f[nf].bytes = (uint64_t)gs.st_size;
            f[nf].dir = ndirs;
            snprintf(f[nf].name, sizeof f[nf].name, "%s", g->d_name);
            total += (uint64_t)gs.st_size;
            nf++;
        }
        closedir(sd);
        ndirs++;
    }
    closedir(d);
    if (nf)
        prof_scratch_sort(&m, f, nf, sizeof *f, by_end);
    uint64_t deleted = 0, kept = nf;
    int64_t oldest_own = 0;
    char own[160];
    process_dir_name(own, sizeof own);
    for (size_t i = 0; i < nf; i++) {
        int too_old = f[i].t_to < now - hist.st.max_age_s;
        if (!too_old && total <= (uint64_t)hist.max_bytes)
            break;
        int sub = openat(hist.dfd, dirs[f[i].dir], O_RDONLY | O_DIRECTORY | O_NOFOLLOW |
                                                       O_CLOEXEC);
        if (sub < 0)
            continue;
        if (!unlinkat(sub, f[i].name, 0)) {
            total -= f[i].bytes;
            deleted++;
            kept--;
            f[i].bytes = UINT64_MAX; /* gone */
        }
        close(sub);
    }
    /* this process's oldest segment still on disk; emptied directories of exited processes */
    uint32_t *left = prof_scratch_calloc(&m, ndirs ? ndirs : 1, sizeof *left);
    for (size_t i = 0; i < nf; i++) {
        if (f[i].bytes == UINT64_MAX)
            continue;
        if (left)
            left[f[i].dir]++;
        if (!strcmp(dirs[f[i].dir], own)) {
            int64_t from, to;
            if (!prof_hseg_name_span(f[i].name, &from, &to) && (!oldest_own || from < oldest_own))
                oldest_own = from;
        }
    }
    for (uint32_t i = 0; left && i < ndirs; i++) {
        if (left[i] || !strcmp(dirs[i], own) || !exited(dirs[i]))
            continue;
        int sub = openat(hist.dfd, dirs[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (sub >= 0) {
            unlinkat(sub, "process.json", 0);
            close(sub);
        }
        unlinkat(hist.dfd, dirs[i], AT_REMOVEDIR); /* fails while anything else is in it */
    }
    prof_scratch_release(&m);
    pthread_mutex_lock(&hist.lock);
    hist.st.deleted += deleted;
    hist.st.disk_bytes = total;
    hist.st.disk_segments = kept;
    hist.st.oldest_s = oldest_own;
    pthread_mutex_unlock(&hist.lock);
}

/* ---- the thread ---- */

static double thread_cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void *history_main(void *arg)
{
    (void)arg;
    prof_name_thread("hist");
    const int64_t L = hist.st.segment_s;
    while (!prof_core_stopping()) {
        int64_t end = (hist.seg_from / L + 1) * L;
        double wait = (double)(end + WRITE_DELAY_S) - prof_unix_now();
        if (wait > 0 &&
            prof_core_nap_until(prof_now_ns() + (int64_t)(wait * 1e9)))
            break;
        int on;
        pthread_mutex_lock(&hist.lock);
        on = hist.st.enabled;
        pthread_mutex_unlock(&hist.lock);
        if (!on)
            break;
        /* a thread held up past the memory's reach writes what the memory still has */
        int64_t now = (int64_t)floor(prof_unix_now());
        int64_t oldest = now - g_cfg.history_s + 1;
        if (end <= oldest)
            hist.seg_from = (oldest / L + 1) * L, end = (hist.seg_from / L + 1) * L;
        if (end + WRITE_DELAY_S > now)
            continue;
        write_segment(hist.seg_from, end);
        hist.seg_from = end;
        pthread_mutex_lock(&hist.lock);
        uint64_t written = hist.st.written_bytes;
        pthread_mutex_unlock(&hist.lock);
        if (!hist.tidied_at || now - hist.tidied_at >= TIDY_EVERY_S ||
            (double)(written - hist.tidied_bytes) >= TIDY_SHARE * (double)hist.max_bytes) {
            tidy();
            hist.tidied_at = now;
            hist.tidied_bytes = written;
        }
        double cpu = thread_cpu_s();
        pthread_mutex_lock(&hist.lock);
        hist.st.write_cpu_s = cpu;
        pthread_mutex_unlock(&hist.lock);
    }
    return NULL;
}

void prof_history_start(void)
{
    struct prof_history_stats *s = &hist.st;
    s->segment_s = (int)prof_env_long("CLRSCOPE_HISTORY_SEGMENT_S", 60, 1, 3600);
    if (s->segment_s > g_cfg.history_s / 3) {
        int seg = g_cfg.history_s / 3;
        prof_log(LOG_WARN, "history: CLRSCOPE_HISTORY_SEGMENT_S=%d is more than a third of "
                 "CLRSCOPE_HISTORY_S=%d; using %d", s->segment_s, g_cfg.history_s, seg);
        s->segment_s = seg;
    }
    s->max_mb = prof_env_double("CLRSCOPE_HISTORY_MAX_MB", 200, 0, 1e7);
    hist.max_bytes = (int64_t)(s->max_mb * 1048576.0);
    const char *age = getenv("CLRSCOPE_HISTORY_MAX_AGE");
    s->max_age_s = 86400;
    if (age && *age) {
        int64_t a = parse_age(age);
        if (a < 60)
            prof_log(LOG_WARN, "CLRSCOPE_HISTORY_MAX_AGE=\"%.40s\" is not an age of at least a "
                     "minute (90m, 24h, 7d, or seconds); using 24h", age);
        else
            s->max_age_s = a;
    }
    const char *rt = prof_runtime_dir();
    char defdir[400];
    if (rt)
        snprintf(defdir, sizeof defdir, "%s/clrscope/history", rt);
    else
        snprintf(defdir, sizeof defdir, "/tmp/clrscope-history-%u", (unsigned)getuid());
    const char *dir = getenv("CLRSCOPE_HISTORY_DIR");
    if (dir && *dir && dir[0] != '/') {
        prof_log(LOG_WARN, "CLRSCOPE_HISTORY_DIR=\"%.60s\" is not an absolute path; using \"%s\"",
                 dir, defdir);
        dir = NULL;
    }
    snprintf(s->dir, sizeof s->dir, "%s", dir && *dir ? dir : defdir);
    if (!(s->max_mb > 0)) {
        snprintf(s->off_reason, sizeof s->off_reason, "CLRSCOPE_HISTORY_MAX_MB=0");
        return;
    }
    if (!(g_cfg.profiles & (PROFILE_CPU | PROFILE_WALL | PROFILE_ALLOC | PROFILE_EXCEPTIONS |
                            PROFILE_LOCK))) {
        snprintf(s->off_reason, sizeof s->off_reason, "no windowed profile is on");
        return;
    }
    char why[200] = "";
    struct stat st;
    hist.dfd = prof_files_dir_open(s->dir, !strcmp(s->dir, defdir), &st, why, sizeof why);
    if (hist.dfd < 0) {
        off(s->dir, why[0] ? why : strerror(errno));
        return;
    }
    hist.shared = prof_files_dir_shared(&st);
    process_dir_name(s->process_dir, sizeof s->process_dir);
    if (mkdirat(hist.dfd, s->process_dir, 0700) && errno != EEXIST) {
        off(s->process_dir, strerror(errno));
        goto fail;
    }
    hist.pdfd = openat(hist.dfd, s->process_dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (hist.pdfd < 0) {
        off(s->process_dir, strerror(errno));
        goto fail;
    }
    snprintf(hist.pdir, sizeof hist.pdir, "%s/%s", s->dir, s->process_dir);
    write_process_file();
    hist.seg_from = (int64_t)floor(g_core.start_unix);
    pthread_mutex_lock(&hist.lock);
    s->enabled = 1;
    hist.reading = 1;
    pthread_mutex_unlock(&hist.lock);
    if (pthread_create(&hist.thread, NULL, history_main, NULL)) {
        off("cannot start its thread", strerror(errno));
        goto fail;
    }
    hist.started = 1;
    prof_log(LOG_INFO, "history: a segment every %d s in %s (at most %.0f MB, %lld s)",
             s->segment_s, hist.pdir, s->max_mb, (long long)s->max_age_s);
    return;
fail:
    pthread_mutex_lock(&hist.lock);
    hist.reading = 0;
    pthread_mutex_unlock(&hist.lock);
    if (hist.pdfd >= 0)
        close(hist.pdfd);
    close(hist.dfd);
    hist.pdfd = hist.dfd = -1;
}

void prof_history_stop(void)
{
    if (!hist.started)
        return;
    pthread_join(hist.thread, NULL); /* prof_core_begin_stopping woke its nap */
    hist.started = 0;
    int on;
    pthread_mutex_lock(&hist.lock);
    on = hist.st.enabled;
    pthread_mutex_unlock(&hist.lock);
    /* the segment that had begun, up to the second now running */
    if (on)
        write_segment(hist.seg_from, (int64_t)floor(prof_unix_now()) + 1);
    pthread_mutex_lock(&hist.lock);
    hist.st.enabled = 0;
    snprintf(hist.st.off_reason, sizeof hist.st.off_reason, "the process is exiting");
    pthread_mutex_unlock(&hist.lock);
}

void prof_history_get_stats(struct prof_history_stats *s)
{
    pthread_mutex_lock(&hist.lock);
    *s = hist.st;
    pthread_mutex_unlock(&hist.lock);
}

int64_t prof_history_reach_s(void)
{
    pthread_mutex_lock(&hist.lock);
    int64_t r = hist.reading && hist.st.max_age_s > g_cfg.history_s ? hist.st.max_age_s
                                                                     : g_cfg.history_s;
    pthread_mutex_unlock(&hist.lock);
    return r;
}

uint32_t prof_history_read_segments(const char *pdir, int kind, int64_t from_s, int64_t to_s,
                                    int64_t before, const char *filter, struct prof_hacc *a)
{
    struct prof_hseg_read_stats rs = {0};
    pthread_mutex_lock(&hist.read_lock);
    prof_hseg_read_dir(pdir, kind, from_s, to_s, before, filter, a, NULL, 0, NULL, &rs);
    pthread_mutex_unlock(&hist.read_lock);
    pthread_mutex_lock(&hist.lock);
    hist.st.read += rs.read;
    hist.st.skipped += rs.skipped;
    if (rs.skipped)
        snprintf(hist.st.last_error, sizeof hist.st.last_error, "%s", rs.last_skip);
    pthread_mutex_unlock(&hist.lock);
    if (rs.skipped)
        prof_log_once(flag_read_refused, LOG_WARN, "history: a segment was refused and skipped "
                      "(%s); counted in /api/v1/status history.skipped", rs.last_skip);
    return rs.read;
}

void prof_history_reader_state(struct prof_history_reader *r)
{
    pthread_mutex_lock(&hist.lock);
    r->reading = hist.reading;
    r->serving = hist.serving;
    r->seg_s = hist.st.segment_s > 0 ? hist.st.segment_s : 60;
    snprintf(r->pdir, sizeof r->pdir, "%s", hist.pdir);
    pthread_mutex_unlock(&hist.lock);
}

int prof_history_view_range(int kind, int64_t from_s, int64_t to_s, const char *filter,
                            struct prof_view *out, uint32_t *from_disk)
{
    if (from_disk)
        *from_disk = 0;
    int64_t now = (int64_t)floor(prof_unix_now());
    int64_t oldest = now - g_cfg.history_s + 1;
    struct prof_history_reader r;
    prof_history_reader_state(&r);
    const char *pdir = r.pdir;
    int64_t L = r.seg_s;
    if (!r.reading || from_s >= oldest || kind < 0 || kind >= PK_COUNT)
        return prof_store_view_range(kind, from_s, to_s, filter, out);
    /* disk up to the first segment boundary the memory covers, memory after it */
    int64_t cut = (oldest + L - 1) / L * L;
    struct prof_hacc acc;
    prof_hacc_init(&acc, (uint32_t)g_cfg.max_stack_nodes);
    int64_t disk_to = to_s < cut - 1 ? to_s : cut - 1;
    uint32_t nread = prof_history_read_segments(pdir, kind, from_s, disk_to, cut, filter, &acc);
    if (to_s >= cut) {
        struct prof_view mv;
        if (prof_store_view_range(kind, from_s > cut ? from_s : cut, to_s, filter, &mv)) {
            prof_hacc_free(&acc);
            return -1;
        }
        prof_hacc_add_view(&acc, &mv, NULL); /* filtered already */
        prof_view_free(&mv);
    }
    if (from_disk)
        *from_disk = nread;
    int rc = prof_hacc_take_view(&acc, kind, out);
    prof_hacc_free(&acc);
    if (!rc && out->t_to <= out->t_from) { /* nothing anywhere: the window asked for */
        out->t_from = (double)from_s;
        out->t_to = (double)(to_s + 1);
    }
    return rc;
}

int prof_history_view(int kind, double seconds, const char *filter, struct prof_view *out,
                      uint32_t *from_disk)
{
    if (from_disk)
        *from_disk = 0;
    if (!(seconds > g_cfg.history_s) || kind < 0 || kind >= PK_COUNT)
        return prof_store_view(kind, seconds, filter, out);
    int64_t to = (int64_t)floor(prof_unix_now());
    int rc = prof_history_view_range(kind, to - (int64_t)ceil(seconds) + 1, to, filter, out,
                                     from_disk);
    if (!rc && out->t_to > prof_unix_now())
        out->t_to = prof_unix_now(); /* the current second so far, as prof_store_view says */
    return rc;
}

/* ---- clrscope serve ---- */

struct seg_name {
    int64_t from, to;
    char name[40];
};

static int by_start(const void *a, const void *b)
{
    const struct seg_name *x = a, *y = b;
    return x->from < y->from ? -1 : x->from > y->from;
}

/* Adds kind `kind` of `a` to the store at second `t`, each row with its path rebuilt. */
static void load_kind(struct prof_hacc *a, int kind, double t)
{
    struct hacc_kind *k = &a->k[kind];
    const char *frames[512];
    for (uint32_t i = 0; i < k->nrows; i++) {
        const struct prof_row *r = &k->rows[i];
        int n = 0;
        for (uint32_t node = r->node; node && n < (int)(sizeof frames / sizeof frames[0]);
             node = k->parent[node])
            frames[n++] = k->name[node];
        for (int x = 0, y = n - 1; x < y; x++, y--) { /* root first */
            const char *tmp = frames[x];
            frames[x] = frames[y];
            frames[y] = tmp;
        }
        prof_store_add(kind, t, frames, n, r->tid, r->label[0] ? r->label : NULL, r->v);
    }
}

int prof_history_serve(const char *pdir, char *why, size_t whycap)
{
    struct prof_scratch m = {0};
    struct seg_name *segs = NULL;
    size_t n = 0, cap = 0;
    DIR *d = opendir(pdir);
    if (!d) {
        snprintf(why, whycap, "%s: %s", pdir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    while ((e = readdir(d))) {
        struct seg_name s;
        if (prof_hseg_name_span(e->d_name, &s.from, &s.to) || strlen(e->d_name) >= sizeof s.name)
            continue;
        snprintf(s.name, sizeof s.name, "%s", e->d_name);
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 256;
            void *q = prof_scratch_realloc(&m, segs, nc * sizeof *segs);
            if (!q)
                break;
            segs = q;
            cap = nc;
        }
        segs[n++] = s;
    }
    closedir(d);
    if (!n) {
        snprintf(why, whycap, "%s holds no history segment (*%s)", pdir, PROF_HSEG_SUFFIX);
        prof_scratch_release(&m);
        return -1;
    }
    prof_scratch_sort(&m, segs, n, sizeof *segs, by_start);
    int64_t from = segs[0].from, to = segs[n - 1].to;
    int64_t span = to - from + 1;
    if (span > 7 * 86400) { /* the newest week: older segments are left out, said */
        from = to - 7 * 86400;
        prof_log(LOG_WARN, "history: %s spans %lld s; serving its last 7 days", pdir,
                 (long long)span);
        span = 7 * 86400 + 1;
    }
    /* as long as the history, and at least the default: the dashboard's windows (up to 15
     * minutes) stay valid requests over a short history */
    g_cfg.history_s = span < 900 ? 900 : (int)span;
    prof_core_freeze_clock((double)from);
    if (prof_store_init(g_cfg.history_s, g_cfg.max_stack_nodes, g_cfg.max_name_bytes)) {
        snprintf(why, whycap, "out of memory for the profile store");
        prof_scratch_release(&m);
        return -1;
    }
    /* each segment lies at its first second: frozen in the last second, "the last minute" is
     * the last one-minute segment */
    prof_core_freeze_clock((double)to - 0.5);
    struct prof_history_stats *st = &hist.st;
    for (size_t i = 0; i < n; i++) {
        if (segs[i].to <= from)
            continue;
        char path[sizeof hist.pdir + 48], why1[120] = "";
        snprintf(path, sizeof path, "%s/%s", pdir, segs[i].name);
        /* one segment at a time, every kind at once, then the next */
        struct prof_scratch fm = {0};
        struct prof_hacc acc;
        prof_hacc_init(&acc, (uint32_t)g_cfg.max_stack_nodes);
        struct prof_mark marks[64];
        size_t len = 0, nm = 0;
        unsigned char *buf = prof_hseg_read_file(path, &fm, &len, why1, sizeof why1);
        if (!buf || prof_hseg_decode(buf, len, PROF_HSEG_ALL, NULL, &acc, marks, 64, &nm, NULL,
                                     why1, sizeof why1)) {
            st->skipped++;
            snprintf(st->last_error, sizeof st->last_error, "%.40s: %s", segs[i].name, why1);
            prof_log(LOG_WARN, "history: %s refused: %s", segs[i].name, why1);
        } else {
            st->read++;
            for (int kind = 0; kind < PK_COUNT; kind++)
                load_kind(&acc, kind, (double)segs[i].from + 0.5);
            for (size_t k = 0; k < nm; k++) {
                struct prof_mark out;
                prof_marks_add(marks[k].label, marks[k].t, &out);
            }
        }
        prof_hacc_free(&acc);
        prof_scratch_release(&fm);
    }
    snprintf(st->dir, sizeof st->dir, "%s", pdir);
    snprintf(hist.pdir, sizeof hist.pdir, "%s", pdir);
    hist.serving = 1; /* the GC's records are read from the segments as asked */
    snprintf(st->off_reason, sizeof st->off_reason, "a post-mortem server: nothing is written");
    st->oldest_s = from;
    st->last_to_s = to;
    prof_log(LOG_INFO, "history: serving %zu segments of %s, %lld s up to %lld (%llu refused)",
             n, pdir, (long long)(to - from), (long long)to, (unsigned long long)st->skipped);
    prof_scratch_release(&m);
    return 0;
}
