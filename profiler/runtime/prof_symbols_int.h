/*
 * prof_symbols_int.h - what the files of prof_symbols share; no other module uses it.
 *   prof_symbols.c        names for IDs, asked of the runtime and cached (clrscope's threads)
 *   prof_symbols_clean.c  the cleaning of names into clrscope's form (pure, any thread)
 */
#ifndef PROF_SYMBOLS_INT_H
#define PROF_SYMBOLS_INT_H

#include <stddef.h>

#define NAME_MAX_LEN 512 /* the longest name built, with its NUL */

/* Copies [s, s+n) into out at *len, bounded by cap; out stays NUL-terminated. */
void symbols_put(char *out, size_t cap, size_t *len, const char *s, size_t n);

#endif
