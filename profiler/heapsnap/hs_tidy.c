/* hs_tidy.c - CLRSCOPE_DUMP_KEEP applied to the .gcdump files that processes of this user which
 * have exited left in the dump directory. Runs on clrscope-heap after each snapshot; the
 * directory and the process table only, no state of its own. */
#include "hs_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_files.h"
#include "prof_log.h"

#define EXITED_MIN_AGE_S 3600 /* another process's snapshot is left alone this long */
#define EXITED_SCAN_MAX 4096  /* directory entries looked at, at most */

struct exited_file {
    time_t mtime;
    char name[64];
};

static int newest_first(const void *a, const void *b)
{
    const struct exited_file *x = a, *y = b;
    return x->mtime < y->mtime ? 1 : x->mtime > y->mtime ? -1 : strcmp(x->name, y->name);
}

/* CLRSCOPE_DUMP_KEEP applied to the snapshots of processes that have exited too: the newest
 * `keep` of them stay (the snapshot of a process that then ran out of memory is worth keeping),
 * older ones go. With each process applying the limit to its own files only, a directory used
 * by restarts would grow without bound (313 files, 236 MB, on a test machine). A file of a
 * live process, or under an hour old (its pid may be another pid namespace's), is never
 * touched; only names clrscope writes (clrscope-PID-ID.gcdump) are looked at, and only files of
 * this user. In a directory other users can write to (sticky, like /tmp) nothing is: the files
 * there are other processes' and other users' (a process running as root could remove them
 * all), and a pid's process may live in another pid namespace. */
void hs_tidy_exited(int dfd, const struct stat *dst)
{
    if (prof_files_dir_shared(dst))
        return;
    char dir[sizeof g_cfg.dump_dir];
    snprintf(dir, sizeof dir, "%s", g_cfg.dump_dir);
    int fd = dup(dfd); /* closedir closes it; the directory read from its start */
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    rewinddir(d);
    int keep = g_cfg.dump_keep > 0 ? g_cfg.dump_keep : 1;
    struct exited_file *f = malloc(EXITED_SCAN_MAX * sizeof *f);
    size_t n = 0, seen = 0;
    time_t now = time(NULL);
    struct dirent *e;
    while (f && (e = readdir(d)) && seen++ < EXITED_SCAN_MAX) {
        int pid = 0, id = 0, end = 0;
        if (sscanf(e->d_name, "clrscope-%d-%d.gcdump%n", &pid, &id, &end) != 2 ||
            e->d_name[end] || pid <= 0 || pid == (int)g_core.pid ||
            strlen(e->d_name) >= sizeof f[n].name)
            continue;
        if (!kill((pid_t)pid, 0) || errno != ESRCH)
            continue; /* alive (or not ours to ask about) */
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) || !S_ISREG(st.st_mode) ||
            st.st_uid != geteuid() || now - st.st_mtime < EXITED_MIN_AGE_S)
            continue;
        f[n].mtime = st.st_mtime;
        snprintf(f[n].name, sizeof f[n].name, "%s", e->d_name);
        n++;
    }
    if (f && n > (size_t)keep) {
        qsort(f, n, sizeof *f, newest_first);
        int removed = 0;
        for (size_t i = (size_t)keep; i < n; i++)
            removed += !unlinkat(dfd, f[i].name, 0);
        if (removed)
            prof_log(LOG_INFO, "heap snapshots: removed %d file%s of exited processes from %s "
                     "(CLRSCOPE_DUMP_KEEP=%d of them stay)", removed, removed == 1 ? "" : "s", dir,
                     keep);
    }
    free(f);
    closedir(d);
}
