/*
 * prof_marks - moments a user or the app named ("deploy 42", "config reloaded"): shown on the
 * dashboard's time axes and used as the boundary between the two windows of a differential
 * flame graph. At most PROF_MARKS_MAX are kept, the oldest given up first (counted).
 *
 * ctx: any thread but a runtime callback or a signal handler (API handlers add and list); one
 * mutex, held for a copy.
 */
#ifndef PROF_MARKS_H
#define PROF_MARKS_H

#include <stddef.h>
#include <stdint.h>

#define PROF_MARKS_MAX 256
#define PROF_MARK_LABEL_MAX 128 /* bytes, the NUL included */

struct prof_mark {
    uint32_t id;  /* 1, 2, ... in the order they were made */
    double t;     /* unix seconds */
    char label[PROF_MARK_LABEL_MAX];
};

/* Records a mark at unix time t; `label` (NULL = "") is cut to PROF_MARK_LABEL_MAX - 1 bytes at
 * a character boundary and made valid UTF-8. Fills *out with what was kept. */
void prof_marks_add(const char *label, double t, struct prof_mark *out);
/* Copies the kept marks, oldest first, into out (at most cap); returns how many were copied.
 * *dropped: marks given up to the cap since the start. */
size_t prof_marks_list(struct prof_mark *out, size_t cap, uint64_t *dropped);
/* Forgets every mark (tests). */
void prof_marks_clear(void);

#endif
