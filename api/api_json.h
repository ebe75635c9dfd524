/*
 * api_json - a bounded, growable byte buffer with JSON string escaping, for replies too large for
 * a cJSON tree (flame graphs). Escapes '"', '\\' and control characters; passes UTF-8 through.
 * Past `max` bytes it stops growing and sets `overflow` (the handler then answers 500).
 * Its bytes live in a scratch arena of its own (mem): a reply made for a moment gives its memory
 * back to the system once sent (api_reply_jbuf hands the arena to the reply), and the answer's
 * other temporaries may share that arena.
 * Pure: a buffer belongs to the one thread that writes it (an API handler, a fuzz target).
 */
#ifndef API_JSON_H
#define API_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "prof_scratch.h"

struct jbuf {
    char *p;
    size_t len, cap, max;
    int overflow;
    struct prof_scratch mem; /* p, and whatever else its writer puts there */
};

void jb_init(struct jbuf *b, size_t max);
/* Releases the arena (p and all else in it). */
void jb_free(struct jbuf *b);
void jb_raw(struct jbuf *b, const char *s, size_t n);
void jb_str(struct jbuf *b, const char *s);          /* a quoted, escaped JSON string */
void jb_int(struct jbuf *b, int64_t v);
void jb_num(struct jbuf *b, double v);               /* null for NaN/inf */
/* Formatted text, unescaped (text replies: Prometheus, thread dumps); one call writes at most
 * 511 bytes, so long strings go through jb_raw. */
void jb_printf(struct jbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* a string literal only ("" s does not compile for a pointer, whose sizeof is not its length) */
#define jb_lit(b, s) jb_raw((b), "" s, sizeof(s) - 1)

#endif
