/*
 * test_fdguard - the dashboard's guard for a process out of file descriptors (web_fdguard), on a
 * real listening socket in this process with RLIMIT_NOFILE filled up: a queued connection is
 * answered 503 through the spare descriptor, which is taken back; without a spare the queue is
 * dropped (the client sees a reset at once) and the socket listens again on the same port, bound
 * to any port or to one by number; once descriptors are free the episode ends; a process with
 * free descriptors is left alone.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "web_fdguard.h"
#include "unit_check.h"

static int g_filler[4096], g_nfill;

static void fill(void)
{
    int fd;
    while (g_nfill < 4096 && (fd = open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0)
        g_filler[g_nfill++] = fd;
}

static void unfill(int keep)
{
    while (g_nfill > keep)
        close(g_filler[--g_nfill]);
}

/* What the client reads within `ms`: the bytes (0 on a clean close), or -errno. */
static int client_read(int c, char *buf, int cap, int ms)
{
    struct pollfd p = {.fd = c, .events = POLLIN};
    if (poll(&p, 1, ms) != 1)
        return -ETIMEDOUT;
    ssize_t n = recv(c, buf, (size_t)cap - 1, 0);
    if (n < 0)
        return -errno;
    buf[n] = 0;
    return (int)n;
}

static int64_t g_now = 1000000000LL;

static void look(void)
{
    g_now += FDGUARD_PERIOD_NS;
    web_fdguard_watch(g_now);
}

/* A listening socket bound to any port (port 0: the kernel releases it when listening stops) or
 * to a port by number (kept), as CLRSCOPE_PORT=0 and CLRSCOPE_PORT=N make civetweb's. */
static int listener(int by_number, struct sockaddr_in *a)
{
    socklen_t al = sizeof *a;
    memset(a, 0, sizeof *a);
    a->sin_family = AF_INET;
    a->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (by_number) { /* a free port's number, then bound by it */
        int t = socket(AF_INET, SOCK_STREAM, 0);
        bind(t, (struct sockaddr *)a, sizeof *a);
        getsockname(t, (struct sockaddr *)a, &al);
        close(t);
    }
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    CHECK(!bind(l, (struct sockaddr *)a, sizeof *a) && !listen(l, 16) &&
              !getsockname(l, (struct sockaddr *)a, &al),
          "a listening socket (by number: %d)", by_number);
    return l;
}

static void scenario(int by_number)
{
    struct sockaddr_in a;
    int l = listener(by_number, &a);
    int port = ntohs(a.sin_port);
    CHECK(web_fdguard_start(port) == 0, "the guard finds it and takes a spare");
    CHECK(fcntl(l, F_GETFL) & O_NONBLOCK, "and makes it non-blocking");
    struct web_fdguard_stats st0, st;
    web_fdguard_get_stats(&st0);

    /* free descriptors: a queued connection is civetweb's (here nobody's), the guard keeps off */
    int c0 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(!connect(c0, (struct sockaddr *)&a, sizeof a), "connect");
    look();
    web_fdguard_get_stats(&st);
    CHECK(!st.out_of_fds && st.refused == st0.refused && st.resets == st0.resets,
          "descriptors free: left alone");
    int s0 = accept(l, NULL, NULL);
    CHECK(s0 >= 0, "the connection stayed queued for its server");
    close(s0);
    close(c0);

    /* the clients' sockets exist before the descriptors run out (connect needs none) */
    int c1 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int c2 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct rlimit old;
    getrlimit(RLIMIT_NOFILE, &old);
    int top = open("/dev/null", O_RDONLY);
    close(top);
    struct rlimit rl = {.rlim_cur = (rlim_t)top + 64, .rlim_max = old.rlim_max};
    CHECK(!setrlimit(RLIMIT_NOFILE, &rl), "a limit of %d descriptors", top + 64);
    fill();
    CHECK(open("/dev/null", O_RDONLY) < 0 && errno == EMFILE, "no descriptor left (%d held)",
          g_nfill);

    /* out of descriptors: answered 503 through the spare, which is taken back */
    CHECK(!connect(c1, (struct sockaddr *)&a, sizeof a), "connect while out of descriptors");
    look();
    char buf[1024];
    int n = client_read(c1, buf, sizeof buf, 1000);
    CHECK(n > 0 && !strncmp(buf, "HTTP/1.1 503 ", 13) && strstr(buf, "run out of file descriptors"),
          "a 503 that says why (%d: %.60s)", n, n > 0 ? buf : "");
    web_fdguard_get_stats(&st);
    CHECK(st.out_of_fds && st.refused == st0.refused + 1 && st.spare_held,
          "refused 1, the spare held again");
    close(c1);

    /* the app took the spare's place: the queue is dropped and the port listens again */
    web_fdguard_lose_spare();
    fill();
    CHECK(!connect(c2, (struct sockaddr *)&a, sizeof a), "connect without a spare");
    look();
    n = client_read(c2, buf, sizeof buf, 1000);
    CHECK(n == -ECONNRESET, "the client hears a reset at once (%d)", n);
    web_fdguard_get_stats(&st);
    CHECK(st.resets == st0.resets + 1 && st.refused == st0.refused + 1 && !st.spare_held,
          "one reset (%llu)", (unsigned long long)(st.resets - st0.resets));
    close(c2);
    struct sockaddr_in b;
    socklen_t bl = sizeof b;
    int acc = 0;
    socklen_t accl = sizeof acc;
    CHECK(!getsockname(l, (struct sockaddr *)&b, &bl) && ntohs(b.sin_port) == port &&
              !getsockopt(l, SOL_SOCKET, SO_ACCEPTCONN, &acc, &accl) && acc,
          "listening again on port %d (%d)", port, ntohs(b.sin_port));

    /* descriptors free again: the episode ends, the spare is taken, connections are served */
    unfill(g_nfill - 8);
    setrlimit(RLIMIT_NOFILE, &old);
    look();
    web_fdguard_get_stats(&st);
    CHECK(!st.out_of_fds && st.spare_held, "the episode ends, the spare is held");
    int c3 = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    CHECK(!connect(c3, (struct sockaddr *)&a, sizeof a), "connect after");
    struct pollfd p = {.fd = l, .events = POLLIN};
    CHECK(poll(&p, 1, 1000) == 1, "queued on the listening socket");
    int s3 = accept(l, NULL, NULL);
    CHECK(s3 >= 0, "and accepted by its server");
    close(s3);
    close(c3);
    unfill(0);
    close(l);
}

int main(void)
{
    scenario(0);
    scenario(1);
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
