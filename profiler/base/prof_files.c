/* prof_files.c - see prof_files.h. */
#include "prof_files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

const char *prof_runtime_dir(void)
{
    const char *rt = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    /* the specification's runtime directory is the user's own, mode 0700: one that others can
     * use (XDG_RUNTIME_DIR=/tmp) is not one, and its clrscope/ must not be made private */
    return rt && rt[0] == '/' && strlen(rt) <= 300 && !stat(rt, &st) && S_ISDIR(st.st_mode) &&
                   st.st_uid == geteuid() && !(st.st_mode & 077)
               ? rt
               : NULL;
}

int prof_files_mkdirs(const char *path, mode_t mode)
{
    char buf[600];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf) {
        errno = ENAMETOOLONG;
        return -1;
    }
    for (char *p = buf + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = 0;
        if (mkdir(buf, mode) && errno != EEXIST)
            return -1;
        *p = '/';
    }
    return mkdir(buf, mode) && errno != EEXIST ? -1 : 0;
}

/* The reason in words, and errno kept. */
static void say(char *why, size_t cap, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *why, size_t cap, const char *fmt, ...)
{
    int e = errno;
    if (cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why, cap, fmt, ap);
        va_end(ap);
    }
    errno = e;
}

static void say_errno(char *why, size_t cap, int e)
{
    char buf[128];
    say(why, cap, "%s", strerror_r(e, buf, sizeof buf));
    errno = e;
}

int prof_files_dir_open(const char *path, int private_dir, struct stat *st_out, char *why,
                        size_t whycap)
{
    struct stat st;
    if (whycap)
        why[0] = 0;
    if (prof_files_mkdirs(path, 0700)) {
        say_errno(why, whycap, errno);
        return -1;
    }
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (!lstat(path, &st) && S_ISLNK(st.st_mode)) {
            say(why, whycap, "it is a symbolic link (clrscope writes only into a real directory: "
                "name the directory itself)");
            errno = ELOOP;
        } else if (e == ENOTDIR) {
            say(why, whycap, "it is not a directory");
            errno = ENOTDIR;
        } else {
            say_errno(why, whycap, e);
        }
        return -1;
    }
    int e = 0;
    if (fstat(fd, &st)) {
        e = errno;
        say_errno(why, whycap, e);
    } else if (private_dir && st.st_uid == geteuid() && (st.st_mode & 077)) {
        if (fchmod(fd, 0700)) {
            e = errno;
            say_errno(why, whycap, e);
        }
        st.st_mode = (st.st_mode & ~(mode_t)07777) | 0700;
    }
    if (!e && prof_files_dir_fit(&st, private_dir, why, whycap))
        e = errno;
    if (e) {
        close(fd);
        errno = e;
        return -1;
    }
    if (st_out)
        *st_out = st;
    return fd;
}

int prof_files_dir_fit(const struct stat *st, int private_dir, char *why, size_t whycap)
{
    if (st->st_uid != geteuid() && (private_dir || st->st_uid != 0)) {
        say(why, whycap, "it belongs to another user (uid %u)%s", (unsigned)st->st_uid,
            private_dir ? "" : "; a directory clrscope writes into must be yours or root's");
    } else if ((st->st_mode & 022) && !(st->st_mode & S_ISVTX)) {
        say(why, whycap, "other users can write to it and it is not sticky (chmod go-w, or "
            "chmod +t as /tmp is)");
    } else {
        return 0;
    }
    errno = EPERM;
    return -1;
}

int prof_files_dir_shared(const struct stat *st)
{
    return (st->st_mode & 022) != 0;
}

int prof_files_private_dir(const char *path)
{
    int fd = prof_files_dir_open(path, 1, NULL, NULL, 0);
    if (fd < 0)
        return -1;
    close(fd);
    return 0;
}

int prof_files_create_at(int dirfd, const char *name, mode_t mode)
{
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = openat(dirfd, name, flags, mode);
    if (fd < 0 && errno == EEXIST && unlinkat(dirfd, name, 0) == 0)
        fd = openat(dirfd, name, flags, mode);
    return fd;
}

int prof_files_create(const char *path, mode_t mode)
{
    return prof_files_create_at(AT_FDCWD, path, mode);
}
