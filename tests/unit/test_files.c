/*
 * test_files.c - clrscope's files in directories others can write to (prof_files): a private
 * directory must be a real one of this user's, made 0700; a directory the user names must be no
 * link, this user's or root's, and writable by no one else unless sticky; a file is always
 * created new, never through a link, so whatever was planted at its name is neither written nor
 * truncated.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof_files.h"

#include "unit_check.h"

static char base[] = "/tmp/clrscope-test-files-XXXXXX";

static char *at(const char *name)
{
    static char buf[4][256];
    static int i;
    char *p = buf[i++ & 3];
    snprintf(p, 256, "%s/%s", base, name);
    return p;
}

static void write_text(const char *path, const char *text, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd >= 0) {
        (void)!write(fd, text, strlen(text));
        close(fd);
    }
}

static int read_text(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return 0;
}

static void test_private_dir(void)
{
    struct stat st;
    /* made with its parents, 0700 */
    CHECK(prof_files_private_dir(at("a/b/dumps")) == 0, "a new directory: %s", strerror(errno));
    CHECK(!stat(at("a/b/dumps"), &st) && (st.st_mode & 0777) == 0700, "made 0700: %o",
          st.st_mode & 0777);
    /* one of ours that others can read or write: closed */
    mkdir(at("open"), 0777);
    chmod(at("open"), 0777);
    CHECK(prof_files_private_dir(at("open")) == 0, "our 0777 directory: %s", strerror(errno));
    CHECK(!stat(at("open"), &st) && (st.st_mode & 0777) == 0700, "closed to 0700: %o",
          st.st_mode & 0777);
    /* a link planted at the name, to a directory the planter can read: refused */
    mkdir(at("elsewhere"), 0777);
    chmod(at("elsewhere"), 0777);
    symlink(at("elsewhere"), at("link"));
    errno = 0;
    CHECK(prof_files_private_dir(at("link")) == -1 && (errno == ELOOP || errno == ENOTDIR),
          "a link: refused (%s)", strerror(errno));
    CHECK(!stat(at("elsewhere"), &st) && (st.st_mode & 0777) == 0777,
          "the link's target is left as it was");
    /* a file at the name */
    write_text(at("file"), "x", 0600);
    CHECK(prof_files_private_dir(at("file")) == -1, "a file: refused");
    /* another user's directory (needs root to make one) */
    if (geteuid() == 0) {
        mkdir(at("theirs"), 0777);
        chmod(at("theirs"), 0777);
        if (!chown(at("theirs"), 65534, 65534)) {
            errno = 0;
            CHECK(prof_files_private_dir(at("theirs")) == -1 && errno == EPERM,
                  "another user's directory: refused with EPERM (%s)", strerror(errno));
            CHECK(!stat(at("theirs"), &st) && (st.st_mode & 0777) == 0777,
                  "and left as it was");
        }
    }
    CHECK(prof_files_private_dir("/proc/nope/x") == -1, "a path that cannot be made");
}

static int opened(const char *path, int private_dir, char *why, size_t cap)
{
    int fd = prof_files_dir_open(path, private_dir, NULL, why, cap);
    if (fd < 0)
        return 0;
    close(fd);
    return 1;
}

static void test_named_dir(void)
{
    char why[200];
    struct stat st;
    /* made when missing, 0700, and opened */
    int fd = prof_files_dir_open(at("named/a/b"), 0, &st, why, sizeof why);
    CHECK(fd >= 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700,
          "a new directory: made 0700 and opened (%s)", why);
    if (fd >= 0) {
        int f = prof_files_create_at(fd, "x.tmp", 0600);
        CHECK(f >= 0 && !stat(at("named/a/b/x.tmp"), &st), "a file made relative to it");
        if (f >= 0)
            close(f);
        CHECK(!prof_files_dir_shared(&(struct stat){.st_mode = S_IFDIR | 0700}), "0700: not shared");
        close(fd);
    }
    /* ours and open to the group or to all: refused, and left as it was (it is the user's) */
    mkdir(at("named/group"), 0770);
    chmod(at("named/group"), 0770);
    errno = 0;
    CHECK(!opened(at("named/group"), 0, why, sizeof why) && errno == EPERM &&
          strstr(why, "not sticky"), "group-writable: refused (%s)", why);
    CHECK(!stat(at("named/group"), &st) && (st.st_mode & 0777) == 0770, "left 0770");
    mkdir(at("named/all"), 0777);
    chmod(at("named/all"), 0777);
    CHECK(!opened(at("named/all"), 0, why, sizeof why) && strstr(why, "other users can write"),
          "0777: refused (%s)", why);
    /* sticky (as /tmp is): others cannot replace our files there; shared */
    chmod(at("named/all"), 01777);
    fd = prof_files_dir_open(at("named/all"), 0, &st, why, sizeof why);
    CHECK(fd >= 0, "01777: used (%s)", why);
    CHECK(fd >= 0 && prof_files_dir_shared(&st), "01777: shared");
    if (fd >= 0)
        close(fd);
    /* readable by others but writable by no one else: used as it is */
    mkdir(at("named/readable"), 0755);
    chmod(at("named/readable"), 0755);
    CHECK(opened(at("named/readable"), 0, why, sizeof why), "0755: used (%s)", why);
    CHECK(!stat(at("named/readable"), &st) && (st.st_mode & 0777) == 0755, "not changed");
    /* a link, even to a good directory of ours: refused, saying so */
    symlink(at("named/readable"), at("named/link"));
    errno = 0;
    CHECK(!opened(at("named/link"), 0, why, sizeof why) && errno == ELOOP &&
          strstr(why, "symbolic link"), "a link: refused (%s)", why);
    write_text(at("named/file"), "x", 0600);
    CHECK(!opened(at("named/file"), 0, why, sizeof why) && errno == ENOTDIR &&
          strstr(why, "not a directory"), "a file: refused (%s)", why);
    /* the rule on a status alone */
    struct stat fake = {.st_mode = S_IFDIR | 0755, .st_uid = geteuid()};
    CHECK(!prof_files_dir_fit(&fake, 0, why, sizeof why), "ours, 0755: fit");
    fake.st_mode = S_IFDIR | 0775;
    CHECK(prof_files_dir_fit(&fake, 0, why, sizeof why) && errno == EPERM, "0775: not fit");
    fake.st_mode = S_IFDIR | 01777;
    fake.st_uid = 0;
    CHECK(!prof_files_dir_fit(&fake, 0, why, sizeof why), "root's /tmp: fit");
    CHECK(geteuid() == 0 || prof_files_dir_fit(&fake, 1, why, sizeof why),
          "root's /tmp as a private directory of another user: not fit");
    fake.st_uid = 4242 == geteuid() ? 4243 : 4242;
    fake.st_mode = S_IFDIR | 0700;
    CHECK(prof_files_dir_fit(&fake, 0, why, sizeof why) && strstr(why, "another user (uid"),
          "another user's: not fit (%s)", why);
    /* another user's real directory, even closed to others (needs root to make one) */
    if (geteuid() == 0) {
        mkdir(at("named/theirs"), 0755);
        if (!chown(at("named/theirs"), 65534, 65534)) {
            errno = 0;
            CHECK(!opened(at("named/theirs"), 0, why, sizeof why) && errno == EPERM &&
                  strstr(why, "belongs to another user (uid 65534)"),
                  "another user's directory: refused (%s)", why);
        }
    }
    CHECK(!opened("/proc/nope/x", 0, why, sizeof why) && why[0], "cannot be made: %s", why);
}

