/* api_json.c - see api_json.h. */
#include "api_json.h"

#include <stdarg.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "prof_utf8.h"

void jb_init(struct jbuf *b, size_t max)
{
    memset(b, 0, sizeof *b);
    b->max = max;
}

void jb_free(struct jbuf *b)
{
    prof_scratch_release(&b->mem);
    memset(b, 0, sizeof *b);
}

static int reserve(struct jbuf *b, size_t n)
{
    if (b->overflow)
        return -1;
    if (b->len + n + 1 <= b->cap)
        return 0;
    size_t nc = b->cap ? b->cap : 4096;
    while (nc < b->len + n + 1)
        nc *= 2;
    if (nc > b->max) {
        if (b->len + n + 1 > b->max) {
            b->overflow = 1;
            return -1;
        }
        nc = b->max;
    }
    char *np = prof_scratch_realloc(&b->mem, b->p, nc);
    if (!np) {
        b->overflow = 1;
        return -1;
    }
    b->p = np;
    b->cap = nc;
    return 0;
}

void jb_raw(struct jbuf *b, const char *s, size_t n)
{
    if (reserve(b, n))
        return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void jb_str(struct jbuf *b, const char *s)
{
    static const char hex[] = "0123456789abcdef";
    if (!s)
        s = "";
    jb_raw(b, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x80) {
            /* whole characters only: a byte of none (a name cut inside one, bytes from the
             * system in another encoding) would make the reply undecodable; it becomes '?' */
            size_t k = prof_utf8_seq((const unsigned char *)s);
            if (k) {
                s += k - 1;
                continue;
            }
            jb_raw(b, run, (size_t)(s - run));
            jb_raw(b, "?", 1);
            run = s + 1;
            continue;
        }
        if (c >= 0x20 && c != '"' && c != '\\')
            continue;
        jb_raw(b, run, (size_t)(s - run));
        char esc[7] = {'\\', 0, 0, 0, 0, 0, 0};
        size_t n = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        default:
            esc[1] = 'u';
            esc[2] = '0';
            esc[3] = '0';
            esc[4] = hex[c >> 4];
            esc[5] = hex[c & 15];
            n = 6;
        }
        jb_raw(b, esc, n);
        run = s + 1;
    }
    jb_raw(b, run, (size_t)(s - run));
    jb_raw(b, "\"", 1);
}

void jb_int(struct jbuf *b, int64_t v)
{
    char tmp[32];
    int n = snprintf(tmp, sizeof tmp, "%lld", (long long)v);
    jb_raw(b, tmp, (size_t)n);
}

void jb_num(struct jbuf *b, double v)
{
    if (!isfinite(v)) {
        jb_lit(b, "null");
        return;
    }
    char tmp[40];
    int n = snprintf(tmp, sizeof tmp, "%.17g", v);
    jb_raw(b, tmp, (size_t)n);
}

void jb_printf(struct jbuf *b, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n > 0)
        jb_raw(b, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}
