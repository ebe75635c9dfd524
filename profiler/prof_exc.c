/*
 * prof_exc.c - see prof_exc.h.
 *
 * Two halves. The event half runs in the runtime's ExceptionThrown callback on the throwing
 * thread: it reads the type and message out of the payload, counts the event in the type's
 * slot (prof_esamp: exact, lock-free), and when the sampler says so walks the thread's stack and
 * hands "type\0message" plus the frames to clrscope-agg through g_ring. The aggregator half
 * turns each sample into store rows (PK_EXC, label = type) and (type, message) table rows, each
 * weighted by the events its type counted since that type's previous sample, so the estimated
 * counts add up to the exact totals; once a second it attributes the events counted after a
 * type's last sample to that sample's stack.
 */
#include "prof_exc.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "prof_config.h"
#include "prof_core.h"
#include "prof_esamp.h"
#include "prof_log.h"
#include "prof_store.h"
#include "prof_symbols.h"
#include "prof_walk.h"

#define EXC_SLOTS 512    /* distinct exception types counted on their own (power of two) */
#define TYPE_TEXT 160    /* bytes of the type name carried in a sample */
#define WTAB_KEYS 4096   /* distinct (type, message) pairs */
#define WTAB_PER_S 512

/* ---- event half (app threads) ---- */

static struct {
    struct esamp_slot slots[EXC_SLOTS + 1]; /* [EXC_SLOTS] = types past the table */
    struct esamp_global g;
    uint64_t events, sampled, dropped, overflow;
} E;

/* Length in bytes of the UTF-16z string at p (terminator included, or all of avail when it has
 * none); its code units in *units. */
static size_t u16z_span(const BYTE *p, size_t avail, size_t *units)
{
    size_t i = 0;
    for (; i + 1 < avail; i += 2)
        if (!p[i] && !p[i + 1]) {
            *units = i / 2;
            return i + 2;
        }
    *units = i / 2;
    return avail;
}

static uint16_t u16_at(const BYTE *p, size_t i)
{
    uint16_t u;
    memcpy(&u, p + 2 * i, 2);
    return u;
}

/* UTF-16LE (unaligned) to UTF-8; never splits a character; always NUL-terminates. */
static size_t u16_to_utf8(const BYTE *p, size_t units, char *out, size_t cap)
{
    size_t j = 0;
    if (!cap)
        return 0;
    for (size_t i = 0; i < units; i++) {
        uint32_t c = u16_at(p, i);
        if (c >= 0xD800 && c <= 0xDBFF && i + 1 < units) {
            uint32_t lo = u16_at(p, i + 1);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                c = 0x10000 + ((c - 0xD800) << 10) + (lo - 0xDC00);
                i++;
            } else {
                c = 0xFFFD;
            }
        } else if (c >= 0xD800 && c <= 0xDFFF) {
            c = 0xFFFD;
        }
        char tmp[4];
        size_t k;
        if (c < 0x80) {
            tmp[0] = (char)(c ? c : ' ');
            k = 1;
        } else if (c < 0x800) {
            tmp[0] = (char)(0xC0 | (c >> 6));
            tmp[1] = (char)(0x80 | (c & 0x3F));
            k = 2;
        } else if (c < 0x10000) {
            tmp[0] = (char)(0xE0 | (c >> 12));
            tmp[1] = (char)(0x80 | ((c >> 6) & 0x3F));
            tmp[2] = (char)(0x80 | (c & 0x3F));
            k = 3;
        } else {
            tmp[0] = (char)(0xF0 | (c >> 18));
            tmp[1] = (char)(0x80 | ((c >> 12) & 0x3F));
            tmp[2] = (char)(0x80 | ((c >> 6) & 0x3F));
            tmp[3] = (char)(0x80 | (c & 0x3F));
            k = 4;
        }
        if (j + k >= cap)
            break;
        memcpy(out + j, tmp, k);
        j += k;
    }
    out[j] = 0;
    return j;
}

