/* web_server.c - see web_server.h. */
#include "web_server.h"

#include <civetweb.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api_reply.h"
#include "api_routes.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_log.h"
#include "web_assets.h"
#include "web_clients.h"
#include "web_discovery.h"
#include "web_fdguard.h"
#include "web_peer.h"
#include "web_shed.h"
#include "web_util.h"

/* civetweb's workers: the owner keeps WEB_OWNER_RESERVE of them whatever other clients hold
 * (web_shed.h). Each is a thread with a 100 KB stack and a 16 KB request buffer. */
#define WEB_WORKERS 32
/* How long a request's line and headers may take to arrive, and how long a reply may wait for
 * its client to read, in civetweb's request_timeout_ms: a connection that sends nothing holds
 * its worker this long at most. */
#define WEB_REQUEST_TIMEOUT_MS "5000"
/* The shortest token a non-loopback bind takes: `auto` makes 32 characters. */
#define WEB_TOKEN_MIN 16

/* Written by web_server_start (Initialize's thread) before the request handler is set, read by
 * civetweb's workers after. The counters and the log-once flags are atomic (workers). */
static struct server_state {
    struct mg_context *ctx;
    int port;              /* the port bound */
    char listen_host[72];  /* the host part of civetweb's listening_ports */
    struct sockaddr_storage listen_addr; /* the listening socket's (ss_family 0: not found) */
    int allow_any;         /* CLRSCOPE_ALLOW_USERS=any: no check of a loopback client's user */
    uid_t uid;             /* the process's effective uid: its owner (with root) */
    uint64_t refused_users;  /* 401s to another local user (atomic) */
    uint64_t unknown_owner;  /* 401s to a connection whose user could not be told (atomic) */
    int logged_other, logged_unknown; /* the one log line of each (atomic) */
} server;

int web_server_port(void)
{
    return server.port;
}

int web_token_ok(const char *presented, const char *expected)
{
    size_t lp = presented ? strlen(presented) : 0, le = strlen(expected);
    unsigned char diff = (unsigned char)(lp != le);
    for (size_t i = 0; i < le; i++)
        diff |= (unsigned char)(expected[i] ^ (i < lp ? presented[i] : 0));
    return diff == 0;
}

static int is_loopback(const char *addr)
{
    return !strncmp(addr, "127.", 4) || !strcmp(addr, "localhost") || !strcmp(addr, "::1");
}

/* The host of the URLs shown and written for discovery: the bound address itself when it is
 * one (127.0.0.2 answers there only), 127.0.0.1 for a loopback name. */
static const char *url_host(void)
{
    return !strcmp(server.listen_host, "localhost") ? "127.0.0.1" : server.listen_host;
}

/* What civetweb listens on for CLRSCOPE_BIND: an IPv6 literal in brackets where the civetweb
 * library has IPv6. Debian's is built without it (mg_check_feature(8) == 0): there ::1 is served
 * on 127.0.0.1 instead, with a line, and any other IPv6 address is refused. Returns -1 then. */
static int choose_listen_host(void)
{
    if (!strchr(g_cfg.bind, ':')) {
        snprintf(server.listen_host, sizeof server.listen_host, "%s", g_cfg.bind);
        return 0;
    }
    if (mg_check_feature(8)) {
        snprintf(server.listen_host, sizeof server.listen_host, "[%s]", g_cfg.bind);
        return 0;
    }
    if (!strcmp(g_cfg.bind, "::1")) {
        snprintf(server.listen_host, sizeof server.listen_host, "127.0.0.1");
        prof_log(LOG_INFO, "CLRSCOPE_BIND=::1: the civetweb library here has no IPv6; the "
                 "dashboard listens on 127.0.0.1 instead");
        return 0;
    }
    prof_log(LOG_ERROR, "CLRSCOPE_BIND=%s is an IPv6 address and the civetweb library here is "
             "built without IPv6: the dashboard stays off (use an IPv4 address; 0.0.0.0 for all)",
             g_cfg.bind);
    return -1;
}

