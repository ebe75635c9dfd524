/*
 * launcher_discovery.c - `clrscope ls` and `clrscope threads`, the launcher's commands that find
 * profiled processes through the discovery files they write (web/web_discovery.c); main() and
 * the usage text are in launcher.c.
 *   ls: lists the profiled processes of this host (the user's own; root's: every user's), each
 *   only when its file was written by the user its process runs as, every field shown with its
 *   control bytes escaped; a file whose process is gone is removed.
 *   threads: prints the thread dump of one profiled process (its /debug/pprof/threads), fetched
 *   with a small HTTP/1.0 GET from the URL and token of its discovery file, under the same rule.
 * Apart from `run` (launcher_run.c) because what is here reads files other users may have put in
 * reach: the directory and owner checks, and the escaping of what reaches the terminal, are the
 * point of this file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "launcher.h"

/* Minimal reader for the discovery file we write ourselves: "key":value pairs. */
static void json_field(const char *json, const char *key, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    out[0] = 0;
    const char *p = strstr(json, pat);
    if (!p)
        return;
    p += strlen(pat);
    p += strspn(p, " \t\r\n");
    if (*p == '"') {
        p++;
        size_t n = strcspn(p, "\"");
        snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    } else {
        size_t n = strcspn(p, ",}");
        snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    }
}

/* "<digits>.json": the pid it names, else 0 */
static long pid_of_name(const char *name)
{
    size_t digits = strspn(name, "0123456789");
    if (!digits || digits > 9 || strcmp(name + digits, ".json"))
        return 0;
    return strtol(name, NULL, 10);
}

/* A discovery file whose process is gone (killed before it could remove it) is removed, but only
 * when nothing else can be meant: its name and content name the same pid, it was written in this
 * pid namespace (a container sharing the directory sees other pids), it is a regular file of
 * ours, and it is still the file just read (not rewritten meanwhile by a new process that was
 * given the same pid). */
static void remove_stale(DIR *d, const char *name, long pid, const char *pid_ns,
                         const struct stat *read_st)
{
    char own_ns[64];
    ssize_t n = readlink("/proc/self/ns/pid", own_ns, sizeof own_ns - 1);
    if (n <= 0 || pid_of_name(name) != pid)
        return;
    own_ns[n] = 0;
    struct stat st;
    if (strcmp(pid_ns, own_ns) || fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) ||
        !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_ino != read_st->st_ino ||
        st.st_dev != read_st->st_dev)
        return;
    unlinkat(dirfd(d), name, 0);
}

/* The effective uid of process pid: the user its files are created as. From /proc/PID/status,
 * which says it even of a process that is not dumpable (its /proc/PID belongs to root). -1 when
 * it cannot be read (gone, or hidden from this user). */
static long process_euid(long pid)
{
    char path[32], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long euid = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long real, eff;
        if (!strncmp(line, "Uid:", 4)) {
            if (sscanf(line + 4, "%lu %lu", &real, &eff) == 2 && eff <= 0xffffffffUL)
                euid = (long)eff;
            break;
        }
    }
    fclose(f);
    return euid;
}

/* Whether a discovery file owned by file_uid may speak for a process running as proc_euid: it
 * was written by that user, or by root (who can write any file anyway). A file another user
 * wrote naming someone else's process (a URL and token of theirs for root to follow, a name
 * planted for a pid to come) does not. */
static int speaks_for(uid_t file_uid, long proc_euid)
{
    return proc_euid >= 0 && (file_uid == (uid_t)proc_euid || file_uid == 0);
}

/* s for the terminal: printable ASCII as it is, any other byte as \xNN (a file can hold escape
 * sequences; the profiler writes none), at most max bytes of s, then "..." when cut. */
static const char *shown(const char *s, size_t max, char *out, size_t cap)
{
    size_t i = 0, j = 0;
    for (; s[i] && i < max && j + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f)
            out[j++] = (char)c;
        else
            j += (size_t)snprintf(out + j, cap - j, "\\x%02x", c);
    }
    if (s[i])
        j += (size_t)snprintf(out + j, cap - j, "...");
    out[j] = 0;
    return out;
}

