/* web_util.c - see web_util.h. */
#include "web_util.h"

#include <civetweb.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "api_reply.h"

#define CHUNK 65536 /* bytes per write */

/* API answers are never stored; a reply may name its own Cache-Control in extra (the dashboard's
 * files: "no-cache", kept and revalidated by ETag). */
static void common_headers(struct mg_connection *c, int own_cache_control)
{
    if (!own_cache_control)
        mg_response_header_add(c, "Cache-Control", "no-store", -1);
    mg_response_header_add(c, "X-Content-Type-Options", "nosniff", -1);
    mg_response_header_add(c, "Content-Security-Policy",
                           "default-src 'self'; img-src 'self' data:; style-src 'self'; "
                           "script-src 'self'; connect-src 'self'; frame-ancestors 'none'; "
                           "base-uri 'none'; form-action 'self'",
                           -1);
    mg_response_header_add(c, "Referrer-Policy", "no-referrer", -1);
    mg_response_header_add(c, "X-Frame-Options", "DENY", -1);
}

int web_send(struct mg_connection *c, struct api_reply *r)
{
    int status = r->status;
    if (status == API_NO_REPLY) { /* nobody to answer: the connection is closed, no reply */
        mg_disable_connection_keep_alive(c);
        api_reply_free(r);
        return status;
    }
    const struct mg_request_info *ri = mg_get_request_info(c);
    int head = ri && ri->request_method && !strcmp(ri->request_method, "HEAD");
    if (head && r->fd >= 0) {
        /* closed before the reply: a client that has its headers finds no descriptor left */
        close(r->fd);
        r->fd = -1;
    }
    mg_response_header_start(c, status);
    if (!r->verbatim) {
        char lenbuf[32];
        snprintf(lenbuf, sizeof lenbuf, "%zu", r->len);
        mg_response_header_add(c, "Content-Type", r->content_type, -1);
        mg_response_header_add(c, "Content-Length", lenbuf, -1);
        int own_cache_control = 0;
        for (int i = 0; i < r->nheaders; i++)
            own_cache_control |= !strcasecmp(r->header_name[i], "Cache-Control");
        common_headers(c, own_cache_control);
    }
    for (int i = 0; i < r->nheaders; i++)
        mg_response_header_add(c, r->header_name[i], r->header_value[i], -1);
    mg_response_header_send(c);
    /* HEAD: the headers GET would send, Content-Length included, and no body */
    if (!head && r->fd >= 0) {
        char *buf = malloc(CHUNK);
        int64_t left = r->fd_len;
        ssize_t n;
        while (buf && left > 0 && (n = read(r->fd, buf, left < CHUNK ? (size_t)left : CHUNK)) > 0) {
            if (mg_write(c, buf, (size_t)n) <= 0)
                break;
            left -= n;
        }
        free(buf);
    } else if (!head) {
        const char *p = r->body;
        size_t len = r->len;
        while (len > 0) {
            int w = mg_write(c, p, len > CHUNK ? CHUNK : len);
            if (w <= 0)
                break;
            p += w;
            len -= (size_t)w;
        }
    }
    api_reply_free(r);
    return status;
}

int web_reply_error(struct mg_connection *c, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    struct api_reply r;
    api_reply_init(&r);
    api_reply_error(&r, status, "%s", msg);
    return web_send(c, &r);
}
