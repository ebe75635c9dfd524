/*
 * web_util - request parsing and reply helpers shared by every handler.
 * Handlers run on civetweb workers (100 KB stacks): these helpers keep buffers small and on the
 * heap, and every reply carries the API security headers (no-store, nosniff, CSP).
 */
#ifndef WEB_UTIL_H
#define WEB_UTIL_H

#include <stddef.h>
#include <stdint.h>

struct mg_connection;
struct api_reply;
typedef struct cJSON cJSON;

struct web_req {
    struct mg_connection *conn;
    const char *method;
    const char *path;   /* local_uri, decoded */
    const char *query;  /* may be NULL */
};

/* Sends the reply a handler built and frees it (api_reply.h): its headers, the API's security
 * headers and Content-Length unless it is verbatim, no body for a HEAD, the body in chunks of
 * 64 KB or streamed from its descriptor; for API_NO_REPLY nothing, and the connection is not
 * kept. Returns the reply's status. */
int web_send(struct mg_connection *c, struct api_reply *r);
/* Sends `obj` as JSON (and frees it). Returns status. */
int web_reply_json(struct mg_connection *c, int status, cJSON *obj);
/* Sends {"error": "..."} with `status`. Returns status. */
int web_reply_error(struct mg_connection *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Sends raw bytes. `extra` is a NULL-terminated list of name, value pairs (may be NULL). */
int web_reply_bytes(struct mg_connection *c, int status, const char *mime, const void *data,
                    size_t len, const char *const *extra);

/* Query parameters. Each returns 0 when absent (out = default), 1 when present and valid, and -1
 * when present but invalid (after replying 400 with a message naming the parameter). */
int web_query_str(const struct web_req *r, const char *name, char *buf, size_t cap);
int web_query_long(const struct web_req *r, const char *name, long def, long min, long max,
                   long *out);
int web_query_double(const struct web_req *r, const char *name, double def, double min, double max,
                     double *out);
/* `seconds` per CONTRACT (default 60, 1..history). */
int web_query_seconds(const struct web_req *r, double *out);

#endif