/* 1 when s is all printable ASCII but spaces (a URL or token the profiler writes), else 0. */
static int plain(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

/* Reads discovery file `name` of directory d into buf: only a regular file of this user's (root:
 * anyone's), never through a link. Returns 0, or -1 with nothing read; *st_out (may be NULL) is
 * the file read. */
static int read_discovery(DIR *d, const char *name, char *buf, size_t cap, struct stat *st_out)
{
    int fd = openat(dirfd(d), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (st.st_uid != geteuid() && geteuid() != 0)) {
        close(fd);
        return -1;
    }
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    if (st_out)
        *st_out = st;
    return 0;
}

/* Opens a directory of discovery files of user `uid`: a real directory (not a link), owned by
 * uid, that no one else can write to, so that every file in it was put there by uid (or root).
 * NULL when it is missing or not such a directory (errno: ENOENT, or EPERM and ENOTDIR). */
static DIR *open_user_dir(const char *path, uid_t uid)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    DIR *d = NULL;
    if (fstat(fd, &st) || st.st_uid != uid || (st.st_mode & 022))
        errno = EPERM;
    else
        d = fdopendir(fd);
    if (!d)
        close(fd);
    return d;
}

/* A directory of discovery files, found: its path and the open directory. */
typedef int (*dir_visit)(DIR *d, const char *path, void *ctx);

/* Opens one user's directory for visit; a directory of this user's that exists but may not be
 * trusted gets a line on stderr, another user's (root's listing) counts in *refused. Returns
 * visit's result, 0 when not visited. */
static int visit_user_dir(const char *path, uid_t uid, dir_visit visit, void *ctx, int *refused)
{
    DIR *d = open_user_dir(path, uid);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        if (uid == geteuid())
            fprintf(stderr, "clrscope: %s is not read: it is not a directory of this user's that "
                    "no one else can write to\n", path);
        else
            (*refused)++;
        return 0;
    }
    int r = visit(d, path, ctx);
    closedir(d);
    return r;
}

/* Calls visit on every directory discovery files are in, until it returns nonzero (returned):
 * the user's own: $XDG_RUNTIME_DIR/clrscope when that is the user's own 0700 runtime directory
 * (as the profiler's prof_runtime_dir), and /tmp/clrscope-EUID; for root also every other
 * /tmp/clrscope-UID that belongs to the uid its name says, or only that of `only_uid` when it
 * is not -1 (the user of the one process looked for). */
static int each_discovery_dir(dir_visit visit, void *ctx, long only_uid)
{
    uid_t me = geteuid();
    int refused = 0, r = 0;
    const char *rt = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    char path[400];
    if (rt && rt[0] == '/' && strlen(rt) <= 300 && !stat(rt, &st) && S_ISDIR(st.st_mode) &&
        st.st_uid == me && !(st.st_mode & 077)) {
        snprintf(path, sizeof path, "%s/clrscope", rt);
        r = visit_user_dir(path, me, visit, ctx, &refused);
    }
    if (r)
        return r;
    if (me != 0 || only_uid >= 0) {
        uid_t uid = me != 0 ? me : (uid_t)only_uid;
        snprintf(path, sizeof path, "/tmp/clrscope-%u", (unsigned)uid);
        r = visit_user_dir(path, uid, visit, ctx, &refused);
        if (refused)
            fprintf(stderr, "clrscope: %s is not read: it is not a directory of uid %u's that "
                    "no one else can write to\n", path, (unsigned)uid);
        return r;
    }
    DIR *tmp = opendir("/tmp");
    struct dirent *e;
    while (tmp && !r && (e = readdir(tmp))) {
        const char *digits = e->d_name + strlen("clrscope-");
        size_t nd = strspn(digits, "0123456789");
        if (strncmp(e->d_name, "clrscope-", strlen("clrscope-")) || !nd || nd > 10 ||
            digits[nd] || (nd > 1 && digits[0] == '0'))
            continue;
        unsigned long long uid = strtoull(digits, NULL, 10);
        if (uid > 0xfffffffeULL)
            continue;
        snprintf(path, sizeof path, "/tmp/%s", e->d_name);
        r = visit_user_dir(path, (uid_t)uid, visit, ctx, &refused);
    }
    if (tmp)
        closedir(tmp);
    if (refused)
        fprintf(stderr, "clrscope: %d /tmp/clrscope-UID director%s not read: not a directory of "
                "that uid's that no one else can write to\n", refused, refused == 1 ? "y" : "ies");
    return r;
}

