/* web_fdguard.c - see web_fdguard.h. */
#include "web_fdguard.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "prof_agg.h"
#include "prof_log.h"

/* connections answered per look at most: a flood waits for the next look */
#define FDGUARD_BATCH 64

/* Written at the start (web_fdguard_start, before listen_fd is published), then by clrscope-agg
 * (the watch); the fields marked atomic are read by any thread (stats, web_fdguard_find). */
static struct fdguard_state {
    int listen_fd;   /* atomic, published last by web_fdguard_start; -1: not guarded */
    int spare_fd;    /* -1: none held (the watch, web_fdguard_lose_spare in tests) */
    int64_t last_ns; /* the watch's last look */
    int guarded;     /* atomic */
    int out;         /* atomic: in an episode of no descriptors */
    int spare;       /* atomic mirror of spare_fd >= 0, for the stats */
    int backlog;     /* the listening socket's, for listening again */
    struct sockaddr_storage addr; /* ... on the address it has */
    socklen_t addr_len;
    uint64_t refused, resets; /* atomic */
    char scratch[2048];       /* a refused request is read into this (clrscope-agg only) */
} fdguard = {.listen_fd = -1, .spare_fd = -1};

static int take_spare(void)
{
    if (fdguard.spare_fd < 0)
        fdguard.spare_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    __atomic_store_n(&fdguard.spare, fdguard.spare_fd >= 0, __ATOMIC_RELAXED);
    return fdguard.spare_fd;
}

static int port_of(int fd, struct sockaddr_storage *ss, socklen_t *sl)
{
    int acc = 0;
    socklen_t al = sizeof acc;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) || !acc)
        return -1;
    *sl = sizeof *ss;
    if (getsockname(fd, (struct sockaddr *)ss, sl))
        return -1;
    if (ss->ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)ss)->sin_port);
    if (ss->ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)ss)->sin6_port);
    return -1;
}

int web_fdguard_find(int (*match)(int fd, void *arg), void *arg, int *matches)
{
    *matches = 0;
    DIR *d = opendir("/proc/self/fd"); /* its buffer is on the heap, not a worker's stack */
    if (!d)
        return -1;
    int found = -1;
    struct dirent *e;
    while (*matches < 2 && (e = readdir(d))) {
        char *end;
        long fd = strtol(e->d_name, &end, 10);
        if (end == e->d_name || *end || fd < 0 || fd > 1 << 30 || fd == dirfd(d))
            continue;
        if (match((int)fd, arg)) {
            if (found < 0)
                found = (int)fd;
            ++*matches;
        }
    }
    closedir(d);
    return found;
}

static int is_listener(int fd, void *port)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    return port_of(fd, &ss, &sl) == *(int *)port;
}

/* The listening socket on `port`, its address kept for listening again */
static int find_listener(int port)
{
    int matches;
    int fd = web_fdguard_find(is_listener, &port, &matches);
    return fd >= 0 && port_of(fd, &fdguard.addr, &fdguard.addr_len) == port ? fd : -1;
}

int web_fdguard_start(int port)
{
    int fd = find_listener(port);
    if (fd < 0) {
        prof_log(LOG_WARN, "dashboard: its listening socket was not found among the process's "
                 "descriptors; should they run out, its accept loop may spin");
        return -1;
    }
    /* a listening socket's TCP_INFO carries its backlog in tcpi_sacked */
    struct tcp_info ti;
    socklen_t tl = sizeof ti;
    memset(&ti, 0, sizeof ti);
    fdguard.backlog = !getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &tl) && ti.tcpi_sacked
                    ? (int)ti.tcpi_sacked
                    : SOMAXCONN;
    int fl = fcntl(fd, F_GETFL);
    if (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0 || take_spare() < 0) {
        prof_log(LOG_WARN, "dashboard: no spare descriptor (%s); should the process run out of "
                 "them, its accept loop may spin", strerror(errno));
        return -1;
    }
    __atomic_store_n(&fdguard.guarded, 1, __ATOMIC_RELAXED);
    __atomic_store_n(&fdguard.listen_fd, fd, __ATOMIC_RELEASE);
    /* looked at from clrscope-agg's loop (every 2-50 ms; the guard paces itself) */
    static const struct prof_kind fdguard_kind = {.name = "fd-guard", .poll = web_fdguard_watch};
    prof_agg_add(&fdguard_kind);
    return 0;
}

/* Answers a connection accepted for want of descriptors and closes it. Non-blocking: a client
 * that has not sent its request yet gets the answer all the same. */