static uint64_t u16_hash(const BYTE *p, size_t units)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < units * 2; i++)
        h = (h ^ p[i]) * 1099511628211ull;
    return h | 1; /* never 0: 0 marks a free slot */
}

void prof_exc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len)
{
    if (id != 80 || version < 1 || !data)
        return;
    if (!(__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_EXCEPTIONS))
        return;
    /* ExceptionThrown_V1: ExceptionType UTF16z, ExceptionMessage UTF16z, EIP, HRESULT, ... */
    size_t tunits, munits;
    size_t tbytes = u16z_span(data, len, &tunits);
    const BYTE *msg = data + tbytes;
    u16z_span(msg, len - tbytes, &munits);

    int overflow = 0;
    struct esamp_slot *s = esamp_slot_for(E.slots, EXC_SLOTS, u16_hash(data, tunits), &overflow);
    __atomic_add_fetch(&E.events, 1, __ATOMIC_RELAXED);
    if (overflow)
        __atomic_add_fetch(&E.overflow, 1, __ATOMIC_RELAXED);
    uint64_t count, wsum;
    int64_t now_s = prof_now_ns() / 1000000000LL + 1;
    int d = esamp_decide(&E.g, s, 1, (uint32_t)g_cfg.exception_rate, now_s, &count, &wsum);
    if (d == ESAMP_NO)
        return;
    struct prof_rec *r = prof_ring_reserve(g_ring);
    if (!r) {
        __atomic_add_fetch(&E.dropped, 1, __ATOMIC_RELAXED);
        if (d == ESAMP_FIRST)
            esamp_retry(s);
        return;
    }
    r->kind = REC_EXCEPTION;
    r->a = (uint64_t)(s - E.slots);
    r->b = count;
    r->c = r->d = 0;
    r->x = 0;
    r->t_unix = prof_unix_now();
    r->os_tid = prof_self_tid();
    size_t tl = tunits ? u16_to_utf8(data, tunits, r->text, TYPE_TEXT) : 0;
    if (!tl)
        tl = (size_t)(stpcpy(r->text, "[unknown]") - r->text);
    u16_to_utf8(msg, munits, r->text + tl + 1, REC_TEXT - tl - 1);
    int max = g_cfg.max_frames < REC_MAX_FRAMES ? g_cfg.max_frames : REC_MAX_FRAMES;
    r->nframes = (uint32_t)prof_walk_current(r->frames, max, &r->truncated);
    prof_ring_commit(g_ring, r);
    __atomic_add_fetch(&E.sampled, 1, __ATOMIC_RELAXED);
}

/* ---- aggregator half (clrscope-agg) ---- */

/* The last sample of a type: where the events counted after it are attributed. */
struct last_sample {
    int n;
    uint32_t tid;
    const char *site;
    const char *names[REC_MAX_FRAMES + 2];
    char type[TYPE_TEXT];
    char msg[REC_TEXT];
};

static struct {
    pthread_once_t once;
    struct prof_wtab *tab;
    pthread_mutex_t lock; /* guards attributed and last: the agg thread and API flushes */
    uint64_t attributed[EXC_SLOTS + 1];
    struct last_sample *last[EXC_SLOTS + 1];
} A = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static void init_tables(void)
{
    A.tab = prof_wtab_new(g_cfg.history_s, WTAB_KEYS, WTAB_PER_S);
    if (!A.tab)
        prof_log(LOG_WARN, "out of memory for the exceptions table; /api/v1/exceptions stays "
                 "empty (flame graphs and pprof still work)");
}

struct prof_wtab *prof_exc_table(void)
{
    pthread_once(&A.once, init_tables);
    return A.tab;
}

