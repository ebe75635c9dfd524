/*
 * fuzz_input.h - reads a libFuzzer input as a stream of small fields (bytes, integers, lengths,
 * payloads). Past the end every read yields zeros / empty payloads, so any input is a valid stream.
 */
#ifndef FUZZ_INPUT_H
#define FUZZ_INPUT_H

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct fin {
    const uint8_t *p;
    size_t n;
};

static inline int fin_more(const struct fin *f)
{
    return f->n > 0;
}

static inline uint8_t fin_u8(struct fin *f)
{
    if (!f->n)
        return 0;
    f->n--;
    return *f->p++;
}

static inline uint16_t fin_u16(struct fin *f)
{
    return (uint16_t)(fin_u8(f) | fin_u8(f) << 8);
}

static inline uint32_t fin_u32(struct fin *f)
{
    return (uint32_t)fin_u16(f) | (uint32_t)fin_u16(f) << 16;
}

static inline uint64_t fin_u64(struct fin *f)
{
    return (uint64_t)fin_u32(f) | (uint64_t)fin_u32(f) << 32;
}

/* The next `want` bytes (fewer at the end) copied into an exact-size heap block, so that
 * AddressSanitizer catches any read past the payload. *len gets the size; free() the result. */
static inline uint8_t *fin_payload(struct fin *f, size_t want, size_t *len)
{
    size_t k = want < f->n ? want : f->n;
    uint8_t *b = malloc(k ? k : 1);
    if (!b)
        abort();
    if (k)
        memcpy(b, f->p, k);
    f->p += k;
    f->n -= k;
    *len = k;
    return b;
}

/* A NUL-terminated string of at most `max` bytes taken up to the next 0 byte (or `max`). */
static inline char *fin_str(struct fin *f, size_t max)
{
    size_t k = 0;
    while (k < f->n && k < max && f->p[k])
        k++;
    char *s = malloc(k + 1);
    if (!s)
        abort();
    memcpy(s, f->p, k);
    s[k] = 0;
    f->p += k;
    f->n -= k;
    if (f->n) { /* the separator */
        f->p++;
        f->n--;
    }
    return s;
}

#define FUZZ_CHECK(cond, ...)                                                                      \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "fuzz check failed at %s:%d: ", __FILE__, __LINE__);                   \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fprintf(stderr, "\n");                                                                 \
            abort();                                                                               \
        }                                                                                          \
    } while (0)

#endif
