/*
 * web_owner - which local user opened a loopback connection to the dashboard, as the kernel says.
 *
 * A loopback connection has both ends in this host's network namespace, and the kernel knows who
 * owns the client's end: the uid of the process that made the socket. It is asked for that one
 * socket by its four ends (the client's address and port, the server's), first over netlink
 * (NETLINK_SOCK_DIAG, an exact lookup: no listing, no file, a few microseconds), then, when that
 * is refused or gives nothing, in /proc/net/tcp (tcp6 for IPv6), whose `uid` column is the same
 * figure. A socket the client has closed already (an orphan, or one in TIME_WAIT: the kernel
 * shows both with uid 0 and no inode) has no owner: it is reported unknown, never as root's.
 * Two sockets with the client's ends but different owners (possible only across distinct server
 * addresses on a wildcard listener) are unknown too.
 *
 * The netlink socket is opened once and held, so that a process out of file descriptors can
 * still tell its owner's requests from others'.
 *
 * ctx: any thread (civetweb workers, clrscope-agg); one mutex around the netlink socket, held for
 * a question and its answer; no stack buffer over 600 bytes (the /proc reading buffer is
 * malloc'd).
 */
#ifndef WEB_OWNER_H
#define WEB_OWNER_H

#include <sys/socket.h>
#include <sys/types.h>

/* The uid owning the client's end of the TCP connection from client_addr:client_port (as
 * civetweb prints it: "127.0.0.1", "::1", "::ffff:127.0.0.1") to server_port on `server`, the
 * listening socket's address (its own port is not read; NULL or a wildcard address: the client's
 * address is tried in its place, then the /proc listing, which needs no server address).
 * Returns 0 with *uid set, or -1 with *why saying what was missing (a literal). */
int web_owner_uid(const char *client_addr, int client_port, const struct sockaddr_storage *server,
                  int server_port, uid_t *uid, const char **why);

/* Opens the netlink socket ahead of the first question (web_server_start). */
void web_owner_prepare(void);

/* 1 when `addr` (civetweb's text of the client's address) is a loopback address: 127.0.0.0/8,
 * ::1, or an IPv4-mapped 127.x. */
int web_owner_is_loopback(const char *addr);

#endif