/* CLRSCOPE_ALLOW_USERS: "same" (the default) serves a loopback client only when it is the
 * process's own user or root; "any" serves every local user (the token, when set, still rules).
 */
static void read_allow_users(void)
{
    server.uid = geteuid();
    const char *v = getenv("CLRSCOPE_ALLOW_USERS");
    if (!v || !*v || !strcasecmp(v, "same"))
        return;
    if (!strcasecmp(v, "any")) {
        server.allow_any = 1;
        if (!g_cfg.token[0])
            prof_log(LOG_INFO, "CLRSCOPE_ALLOW_USERS=any: every local user can read and drive "
                     "this dashboard");
        return;
    }
    prof_log(LOG_WARN, "CLRSCOPE_ALLOW_USERS=\"%.20s\" is neither same nor any; using same", v);
}

static int is_listener(int fd, void *arg)
{
    int *port = arg, acc = 0;
    socklen_t al = sizeof acc;
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &al) || !acc)
        return 0;
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl))
        return 0;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port) == *port;
    return ss.ss_family == AF_INET6 && ntohs(((struct sockaddr_in6 *)&ss)->sin6_port) == *port;
}

/* The listening socket's address: the server end of the connections whose user web_owner asks
 * the kernel for. Left unknown (web_owner then does without) when two sockets listen on the
 * port. */
static void find_listen_addr(void)
{
    int matches, port = server.port;
    int fd = web_fdguard_find(is_listener, &port, &matches);
    socklen_t sl = sizeof server.listen_addr;
    if (fd < 0 || matches != 1 || getsockname(fd, (struct sockaddr *)&server.listen_addr, &sl))
        memset(&server.listen_addr, 0, sizeof server.listen_addr);
}

/* Host must name this server (DNS-rebinding defence): loopback names with our port, or the bound
 * address. With a token on a non-loopback bind any Host is accepted: the token is the guard. */
static int host_ok(struct mg_connection *c)
{
    const char *host = mg_get_header(c, "Host");
    if (!host)
        return 1; /* HTTP/1.0 clients; nothing for a rebinding attack to ride on */
    if (!is_loopback(g_cfg.bind) && g_cfg.token[0])
        return 1;
    char port[16];
    snprintf(port, sizeof port, ":%d", server.port);
    const char *names[] = {"127.0.0.1", "localhost", "[::1]", g_cfg.bind};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        size_t n = strlen(names[i]);
        if (!strncasecmp(host, names[i], n) && (!strcmp(host + n, port) || host[n] == 0))
            return 1;
    }
    return 0;
}

/* civetweb's connection callbacks, on the worker that takes the connection and closes it: the
 * workers held, for web_shed (civetweb tells nothing of the client at this point). */
static int init_connection(const struct mg_connection *c, void **conn_data)
{
    (void)c;
    *conn_data = NULL;
    web_shed_opened();
    return 0;
}

static void connection_close(const struct mg_connection *c)
{
    (void)c;
    web_shed_closed();
}

/* The token of the Authorization header or of the query, checked: 1 when one of them is right,
 * -1 when one is presented and none is right, 0 when none is presented. */
static int presented_token(struct mg_connection *c, const char *query)
{
    int rc = 0;
    const char *h = mg_get_header(c, "Authorization");
    if (h && !strncasecmp(h, "Bearer ", 7)) {
        if (web_token_ok(h + 7, g_cfg.token))
            return 1;
        rc = -1;
    }
    char *buf = query ? malloc(256) : NULL;
    if (!buf)
        return rc;
    int n = mg_get_var(query, strlen(query), "token", buf, 256);
    if (n > 0 && web_token_ok(buf, g_cfg.token))
        rc = 1;
    else if (n > 0 || n == -2) /* -2: longer than any token */
        rc = -1;
    free(buf);
    return rc;
}

