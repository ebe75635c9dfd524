/* web_peer.c - see web_peer.h. */
#include "web_peer.h"

#include <arpa/inet.h>
#include <civetweb.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "web_fdguard.h"

/* The port and printed address of a socket end; -1 when it is no IP socket. */
static int end_of(const struct sockaddr_storage *ss, char *addr, size_t cap, int *port)
{
    if (ss->ss_family == AF_INET) {
        const struct sockaddr_in *a = (const struct sockaddr_in *)ss;
        *port = ntohs(a->sin_port);
        return inet_ntop(AF_INET, &a->sin_addr, addr, (socklen_t)cap) ? 0 : -1;
    }
    if (ss->ss_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const struct sockaddr_in6 *)ss;
        *port = ntohs(a->sin6_port);
        return inet_ntop(AF_INET6, &a->sin6_addr, addr, (socklen_t)cap) ? 0 : -1;
    }
    return -1;
}

static int is_the_request(int fd, void *arg)
{
    const struct mg_request_info *ri = arg;
    int type = 0;
    socklen_t tl = sizeof type;
    if (getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) || type != SOCK_STREAM)
        return 0;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    char addr[INET6_ADDRSTRLEN];
    int port;
    if (getpeername(fd, (struct sockaddr *)&ss, &sl) || end_of(&ss, addr, sizeof addr, &port) ||
        port != ri->remote_port || strcmp(addr, ri->remote_addr))
        return 0;
    sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) || end_of(&ss, addr, sizeof addr, &port))
        return 0;
    return port == ri->server_port;
}

int web_peer_socket(const struct mg_connection *c)
{
    const struct mg_request_info *ri = mg_get_request_info(c);
    if (!ri || ri->remote_port <= 0 || !ri->remote_addr[0])
        return -1;
    int matches;
    int fd = web_fdguard_find(is_the_request, (void *)ri, &matches);
    /* Two sockets with these ends (the app listening on the same port number at another
     * address, reached from the same client port): which one is ours cannot be told, and
     * the wrong one's close would end a wait whose client is still there. */
    return matches == 1 ? fd : -1;
}

int web_peer_gone(int fd)
{
    if (fd < 0)
        return 0;
    char b;
    ssize_t n = recv(fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0)
        return 1; /* the client's FIN: it sends nothing more, and it asked for nothing more */
    if (n < 0 && (errno == ECONNRESET || errno == ENOTCONN || errno == EPIPE))
        return 1;
    return 0;
}
