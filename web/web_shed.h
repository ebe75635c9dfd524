/*
 * web_shed - keeps idle connections of other clients from starving the owner of the dashboard.
 *
 * civetweb gives each connection a worker from its accept until its request has been read and
 * answered, and a connection that sends half a request line holds its worker until the request
 * timeout; a worker that takes a connection cannot tell whose it is (civetweb says nothing of the
 * client before the request has been read). So clrscope counts the connections its workers hold
 * (civetweb's connection callbacks), and when every worker has held one for WEB_SHED_AFTER_MS,
 * it looks at the dashboard's connections among the process's descriptors (those accepted and
 * those queued for a worker), tells each one's client (web_clients_identify), and shuts, at once,
 * the connections of any client other than the process's owner beyond WEB_CLIENT_CONNS, then
 * more of the clients holding the most until the others together hold at most all workers but
 * WEB_OWNER_RESERVE. A shut connection frees its worker within a poll; the owner's connections
 * are never shut. Each descriptor is duplicated and its two ends checked again before it is
 * shut, so a descriptor closed and reused meanwhile is never touched.
 *
 * ctx: web_shed_start once (web_server_start; it adds the watch to clrscope-agg's loop);
 * web_shed_opened/closed from civetweb's connection callbacks on its workers; web_shed_watch on
 * clrscope-agg only; web_shed_pass there and in tests; web_shed_dropped anywhere.
 */
#ifndef WEB_SHED_H
#define WEB_SHED_H

#include <stdint.h>

#define WEB_CLIENT_CONNS 8    /* connections a client other than the owner keeps when shed */
#define WEB_OWNER_RESERVE 8   /* workers the other clients together leave to the owner */
#define WEB_SHED_AFTER_MS 100 /* every worker held this long: a look */
#define WEB_SHED_EVERY_MS 250 /* at most one look this often while it lasts */

/* Watches the server on `port` (bound to `listen_addr`'s address unless NULL or a wildcard)
 * with `workers` workers. */
struct sockaddr_storage;
void web_shed_start(int port, const struct sockaddr_storage *listen_addr, int workers);
/* A worker took a connection; it closed it. */
void web_shed_opened(void);
void web_shed_closed(void);
/* clrscope-agg's look; `now` is prof_now_ns(). */
void web_shed_watch(int64_t now);
/* One look now: the connections shut. */
int web_shed_pass(void);
/* Connections shut since the start. */
uint64_t web_shed_dropped(void);

#endif