/* What `clrscope ls` counts over the directories. */
struct listing {
    int shown;        /* processes listed */
    int untrusted;    /* files not written by their process's user */
    char own_ns[64];  /* this process's pid namespace */
};

static int list_dir(DIR *d, const char *dir, void *ctx)
{
    (void)dir;
    struct listing *ls = ctx;
    struct dirent *e;
    while ((e = readdir(d))) {
        long name_pid = pid_of_name(e->d_name);
        char buf[4096];
        struct stat read_st;
        if (!name_pid || read_discovery(d, e->d_name, buf, sizeof buf, &read_st))
            continue;
        char pid[16], url[256], cmd[600], token[256], pid_ns[64];
        json_field(buf, "pid", pid, sizeof pid);
        json_field(buf, "url", url, sizeof url);
        json_field(buf, "cmdline", cmd, sizeof cmd);
        json_field(buf, "token", token, sizeof token);
        json_field(buf, "pid_ns", pid_ns, sizeof pid_ns);
        long p = strtol(pid, NULL, 10);
        if (p <= 0)
            continue; /* not a discovery file */
        if (kill((pid_t)p, 0) && errno == ESRCH) {
            if (pid_ns[0])
                remove_stale(d, e->d_name, p, pid_ns, &read_st); /* gone without cleaning up */
            continue;
        }
        if (pid_ns[0] && strcmp(pid_ns, ls->own_ns))
            continue; /* its pid is another process here: nothing to check the file against */
        if (p != name_pid || !speaks_for(read_st.st_uid, process_euid(p))) {
            ls->untrusted++;
            continue;
        }
        char u[4 * 120 + 8], t[4 * 256 + 8], c[4 * 300 + 8];
        shown(url, 120, u, sizeof u);
        shown(cmd, 300, c, sizeof c);
        if (!ls->shown)
            printf("%-8s %-34s %s\n", "PID", "URL", "COMMAND");
        if (token[0] && strcmp(token, "null"))
            printf("%-8ld %s?token=%s %s\n", p, u, shown(token, 256, t, sizeof t), c);
        else
            printf("%-8ld %-34s %s\n", p, u, c);
        ls->shown++;
    }
    return 0;
}

/* The history directory the profiler writes by default (prof_history.c), or
 * CLRSCOPE_HISTORY_DIR. */
static void history_dir(char *out, size_t cap)
{
    const char *env = getenv("CLRSCOPE_HISTORY_DIR");
    const char *rt = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    if (env && env[0] == '/')
        snprintf(out, cap, "%s", env);
    else if (rt && rt[0] == '/' && strlen(rt) <= 300 && !stat(rt, &st) && S_ISDIR(st.st_mode))
        snprintf(out, cap, "%s/clrscope/history", rt);
    else
        snprintf(out, cap, "/tmp/clrscope-history-%u", (unsigned)getuid());
}

/* `ls --all`: each process's history in the history directory ("<name>-<pid>-<start>/"): its
 * span, segments and bytes, and whether the process still runs. Returns how many it listed. */
static int list_histories(void)
{
    char dir[512];
    history_dir(dir, sizeof dir);
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int shown_n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        const char *dash2 = strrchr(e->d_name, '-');
        if (e->d_name[0] == '.' || !dash2 || dash2 == e->d_name)
            continue;
        const char *dash1 = dash2 - 1;
        while (dash1 > e->d_name && *dash1 != '-')
            dash1--;
        long pid = strtol(dash1 + 1, NULL, 10);
        if (*dash1 != '-' || pid <= 0)
            continue;
        char sub[1024];
        snprintf(sub, sizeof sub, "%s/%s", dir, e->d_name);
        DIR *sd = opendir(sub);
        if (!sd)
            continue;
        long long from = 0, to = 0, bytes = 0;
        int n = 0;
        struct dirent *g;
        while ((g = readdir(sd))) {
            long long f, t;
            char tail[8];
            if (sscanf(g->d_name, "%lld-%lld%7s", &f, &t, tail) != 3 || strcmp(tail, ".clrh"))
                continue;
            char path[1400];
            struct stat st;
            snprintf(path, sizeof path, "%s/%s", sub, g->d_name);
            if (stat(path, &st))
                continue;
            bytes += st.st_size;
            if (!n || f < from)
                from = f;
            if (!n || t > to)
                to = t;
            n++;
        }
        closedir(sd);
        if (!n)
            continue;
        if (!shown_n++)
            printf("\nhistories in %s (clrscope serve DIR shows one):\n", dir);
        char nm[96], when[32];
        time_t tt = (time_t)to;
        struct tm tm;
        strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S", localtime_r(&tt, &tm));
        int alive = !kill((pid_t)pid, 0) || errno == EPERM;
        printf("%-8ld %-9s %lld min to %s, %d segments, %lld KiB  %s\n", pid,
               alive ? "running" : "exited", (to - from + 59) / 60, when, n, bytes / 1024,
               shown(sub, 200, nm, sizeof nm));
    }
    closedir(d);
    return shown_n;
}

