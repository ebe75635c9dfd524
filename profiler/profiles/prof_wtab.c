/* prof_wtab.c - see prof_wtab.h. */
#include "prof_wtab.h"
#include "prof_utf8.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "prof_core.h"

#define MAX_STR 512 /* key strings are cut here */

struct key {
    char *a, *b, *extra;
    uint64_t n, h;
};

struct entry {
    uint32_t key;
    int64_t v[WTAB_NV];
};

struct bucket {
    int64_t sec; /* INT64_MIN = empty */
    uint32_t n, cap;
    struct entry *e;
};

struct prof_wtab {
    pthread_mutex_t lock;
    struct key *keys;
    uint32_t nkeys, max_keys;
    uint32_t *index; /* open addressing: key id + 1, 0 = empty */
    uint32_t index_mask;
    struct bucket *buckets;
    int nbuckets;
    uint32_t max_per_s;
    uint64_t dropped;
    int64_t last_compact; /* unix second of the last compaction attempt */
    double t_init;        /* unix time the table was made: no window covers anything before */
};

static uint64_t hash_key(const char *a, const char *b, uint64_t n)
{
    uint64_t h = 1469598103934665603ull;
    for (const char *p = a; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h = (h ^ 0xff) * 1099511628211ull;
    for (const char *p = b; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    h ^= n * 0x9E3779B97F4A7C15ull;
    return h ^ (h >> 29);
}

static char *copy_str(const char *s)
{
    size_t n = strnlen(s, MAX_STR - 1);
    char *c = malloc(n + 1);
    if (c) {
        memcpy(c, s, n);
        c[n] = 0;
        prof_utf8_clean(c); /* cut at MAX_STR, or before, inside a character: a '?' */
    }
    return c;
}

static int key_eq(const struct key *k, const char *a, const char *b, uint64_t n)
{
    return k->n == n && !strncmp(k->a, a, MAX_STR - 1) && !strncmp(k->b, b, MAX_STR - 1);
}

static void free_key(struct key *k)
{
    free(k->a);
    free(k->b);
    free(k->extra);
}

/* Drops the keys no bucket still uses (they aged out of the history) and renumbers the rest.
 * Lock held. Returns the number of keys freed. */
static uint32_t compact(struct prof_wtab *t)
{
    uint32_t *map = calloc(t->nkeys, sizeof *map); /* old id -> new id + 1 */
    if (!map)
        return 0;
    map[0] = 1; /* the overflow key stays key 0 */
    int64_t oldest = (int64_t)floor(prof_unix_now()) - t->nbuckets + 1;
    for (int i = 0; i < t->nbuckets; i++) {
        struct bucket *b = &t->buckets[i];
        if (b->sec < oldest) /* out of the history: nobody can read it any more */
            b->n = 0;
        for (uint32_t j = 0; j < b->n; j++)
            map[b->e[j].key] = 1;
    }
    uint32_t n = 0;
    for (uint32_t id = 0; id < t->nkeys; id++) {
        if (!map[id]) {
            free_key(&t->keys[id]);
            continue;
        }
        t->keys[n] = t->keys[id];
        map[id] = ++n;
    }
    uint32_t freed = t->nkeys - n;
    t->nkeys = n;
    memset(t->index, 0, (t->index_mask + 1) * sizeof *t->index);
    for (uint32_t id = 0; id < n; id++) {
        uint32_t i = (uint32_t)t->keys[id].h & t->index_mask;
        while (t->index[i])
            i = (i + 1) & t->index_mask;
        t->index[i] = id + 1;
    }
    for (int i = 0; i < t->nbuckets; i++)
        for (uint32_t j = 0; j < t->buckets[i].n; j++)
            t->buckets[i].e[j].key = map[t->buckets[i].e[j].key] - 1;
    free(map);
    return freed;
}

/* Finds or creates a key; 0 (the overflow key) when the table is full. Lock held. */
static uint32_t key_id(struct prof_wtab *t, const char *a, const char *b, uint64_t n,
                       const char *extra)
{
    uint64_t h = hash_key(a, b, n);
    uint32_t i = (uint32_t)h & t->index_mask;
    for (;; i = (i + 1) & t->index_mask) {
        uint32_t id = t->index[i];
        if (!id)
            break;
        struct key *k = &t->keys[id - 1];
        if (k->h == h && key_eq(k, a, b, n))
            return id - 1;
    }
    if (t->nkeys >= t->max_keys) {
        /* at most every 10 s: a table that is really full must not rescan on every add */
        int64_t now = (int64_t)prof_unix_now();
        if (now - t->last_compact < 10)
            return 0;
        t->last_compact = now;
        if (!compact(t))
            return 0;
        i = (uint32_t)h & t->index_mask;
        while (t->index[i])
            i = (i + 1) & t->index_mask;
    }
    struct key *k = &t->keys[t->nkeys];
    k->a = copy_str(a);
    k->b = copy_str(b);
    k->extra = copy_str(extra ? extra : "");
    if (!k->a || !k->b || !k->extra) {
        free_key(k);
        return 0;
    }
    k->n = n;
    k->h = h;
    t->index[i] = ++t->nkeys;
    return t->nkeys - 1;
}

struct prof_wtab *prof_wtab_new(int history_s, uint32_t max_keys, uint32_t max_per_s)
{
    if (history_s < 1 || max_keys < 2 || max_per_s < 2)
        return NULL;
    struct prof_wtab *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    uint32_t isz = 4;
    while (isz < max_keys * 2u)
        isz <<= 1;
    t->keys = calloc(max_keys, sizeof *t->keys);
    t->index = calloc(isz, sizeof *t->index);
    t->buckets = calloc((size_t)history_s, sizeof *t->buckets);
    if (!t->keys || !t->index || !t->buckets) {
        prof_wtab_free(t);
        return NULL;
    }
    pthread_mutex_init(&t->lock, NULL);
    t->max_keys = max_keys;
    t->index_mask = isz - 1;
    t->nbuckets = history_s;
    t->max_per_s = max_per_s;
    t->t_init = prof_unix_now();
    for (int i = 0; i < history_s; i++)
        t->buckets[i].sec = INT64_MIN;
    if (key_id(t, "[other]", "", 0, NULL) != 0 || t->nkeys != 1) {
        prof_wtab_free(t);
        return NULL;
    }
    return t;
}

void prof_wtab_free(struct prof_wtab *t)
{
    if (!t)
        return;
    for (uint32_t i = 0; i < t->nkeys; i++)
        free_key(&t->keys[i]);
    if (t->buckets)
        for (int i = 0; i < t->nbuckets; i++)
            free(t->buckets[i].e);
    free(t->keys);
    free(t->index);
    free(t->buckets);
    free(t);
}

/* The entry of `key` in bucket b, created if room (the last slot is kept for key 0). */
static struct entry *bucket_entry(struct prof_wtab *t, struct bucket *b, uint32_t key)
{
    for (uint32_t i = 0; i < b->n; i++)
        if (b->e[i].key == key)
            return &b->e[i];
    if (key != 0 && b->n + 1 >= t->max_per_s)
        return NULL;
    if (b->n == t->max_per_s)
        return NULL;
    if (b->n == b->cap) {
        uint32_t ncap = b->cap ? b->cap * 2 : 16;
        if (ncap > t->max_per_s)
            ncap = t->max_per_s;
        struct entry *ne = realloc(b->e, ncap * sizeof *ne);
        if (!ne)
            return NULL;
        b->e = ne;
        b->cap = ncap;
    }
    struct entry *e = &b->e[b->n++];
    memset(e, 0, sizeof *e);
    e->key = key;
    return e;
}

void prof_wtab_add(struct prof_wtab *t, double t_unix, const char *a, const char *b, uint64_t n,
                   const char *extra, const int64_t v[WTAB_NV])
{
    if (!t)
        return;
    int64_t sec = (int64_t)floor(t_unix);
    pthread_mutex_lock(&t->lock);
    struct bucket *bk = &t->buckets[((sec % t->nbuckets) + t->nbuckets) % t->nbuckets];
    if (bk->sec != sec) {
        /* older than the history: nowhere to put it (but a bucket from the future is from
         * before the wall clock was set back: reused) */
        if (bk->sec > sec && bk->sec <= (int64_t)floor(prof_unix_now()) + 1)
            goto drop;
        bk->sec = sec;
        bk->n = 0;
    }
    uint32_t id = key_id(t, a ? a : "", b ? b : "", n, extra);
    struct entry *e = bucket_entry(t, bk, id);
    if (!e && id != 0) {
        t->dropped++;
        e = bucket_entry(t, bk, 0);
    } else if (id == 0) {
        t->dropped++;
    }
    if (!e)
        goto unlock;
    for (int i = 0; i < WTAB_NV; i++)
        e->v[i] += v[i];
    goto unlock;
drop:
    t->dropped++;
unlock:
    pthread_mutex_unlock(&t->lock);
}

/* The whole unix seconds from..to that the last `seconds` (default 60, at most the history) span. */
static void window(const struct prof_wtab *t, double seconds, double now, int64_t *from,
                   int64_t *to)
{
    if (!(seconds > 0))
        seconds = 60;
    if (seconds > t->nbuckets)
        seconds = t->nbuckets;
    *to = (int64_t)floor(now);
    *from = *to - (int64_t)ceil(seconds) + 1;
}

void prof_wtab_span(struct prof_wtab *t, double seconds, double *t_from, double *t_to)
{
    double now = prof_unix_now();
    *t_from = *t_to = now;
    if (!t)
        return;
    int64_t from, to;
    window(t, seconds, now, &from, &to);
    *t_from = (double)from > t->t_init ? (double)from : t->t_init;
}

int prof_wtab_sum(struct prof_wtab *t, double seconds, const char *filter_a,
                  struct prof_wtab_row **rows, size_t *nrows)
{
    *rows = NULL;
    *nrows = 0;
    if (!t)
        return 0;
    pthread_mutex_lock(&t->lock);
    int64_t from, to;
    window(t, seconds, prof_unix_now(), &from, &to);
    /* slot[key] = row index + 1 */
    uint32_t *slot = calloc(t->nkeys, sizeof *slot);
    struct prof_wtab_row *out = calloc(t->nkeys, sizeof *out);
    if (!slot || !out) {
        pthread_mutex_unlock(&t->lock);
        free(slot);
        free(out);
        return -1;
    }
    size_t n = 0, bytes = 0;
    for (int i = 0; i < t->nbuckets; i++) {
        const struct bucket *bk = &t->buckets[i];
        if (bk->sec < from || bk->sec > to)
            continue;
        for (uint32_t j = 0; j < bk->n; j++) {
            const struct entry *e = &bk->e[j];
            const struct key *k = &t->keys[e->key];
            if (filter_a && strcmp(k->a, filter_a))
                continue;
            if (!slot[e->key]) {
                out[n].a = k->a;
                out[n].b = k->b;
                out[n].extra = k->extra;
                out[n].n = k->n;
                slot[e->key] = (uint32_t)++n;
                bytes += strlen(k->a) + strlen(k->b) + strlen(k->extra) + 3;
            }
            struct prof_wtab_row *r = &out[slot[e->key] - 1];
            for (int v = 0; v < WTAB_NV; v++)
                r->v[v] += e->v[v];
        }
    }
    /* The rows and copies of their strings in one block: keys may be dropped once we unlock. */
    struct prof_wtab_row *res = malloc(n * sizeof *res + bytes + 1);
    if (res) {
        char *p = (char *)(res + n);
        for (size_t i = 0; i < n; i++) {
            res[i] = out[i];
            const char **f[3] = {&res[i].a, &res[i].b, &res[i].extra};
            for (int k = 0; k < 3; k++) {
                size_t len = strlen(*f[k]) + 1;
                memcpy(p, *f[k], len);
                *f[k] = p;
                p += len;
            }
        }
    }
    pthread_mutex_unlock(&t->lock);
    free(slot);
    free(out);
    if (!res)
        return -1;
    *rows = res;
    *nrows = n;
    return 0;
}

void prof_wtab_stats(struct prof_wtab *t, uint64_t *keys, uint64_t *dropped)
{
    *keys = 0;
    *dropped = 0;
    if (!t)
        return;
    pthread_mutex_lock(&t->lock);
    *keys = t->nkeys;
    *dropped = t->dropped;
    pthread_mutex_unlock(&t->lock);
}

size_t prof_wtab_mem_bytes(struct prof_wtab *t)
{
    if (!t)
        return 0;
    pthread_mutex_lock(&t->lock);
    size_t b = sizeof *t + (size_t)t->max_keys * sizeof *t->keys +
               ((size_t)t->index_mask + 1) * sizeof *t->index +
               (size_t)t->nbuckets * sizeof *t->buckets;
    for (int i = 0; i < t->nbuckets; i++)
        b += (size_t)t->buckets[i].cap * sizeof(struct entry);
    for (uint32_t i = 0; i < t->nkeys; i++) {
        const struct key *k = &t->keys[i];
        b += (k->a ? strlen(k->a) + 1 : 0) + (k->b ? strlen(k->b) + 1 : 0) +
             (k->extra ? strlen(k->extra) + 1 : 0);
    }
    pthread_mutex_unlock(&t->lock);
    return b;
}
