/* prof_utf8.c - see prof_utf8.h. */
#include "prof_utf8.h"

#include <stdint.h>
#include <string.h>

/* The length of the well-formed UTF-8 sequence at p (RFC 3629: no overlong forms, no
 * surrogates, nothing above U+10FFFF), 0 if there is none. */
size_t prof_utf8_seq(const unsigned char *p)
{
    unsigned c = p[0];
    if (c < 0x80)
        return 1;
    size_t k;
    unsigned lo = 0x80, hi = 0xBF; /* the range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) {
        k = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        k = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        k = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    if (p[1] < lo || p[1] > hi) /* (a NUL ends it here too) */
        return 0;
    for (size_t i = 2; i < k; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    return k;
}

size_t prof_utf8_clean(char *s)
{
    size_t bad = 0;
    unsigned char *p = (unsigned char *)s;
    while (*p) {
        size_t k = prof_utf8_seq(p);
        if (!k) {
            *p++ = '?';
            bad++;
            continue;
        }
        p += k;
    }
    return bad;
}

size_t prof_utf16_to_utf8(const uint16_t *src, size_t n, char *dst, size_t cap)
{
    size_t j = 0;
    if (cap == 0)
        return 0;
    for (size_t i = 0; src && i < n && src[i]; i++) {
        uint32_t c = src[i];
        if (c >= 0xD800 && c <= 0xDBFF && i + 1 < n && src[i + 1] >= 0xDC00 && src[i + 1] <= 0xDFFF) {
            c = 0x10000 + ((c - 0xD800) << 10) + (src[i + 1] - 0xDC00u);
            i++;
        } else if (c >= 0xD800 && c <= 0xDFFF) {
            c = 0xFFFD;
        }
        unsigned char tmp[4];
        size_t k;
        if (c < 0x80) {
            tmp[0] = (unsigned char)c;
            k = 1;
        } else if (c < 0x800) {
            tmp[0] = (unsigned char)(0xC0 | (c >> 6));
            tmp[1] = (unsigned char)(0x80 | (c & 0x3F));
            k = 2;
        } else if (c < 0x10000) {
            tmp[0] = (unsigned char)(0xE0 | (c >> 12));
            tmp[1] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            tmp[2] = (unsigned char)(0x80 | (c & 0x3F));
            k = 3;
        } else {
            tmp[0] = (unsigned char)(0xF0 | (c >> 18));
            tmp[1] = (unsigned char)(0x80 | ((c >> 12) & 0x3F));
            tmp[2] = (unsigned char)(0x80 | ((c >> 6) & 0x3F));
            tmp[3] = (unsigned char)(0x80 | (c & 0x3F));
            k = 4;
        }
        if (j + k >= cap)
            break;
        memcpy(dst + j, tmp, k);
        j += k;
    }
    dst[j] = 0;
    return j;
}
