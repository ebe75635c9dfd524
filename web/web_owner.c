/* web_owner.c - see web_owner.h. */
#include "web_owner.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/sock_diag.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define PROC_BUF 16384  /* bytes of /proc/net/tcp read at a time (malloc'd) */
#define TCP_ST_TIME_WAIT 6
#define TCP_ST_LISTEN 10

/* fd and seq under lock (any thread that asks); netlink_works atomic. */
static struct owner_state {
    pthread_mutex_t lock; /* one question to the kernel and its answer at a time */
    int fd;               /* the NETLINK_SOCK_DIAG socket, held; -1: none (opened when asked) */
    uint32_t seq;         /* the last question's number */
    /* set once a netlink lookup has named an owner: from then on netlink's "no such socket" is
     * believed and the /proc listing is not read for it; before, the same answer may mean that
     * the kernel has no TCP diagnostics module */
    int netlink_works;
} owner = {.lock = PTHREAD_MUTEX_INITIALIZER, .fd = -1};

void web_owner_prepare(void)
{
    pthread_mutex_lock(&owner.lock);
    if (owner.fd < 0)
        owner.fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    pthread_mutex_unlock(&owner.lock);
}

struct end {
    int family;             /* AF_INET or AF_INET6 */
    unsigned char addr[16]; /* 4 bytes for AF_INET */
};

static size_t addr_len(int family)
{
    return family == AF_INET ? 4 : 16;
}

static int parse_end(const char *text, struct end *e)
{
    memset(e, 0, sizeof *e);
    if (inet_pton(AF_INET, text, e->addr) == 1) {
        e->family = AF_INET;
        return 0;
    }
    struct in6_addr a6;
    if (inet_pton(AF_INET6, text, &a6) != 1)
        return -1;
    if (IN6_IS_ADDR_V4MAPPED(&a6)) { /* an IPv4 client of a dual-stack listener */
        e->family = AF_INET;
        memcpy(e->addr, a6.s6_addr + 12, 4);
    } else {
        e->family = AF_INET6;
        memcpy(e->addr, a6.s6_addr, 16);
    }
    return 0;
}

int web_owner_is_loopback(const char *addr)
{
    struct end e;
    if (!addr || parse_end(addr, &e))
        return 0;
    if (e.family == AF_INET)
        return e.addr[0] == 127;
    static const unsigned char one[16] = {[15] = 1};
    return !memcmp(e.addr, one, 16);
}

/* The listening socket's address as the server end of a connection from a client of `family`;
 * -1 when there is none to tell (no address, a wildcard, another family). */
static int server_end(const struct sockaddr_storage *ss, int family, struct end *e)
{
    static const unsigned char zero[16];
    memset(e, 0, sizeof *e);
    if (!ss)
        return -1;
    if (ss->ss_family == AF_INET) {
        memcpy(e->addr, &((const struct sockaddr_in *)ss)->sin_addr, 4);
        e->family = AF_INET;
    } else if (ss->ss_family == AF_INET6) {
        const struct in6_addr *a6 = &((const struct sockaddr_in6 *)ss)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a6)) {
            e->family = AF_INET;
            memcpy(e->addr, a6->s6_addr + 12, 4);
        } else {
            e->family = AF_INET6;
            memcpy(e->addr, a6->s6_addr, 16);
        }
    } else {
        return -1;
    }
    if (e->family != family || !memcmp(e->addr, zero, addr_len(family)))
        return -1;
    return 0;
}

/* The answer to question `seq`: 1 with *uid, 0 when the kernel has no such socket with an owner,
 * -1 when there is none to read. Under the lock. */
static int read_answer(uint32_t seq, const struct end *cl, const struct inet_diag_req_v2 *req,
                       uid_t *uid)
{
    union {
        struct nlmsghdr h;
        unsigned char b[512];
    } in;
    for (int tries = 0; tries < 4; tries++) {
        ssize_t n = recv(owner.fd, &in, sizeof in, MSG_DONTWAIT);
        if (n < (ssize_t)NLMSG_HDRLEN)
            return -1;
        if (in.h.nlmsg_seq != seq)
            continue; /* a late answer to an earlier question */
        const struct inet_diag_msg *m = (const void *)(in.b + NLMSG_HDRLEN);
        if (in.h.nlmsg_type == NLMSG_ERROR) {
            const struct nlmsgerr *e = (const void *)(in.b + NLMSG_HDRLEN);
            return n >= (ssize_t)(NLMSG_HDRLEN + sizeof *e) && e->error == -ENOENT ? 0 : -1;
        }
        if (n < (ssize_t)(NLMSG_HDRLEN + sizeof *m) || in.h.nlmsg_type != SOCK_DIAG_BY_FAMILY)
            return -1;
        /* the same socket (a lookup that misses may answer with a listener on the client's
         * port), open (a closed one has no inode and shows uid 0) */
        int ok = m->id.idiag_sport == req->id.idiag_sport &&
                 m->id.idiag_dport == req->id.idiag_dport &&
                 !memcmp(m->id.idiag_src, cl->addr, addr_len(cl->family)) &&
                 m->idiag_state != TCP_ST_LISTEN && m->idiag_state != TCP_ST_TIME_WAIT &&
                 m->idiag_inode != 0;
        if (ok)
            *uid = m->idiag_uid;
        return ok;
    }
    return -1;
}

