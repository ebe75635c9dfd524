/*
 * test_access - who a dashboard client is and what limits it (web_owner, web_clients, web_shed),
 * on real loopback connections in this process: the kernel names the owner of a client's socket
 * (netlink, and /proc/net/tcp when the server address is unknown), a closed client has none;
 * wrong tokens lead to a back-off that grows and never touches the owner; when the workers are
 * full, another user's connections over its share are shut, the owner's never.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "unit_check.h"
#include "web_clients.h"
#include "web_owner.h"
#include "web_shed.h"

#define NS 1000000000LL

static int listener(struct sockaddr_storage *ss)
{
    int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 64) ||
        getsockname(l, (struct sockaddr *)&a, &al))
        return -1;
    memset(ss, 0, sizeof *ss);
    memcpy(ss, &a, sizeof a);
    return l;
}

static int port_of(const struct sockaddr_storage *ss)
{
    return ntohs(((const struct sockaddr_in *)ss)->sin_port);
}

static int connect_to(const struct sockaddr_storage *ss, int *client_port)
{
    int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in me;
    socklen_t ml = sizeof me;
    if (c < 0 || connect(c, (const struct sockaddr *)ss, sizeof(struct sockaddr_in)) ||
        getsockname(c, (struct sockaddr *)&me, &ml))
        return -1;
    *client_port = ntohs(me.sin_port);
    return c;
}

static void test_owner(void)
{
    struct sockaddr_storage ss;
    int l = listener(&ss), cport = 0;
    CHECK(l >= 0, "listen: %s", strerror(errno));
    int c = connect_to(&ss, &cport);
    int a = accept(l, NULL, NULL);
    CHECK(c >= 0 && a >= 0, "connect: %s", strerror(errno));
    uid_t uid = 4242;
    const char *why = NULL;
    CHECK(web_owner_uid("127.0.0.1", cport, &ss, port_of(&ss), &uid, &why) == 0 &&
              uid == geteuid(), "the owner of our own client socket: %u (%s)", (unsigned)uid,
          why ? why : "");
    /* a wildcard or unknown server address: netlink with the client's own, or the listing */
    uid = 4242;
    CHECK(web_owner_uid("127.0.0.1", cport, NULL, port_of(&ss), &uid, &why) == 0 &&
              uid == geteuid(), "without the server address: %u", (unsigned)uid);
    uid = 4242;
    CHECK(web_owner_uid("::ffff:127.0.0.1", cport, &ss, port_of(&ss), &uid, &why) == 0 &&
              uid == geteuid(), "an IPv4-mapped client address: %u", (unsigned)uid);
    /* no such client */
    CHECK(web_owner_uid("127.0.0.1", cport == 65535 ? 1 : cport + 1, &ss, port_of(&ss), &uid,
                        &why) == -1 && why, "a port no socket has");
    CHECK(web_owner_uid("not an address", cport, &ss, port_of(&ss), &uid, &why) == -1,
          "no address");
    /* the client closes its end first: an orphan or TIME_WAIT has no owner, never root's */
    close(c);
    usleep(20000);
    why = NULL;
    CHECK(web_owner_uid("127.0.0.1", cport, &ss, port_of(&ss), &uid, &why) == -1 && why,
          "a closed client socket has no owner");
    CHECK(web_owner_uid("127.0.0.1", cport, NULL, port_of(&ss), &uid, &why) == -1,
          "nor in the listing");
    close(a);
    close(l);
    CHECK(web_owner_is_loopback("127.0.0.1") && web_owner_is_loopback("127.9.9.9") &&
              web_owner_is_loopback("::1") && web_owner_is_loopback("::ffff:127.0.0.1") &&
              !web_owner_is_loopback("10.0.0.1") && !web_owner_is_loopback("::2") &&
              !web_owner_is_loopback("x"), "loopback addresses");
}

static struct web_client addr_client(const char *text)
{
    struct web_client cl;
    memset(&cl, 0, sizeof cl);
    cl.family = AF_INET;
    inet_pton(AF_INET, text, cl.addr);
    return cl;
}