static int reply_throttled(struct mg_connection *c, int retry_s)
{
    struct api_reply r;
    api_reply_init(&r);
    api_reply_error(&r, 429, "too many wrong tokens from this client: retry in %d s", retry_s);
    char after[16];
    snprintf(after, sizeof after, "%d", retry_s);
    api_reply_header(&r, "Retry-After", after);
    return web_send(c, &r);
}

/* Whether the request may be served: with a token, it must carry it (and a client in a back-off
 * is refused); without one (a loopback bind), a loopback client must be the process's own user
 * or root unless CLRSCOPE_ALLOW_USERS=any. 0 to serve it, else the status of the refusal sent. */
static int admit(struct mg_connection *c, const char *query)
{
    if (!g_cfg.token[0] && server.allow_any)
        return 0;
    const struct mg_request_info *ri = mg_get_request_info(c);
    struct web_client client, *cl = &client;
    web_clients_identify(ri->remote_addr, ri->remote_port, ri->server_port, cl);
    char who[64];
    if (g_cfg.token[0]) {
        int64_t now = prof_now_ns();
        int retry_s, block_s;
        if (web_clients_blocked(cl, now, &retry_s))
            return reply_throttled(c, retry_s);
        int tok = presented_token(c, query);
        if (tok > 0)
            return 0;
        if (tok < 0 && web_clients_failed(cl, now, &block_s)) {
            web_clients_describe(cl, who, sizeof who);
            prof_log(LOG_WARN, "web: %s sent %d wrong tokens within %d s: refused (429) for %d s",
                     who, WEB_FAIL_MAX, WEB_FAIL_WINDOW_S, block_s);
        }
        return web_reply_error(c, 401, "missing or wrong token: send 'Authorization: Bearer "
                               "<token>' or open the dashboard with ?token=<token>");
    }
    if (cl->owner)
        return 0;
    if (cl->uid_known) {
        __atomic_fetch_add(&server.refused_users, 1, __ATOMIC_RELAXED);
        prof_log_once(server.logged_other, LOG_INFO, "web: a request of uid %u was refused: the "
                      "dashboard serves only the process's user (uid %u) and root "
                      "(CLRSCOPE_TOKEN lets others in with the token; /api/v1/status "
                      "dashboard.refused_other_users counts them)", (unsigned)cl->uid,
                      (unsigned)server.uid);
        return web_reply_error(c, 401, "this dashboard serves only the user the process runs as "
                               "(uid %u) and root, not uid %u: its owner can set CLRSCOPE_TOKEN "
                               "(e.g. CLRSCOPE_TOKEN=auto) to let other users in with the token",
                               (unsigned)server.uid, (unsigned)cl->uid);
    }
    __atomic_fetch_add(&server.unknown_owner, 1, __ATOMIC_RELAXED);
    const char *why = cl->why ? cl->why : "not a loopback connection";
    prof_log_once(server.logged_unknown, LOG_WARN, "web: cannot tell which user opened a "
                  "connection to the dashboard (%s): such requests are refused (401); set "
                  "CLRSCOPE_TOKEN, or CLRSCOPE_ALLOW_USERS=any to serve every local user", why);
    return web_reply_error(c, 401, "cannot tell which user opened this connection (%s), and "
                           "the dashboard serves only the user the process runs as: set "
                           "CLRSCOPE_TOKEN and send it, or CLRSCOPE_ALLOW_USERS=any", why);
}

/* Cross-site POSTs are refused: a browser always sends Origin on them. */
static int origin_ok(struct mg_connection *c)
{
    const char *origin = mg_get_header(c, "Origin");
    if (!origin)
        return 1; /* curl and other non-browser clients */
    const char *host = mg_get_header(c, "Host");
    if (!host)
        return 0;
    const char *p = strstr(origin, "://");
    return p && !strcasecmp(p + 3, host);
}

/* The dashboard's own files are served to every client that names this server: they are the
 * same in every copy of the library and hold nothing of the process, and the page must load
 * before it can send the token with its requests (a <script src> carries no header). */
