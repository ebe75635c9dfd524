/* api_reply.c - see api_reply.h (the reply half). */
#include "api_reply.h"

#include <cjson/cJSON.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "api_json.h"
#include "prof_scratch.h"
#include "prof_utf8.h"

void api_reply_init(struct api_reply *r)
{
    memset(r, 0, sizeof *r);
    r->fd = -1;
}

static void drop_body(struct api_reply *r)
{
    if (r->owned)
        (r->release_owned ? r->release_owned : free)(r->owned);
    r->owned = NULL;
    r->release_owned = NULL;
    r->body = NULL;
    r->len = 0;
    if (r->fd >= 0)
        close(r->fd);
    r->fd = -1;
    r->fd_len = 0;
}

void api_reply_free(struct api_reply *r)
{
    drop_body(r);
    api_reply_init(r);
}

int api_reply_header(struct api_reply *r, const char *name, const char *value)
{
    size_t n = strlen(value) + 1;
    if (r->nheaders == API_MAX_HEADERS || n > sizeof r->hbuf - r->hused)
        return -1;
    char *v = r->hbuf + r->hused;
    memcpy(v, value, n);
    r->hused += n;
    r->header_name[r->nheaders] = name;
    r->header_value[r->nheaders] = v;
    r->nheaders++;
    return 0;
}

static int set_body(struct api_reply *r, int status, const char *type, const void *data,
                    size_t len, void *owned, void (*release)(void *))
{
    drop_body(r);
    r->status = status;
    r->content_type = type;
    r->body = data;
    r->len = len;
    r->owned = owned;
    r->release_owned = release;
    return status;
}

int api_reply_owned(struct api_reply *r, int status, const char *type, void *data, size_t len)
{
    return set_body(r, status, type, data ? data : "", data ? len : 0, data, NULL);
}

int api_reply_scratch(struct api_reply *r, int status, const char *type, const void *data,
                      size_t len, struct prof_scratch *mem)
{
    if (!mem->large && !mem->chunks) /* nothing in the arena: data is not either */
        return set_body(r, status, type, data ? data : "", data ? len : 0, NULL, NULL);
    void *moved = prof_scratch_move(mem);
    if (!moved) {
        prof_scratch_release(mem);
        return api_reply_error(r, 503, "out of memory while building the reply");
    }
    return set_body(r, status, type, data ? data : "", data ? len : 0, moved, prof_scratch_drop);
}

int api_reply_static(struct api_reply *r, int status, const char *type, const void *data,
                     size_t len)
{
    return set_body(r, status, type, data, len, NULL, NULL);
}

static void release_cjson(void *p)
{
    cJSON_free(p);
}

int api_reply_json(struct api_reply *r, int status, cJSON *obj)
{
    char *s = obj ? cJSON_PrintUnformatted(obj) : NULL;
    cJSON_Delete(obj);
    if (!s)
        return api_reply_error(r, 500, "out of memory while building the reply");
    return set_body(r, status, API_JSON, s, strlen(s), s, release_cjson);
}

int api_reply_jbuf(struct api_reply *r, int status, const char *type, struct jbuf *b,
                   const char *overflow_msg)
{
    if (b->overflow) {
        jb_free(b);
        return api_reply_error(r, 500, "%s", overflow_msg);
    }
    const char *p = b->p;
    size_t len = b->len;
    struct prof_scratch mem = b->mem;
    jb_init(b, b->max); /* the bytes are the reply's now */
    return api_reply_scratch(r, status, type, p, len, &mem);
}

int api_reply_error(struct api_reply *r, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    prof_utf8_clean(msg); /* it may quote the request's bytes, or cut a character at its cap */
    r->nheaders = 0;
    r->hused = 0;
    r->verbatim = 0;
    cJSON *o = cJSON_CreateObject();
    char *s = NULL;
    if (o && cJSON_AddStringToObject(o, "error", msg))
        s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    if (!s) {
        static const char oom[] = "{\"error\":\"out of memory\"}";
        return set_body(r, status, API_JSON, oom, sizeof oom - 1, NULL, NULL);
    }
    return set_body(r, status, API_JSON, s, strlen(s), s, release_cjson);
}
