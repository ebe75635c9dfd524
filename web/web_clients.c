/* web_clients.c - see web_clients.h. */
#include "web_clients.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "web_owner.h"

#define NS 1000000000LL

struct client_entry {
    int used;
    /* the key: a uid the kernel named, else an address */
    int uid_known;
    uid_t uid;
    int family;
    unsigned char addr[16];
    int fails;              /* wrong tokens since window_ns */
    int64_t window_ns;
    int64_t blocked_until_ns;
    int blocks_in_row;      /* blocks each begun soon after the one before: each twice as long */
    int64_t last_ns;        /* its last connection or failure: the oldest idle one is forgotten */
};

/* owner and listen_addr: written by web_clients_setup before any request, read by any thread
 * after; the rest under `lock` (civetweb workers). */
static struct clients_state {
    uid_t owner;
    struct sockaddr_storage listen_addr; /* ss_family 0: unknown */
    pthread_mutex_t lock;
    struct client_entry e[WEB_CLIENTS_MAX];
    struct web_clients_stats stats;
} clients = {.lock = PTHREAD_MUTEX_INITIALIZER};

void web_clients_setup(uid_t owner, const struct sockaddr_storage *listen_addr)
{
    web_owner_prepare();
    clients.owner = owner;
    if (listen_addr)
        clients.listen_addr = *listen_addr;
    else
        memset(&clients.listen_addr, 0, sizeof clients.listen_addr);
}

void web_clients_identify(const char *addr, int port, int server_port, struct web_client *cl)
{
    memset(cl, 0, sizeof *cl);
    struct in6_addr a6;
    if (!addr)
        return;
    if (inet_pton(AF_INET, addr, cl->addr) == 1) {
        cl->family = AF_INET;
    } else if (inet_pton(AF_INET6, addr, &a6) == 1) {
        cl->family = AF_INET6;
        memcpy(cl->addr, &a6, 16);
    }
    if (!web_owner_is_loopback(addr))
        return;
    const struct sockaddr_storage *sv = clients.listen_addr.ss_family ? &clients.listen_addr : NULL;
    if (web_owner_uid(addr, port, sv, server_port, &cl->uid, &cl->why) == 0) {
        cl->uid_known = 1;
        cl->owner = cl->uid == clients.owner || cl->uid == 0;
    }
}

static int same(const struct client_entry *e, const struct web_client *cl)
{
    if (e->uid_known != cl->uid_known)
        return 0;
    if (cl->uid_known)
        return e->uid == cl->uid;
    return e->family == cl->family && !memcmp(e->addr, cl->addr, sizeof e->addr);
}

/* The client's entry; with `create`, a new one in a free place or in place of the one seen
 * longest ago that is not blocked (else the one whose block ends first). Under the lock. */
static struct client_entry *find(const struct web_client *cl, int create, int64_t now)
{
    struct client_entry *free_e = NULL, *idle = NULL, *blocked = NULL;
    for (int i = 0; i < WEB_CLIENTS_MAX; i++) {
        struct client_entry *e = &clients.e[i];
        if (!e->used) {
            if (!free_e)
                free_e = e;
            continue;
        }
        if (same(e, cl))
            return e;
        if (e->blocked_until_ns <= now) {
            if (!idle || e->last_ns < idle->last_ns)
                idle = e;
        } else if (!blocked || e->blocked_until_ns < blocked->blocked_until_ns) {
            blocked = e;
        }
    }
    if (!create)
        return NULL;
    struct client_entry *e = free_e ? free_e : idle ? idle : blocked;
    memset(e, 0, sizeof *e);
    e->used = 1;
    e->uid_known = cl->uid_known;
    e->uid = cl->uid;
    e->family = cl->family;
    memcpy(e->addr, cl->addr, sizeof e->addr);
    e->last_ns = now;
    return e;
}

int web_clients_blocked(const struct web_client *cl, int64_t now_ns, int *retry_s)
{
    if (cl->owner)
        return 0;
    pthread_mutex_lock(&clients.lock);
    struct client_entry *e = find(cl, 0, now_ns);
    int blocked = e && e->blocked_until_ns > now_ns;
    if (blocked) {
        *retry_s = (int)((e->blocked_until_ns - now_ns + NS - 1) / NS);
        clients.stats.throttled++;
    }
    pthread_mutex_unlock(&clients.lock);
    return blocked;
}

int web_clients_failed(const struct web_client *cl, int64_t now_ns, int *block_s)
{
    pthread_mutex_lock(&clients.lock);
    clients.stats.token_failures++;
    struct client_entry *e = cl->owner ? NULL : find(cl, 1, now_ns);
    int starts = 0;
    if (e) {
        e->last_ns = now_ns;
        if (now_ns - e->window_ns > WEB_FAIL_WINDOW_S * NS) {
            e->window_ns = now_ns;
            e->fails = 0;
        }
        if (e->blocked_until_ns && now_ns - e->blocked_until_ns > WEB_BLOCK_MAX_S * NS)
            e->blocks_in_row = 0;
        if (++e->fails >= WEB_FAIL_MAX) {
            int len = WEB_BLOCK_S << (e->blocks_in_row < 4 ? e->blocks_in_row : 4);
            if (len > WEB_BLOCK_MAX_S)
                len = WEB_BLOCK_MAX_S;
            e->blocked_until_ns = now_ns + len * NS;
            e->blocks_in_row++;
            e->fails = 0;
            clients.stats.blocks++;
            *block_s = len;
            starts = 1;
        }
    }
    pthread_mutex_unlock(&clients.lock);
    return starts;
}

void web_clients_describe(const struct web_client *cl, char *buf, size_t cap)
{
    char a[INET6_ADDRSTRLEN];
    if (cl->uid_known)
        snprintf(buf, cap, "uid %u", (unsigned)cl->uid);
    else if (cl->family && inet_ntop(cl->family, cl->addr, a, sizeof a))
        snprintf(buf, cap, "%s", a);
    else
        snprintf(buf, cap, "a client of unknown address");
}

void web_clients_get_stats(struct web_clients_stats *out)
{
    pthread_mutex_lock(&clients.lock);
    *out = clients.stats;
    pthread_mutex_unlock(&clients.lock);
}

void web_clients_reset(void)
{
    pthread_mutex_lock(&clients.lock);
    memset(clients.e, 0, sizeof clients.e);
    memset(&clients.stats, 0, sizeof clients.stats);
    pthread_mutex_unlock(&clients.lock);
}
