/* web_shed.c - see web_shed.h. */
#include "web_shed.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "prof_agg.h"
#include "prof_log.h"
#include "web_clients.h"
#include "web_fdguard.h"

#define SHED_MAX 512 /* connections one look reads at most */
#define MS 1000000LL

/* port, family, listen, workers: written by web_shed_start before the server takes a
 * connection, read after; busy by the workers (atomic); full_since and last_pass by clrscope-agg;
 * dropped and logged atomic. */
static struct shed_state {
    int port;
    int family;               /* of the listening address; 0: any address */
    unsigned char listen[16];
    int workers;
    int busy;                 /* connections the workers hold now */
    int64_t full_since;       /* since when every worker holds one; 0: not now */
    int64_t last_pass;
    uint64_t dropped;
    int logged;
} shed;

/* One connection to the dashboard, its client's end. */
struct conn {
    int fd;
    int family;
    unsigned char addr[16];
    int port;
    int client; /* its client's index in the look; -1: the owner's */
    int keep;
};

struct look {
    struct conn *c;
    int n;
};

/* The family, address and port of a socket end; IPv4-mapped IPv6 as IPv4. -1: no IP end. */
static int raw_end(const struct sockaddr_storage *ss, int *family, unsigned char *addr, int *port)
{
    memset(addr, 0, 16);
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ss;
        *family = AF_INET;
        memcpy(addr, &a->sin_addr, 4);
        *port = ntohs(a->sin_port);
        return 0;
    }
    if (ss->ss_family != AF_INET6)
        return -1;
    const struct sockaddr_in6 *a = (const void *)ss;
    *port = ntohs(a->sin6_port);
    if (IN6_IS_ADDR_V4MAPPED(&a->sin6_addr)) {
        *family = AF_INET;
        memcpy(addr, a->sin6_addr.s6_addr + 12, 4);
    } else {
        *family = AF_INET6;
        memcpy(addr, a->sin6_addr.s6_addr, 16);
    }
    return 0;
}

/* Whether fd is a connection accepted on the dashboard's address; its client's end in *c. */
static int dashboard_conn(int fd, struct conn *c)
{
    int type = 0, acc = 0;
    socklen_t tl = sizeof type, al = sizeof acc;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) || type != SOCK_STREAM ||
        getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) || acc)
        return 0;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    int family, port;
    unsigned char addr[16];
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) || raw_end(&ss, &family, addr, &port) ||
        port != shed.port || (shed.family && (family != shed.family ||
                                              memcmp(addr, shed.listen, sizeof addr))))
        return 0;
    sl = sizeof ss;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) ||
        raw_end(&ss, &c->family, c->addr, &c->port))
        return 0;
    c->fd = fd;
    return 1;
}

/* Whether the connection is ending already: its client closed it, or it was shut before. */
static int ending(int fd)
{
    char b;
    return recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) == 0;
}

/* web_fdguard_find's test, used to list: it keeps every dashboard connection that is not ending
 * and holds for none, so the listing goes through all descriptors. */
static int collect(int fd, void *arg)
{
    struct look *lk = arg;
    if (lk->n < SHED_MAX && dashboard_conn(fd, &lk->c[lk->n]) && !ending(fd))
        lk->n++;
    return 0;
}

static int same_client(const struct web_client *a, const struct web_client *b)
{
    if (a->uid_known != b->uid_known)
        return 0;
    if (a->uid_known)
        return a->uid == b->uid;
    return a->family == b->family && !memcmp(a->addr, b->addr, sizeof a->addr);
}

/* Shuts the connection when its descriptor is still that connection: checked on a duplicate,
 * which stays the same socket whatever happens to fd meanwhile. */
static int shut(const struct conn *c)
{
    int d = fcntl(c->fd, F_DUPFD_CLOEXEC, 0);
    if (d < 0)
        return 0;
    struct conn now;
    int ok = dashboard_conn(d, &now) && now.family == c->family && now.port == c->port &&
             !memcmp(now.addr, c->addr, sizeof now.addr);
    if (ok)
        ok = shutdown(d, SHUT_RDWR) == 0;
    close(d);
    return ok;
}

/* Marks the connections kept: WEB_CLIENT_CONNS per client, then fewer from the clients holding
 * the most until all hold at most the workers less the owner's reserve. */