int cmd_ls_all(void)
{
    int rc = cmd_ls();
    if (!list_histories())
        printf("no history on disk found\n");
    return rc;
}

int cmd_ls(void)
{
    struct listing ls = {0};
    ssize_t nl = readlink("/proc/self/ns/pid", ls.own_ns, sizeof ls.own_ns - 1);
    ls.own_ns[nl > 0 ? nl : 0] = 0;
    each_discovery_dir(list_dir, &ls, -1);
    if (!ls.shown)
        printf("no profiled processes found\n");
    fflush(stdout);
    if (ls.untrusted)
        fprintf(stderr, "clrscope: %d discovery file%s not listed: not written by the user of "
                "the process %s\n", ls.untrusted, ls.untrusted == 1 ? "" : "s",
                ls.untrusted == 1 ? "it names" : "they name");
    return 0;
}

/* GET path from http://HOST:PORT/ (the discovery file's url) with the token; the body goes to
 * stdout on 200. Returns the exit status: 0, or 1 with a message. */
static int http_get_print(const char *url, const char *token, const char *path)
{
    char host[256], port[16];
    const char *h = url + strlen("http://");
    if (strncmp(url, "http://", 7))
        goto bad_url;
    const char *end = h[0] == '[' ? strchr(h, ']') : NULL; /* [v6]:port */
    const char *colon = strchr(end ? end : h, ':');
    if (!colon)
        goto bad_url;
    const char *hs = end ? h + 1 : h;
    size_t hl = (size_t)((end ? end : colon) - hs);
    size_t pl = strspn(colon + 1, "0123456789");
    if (!hl || hl >= sizeof host || !pl || pl >= sizeof port)
        goto bad_url;
    memcpy(host, hs, hl);
    host[hl] = 0;
    memcpy(port, colon + 1, pl);
    port[pl] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) || !ai) {
        fprintf(stderr, "clrscope: cannot resolve %s\n", host);
        return 1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = 15};
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
        fprintf(stderr, "clrscope: cannot connect to %s: %s\n", url, strerror(errno));
        freeaddrinfo(ai);
        if (fd >= 0)
            close(fd);
        return 1;
    }
    freeaddrinfo(ai);
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %.*s\r\n%s%s%sConnection: close\r\n\r\n",
                     path, (int)(colon + 1 + pl - h), h, token[0] ? "Authorization: Bearer " : "",
                     token, token[0] ? "\r\n" : "");
    if (n <= 0 || (size_t)n >= sizeof req ||
        send(fd, req, (size_t)n, MSG_NOSIGNAL) != (ssize_t)n) {
        fprintf(stderr, "clrscope: cannot send the request to %s\n", url);
        close(fd);
        return 1;
    }
    /* the reply: the status line and headers, then the body, streamed to stdout */
    char buf[16384];
    size_t have = 0;
    char *body = NULL;
    ssize_t r = 0;
    while (!body && have < sizeof buf - 1 && (r = read(fd, buf + have, sizeof buf - 1 - have)) > 0) {
        have += (size_t)r;
        buf[have] = 0;
        body = strstr(buf, "\r\n\r\n");
    }
    int status = 0;
    if (!body || sscanf(buf, "HTTP/%*s %d", &status) != 1) {
        fprintf(stderr, "clrscope: %s from %s\n",
                have >= sizeof buf - 1 ? "reply headers too long" : "no complete reply", url);
        close(fd);
        return 1;
    }
    *body = 0; /* the headers alone, for Content-Length */
    body += 4;
    long long want = -1;
    for (char *hdr = strstr(buf, "\r\n"); hdr; hdr = strstr(hdr + 2, "\r\n"))
        if (!strncasecmp(hdr + 2, "Content-Length:", 15))
            want = strtoll(hdr + 17, NULL, 10);
    FILE *out = status == 200 ? stdout : stderr;
    if (status != 200)
        fprintf(stderr, "clrscope: %s answered %d: ", url, status);
    long long got = 0;
    for (size_t len = have - (size_t)(body - buf);; len = (size_t)r, body = buf) {
        /* no control bytes but line ends and tabs reach the terminal */
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)body[i];
            fputc(c >= 0x20 || c == '\n' || c == '\t' ? (c == 0x7f ? '?' : c) : '?', out);
        }
        got += (long long)len;
        if ((r = read(fd, buf, sizeof buf)) <= 0)
            break;
    }
    int failed = r < 0 || (want >= 0 && got != want);
    if (status != 200)
        fputc('\n', stderr);
    close(fd);
    if (failed) {
        fflush(stdout);
        fprintf(stderr, "clrscope: the reply from %s ended early (%lld of %lld bytes)%s\n", url,
                got, want, r < 0 ? ": timed out or failed" : "");
        return 1;
    }
    return status == 200 ? 0 : 1;