static void refuse(int c)
{
    (void)!recv(c, fdguard.scratch, sizeof fdguard.scratch, MSG_DONTWAIT);
    struct rlimit rl;
    char lim[48] = "";
    if (!getrlimit(RLIMIT_NOFILE, &rl) && rl.rlim_cur != RLIM_INFINITY)
        snprintf(lim, sizeof lim, " (RLIMIT_NOFILE %llu)", (unsigned long long)rl.rlim_cur);
    char body[320], head[400];
    int bl = snprintf(body, sizeof body,
                      "{\"error\": \"the process has run out of file descriptors%s: the "
                      "dashboard cannot serve requests until some are closed\"}\n", lim);
    int hl = snprintf(head, sizeof head,
                      "HTTP/1.1 503 Service Unavailable\r\n"
                      "Content-Type: application/json; charset=utf-8\r\n"
                      "Content-Length: %d\r\nRetry-After: 5\r\nCache-Control: no-store\r\n"
                      "X-Content-Type-Options: nosniff\r\nConnection: close\r\n\r\n", bl);
    if (hl > 0 && hl < (int)sizeof head && bl > 0 && bl < (int)sizeof body) {
        (void)!send(c, head, (size_t)hl, MSG_DONTWAIT | MSG_NOSIGNAL);
        (void)!send(c, body, (size_t)bl, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
    shutdown(c, SHUT_WR);
    close(c);
}

static int bound_as_before(int lfd)
{
    struct sockaddr_storage cur;
    socklen_t cl = sizeof cur;
    return !getsockname(lfd, (struct sockaddr *)&cur, &cl) && cl == fdguard.addr_len &&
           !memcmp(&cur, &fdguard.addr, cl);
}

/* No spare to answer with: the queued connections are reset, so that their clients hear at once
 * instead of waiting and the accept loop stops spinning. On Linux, shutdown(SHUT_RD) of a
 * listening socket drops its queue and stops its listening; it listens again at once on the
 * same address, with no new descriptor. Should that fail (the port taken in between), the dashboard is off, and says so. */
static void reset_queue(int lfd)
{
    if (shutdown(lfd, SHUT_RD) && errno != ENOTCONN)
        return;
    /* bound to any port (0), the socket gave it up and bind takes it again; bound by number, it
     * kept it and bind says EINVAL; either way it must listen where it did */
    int ok = (!bind(lfd, (struct sockaddr *)&fdguard.addr, fdguard.addr_len) || errno == EINVAL) &&
             !listen(lfd, fdguard.backlog) && bound_as_before(lfd);
    if (!ok) {
        prof_log(LOG_ERROR, "dashboard: its listening socket could not listen again after its "
                 "queue was dropped for want of file descriptors (%s); the dashboard is off",
                 strerror(errno));
        __atomic_store_n(&fdguard.listen_fd, -1, __ATOMIC_RELEASE);
        return;
    }
    __atomic_fetch_add(&fdguard.resets, 1, __ATOMIC_RELAXED);
}

static void episode(int out)
{
    if (__atomic_load_n(&fdguard.out, __ATOMIC_RELAXED) == out)
        return;
    __atomic_store_n(&fdguard.out, out, __ATOMIC_RELAXED);
    if (out)
        prof_log(LOG_WARN, "the process has run out of file descriptors: dashboard connections "
                 "are answered 503 (or reset) until some are closed");
    else
        prof_log(LOG_INFO, "file descriptors are available again: the dashboard serves requests");
}

void web_fdguard_watch(int64_t now)
{
    int lfd = __atomic_load_n(&fdguard.listen_fd, __ATOMIC_ACQUIRE);
    if (lfd < 0 || now - fdguard.last_ns < FDGUARD_PERIOD_NS)
        return;
    fdguard.last_ns = now;
    take_spare(); /* again, when the app took its place after the last answer */
    struct pollfd p = {.fd = lfd, .events = POLLIN};
    int queued = poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
    if (!queued && !__atomic_load_n(&fdguard.out, __ATOMIC_RELAXED))
        return;
    /* A connection is queued (civetweb takes it within microseconds, unless no descriptor is
     * free), or descriptors ran out at an earlier look: a copy of the listening socket's
     * descriptor tells whether one is free now (closed at once). */
    int probe = fcntl(lfd, F_DUPFD_CLOEXEC, 0);
    if (probe >= 0) {
        close(probe);
        episode(0);
        return;
    }
    if ((errno != EMFILE && errno != ENFILE) || !queued)
        return;
    episode(1);
    for (int i = 0; fdguard.spare_fd >= 0 && i < FDGUARD_BATCH; i++) {
        close(fdguard.spare_fd);
        fdguard.spare_fd = -1;
        /* civetweb's accept may take the place first: then civetweb serves the connection */
        int c = accept4(lfd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (c >= 0) {
            refuse(c);
            __atomic_fetch_add(&fdguard.refused, 1, __ATOMIC_RELAXED);
        }
        if (take_spare() < 0 || c < 0)
            break; /* the queue is empty (EAGAIN), or the place was taken */
    }
    p.revents = 0;
    if (fdguard.spare_fd < 0 && poll(&p, 1, 0) == 1 && (p.revents & POLLIN))
        reset_queue(lfd);
}

void web_fdguard_get_stats(struct web_fdguard_stats *out)
{
    out->guarded = __atomic_load_n(&fdguard.guarded, __ATOMIC_RELAXED);
    out->spare_held = __atomic_load_n(&fdguard.spare, __ATOMIC_RELAXED);
    out->out_of_fds = __atomic_load_n(&fdguard.out, __ATOMIC_RELAXED);
    out->refused = __atomic_load_n(&fdguard.refused, __ATOMIC_RELAXED);
    out->resets = __atomic_load_n(&fdguard.resets, __ATOMIC_RELAXED);
}

void web_fdguard_lose_spare(void)
{
    if (fdguard.spare_fd >= 0)
        close(fdguard.spare_fd);
    fdguard.spare_fd = -1;
    __atomic_store_n(&fdguard.spare, 0, __ATOMIC_RELAXED);
}