static void choose(struct look *lk, int *held, int ncl)
{
    int others = 0;
    for (int i = 0; i < lk->n; i++) {
        struct conn *c = &lk->c[i];
        c->keep = c->client < 0 || held[c->client] < WEB_CLIENT_CONNS;
        if (c->client >= 0 && c->keep) {
            held[c->client]++;
            others++;
        }
    }
    int cap = shed.workers - WEB_OWNER_RESERVE;
    while (others > (cap > 0 ? cap : 0)) {
        int most = 0;
        for (int j = 1; j < ncl; j++)
            if (held[j] > held[most])
                most = j;
        for (int i = lk->n - 1; i >= 0; i--)
            if (lk->c[i].client == most && lk->c[i].keep) {
                lk->c[i].keep = 0;
                break;
            }
        held[most]--;
        others--;
    }
}

int web_shed_pass(void)
{
    struct look lk = {.c = calloc(SHED_MAX, sizeof(struct conn))};
    struct web_client *cls = calloc(SHED_MAX, sizeof *cls);
    int *held = calloc(SHED_MAX, sizeof *held);
    int ncl = 0, done = 0;
    if (!lk.c || !cls || !held)
        goto out;
    int matches;
    web_fdguard_find(collect, &lk, &matches);
    for (int i = 0; i < lk.n; i++) {
        struct conn *c = &lk.c[i];
        char text[INET6_ADDRSTRLEN];
        struct web_client cl;
        if (!inet_ntop(c->family, c->addr, text, sizeof text))
            text[0] = 0;
        web_clients_identify(text, c->port, shed.port, &cl);
        c->client = -1;
        if (cl.owner)
            continue;
        for (int j = 0; j < ncl && c->client < 0; j++)
            if (same_client(&cls[j], &cl))
                c->client = j;
        if (c->client < 0) {
            cls[ncl] = cl;
            c->client = ncl++;
        }
    }
    choose(&lk, held, ncl);
    int first = -1;
    for (int i = 0; i < lk.n; i++)
        if (!lk.c[i].keep && shut(&lk.c[i])) {
            done++;
            if (first < 0)
                first = lk.c[i].client;
        }
    if (done) {
        __atomic_fetch_add(&shed.dropped, (uint64_t)done, __ATOMIC_RELAXED);
        char who[64];
        web_clients_describe(&cls[first], who, sizeof who);
        prof_log_once(shed.logged, LOG_WARN, "web: every dashboard worker was busy and clients "
                      "other than the process's user held more than their share (%d each, all "
                      "but %d workers together): %d connections shut, the first of %s "
                      "(/api/v1/status dashboard.dropped_over_cap counts them)",
                      WEB_CLIENT_CONNS, WEB_OWNER_RESERVE, done, who);
    }
out:
    free(lk.c);
    free(cls);
    free(held);
    return done;
}

void web_shed_watch(int64_t now)
{
    if (!shed.workers || __atomic_load_n(&shed.busy, __ATOMIC_RELAXED) < shed.workers) {
        shed.full_since = 0;
        return;
    }
    if (!shed.full_since)
        shed.full_since = now;
    if (now - shed.full_since < WEB_SHED_AFTER_MS * MS ||
        now - shed.last_pass < WEB_SHED_EVERY_MS * MS)
        return;
    shed.last_pass = now;
    web_shed_pass();
}

void web_shed_start(int port, const struct sockaddr_storage *listen_addr, int workers)
{
    static const unsigned char zero[16];
    int lp;
    shed.port = port;
    shed.workers = workers;
    if (listen_addr && !raw_end(listen_addr, &shed.family, shed.listen, &lp) &&
        !memcmp(shed.listen, zero, sizeof zero))
        shed.family = 0; /* a wildcard: any address */
    static const struct prof_kind shed_kind = {.name = "web-shed", .poll = web_shed_watch};
    prof_agg_add(&shed_kind);
}

void web_shed_opened(void)
{
    __atomic_fetch_add(&shed.busy, 1, __ATOMIC_RELAXED);
    prof_agg_poll_often(); /* the guards' polls, 4 a second while the dashboard is used */
}

void web_shed_closed(void)
{
    __atomic_fetch_sub(&shed.busy, 1, __ATOMIC_RELAXED);
}

uint64_t web_shed_dropped(void)
{
    return __atomic_load_n(&shed.dropped, __ATOMIC_RELAXED);
}
