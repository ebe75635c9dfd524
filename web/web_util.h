/*
 * web_util - the one place replies are written to civetweb: a reply an API handler built
 * (api_reply.h), the server's own errors and pages.
 * Every reply but a verbatim one carries the API security headers (no-store unless it names
 * its own Cache-Control, nosniff, CSP, no referrer, no framing) and its Content-Length; a HEAD
 * gets the headers GET would, and no body.
 * ctx: civetweb workers (100 KB stacks: the file chunk buffer is malloc'd).
 */
#ifndef WEB_UTIL_H
#define WEB_UTIL_H

struct mg_connection;
struct api_reply;

/* Sends `r` and frees it: its headers, the body in chunks of 64 KB or streamed from its
 * descriptor (closed before the headers for a HEAD); for API_NO_REPLY nothing, and the
 * connection is not kept. Returns the reply's status. */
int web_send(struct mg_connection *c, struct api_reply *r);
/* Sends {"error": "..."} with `status`. Returns status. */
int web_reply_error(struct mg_connection *c, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#endif
