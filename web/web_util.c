/* web_util.c - see web_util.h. */
#include "web_util.h"

#include <civetweb.h>
#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "prof_config.h"
#include "prof_utf8.h"

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

int web_reply_bytes(struct mg_connection *c, int status, const char *mime, const void *data,
                    size_t len, const char *const *extra)
{
    char lenbuf[32];
    snprintf(lenbuf, sizeof lenbuf, "%zu", len);
    mg_response_header_start(c, status);
    mg_response_header_add(c, "Content-Type", mime, -1);
    mg_response_header_add(c, "Content-Length", lenbuf, -1);
    int own_cache_control = 0;
    for (int i = 0; extra && extra[i] && extra[i + 1]; i += 2)
        own_cache_control |= !strcasecmp(extra[i], "Cache-Control");
    common_headers(c, own_cache_control);
    for (int i = 0; extra && extra[i] && extra[i + 1]; i += 2)
        mg_response_header_add(c, extra[i], extra[i + 1], -1);
    mg_response_header_send(c);
    /* HEAD: the headers GET would send, Content-Length included, and no body */
    const struct mg_request_info *ri = mg_get_request_info(c);
    if (ri && ri->request_method && !strcmp(ri->request_method, "HEAD"))
        return status;
    const char *p = data;
    while (len > 0) {
        size_t chunk = len > 65536 ? 65536 : len;
        int w = mg_write(c, p, chunk);
        if (w <= 0)
            break;
        p += w;
        len -= (size_t)w;
    }
    return status;
}

int web_reply_json(struct mg_connection *c, int status, cJSON *obj)
{
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!s)
        return web_reply_error(c, 500, "out of memory while building the reply");
    web_reply_bytes(c, status, "application/json; charset=utf-8", s, strlen(s), NULL);
    cJSON_free(s);
    return status;
}

int web_reply_error(struct mg_connection *c, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    prof_utf8_clean(msg); /* it may quote the request's bytes, or cut a character at its cap */
    cJSON *o = cJSON_CreateObject();
    char *s = NULL;
    if (o && cJSON_AddStringToObject(o, "error", msg))
        s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        web_reply_bytes(c, status, "application/json; charset=utf-8", oom, sizeof oom - 1, NULL);
        return status;
    }
    web_reply_bytes(c, status, "application/json; charset=utf-8", s, strlen(s), NULL);
    cJSON_free(s);
    return status;
}

int web_query_str(const struct web_req *r, const char *name, char *buf, size_t cap)
{
    buf[0] = 0;
    if (!r->query)
        return 0;
    int n = mg_get_var(r->query, strlen(r->query), name, buf, cap);
    if (n == -1)
        return 0;
    if (n < 0) {
        web_reply_error(r->conn, 400, "query parameter '%s' is too long (max %zu bytes)", name,
                        cap - 1);
        return -1;
    }
    if (prof_utf8_clean(buf)) { /* (a filter is echoed in the JSON, which is UTF-8) */
        web_reply_error(r->conn, 400, "query parameter '%s' is not valid UTF-8 (after "
                        "percent-decoding: '%s')", name, buf);
        return -1;
    }
    return 1;
}

int web_query_long(const struct web_req *r, const char *name, long def, long min, long max,
                   long *out)
{
    char buf[32];
    *out = def;
    int rc = web_query_str(r, name, buf, sizeof buf);
    if (rc <= 0)
        return rc;
    char *end = NULL;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (!buf[0] || errno || *end || v < min || v > max) {
        web_reply_error(r->conn, 400, "query parameter '%s' must be a whole number from %ld to %ld",
                        name, min, max);
        return -1;
    }
    *out = v;
    return 1;
}

int web_query_double(const struct web_req *r, const char *name, double def, double min, double max,
                     double *out)
{
    char buf[32];
    *out = def;
    int rc = web_query_str(r, name, buf, sizeof buf);
    if (rc <= 0)
        return rc;
    char *end = NULL;
    errno = 0;
    double v = strtod(buf, &end);
    /* decimal only: strtod also reads "0x10" as 16 and " 5" as 5 */
    int decimal = strspn(buf, "0123456789.eE+-") == strlen(buf);
    if (!buf[0] || !decimal || errno || *end || !isfinite(v) || v < min || v > max) {
        web_reply_error(r->conn, 400, "query parameter '%s' must be a number from %g to %g", name,
                        min, max);
        return -1;
    }
    *out = v;
    return 1;
}

int web_query_seconds(const struct web_req *r, double *out)
{
    return web_query_double(r, "seconds", 60, 1, g_cfg.history_s, out);
}