static void test_back_off(void)
{
    web_clients_reset();
    struct web_client a = addr_client("192.0.2.7"), b = addr_client("192.0.2.8");
    struct web_client owner = {.uid_known = 1, .uid = 1000, .owner = 1};
    int64_t t = 1000 * NS;
    int block = 0, retry = 0, starts = 0;
    for (int i = 0; i < WEB_FAIL_MAX; i++)
        starts += web_clients_failed(&a, t + i * NS, &block);
    CHECK(starts == 1 && block == WEB_BLOCK_S, "a block after %d wrong tokens: %d, %d s",
          WEB_FAIL_MAX, starts, block);
    CHECK(web_clients_blocked(&a, t + 20 * NS, &retry) && retry == WEB_BLOCK_S - 11,
          "refused meanwhile, %d s left", retry);
    CHECK(!web_clients_blocked(&b, t + 20 * NS, &retry), "another client is not");
    CHECK(!web_clients_blocked(&a, t + 80 * NS, &retry), "the block ends");
    /* guesses spread out over more than the window never block */
    for (int i = 0; i < 3 * WEB_FAIL_MAX; i++)
        CHECK(!web_clients_failed(&b, t + i * 7 * NS, &block), "slow guesses, %d", i);
    /* a block soon after the last: twice as long */
    starts = 0;
    for (int i = 0; i < WEB_FAIL_MAX; i++)
        starts += web_clients_failed(&a, t + 100 * NS + i, &block);
    CHECK(starts == 1 && block == 2 * WEB_BLOCK_S, "the second block: %d s", block);
    for (int i = 0; i < 5; i++) {
        for (int j = 0; j < WEB_FAIL_MAX; j++)
            web_clients_failed(&a, t + (400 + i * 1000) * NS + j, &block);
    }
    CHECK(block == WEB_BLOCK_MAX_S, "blocks grow up to %d s: %d", WEB_BLOCK_MAX_S, block);
    /* the owner is never blocked */
    for (int i = 0; i < 5 * WEB_FAIL_MAX; i++)
        CHECK(!web_clients_failed(&owner, t + i, &block), "owner guess %d", i);
    CHECK(!web_clients_blocked(&owner, t + 1, &retry), "the owner is not blocked");
    /* more clients than the table: the oldest idle ones are forgotten, blocks kept */
    int64_t t2 = t + 10000 * NS;
    for (int j = 0; j < WEB_FAIL_MAX; j++)
        web_clients_failed(&b, t2 + j, &block);
    for (int i = 0; i < 3 * WEB_CLIENTS_MAX; i++) {
        struct web_client c = addr_client("198.51.100.1");
        c.addr[3] = (unsigned char)i;
        c.addr[2] = (unsigned char)(i >> 8);
        web_clients_failed(&c, t2 + WEB_FAIL_MAX + i, &block);
    }
    CHECK(web_clients_blocked(&b, t2 + NS, &retry), "a blocked client stays blocked");
    struct web_clients_stats st;
    web_clients_get_stats(&st);
    CHECK(st.token_failures >= 4 * WEB_FAIL_MAX && st.blocks >= 3 && st.throttled >= 2,
          "stats: %llu failures, %llu blocks, %llu throttled",
          (unsigned long long)st.token_failures, (unsigned long long)st.blocks,
          (unsigned long long)st.throttled);
}

/* Server ends of `n` connections of another user (a child as nobody when we are root). */
static int other_user_conns(const struct sockaddr_storage *ss, int l, int n, int *acc, pid_t *child)
{
    int ready[2];
    if (pipe(ready))
        return -1;
    *child = fork();
    if (*child == 0) {
        close(ready[0]);
        if (geteuid() == 0 && (setgid(65534) || setuid(65534)))
            _exit(1);
        int cport;
        for (int i = 0; i < n; i++)
            if (connect_to(ss, &cport) < 0)
                _exit(1);
        if (write(ready[1], "r", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    close(ready[1]);
    char b;
    int ok = read(ready[0], &b, 1) == 1;
    close(ready[0]);
    for (int i = 0; ok && i < n; i++)
        acc[i] = accept(l, NULL, NULL);
    return ok ? 0 : -1;
}

static int shut_count(const int *acc, int n)
{
    int shut = 0;
    for (int i = 0; i < n; i++) {
        char b;
        if (acc[i] >= 0 && recv(acc[i], &b, 1, MSG_DONTWAIT) == 0)
            shut++;
    }
    return shut;
}

static void test_shed(void)
{
    struct sockaddr_storage ss;
    int l = listener(&ss);
    int acc[12], mine[4], cport;
    pid_t child = -1;
    /* the owner is someone else when we are not root; root is always an owner */
    uid_t owner = geteuid() == 0 ? 4242 : geteuid() + 1;
    web_clients_setup(owner, &ss);
    web_shed_start(port_of(&ss), &ss, 32);
    CHECK(other_user_conns(&ss, l, 12, acc, &child) == 0, "another user's connections");
    int owners[4];
    for (int i = 0; i < 4; i++) { /* root's, or when not root ours, which then are "another's" */
        mine[i] = connect_to(&ss, &cport);
        owners[i] = accept(l, NULL, NULL);
    }
    int done = web_shed_pass();
    int shut = shut_count(acc, 12), owner_shut = shut_count(owners, 4);
    if (geteuid() == 0) {
        CHECK(done == 12 - WEB_CLIENT_CONNS && shut == done, "one client keeps %d: %d shut, %d "
              "seen shut", WEB_CLIENT_CONNS, done, shut);
        CHECK(owner_shut == 0, "root's connections are never shut: %d", owner_shut);
    } else {
        CHECK(done == 16 - WEB_CLIENT_CONNS && shut + owner_shut == done, "%d shut", done);
    }
    /* all others together leave WEB_OWNER_RESERVE of 12 workers: 4 kept of the rest */
    web_shed_start(port_of(&ss), &ss, 12);
    done = web_shed_pass();
    shut = shut_count(acc, 12);
    if (geteuid() == 0)
        CHECK(shut == 12 - (12 - WEB_OWNER_RESERVE), "the reserve: %d of 12 shut", shut);
    CHECK(web_shed_dropped() >= 8, "counted: %llu", (unsigned long long)web_shed_dropped());
    /* the same user as the process: nothing is shut */
    web_clients_setup(geteuid(), &ss);
    int before = shut_count(owners, 4);
    CHECK(web_shed_pass() == 0, "the owner's own connections stay");
    CHECK(shut_count(owners, 4) == before, "none of ours was shut");
    if (child > 0) {
        kill(child, SIGKILL);
        waitpid(child, NULL, 0);
    }
    for (int i = 0; i < 12; i++)
        close(acc[i]);
    for (int i = 0; i < 4; i++) {
        close(mine[i]);
        close(owners[i]);
    }
    close(l);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    test_owner();
    test_back_off();
    test_shed();
    printf("%d passed, %d failed\n", passed, failed);
    return failed != 0;
}
