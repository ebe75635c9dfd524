/* hs_file.c - a snapshot's .gcdump file: the heap graph laid out as the format's nodes (a root,
 * one pseudo node per root category and per static variable, then the objects) for the writer
 * (hs_gcdump.c), and the file itself: disk space checked, written under a temporary name, then
 * renamed, all relative to the dump directory's descriptor; opened for /file and removed only
 * while it is the file written. Writes on clrscope-heap (prof_heapsnap_write_graph also in the
 * fuzz target), opens and removes under the list's lock on any thread; no state of its own. */
#include "hs_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hs_gcdump.h"
#include "hs_graph.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_files.h"
#include "prof_log.h"
#include "prof_scratch.h"

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
char *hs_static_label(struct prof_scratch *mem, const struct heap_graph *g, uint32_t s)
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
        f->stat_names[s] = hs_static_label(&f->mem, g, s);
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


/* The file's name within the dump directory (the last part of its path). */
static const char *file_name(const struct hs_snapshot *s)
{
    const char *slash = strrchr(s->file, '/');
    return slash ? slash + 1 : s->file;
}

int hs_file_write(const struct hs_snapshot *s, int dirfd, const struct heap_graph *g,
                  const char **tnames, const char **tmods, char *path, size_t pathcap,
                  struct stat *file_st, char *err, size_t errcap)
{
    char e[128];
    char dir[sizeof g_cfg.dump_dir];
    snprintf(dir, sizeof dir, "%s", g_cfg.dump_dir);
    uint64_t need = (uint64_t)g->n * 14 + g->ne * 2 + (1u << 20);
    if (hs_disk_room(dirfd, dir, need, err, errcap))
        return -1;
    char name[64], tmp[80];
    snprintf(name, sizeof name, "clrscope-%d-%d.gcdump", (int)g_core.pid, s->id);
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    snprintf(path, pathcap, "%.500s/%s", dir, name);
    int fd = prof_files_create_at(dirfd, tmp, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        hs_errtext(errno, e, sizeof e);
        snprintf(err, errcap, "cannot write %.140s.tmp: %.90s", path, e);
        if (fd >= 0) {
            close(fd);
            unlinkat(dirfd, tmp, 0);
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
    /* what is renamed into place is what was written: its inode, size and time of change are
     * what /file checks (a rename changes none of them) */
    if (!rc && (fflush(f) || fstat(fileno(f), file_st))) {
        hs_errtext(errno, e, sizeof e);
        snprintf(err, errcap, "cannot write %.140s.tmp: %.90s", path, e);
        rc = -1;
    }
    if (fclose(f) && !rc) {
        hs_errtext(errno, e, sizeof e);
        snprintf(err, errcap, "cannot write %.140s.tmp: %.90s", path, e);
        rc = -1;
    }
    prof_scratch_release(&mem);
    if (!rc && renameat(dirfd, tmp, dirfd, name)) {
        hs_errtext(errno, e, sizeof e);
        snprintf(err, errcap, "cannot rename %.140s.tmp: %.90s", path, e);
        rc = -1;
    }
    if (rc) {
        unlinkat(dirfd, tmp, 0);
        return -1;
    }
    return 0;
}

/* Whether `st` is the file of `s` as it was written: the same regular file (device and inode: an
 * inode freed can be given to the next file made, so also its size and time of change). */
static int same_file(const struct hs_snapshot *s, const struct stat *st)
{
    return S_ISREG(st->st_mode) && (uint64_t)st->st_dev == s->file_dev &&
           (uint64_t)st->st_ino == s->file_ino && (uint64_t)st->st_size == s->file_bytes &&
           (int64_t)st->st_mtim.tv_sec * 1000000000 + st->st_mtim.tv_nsec == s->file_mtime_ns;
}

/* The dump directory, opened again, if it is the one the file of `s` was written in and still
 * fit for it; else -1 with the reason in `why` (errno ENOENT when it is gone). */
static int open_dir_of(const struct hs_snapshot *s, char *why, size_t whycap)
{
    char dir[sizeof g_cfg.dump_dir];
    snprintf(dir, sizeof dir, "%s", g_cfg.dump_dir);
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        int err = errno;
        char e[128];
        hs_errtext(err, e, sizeof e);
        snprintf(why, whycap, "its directory %.200s cannot be opened: %s%s", dir, e,
                 err == ELOOP || err == ENOTDIR ? " (it is no longer a real directory)" : "");
        errno = err;
        return -1;
    }
    struct stat dst;
    char fit[200];
    if (fstat(dfd, &dst) || (uint64_t)dst.st_dev != s->dir_dev ||
        (uint64_t)dst.st_ino != s->dir_ino) {
        snprintf(why, whycap, "%.200s is no longer the directory the file was written in", dir);
    } else if (prof_files_dir_fit(&dst, g_cfg.dump_dir_default, fit, sizeof fit)) {
        snprintf(why, whycap, "its directory %.200s cannot be trusted now: %s", dir, fit);
    } else {
        return dfd;
    }
    close(dfd);
    errno = EPERM;
    return -1;
}

int hs_file_open(const struct hs_snapshot *s, char *why, size_t whycap)
{
    why[0] = 0;
    if (!s->file[0]) {
        errno = ENOENT;
        return -1;
    }
    int dfd = open_dir_of(s, why, whycap);
    if (dfd < 0)
        return errno == ENOENT ? -1 : -2;
    /* O_NONBLOCK: a FIFO put at the name must not hold the worker; a regular file ignores it */
    int fd = openat(dfd, file_name(s), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    int err = errno;
    close(dfd);
    if (fd < 0) {
        if (err == ENOENT) {
            errno = ENOENT;
            return -1;
        }
        if (err == ELOOP)
            snprintf(why, whycap, "%.300s is now a symbolic link", s->file);
        else {
            char e[128];
            hs_errtext(err, e, sizeof e);
            snprintf(why, whycap, "%.300s cannot be opened: %s", s->file, e);
        }
        errno = err;
        return err == ELOOP ? -2 : -1;
    }
    struct stat st;
    if (fstat(fd, &st) || !same_file(s, &st)) {
        snprintf(why, whycap, "%.300s was replaced or changed since it was written", s->file);
        close(fd);
        return -2;
    }
    return fd;
}

void hs_file_remove(const struct hs_snapshot *s)
{
    char why[300];
    if (!s->file[0])
        return;
    int dfd = open_dir_of(s, why, sizeof why);
    if (dfd < 0) {
        prof_log(LOG_DEBUG, "heap snapshot %d: its file is left in place: %s", s->id, why);
        return;
    }
    struct stat st;
    if (!fstatat(dfd, file_name(s), &st, AT_SYMLINK_NOFOLLOW) && same_file(s, &st))
        unlinkat(dfd, file_name(s), 0);
    else
        prof_log(LOG_DEBUG, "heap snapshot %d: %s is not the file written; left in place", s->id,
                 s->file);
    close(dfd);
}
