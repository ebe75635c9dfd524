/* prof_files.c - see prof_files.h. */
#include "prof_files.h"

#include <errno.h>
#include <fcntl.h>
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

int prof_files_private_dir(const char *path)
{
    if (prof_files_mkdirs(path, 0700))
        return -1;
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    int rc = fstat(fd, &st);
    if (!rc && st.st_uid != geteuid()) {
        errno = EPERM;
        rc = -1;
    } else if (!rc && (st.st_mode & 077)) {
        rc = fchmod(fd, 0700);
    }
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

int prof_files_create(const char *path, mode_t mode)
{
    const int flags = O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC;
    int fd = open(path, flags, mode);
    if (fd < 0 && errno == EEXIST && unlink(path) == 0)
        fd = open(path, flags, mode);
    return fd;
}
