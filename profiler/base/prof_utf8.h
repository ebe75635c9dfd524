/*
 * prof_utf8 - text that reaches JSON and pprof is well-formed UTF-8: the runtime's UTF-16 names
 * converted, and bytes read from the system (a /proc comm the kernel cut inside a character, a
 * command line in any bytes, a query parameter) cleaned. Pure functions, any thread; no
 * allocation (they write into the caller's buffers).
 */
#ifndef PROF_UTF8_H
#define PROF_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* UTF-16 to UTF-8 with replacement of unpaired surrogates; always NUL-terminates. */
size_t prof_utf16_to_utf8(const uint16_t *src, size_t n, char *dst, size_t cap);
/* Makes s valid UTF-8 in place: each byte that does not belong to a well-formed sequence (a
 * character the kernel cut at /proc's 15-byte comm, arbitrary bytes in a name or an argument)
 * becomes '?'. For text read from the system before it reaches JSON or pprof. Returns how many
 * bytes it replaced. */
size_t prof_utf8_clean(char *s);
/* The length of the well-formed UTF-8 sequence (RFC 3629) that starts at p: 1 for an ASCII
 * byte, 0 when the bytes there are no whole character. */
size_t prof_utf8_seq(const unsigned char *p);

#endif