bad_url:
    fprintf(stderr, "clrscope: the discovery file's url '%s' is not http://HOST:PORT/\n", url);
    return 1;
}

/* What `clrscope threads` looks for in each discovery directory, and its exit status. */
struct thread_dump {
    long pid;
    long proc_euid;   /* the user the process runs as */
    int grouped;
    char own_ns[64];  /* this process's pid namespace */
    int status;       /* set when the dump was asked for */
};

/* Asks the process of want->pid for its thread dump when directory d has its discovery file,
 * written by the process's user in this pid namespace. Returns 1 once asked (want->status). */
static int dump_threads(DIR *d, const char *dir, void *ctx)
{
    (void)dir;
    struct thread_dump *want = ctx;
    char name[32], buf[4096], url[256], token[256], fpid[16], pid_ns[64];
    struct stat fst;
    snprintf(name, sizeof name, "%ld.json", want->pid);
    if (read_discovery(d, name, buf, sizeof buf, &fst) || !speaks_for(fst.st_uid, want->proc_euid))
        return 0;
    json_field(buf, "pid", fpid, sizeof fpid);
    json_field(buf, "url", url, sizeof url);
    json_field(buf, "token", token, sizeof token);
    json_field(buf, "pid_ns", pid_ns, sizeof pid_ns);
    if (strtol(fpid, NULL, 10) != want->pid || !url[0] || !plain(url) || !plain(token) ||
        (pid_ns[0] && strcmp(pid_ns, want->own_ns)))
        return 0;
    if (!strcmp(token, "null"))
        token[0] = 0;
    want->status = http_get_print(url, token, want->grouped ? "/debug/pprof/threads?debug=1"
                                                            : "/debug/pprof/threads?debug=2");
    return 1;
}

int cmd_threads(int argc, char **argv)
{
    int grouped = 0;
    const char *pid_arg = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--grouped"))
            grouped = 1;
        else if (!pid_arg && argv[i][0] != '-')
            pid_arg = argv[i];
        else {
            fprintf(stderr, "clrscope: threads: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    char *end = NULL;
    long pid = pid_arg ? strtol(pid_arg, &end, 10) : 0;
    if (!pid_arg || *end || pid <= 0 || pid > 999999999) {
        fprintf(stderr, "clrscope: threads needs the pid of a profiled process (clrscope ls "
                        "lists them)\n");
        return 2;
    }
    /* the process must be there, and be the file's writer: a file a killed process left (whose
     * port another process may have now), or one another user planted for root to follow, is
     * not used */
    struct thread_dump want = {.pid = pid, .grouped = grouped};
    if ((kill((pid_t)pid, 0) && errno != EPERM) || (want.proc_euid = process_euid(pid)) < 0) {
        fprintf(stderr, "clrscope: no process %ld\n", pid);
        return 1;
    }
    ssize_t nl = readlink("/proc/self/ns/pid", want.own_ns, sizeof want.own_ns - 1);
    want.own_ns[nl > 0 ? nl : 0] = 0;
    if (each_discovery_dir(dump_threads, &want, want.proc_euid))
        return want.status;
    fprintf(stderr, "clrscope: no profiled process %ld found (clrscope ls lists them; a process "
                    "with the dashboard off has none)\n", pid);
    return 1;
}
