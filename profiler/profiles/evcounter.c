/* evcounter.c - see evcounter.h. */
#include "evcounter.h"

#include <string.h>

/* System.TypeCode values as EventPipe metadata uses them (17 = Guid, 19 = array in V2 only). */
enum {
    TC_OBJECT = 1,
    TC_BOOLEAN = 3,
    TC_SINGLE = 13,
    TC_DOUBLE = 14,
    TC_STRING = 18,
};

#define MAX_DEPTH 8     /* nested structs; EventCounters uses 2 */
#define MAX_FIELDS 512  /* fields visited before the input is refused */

struct cur {
    const uint8_t *p;
    size_t len, off;
};

static int rd(struct cur *c, void *v, size_t n)
{
    if (n > c->len - c->off)
        return -1;
    memcpy(v, c->p + c->off, n);
    c->off += n;
    return 0;
}

/* Reads a UTF-16z string into out[cap] as ASCII (other characters become '?'; the text is cut to
 * fit). out may be NULL to skip. -1 when no terminator lies inside the input. */
static int rd_str(struct cur *c, char *out, size_t cap)
{
    size_t j = 0;
    while (c->len - c->off >= 2) {
        unsigned ch = (unsigned)c->p[c->off] | (unsigned)c->p[c->off + 1] << 8;
        c->off += 2;
        if (!ch) {
            if (out)
                out[j] = 0;
            return 0;
        }
        if (out && j + 1 < cap)
            out[j++] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    return -1;
}

/* Payload bytes of a fixed-size TypeCode, -1 for variable or unsupported ones (Boolean's width
 * differs between manifest and self-describing events, so it is refused rather than guessed). */
static long fixed_size(uint32_t tc)
{
    switch (tc) {
    case 5: case 6:                   /* SByte, Byte */
        return 1;
    case 4: case 7: case 8:           /* Char, Int16, UInt16 */
        return 2;
    case 9: case 10: case 13:         /* Int32, UInt32, Single */
        return 4;
    case 11: case 12: case 14: case 16: /* Int64, UInt64, Double, DateTime */
        return 8;
    case 15: case 17:                 /* Decimal, Guid */
        return 16;
    default:
        return -1;
    }
}

int evc_parse(const uint8_t *meta, size_t meta_len, const uint8_t *data, size_t data_len,
              struct evc_value *out)
{
    if (!meta || !data || !out)
        return -1;
    memset(out, 0, sizeof *out);
    struct cur m = {meta, meta_len, 0}, d = {data, data_len, 0};
    uint32_t u32;
    uint64_t u64;
    char ename[32];
    if (rd(&m, &u32, 4) || rd_str(&m, ename, sizeof ename) || strcmp(ename, "EventCounters") ||
        rd(&m, &u64, 8) || rd(&m, &u32, 4) || rd(&m, &u32, 4) || rd(&m, &u32, 4))
        return -1;
    uint32_t left[MAX_DEPTH];
    int depth = 0, have_name = 0, have_value = 0, fields = 0;
    left[depth++] = u32; /* the parameters */
    while (depth > 0) {
        if (left[depth - 1] == 0) {
            depth--;
            if (depth > 0 && rd_str(&m, NULL, 0)) /* a struct's name follows its fields */
                return -1;
            continue;
        }
        if (++fields > MAX_FIELDS)
            return -1;
        left[depth - 1]--;
        uint32_t tc;
        if (rd(&m, &tc, 4))
            return -1;
        if (tc == TC_OBJECT) {
            if (depth == MAX_DEPTH || rd(&m, &left[depth], 4))
                return -1;
            depth++;
            continue;
        }
        char fname[24];
        if (rd_str(&m, fname, sizeof fname))
            return -1;
        if (tc == TC_STRING) {
            char *dst = NULL;
            size_t cap = 0;
            if (!strcmp(fname, "Name")) {
                dst = out->name;
                cap = sizeof out->name;
                have_name = 1;
            } else if (!strcmp(fname, "DisplayUnits")) {
                dst = out->units;
                cap = sizeof out->units;
            }
            if (rd_str(&d, dst, cap))
                return -1;
            continue;
        }
        if (tc == TC_BOOLEAN)
            return -1;
        long size = fixed_size(tc);
        if (size < 0 || (size_t)size > d.len - d.off)
            return -1;
        if (tc == TC_DOUBLE && (!strcmp(fname, "Increment") || !strcmp(fname, "Mean"))) {
            memcpy(&out->value, d.p + d.off, 8);
            out->incrementing = fname[0] == 'I';
            have_value = 1;
        } else if (tc == TC_SINGLE && !strcmp(fname, "IntervalSec")) {
            float f;
            memcpy(&f, d.p + d.off, 4);
            out->interval_s = f;
        }
        d.off += (size_t)size;
    }
    return have_name && have_value && out->name[0] ? 0 : -1;
}