static int serve_asset(struct mg_connection *c, const struct web_asset *a)
{
    const char *inm = mg_get_header(c, "If-None-Match");
    struct api_reply r;
    api_reply_init(&r);
    /* kept by the browser but asked again each load (the .so may be newer): 304 by ETag */
    if (inm && !strcmp(inm, a->etag)) {
        api_reply_static(&r, 304, NULL, "", 0);
        r.verbatim = 1;
        api_reply_header(&r, "ETag", a->etag);
        api_reply_header(&r, "Cache-Control", "no-cache");
        return web_send(c, &r);
    }
    const char *ae = mg_get_header(c, "Accept-Encoding");
    int gz = ae && strstr(ae, "gzip") && a->gz_len < a->len;
    api_reply_static(&r, 200, a->mime, gz ? a->gz : a->data, gz ? a->gz_len : a->len);
    api_reply_header(&r, "Cache-Control", "no-cache");
    api_reply_header(&r, "ETag", a->etag);
    api_reply_header(&r, "Vary", "Accept-Encoding");
    if (gz)
        api_reply_header(&r, "Content-Encoding", "gzip");
    return web_send(c, &r);
}

/* What a waiting handler asks of the server: whether its client is gone. The request's socket
 * is looked for at the first question (a handler that never waits costs no listing). */
struct peer_watch {
    struct mg_connection *conn;
    int fd;
    int looked;
};

static int client_gone(void *ctx)
{
    struct peer_watch *w = ctx;
    if (!w->looked) {
        w->fd = web_peer_socket(w->conn);
        w->looked = 1;
    }
    return web_peer_gone(w->fd);
}

static void guard_stats(struct api_guard_stats *out)
{
    struct web_fdguard_stats fg;
    web_fdguard_get_stats(&fg);
    out->guarded = fg.guarded;
    out->spare_held = fg.spare_held;
    out->out_of_fds = fg.out_of_fds;
    out->refused = fg.refused;
    out->resets = fg.resets;
    struct web_clients_stats cs;
    web_clients_get_stats(&cs);
    out->allow_any = server.allow_any;
    out->refused_users = __atomic_load_n(&server.refused_users, __ATOMIC_RELAXED);
    out->unknown_owner = __atomic_load_n(&server.unknown_owner, __ATOMIC_RELAXED);
    out->dropped_over_cap = web_shed_dropped();
    out->token_failures = cs.token_failures;
    out->throttled = cs.throttled;
}

/* A POST's body, whole, into a buffer on the heap (worker stacks are small): none, or at most
 * API_MAX_BODY bytes; 0, or the status of the error already sent. */
