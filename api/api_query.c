/* api_query.c - see api_reply.h (the query half). */
#include "api_reply.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "prof_config.h"
#include "prof_history.h"
#include "prof_utf8.h"

static int hex_digit(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c |= 0x20;
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

/* Form decoding of src[0..n) into dst (cap >= 1): %XX with two hex digits is that byte, '+' a
 * space, anything else itself (a lone '%' too). Returns the decoded length, or -2 when the
 * value does not fit in cap - 1 bytes. */
static int decode(const char *src, size_t n, char *dst, size_t cap)
{
    size_t i = 0, j = 0;
    for (; i < n && j + 1 < cap; i++, j++) {
        int hi, lo;
        if (src[i] == '%' && i + 2 < n && (hi = hex_digit((unsigned char)src[i + 1])) >= 0 &&
            (lo = hex_digit((unsigned char)src[i + 2])) >= 0) {
            dst[j] = (char)(hi << 4 | lo);
            i += 2;
        } else {
            dst[j] = src[i] == '+' ? ' ' : src[i];
        }
    }
    dst[j] = 0;
    return i >= n ? (int)j : -2;
}

int api_query_get(const char *query, const char *name, char *buf, size_t cap)
{
    buf[0] = 0;
    if (!query || !name)
        return -1;
    size_t qlen = strlen(query), nlen = strlen(name);
    /* name=value pairs split at '&'; the name must start the string or follow a '&' */
    for (size_t p = 0; p + nlen < qlen; p++) {
        if ((p && query[p - 1] != '&') || query[p + nlen] != '=' ||
            strncasecmp(query + p, name, nlen))
            continue;
        size_t v = p + nlen + 1;
        const char *amp = memchr(query + v, '&', qlen - v);
        size_t vlen = amp ? (size_t)(amp - (query + v)) : qlen - v;
        return decode(query + v, vlen, buf, cap);
    }
    return -1;
}

int api_query_str(const struct api_req *q, const char *name, char *buf, size_t cap,
                  struct api_reply *err)
{
    int n = api_query_get(q->query, name, buf, cap);
    if (n == -1)
        return 0;
    if (n < 0) {
        api_reply_error(err, 400, "query parameter '%s' is too long (max %zu bytes)", name,
                        cap - 1);
        return -1;
    }
    if (prof_utf8_clean(buf)) { /* (a filter is echoed in the JSON, which is UTF-8) */
        api_reply_error(err, 400, "query parameter '%s' is not valid UTF-8 (after "
                        "percent-decoding: '%s')", name, buf);
        return -1;
    }
    return 1;
}

int api_query_long(const struct api_req *q, const char *name, long def, long min, long max,
                   long *out, struct api_reply *err)
{
    char buf[32];
    *out = def;
    int rc = api_query_str(q, name, buf, sizeof buf, err);
    if (rc <= 0)
        return rc;
    char *end = NULL;
    errno = 0;
    long v = strtol(buf, &end, 10);
    if (!buf[0] || errno || *end || v < min || v > max) {
        api_reply_error(err, 400, "query parameter '%s' must be a whole number from %ld to %ld",
                        name, min, max);
        return -1;
    }
    *out = v;
    return 1;
}

int api_query_double(const struct api_req *q, const char *name, double def, double min,
                     double max, double *out, struct api_reply *err)
{
    char buf[32];
    *out = def;
    int rc = api_query_str(q, name, buf, sizeof buf, err);
    if (rc <= 0)
        return rc;
    char *end = NULL;
    errno = 0;
    double v = strtod(buf, &end);
    /* decimal only: strtod also reads "0x10" as 16 and " 5" as 5 */
    int decimal = strspn(buf, "0123456789.eE+-") == strlen(buf);
    if (!buf[0] || !decimal || errno || *end || !isfinite(v) || v < min || v > max) {
        api_reply_error(err, 400, "query parameter '%s' must be a number from %g to %g", name,
                        min, max);
        return -1;
    }
    *out = v;
    return 1;
}

int api_query_seconds(const struct api_req *q, double *out, struct api_reply *err)
{
    /* past the memory's CLRSCOPE_HISTORY_S, the history on disk answers (prof_history.h) */
    return api_query_double(q, "seconds", 60, 1, (double)prof_history_reach_s(), out, err);
}

/* One moment: "now", unix seconds (>= 1e9) or seconds relative to now (<= 0). */
static int parse_time(const char *s, size_t n, double now, double *out)
{
    char buf[32];
    if (n == 0 || n >= sizeof buf)
        return -1;
    memcpy(buf, s, n);
    buf[n] = 0;
    if (!strcmp(buf, "now")) {
        *out = now;
        return 0;
    }
    if (strspn(buf, "0123456789.eE+-") != n)
        return -1;
    char *end = NULL;
    errno = 0;
    double v = strtod(buf, &end);
    if (errno || *end || !isfinite(v))
        return -1;
    if (v <= 0)
        *out = now + v;
    else if (v >= 1e9 && v < 1e11)
        *out = v;
    else
        return -1;
    return 0;
}

int api_query_time(const struct api_req *q, const char *name, double now, double *out,
                   struct api_reply *err)
{
    char buf[40];
    int rc = api_query_str(q, name, buf, sizeof buf, err);
    if (rc <= 0)
        return rc;
    if (parse_time(buf, strlen(buf), now, out) < 0) {
        api_reply_error(err, 400, "query parameter '%s' must be a time: unix seconds, seconds "
                        "relative to now (-300) or now", name);
        return -1;
    }
    return 1;
}

int api_query_span(const struct api_req *q, const char *name, double now, double *from,
                   double *to, struct api_reply *err)
{
    char buf[80];
    int rc = api_query_str(q, name, buf, sizeof buf, err);
    if (rc <= 0)
        return rc;
    const char *comma = strchr(buf, ',');
    if (!comma || parse_time(buf, (size_t)(comma - buf), now, from) < 0 ||
        parse_time(comma + 1, strlen(comma + 1), now, to) < 0) {
        api_reply_error(err, 400, "query parameter '%s' must be FROM,TO: each unix seconds, "
                        "seconds relative to now (-300) or now", name);
        return -1;
    }
    if (*to <= *from) {
        api_reply_error(err, 400, "query parameter '%s': the window ends before it starts", name);
        return -1;
    }
    return 1;
}
