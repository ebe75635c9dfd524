/*
 * web_clients - who a dashboard connection comes from, and the back-off after wrong tokens.
 *
 * A client is a local user on a loopback connection whose owner the kernel names (web_owner),
 * else an address. The owner of the process (its effective uid, or root) is never limited: it
 * can read the process's memory and its discovery file anyway. Any other client, after
 * WEB_FAIL_MAX wrong tokens within WEB_FAIL_WINDOW_S, is refused for WEB_BLOCK_S seconds
 * (doubling with each block that follows soon after the last, up to WEB_BLOCK_MAX_S): 429 with
 * Retry-After, the right token included, so that guessing gets nowhere and no worker sleeps. A
 * missing token is no guess. The table holds WEB_CLIENTS_MAX clients; the one seen longest ago
 * and not blocked is forgotten for a new one.
 *
 * ctx: web_clients_setup once (web_server_start, before the request handler is set);
 * web_clients_identify on any thread (civetweb workers, clrscope-agg); the back-off functions on
 * civetweb workers (one mutex around the table, held for a few comparisons); the stats anywhere.
 */
#ifndef WEB_CLIENTS_H
#define WEB_CLIENTS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/types.h>

#define WEB_CLIENTS_MAX 128
#define WEB_FAIL_MAX 10
#define WEB_FAIL_WINDOW_S 60
#define WEB_BLOCK_S 60
#define WEB_BLOCK_MAX_S 960

/* One connection's client. */
struct web_client {
    int family;             /* AF_INET or AF_INET6 of addr; 0: no IP address */
    unsigned char addr[16];
    int uid_known;          /* a loopback peer whose owner the kernel named */
    uid_t uid;
    int owner;              /* uid_known and the uid is the process's or root's */
    const char *why;        /* a loopback peer whose user is unknown: why (a literal) */
};

/* The process's owner and the listening socket's address (NULL: unknown), for identify; the
 * kernel's socket diagnostics are made ready to ask (web_owner_prepare). */
void web_clients_setup(uid_t owner, const struct sockaddr_storage *listen_addr);
/* Fills *cl for the client at addr:port (civetweb's text of the address) of a connection to
 * server_port: a loopback peer's user is asked of the kernel. */
void web_clients_identify(const char *addr, int port, int server_port, struct web_client *cl);
/* 1 while the client is refused after wrong tokens, *retry_s the seconds left (>= 1). */
int web_clients_blocked(const struct web_client *cl, int64_t now_ns, int *retry_s);
/* A wrong token from the client at now_ns; 1 when this one starts a block (*block_s long). */
int web_clients_failed(const struct web_client *cl, int64_t now_ns, int *block_s);
/* The client in words for a log line ("uid 1001", "192.0.2.7"). */
void web_clients_describe(const struct web_client *cl, char *buf, size_t cap);

struct web_clients_stats {
    uint64_t token_failures; /* requests with a wrong token */
    uint64_t blocks;         /* back-offs started */
    uint64_t throttled;      /* requests answered 429 during a back-off */
};
void web_clients_get_stats(struct web_clients_stats *out);
/* Tests: forgets every client and zeroes the figures. */
void web_clients_reset(void);

#endif