static int read_body(struct mg_connection *c, const struct mg_request_info *ri, char **out,
                     size_t *len)
{
    *out = NULL;
    *len = 0;
    long long cl = ri->content_length;
    if (cl <= 0)
        return 0; /* none (a chunked body is not read: the API's bodies are small JSON) */
    if (cl > API_MAX_BODY)
        return web_reply_error(c, 413, "request body of %lld bytes; at most %d", cl,
                               API_MAX_BODY);
    char *b = malloc((size_t)cl + 1);
    if (!b)
        return web_reply_error(c, 503, "out of memory");
    size_t got = 0;
    while (got < (size_t)cl) {
        int r = mg_read(c, b + got, (size_t)cl - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got < (size_t)cl) {
        free(b);
        return web_reply_error(c, 400, "request body ended after %zu of %lld bytes", got, cl);
    }
    b[got] = 0;
    *out = b;
    *len = got;
    return 0;
}

static int handle(struct mg_connection *c, void *cbdata)
{
    (void)cbdata;
    const struct mg_request_info *ri = mg_get_request_info(c);
    const char *method = ri->request_method, *query = ri->query_string;
    const char *path = ri->local_uri ? ri->local_uri : "/";
    if (prof_core_stopping())
        return web_reply_error(c, 503, "the process is shutting down");
    if (!host_ok(c))
        return web_reply_error(c, 403, "Host header does not name this server");
    unsigned m = api_method_bit(method);
    struct api_match match;
    enum api_match_result res = api_route_match(method, path, &match);
    const struct web_asset *asset = res == API_ROUTE_NONE && m == API_GET ? web_asset_find(path)
                                                                          : NULL;
    if (asset)
        return serve_asset(c, asset);
    int refused = admit(c, query);
    if (refused)
        return refused;
    if (res == API_ROUTE_NONE) {
        if (m != API_GET)
            return web_reply_error(c, 405, "method not allowed");
        return web_reply_error(c, 404, "no such page: %.200s", path);
    }
    if (res == API_ROUTE_SCOPE_METHOD)
        return web_reply_error(c, 405, "method %.10s not allowed on %s", method, match.scope);
    if (m != API_GET && !origin_ok(c))
        return web_reply_error(c, 403, "cross-origin request refused");
    if (res == API_ROUTE_METHOD) {
        if (match.route->not_allowed)
            return web_reply_error(c, 405, "%s", match.route->not_allowed);
        return web_reply_error(c, 405, "method %.10s not allowed on %s", method, match.scope);
    }
    if (g_core.post_mortem && !match.route->history)
        return web_reply_error(c, 404, "%.100s needs the running process; this server shows the "
                               "history of one that has exited (clrscope serve)", path);
    char *body = NULL;
    size_t body_len = 0;
    if (m == API_POST) {
        int rc = read_body(c, ri, &body, &body_len);
        if (rc)
            return rc;
    }
    struct peer_watch watch = {.conn = c, .fd = -1};
    struct api_req q = {.method = method,
                        .body = body,
                        .body_len = body_len,
                        .path = path,
                        .query = query,
                        .id = match.id,
                        .name = match.name,
                        .name_len = match.name_len,
                        .client_gone = client_gone,
                        .client_ctx = &watch};
    guard_stats(&q.guard);
    struct api_reply out;
    api_reply_init(&out);
    match.route->handler(&q, &out);
    free(body);
    if (!out.status) /* a handler that filled nothing */
        api_reply_error(&out, 500, "no reply for %.200s", path);
    return web_send(c, &out);
}

static int log_message(const struct mg_connection *c, const char *msg)
{
    (void)c;
    prof_log(LOG_DEBUG, "web: %s", msg);
    return 1;
}

/* civetweb's own refusals (a method it does not know, a request over max_request_size, a
 * malformed request line) in the API's form: {"error": ...} as JSON. */
static int http_error(struct mg_connection *c, int status, const char *msg)
{
    web_reply_error(c, status, "%s", msg && *msg ? msg : "bad request");
    return 0;
}

static void *init_thread(const struct mg_context *ctx, int type)
{
    (void)ctx;
    prof_name_thread(type == 0 ? "web" : "web-w");
    return NULL;
}

static struct mg_context *try_start(int port, char *err, size_t errcap)
{
    char listen[96], nthreads[8];
    snprintf(listen, sizeof listen, "%s:%d", server.listen_host, port);
    snprintf(nthreads, sizeof nthreads, "%d", WEB_WORKERS);
    /* civetweb's CORS options empty: it answers no preflight itself (it would allow any origin
     * and echo any method, without the security headers); an OPTIONS reaches handle() */
    const char *opts[] = {"listening_ports", listen,
                          "num_threads", nthreads,
                          "request_timeout_ms", WEB_REQUEST_TIMEOUT_MS,
                          "max_request_size", "16384",
                          "enable_keep_alive", "no",
                          "access_control_allow_origin", "",
                          "access_control_allow_methods", "",
                          "access_control_allow_headers", "",
                          "access_control_list", NULL,
                          NULL, NULL};
    const size_t acl = sizeof opts / sizeof opts[0] - 4;
    if (is_loopback(server.listen_host) && server.listen_host[0] != '[') /* an IPv4 list */
        opts[acl + 1] = "-0.0.0.0/0,+127.0.0.0/8";
    else
        opts[acl] = NULL;
    struct mg_callbacks cb;
    memset(&cb, 0, sizeof cb);
    cb.log_message = log_message;
    cb.init_thread = init_thread;
    cb.init_connection = init_connection;
    cb.connection_close = connection_close;
    cb.http_error = http_error;
    struct mg_init_data init = {.callbacks = &cb, .user_data = NULL, .configuration_options = opts};
    unsigned code = 0;
    struct mg_error_data ed = {.code = &code, .text = err, .text_buffer_size = errcap};
    err[0] = 0;
    return mg_start2(&init, &ed);
}

int web_server_start(void)
{
    if (!g_cfg.dashboard) {
        prof_log(LOG_INFO, "dashboard off (CLRSCOPE_DASHBOARD=0)");
        return 0;
    }
    if (g_cfg.token_bad)
        return -1; /* logged where the variable was read */
    if (!is_loopback(g_cfg.bind) && !g_cfg.token[0]) {
        prof_log(LOG_ERROR, "CLRSCOPE_BIND=%s is not a loopback address and CLRSCOPE_TOKEN is "
                 "unset: the dashboard stays off (set CLRSCOPE_TOKEN=auto)", g_cfg.bind);
        return -1;
    }
    if (!is_loopback(g_cfg.bind) && strlen(g_cfg.token) < WEB_TOKEN_MIN) {
        prof_log(LOG_ERROR, "CLRSCOPE_BIND=%s is not a loopback address and CLRSCOPE_TOKEN has "
                 "%zu characters, fewer than the %d such a bind needs: the dashboard stays off "
                 "(CLRSCOPE_TOKEN=auto makes a strong one)", g_cfg.bind, strlen(g_cfg.token),
                 WEB_TOKEN_MIN);
        return -1;
    }
    read_allow_users();
    if (choose_listen_host())
        return -1;
    mg_init_library(0);
    char err[256];
    int tries = g_cfg.port == 0 ? 1 : 16;
    for (int i = 0; i < tries && !server.ctx; i++) {
        int port = g_cfg.port == 0 ? 0 : g_cfg.port + i;
        if (port > 65535)
            break;
        server.ctx = try_start(port, err, sizeof err);
    }
    if (!server.ctx) {
        prof_log(LOG_ERROR, "dashboard not started: %s on %s ports %d..%d (%s); the app and the "
                 "other profiles run on", "no free port", server.listen_host, g_cfg.port,
                 g_cfg.port + tries - 1, err[0] ? err : "unknown error");
        return -1;
    }
    struct mg_server_port ports[4];
    int np = mg_get_server_ports(server.ctx, 4, ports);
    server.port = np > 0 ? ports[0].port : g_cfg.port;
    find_listen_addr();
    const struct sockaddr_storage *la = server.listen_addr.ss_family ? &server.listen_addr : NULL;
    web_clients_setup(server.uid, la);
    web_shed_start(server.port, la, WEB_WORKERS);
    mg_set_request_handler(server.ctx, "/", handle, NULL);
    web_fdguard_start(server.port); /* logs when it cannot guard */
    if (!g_core.post_mortem) { /* `clrscope ls` lists running apps, not their histories */
        web_discovery_write(url_host(), server.port);
        atexit(web_discovery_remove);
    }
    const char *host = url_host();
    if (g_cfg.token[0] && g_cfg.token_auto)
        prof_log(LOG_ALWAYS, "dashboard http://%s:%d/?token=%s (pid %d)", host, server.port, g_cfg.token,
                 (int)g_core.pid);
    else
        prof_log(LOG_ALWAYS, "dashboard http://%s:%d/ (pid %d)", host, server.port, (int)g_core.pid);
    return 0;
}

/* At Shutdown the process is about to exit: mg_stop would wait up to a second for civetweb's
 * master thread to leave its poll loop, delaying every exit. Requests arriving from now on are
 * answered 503 (handle() checks prof_core_stopping()), and the threads end with the process. */
void web_server_stop(void)
{
    web_discovery_remove();
}