/* Asks NETLINK_SOCK_DIAG for the client's socket by its ends, on the held socket (a process out
 * of descriptors can still ask): 1 with *uid set; 0 when the kernel has no such socket with an
 * owner (none, a closed one, or no TCP diagnostics); -1 when it could not be asked. The kernel
 * answers within sendto: the answer is queued when it returns. */
static int ask_netlink(const struct end *cl, int cport, const struct end *sv, int sport,
                       uid_t *uid)
{
    struct {
        struct nlmsghdr nlh;
        struct inet_diag_req_v2 req;
    } msg;
    memset(&msg, 0, sizeof msg);
    msg.nlh.nlmsg_len = sizeof msg;
    msg.nlh.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    msg.nlh.nlmsg_flags = NLM_F_REQUEST;
    msg.req.sdiag_family = (uint8_t)cl->family;
    msg.req.sdiag_protocol = IPPROTO_TCP;
    msg.req.idiag_states = ~0u;
    msg.req.id.idiag_sport = htons((uint16_t)cport); /* the client's socket: its own end first */
    msg.req.id.idiag_dport = htons((uint16_t)sport);
    memcpy(msg.req.id.idiag_src, cl->addr, addr_len(cl->family));
    memcpy(msg.req.id.idiag_dst, sv->addr, addr_len(cl->family));
    msg.req.id.idiag_cookie[0] = msg.req.id.idiag_cookie[1] = INET_DIAG_NOCOOKIE;
    struct sockaddr_nl to = {.nl_family = AF_NETLINK};
    int rc = -1;
    pthread_mutex_lock(&owner.lock);
    if (owner.fd < 0)
        owner.fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC, NETLINK_SOCK_DIAG);
    if (owner.fd >= 0) {
        msg.nlh.nlmsg_seq = ++owner.seq;
        if (sendto(owner.fd, &msg, sizeof msg, 0, (struct sockaddr *)&to, sizeof to) ==
            (ssize_t)sizeof msg) {
            rc = read_answer(msg.nlh.nlmsg_seq, cl, &msg.req, uid);
        } else if (errno != EINTR && errno != ENOBUFS) {
            close(owner.fd); /* refused for good (a filter): asked again on a new one next time */
            owner.fd = -1;
        }
    }
    pthread_mutex_unlock(&owner.lock);
    return rc;
}

/* The 32-bit words of an address in /proc/net/tcp: each printed %08X from its bytes as a host
 * integer. -1 on anything else. */
static int parse_hex_addr(const char *s, size_t n, unsigned char *out, size_t words)
{
    if (n != words * 8)
        return -1;
    for (size_t w = 0; w < words; w++) {
        uint32_t v = 0;
        for (int i = 0; i < 8; i++) {
            char ch = s[w * 8 + (size_t)i];
            int d = ch >= '0' && ch <= '9' ? ch - '0' : ch >= 'A' && ch <= 'F' ? ch - 'A' + 10 : -1;
            if (d < 0)
                return -1;
            v = v << 4 | (uint32_t)d;
        }
        memcpy(out + 4 * w, &v, 4);
    }
    return 0;
}

