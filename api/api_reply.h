/*
 * api_reply - what an endpoint handler is given and what it gives back: the parsed request
 * (struct api_req), the reply it fills (struct api_reply) and the query-string accessors.
 *
 * A handler builds its whole reply here, headers and body, and sends nothing: the server (web/)
 * writes it out, adds Content-Length and the API's security headers, leaves the body out for a
 * HEAD and closes the connection when the handler found its client gone. Nothing here knows of
 * civetweb or of sockets, so a handler runs as well from a unit test or a fuzz target.
 *
 * ctx: every function on the thread that owns the request and the reply (a civetweb worker, a
 * test); pure but for the memory they allocate.
 */
#ifndef API_REPLY_H
#define API_REPLY_H

#include <stddef.h>
#include <stdint.h>

typedef struct cJSON cJSON;
struct jbuf;
struct prof_scratch;

/* The dashboard's guards as /api/v1/status shows them: the descriptor guard (web_fdguard) and
 * who is let in (web_server, web_clients). */
struct api_guard_stats {
    int guarded;      /* the listening socket was found and a spare held at the start */
    int spare_held;   /* a spare descriptor is held now */
    int out_of_fds;   /* in an episode of no free descriptors */
    uint64_t refused; /* connections answered 503 for want of descriptors */
    uint64_t resets;  /* queues dropped for want of a spare to answer with */
    int allow_any;    /* CLRSCOPE_ALLOW_USERS=any */
    uint64_t refused_users;    /* 401s to another local user */
    uint64_t unknown_owner;    /* 401s to a connection whose user could not be told */
    uint64_t dropped_over_cap; /* connections shut at once: their client held its share */
    uint64_t token_failures;   /* requests with a wrong token */
    uint64_t throttled;        /* 429s to a client refused after wrong tokens */
};

struct api_req {
    const char *method; /* as received: "GET", "HEAD", "POST", "DELETE" */
    const char *path;   /* the local URI, percent-decoded */
    const char *query;  /* the raw query string (still percent-encoded); NULL when none */
    /* what the route's pattern captured (api_routes.h) */
    int id;             /* {id}: a heap snapshot's id (> 0); 0 when the route has none */
    const char *name;   /* {name}: the rest of the path, name_len bytes (not NUL-terminated) */
    size_t name_len;
    /* A POST's body (at most API_MAX_BODY bytes, NUL-terminated); NULL with body_len 0 when
     * there is none. */
    const char *body;
    size_t body_len;
    /* What the server offers. client_gone(client_ctx): 1 once the client has closed its side or
     * reset the connection, never blocking; NULL when the server cannot tell (never gone). For a
     * handler that waits (a profile collected over the next seconds). */
    int (*client_gone)(void *ctx);
    void *client_ctx;
    struct api_guard_stats guard;
};

#define API_MAX_BODY 4096 /* bytes of a POST's body the server reads; more is a 413 */
#define API_NO_REPLY 499 /* status of a request whose client left: nothing is sent */
#define API_MAX_HEADERS 8
#define API_JSON "application/json; charset=utf-8"

struct api_reply {
    int status;               /* API_NO_REPLY: no reply, and the connection is not kept */
    const char *content_type; /* a string that outlives the reply (a literal) */
    /* 0: Content-Type, Content-Length, the API's security headers (Cache-Control: no-store
     * unless a header below names its own), then the headers below. 1: the headers below and
     * nothing else, in their order (a redirect, a 304, a file download); Content-Length among
     * them when there is one. */
    int verbatim;
    int nheaders;
    const char *header_name[API_MAX_HEADERS]; /* literals */
    const char *header_value[API_MAX_HEADERS]; /* copies, in hbuf */
    char hbuf[768];
    size_t hused;
    /* The body: len bytes at body, which is `owned` (released with release_owned, free() when
     * NULL) or a literal; or, when fd >= 0, fd_len bytes read from fd from its current offset,
     * the descriptor closed once sent (before the headers, for a HEAD). */
    const char *body;
    size_t len;
    void *owned;
    void (*release_owned)(void *);
    int fd;
    int64_t fd_len;
};

void api_reply_init(struct api_reply *r);
/* Frees the owned body and closes the descriptor; the reply is empty (api_reply_init) again. */
void api_reply_free(struct api_reply *r);
/* Adds a header (name: a literal; value copied). 0, or -1 when there is no room left. */
int api_reply_header(struct api_reply *r, const char *name, const char *value);

/* Each of these sets the status, the content type and the body (dropping a body set before) and
 * returns the status. */
/* `data`, malloc'd, becomes the reply's (freed by the sender, or here on failure). */
int api_reply_owned(struct api_reply *r, int status, const char *type, void *data, size_t len);
/* `data`, in the arena `mem`, becomes the reply's with all the arena holds: the arena is
 * released once the body is sent (or here on failure: 503) and *mem is empty. */
int api_reply_scratch(struct api_reply *r, int status, const char *type, const void *data,
                      size_t len, struct prof_scratch *mem);
/* `data` is a literal or otherwise outlives the reply. */
int api_reply_static(struct api_reply *r, int status, const char *type, const void *data,
                     size_t len);
/* `obj` as compact JSON (and frees it); 500 with an error when it cannot be printed. */
int api_reply_json(struct api_reply *r, int status, cJSON *obj);
/* The buffer's bytes with its arena (taken: b is emptied); 500 with `overflow_msg` as the error
 * when the buffer overflowed. */
int api_reply_jbuf(struct api_reply *r, int status, const char *type, struct jbuf *b,
                   const char *overflow_msg);
/* {"error": message} with `status` (headers set before are dropped). The message may quote
 * request bytes: it is cut at 511 bytes and made valid UTF-8. */
int api_reply_error(struct api_reply *r, int status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Query parameters, first occurrence, names compared without case, '+' and %XX decoded (the
 * rules civetweb's mg_get_var has). Each returns 0 when absent (out = default), 1 when present
 * and valid, and -1 when present but invalid: `err` then holds a 400 reply whose message names
 * the parameter. */
int api_query_str(const struct api_req *q, const char *name, char *buf, size_t cap,
                  struct api_reply *err);
int api_query_long(const struct api_req *q, const char *name, long def, long min, long max,
                   long *out, struct api_reply *err);
int api_query_double(const struct api_req *q, const char *name, double def, double min,
                     double max, double *out, struct api_reply *err);
/* `seconds` per CONTRACT (default 60, 1..CLRSCOPE_HISTORY_S). */
int api_query_seconds(const struct api_req *q, double *out, struct api_reply *err);
/* A moment: unix seconds (1e9 and more), seconds relative to `now` (0 or less: "-300"), or
 * "now"; into *out as unix seconds. */
int api_query_time(const struct api_req *q, const char *name, double now, double *out,
                   struct api_reply *err);
/* A window "FROM,TO", each a moment as above, TO after FROM. */
int api_query_span(const struct api_req *q, const char *name, double now, double *from,
                   double *to, struct api_reply *err);
/* The raw lookup under those: the decoded value of `name` in `query` into buf (cap >= 1, always
 * NUL-terminated; a %00 ends the string early). Returns its decoded length, -1 when absent, -2
 * when it does not fit in cap - 1 bytes. */
int api_query_get(const char *query, const char *name, char *buf, size_t cap);

#endif