static void test_create(void)
{
    char buf[64];
    struct stat st;
    int fd = prof_files_create(at("new.tmp"), 0600);
    CHECK(fd >= 0, "a new file: %s", strerror(errno));
    CHECK(fd >= 0 && !fstat(fd, &st) && (st.st_mode & 0777) == 0600, "mode 0600");
    if (fd >= 0)
        close(fd);
    /* a link planted at the name, to a file of ours: the link goes, the file is untouched */
    write_text(at("precious"), "keep me", 0600);
    symlink(at("precious"), at("planted.tmp"));
    fd = prof_files_create(at("planted.tmp"), 0600);
    CHECK(fd >= 0, "a link at the name: replaced by a new file (%s)", strerror(errno));
    if (fd >= 0) {
        (void)!write(fd, "snapshot", 8);
        close(fd);
    }
    CHECK(!read_text(at("precious"), buf, sizeof buf) && !strcmp(buf, "keep me"),
          "the link's target is not written: \"%s\"", buf);
    CHECK(!lstat(at("planted.tmp"), &st) && S_ISREG(st.st_mode) && st.st_uid == geteuid(),
          "the name is now a regular file of ours");
    /* a file planted readable by all: not reused (its mode would stay), replaced */
    write_text(at("open.tmp"), "old", 0666);
    chmod(at("open.tmp"), 0666);
    fd = prof_files_create(at("open.tmp"), 0600);
    CHECK(fd >= 0 && !fstat(fd, &st) && (st.st_mode & 0777) == 0600 && st.st_size == 0,
          "a planted 0666 file: replaced by a new 0600 one");
    if (fd >= 0)
        close(fd);
    CHECK(prof_files_create(at("no/such/dir.tmp"), 0600) == -1 && errno == ENOENT,
          "no directory: ENOENT");
}

static void test_runtime_dir(void)
{
    setenv("XDG_RUNTIME_DIR", base, 1);
    CHECK(prof_runtime_dir() && !strcmp(prof_runtime_dir(), base), "absolute: used");
    /* others may use it (XDG_RUNTIME_DIR=/tmp): not a runtime directory, and its clrscope/
     * (the shared one) must not be made private */
    chmod(base, 01777);
    CHECK(prof_runtime_dir() == NULL, "open to others (like /tmp): ignored");
    chmod(base, 0750);
    CHECK(prof_runtime_dir() == NULL, "open to the group: ignored");
    chmod(base, 0700);
    setenv("XDG_RUNTIME_DIR", "/tmp", 1);
    CHECK(prof_runtime_dir() == NULL, "/tmp: ignored");
    setenv("XDG_RUNTIME_DIR", "/nonexistent/run", 1);
    CHECK(prof_runtime_dir() == NULL, "missing: ignored, not made");
    setenv("XDG_RUNTIME_DIR", "relrun", 1);
    CHECK(prof_runtime_dir() == NULL, "relative: ignored, as the spec says");
    char longdir[400];
    memset(longdir, 'a', sizeof longdir - 1);
    longdir[0] = '/';
    longdir[sizeof longdir - 1] = 0;
    setenv("XDG_RUNTIME_DIR", longdir, 1);
    CHECK(prof_runtime_dir() == NULL, "longer than 300 bytes: ignored, not cut");
    unsetenv("XDG_RUNTIME_DIR");
    CHECK(prof_runtime_dir() == NULL, "unset");
}

int main(void)
{
    if (!mkdtemp(base)) {
        printf("FAIL: mkdtemp: %s\n", strerror(errno));
        return 1;
    }
    test_private_dir();
    test_named_dir();
    test_create();
    test_runtime_dir();
    char cmd[300];
    snprintf(cmd, sizeof cmd, "chmod -R u+rwx '%s' 2>/dev/null; rm -rf '%s'", base, base);
    (void)!system(cmd);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
