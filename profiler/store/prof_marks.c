/* prof_marks.c - see prof_marks.h. */
#include "prof_marks.h"

#include <pthread.h>
#include <string.h>

#include "prof_utf8.h"

static struct {
    pthread_mutex_t mu;
    struct prof_mark ring[PROF_MARKS_MAX];
    size_t first, n;  /* the oldest's slot, how many are kept */
    uint32_t next_id;
    uint64_t dropped;
} g_marks = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_id = 1};

/* The longest prefix of s of at most cap - 1 bytes that ends between two characters. */
static size_t cut(const char *s, size_t cap)
{
    size_t n = strlen(s);
    if (n < cap)
        return n;
    n = cap - 1;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80)
        n--;
    return n;
}

void prof_marks_add(const char *label, double t, struct prof_mark *out)
{
    struct prof_mark m = {.t = t};
    if (label) {
        size_t n = cut(label, sizeof m.label);
        memcpy(m.label, label, n);
        m.label[n] = 0;
        prof_utf8_clean(m.label);
        for (char *p = m.label; *p; p++)
            if ((unsigned char)*p < 0x20 || *p == 0x7f)
                *p = ' '; /* a label is one line */
    }
    pthread_mutex_lock(&g_marks.mu);
    m.id = g_marks.next_id++;
    if (g_marks.n == PROF_MARKS_MAX) {
        g_marks.first = (g_marks.first + 1) % PROF_MARKS_MAX;
        g_marks.n--;
        g_marks.dropped++;
    }
    g_marks.ring[(g_marks.first + g_marks.n) % PROF_MARKS_MAX] = m;
    g_marks.n++;
    pthread_mutex_unlock(&g_marks.mu);
    if (out)
        *out = m;
}

size_t prof_marks_list(struct prof_mark *out, size_t cap, uint64_t *dropped)
{
    pthread_mutex_lock(&g_marks.mu);
    size_t n = g_marks.n < cap ? g_marks.n : cap;
    size_t skip = g_marks.n - n; /* the newest `cap` when there are more */
    for (size_t i = 0; i < n; i++)
        out[i] = g_marks.ring[(g_marks.first + skip + i) % PROF_MARKS_MAX];
    if (dropped)
        *dropped = g_marks.dropped;
    pthread_mutex_unlock(&g_marks.mu);
    return n;
}

void prof_marks_clear(void)
{
    pthread_mutex_lock(&g_marks.mu);
    g_marks.first = g_marks.n = 0;
    g_marks.dropped = 0;
    g_marks.next_id = 1;
    pthread_mutex_unlock(&g_marks.mu);
}