/* The throwing method: the leaf-most frame that is not the runtime's exception machinery. */
static const char *throw_site(const char **names, int n)
{
    for (int i = n - 1; i >= 0; i--) {
        const char *f = names[i];
        if (f[0] == '[' || !strncmp(f, "System.Runtime.EH.", 18) ||
            !strncmp(f, "System.Runtime.ExceptionServices.InternalCalls.", 47) ||
            !strncmp(f, "System.ThrowHelper.", 19))
            continue;
        return f;
    }
    return n > 0 ? names[n - 1] : "";
}

void prof_exc_consume(const struct prof_rec *rec, const char **names, int n)
{
    struct prof_wtab *tab = prof_exc_table();
    uint32_t slot = rec->a <= EXC_SLOTS ? (uint32_t)rec->a : EXC_SLOTS;
    pthread_mutex_lock(&A.lock);
    uint64_t w = rec->b > A.attributed[slot] ? rec->b - A.attributed[slot] : 0;
    if (rec->b > A.attributed[slot])
        A.attributed[slot] = rec->b;

    size_t tl = strnlen(rec->text, REC_TEXT - 1);
    const char *msg = tl + 1 < REC_TEXT ? rec->text + tl + 1 : "";
    char type[TYPE_TEXT];
    prof_symbols_clean_type(rec->text, type, sizeof type);
    const char *site = throw_site(names, n);

    int64_t v[PROF_NVALUES] = {(int64_t)w, 1, 0};
    prof_store_add(PK_EXC, rec->t_unix, names, n, rec->os_tid, type, v);
    int64_t tv[WTAB_NV] = {(int64_t)w, 1, 0};
    prof_wtab_add(tab, rec->t_unix, type, msg, 0, site, tv);

    struct last_sample *l = A.last[slot];
    if (!l)
        l = A.last[slot] = malloc(sizeof *l);
    if (l) {
        l->n = n < REC_MAX_FRAMES + 2 ? n : REC_MAX_FRAMES + 2;
        memcpy(l->names, names, (size_t)l->n * sizeof *names);
        l->tid = rec->os_tid;
        l->site = site;
        memcpy(l->type, type, sizeof l->type);
        snprintf(l->msg, sizeof l->msg, "%s", msg);
    }
    pthread_mutex_unlock(&A.lock);
}

void prof_exc_tick(double now_unix)
{
    struct prof_wtab *tab = prof_exc_table();
    pthread_mutex_lock(&A.lock);
    for (uint32_t slot = 0; slot <= EXC_SLOTS; slot++) {
        struct last_sample *l = A.last[slot];
        if (!l)
            continue;
        uint64_t count = __atomic_load_n(&E.slots[slot].count, __ATOMIC_RELAXED);
        if (count <= A.attributed[slot])
            continue;
        int64_t w = (int64_t)(count - A.attributed[slot]);
        A.attributed[slot] = count;
        int64_t v[PROF_NVALUES] = {w, 0, 0};
        prof_store_add(PK_EXC, now_unix, l->names, l->n, l->tid, l->type, v);
        int64_t tv[WTAB_NV] = {w, 0, 0};
        prof_wtab_add(tab, now_unix, l->type, l->msg, 0, l->site, tv);
    }
    pthread_mutex_unlock(&A.lock);
}

void prof_exc_get_stats(struct prof_exc_stats *out)
{
    memset(out, 0, sizeof *out);
    out->events = __atomic_load_n(&E.events, __ATOMIC_RELAXED);
    out->sampled = __atomic_load_n(&E.sampled, __ATOMIC_RELAXED);
    out->dropped = __atomic_load_n(&E.dropped, __ATOMIC_RELAXED);
    out->overflow_events = __atomic_load_n(&E.overflow, __ATOMIC_RELAXED);
    for (uint32_t i = 0; i < EXC_SLOTS; i++)
        if (__atomic_load_n(&E.slots[i].key, __ATOMIC_RELAXED))
            out->types++;
    uint64_t keys;
    prof_wtab_stats(prof_exc_table(), &keys, &out->table_dropped);
}