/* "ADDR:PORT" of /proc/net/tcp. */
static int parse_proc_end(const char *tok, size_t n, int family, unsigned char *addr, int *port)
{
    const char *colon = memchr(tok, ':', n);
    if (!colon)
        return -1;
    if (parse_hex_addr(tok, (size_t)(colon - tok), addr, addr_len(family) / 4))
        return -1;
    char *end;
    unsigned long p = strtoul(colon + 1, &end, 16);
    if (end != tok + n || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

struct proc_match {
    const struct end *cl, *sv; /* sv NULL: any server address */
    int cport, sport;
    int found;     /* sockets with the client's ends and an owner */
    int closed;    /* ... without one (closed by the client) */
    int ambiguous; /* two owners */
    uid_t uid;
};

/* One line of /proc/net/tcp: "sl: local rem st tx:rx tr:when retrnsmt uid timeout inode ...". */
static void match_line(char *line, struct proc_match *pm)
{
    const char *tok[10];
    size_t len[10];
    int nt = 0;
    for (char *p = line; *p && nt < 10;) {
        while (*p == ' ')
            p++;
        if (!*p)
            break;
        tok[nt] = p;
        while (*p && *p != ' ')
            p++;
        len[nt] = (size_t)(p - tok[nt]);
        nt++;
    }
    if (nt < 10)
        return;
    unsigned char la[16], ra[16];
    int lp, rp;
    int fam = pm->cl->family;
    if (parse_proc_end(tok[1], len[1], fam, la, &lp) || parse_proc_end(tok[2], len[2], fam, ra, &rp))
        return;
    if (lp != pm->cport || rp != pm->sport || memcmp(la, pm->cl->addr, addr_len(fam)) ||
        (pm->sv && memcmp(ra, pm->sv->addr, addr_len(fam))))
        return;
    unsigned long st = strtoul(tok[3], NULL, 16), uid = strtoul(tok[7], NULL, 10);
    unsigned long long inode = strtoull(tok[9], NULL, 10);
    if (st == TCP_ST_LISTEN)
        return;
    if (st == TCP_ST_TIME_WAIT || inode == 0) {
        pm->closed++;
        return;
    }
    if (pm->found && pm->uid != (uid_t)uid)
        pm->ambiguous = 1;
    pm->found++;
    pm->uid = (uid_t)uid;
}

/* Looks for the client's socket in /proc/net/tcp (tcp6): 1 with *uid; 0 none with an owner;
 * -1 unreadable; -2 two with different owners. */
static int ask_proc(struct proc_match *pm, uid_t *uid)
{
    int fd = open(pm->cl->family == AF_INET ? "/proc/net/tcp" : "/proc/net/tcp6",
                  O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char *buf = malloc(PROC_BUF);
    if (!buf) {
        close(fd);
        return -1;
    }
    size_t have = 0;
    int header = 1, failed = 0;
    for (;;) {
        ssize_t n = read(fd, buf + have, PROC_BUF - 1 - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0) {
            failed = n < 0;
            break;
        }
        have += (size_t)n;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = memchr(line, '\n', have - (size_t)(line - buf)))) {
            *nl = 0;
            if (header)
                header = 0; /* the column names */
            else
                match_line(line, pm);
            line = nl + 1;
        }
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        if (have == PROC_BUF - 1)
            have = 0; /* a line longer than the buffer is no socket's */
    }
    free(buf);
    close(fd);
    if (failed && !pm->found)
        return -1;
    if (pm->ambiguous)
        return -2;
    if (!pm->found)
        return 0;
    *uid = pm->uid;
    return 1;
}

int web_owner_uid(const char *client_addr, int client_port, const struct sockaddr_storage *server,
                  int server_port, uid_t *uid, const char **why)
{
    struct end cl, sv;
    if (!client_addr || parse_end(client_addr, &cl)) {
        *why = "the client's address is no IP address";
        return -1;
    }
    int sv_known = server_end(server, cl.family, &sv) == 0;
    /* a wildcard listener: a loopback client most often connects to its own address */
    int rc = ask_netlink(&cl, client_port, sv_known ? &sv : &cl, server_port, uid);
    if (rc == 1) {
        __atomic_store_n(&owner.netlink_works, 1, __ATOMIC_RELAXED);
        return 0;
    }
    if (rc == 0 && sv_known && __atomic_load_n(&owner.netlink_works, __ATOMIC_RELAXED)) {
        *why = "the client's socket is closed already";
        return -1;
    }
    struct proc_match pm = {.cl = &cl, .sv = sv_known ? &sv : NULL, .cport = client_port,
                            .sport = server_port};
    int rp = ask_proc(&pm, uid);
    if (rp == 1)
        return 0;
    if (rp == -2)
        *why = "two sockets have the client's ends, with different owners";
    else if (rp == 0)
        *why = "no open socket has the client's ends (it was closed already)";
    else
        *why = rc < 0 ? "neither netlink (NETLINK_SOCK_DIAG) nor /proc/net/tcp can be read"
                      : "/proc/net/tcp cannot be read and netlink found no such socket";
    return -1;
}
