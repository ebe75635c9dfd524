/*
 * prof_exc.c - see prof_exc.h.
 *
 * Two halves. The event half runs on the throwing thread, in the profiling API's ExceptionThrown
 * callback (the default) or, with CLRSCOPE_EXCEPTION_SOURCE=events, in the runtime's
 * ExceptionThrown_V1 event. It counts the exception in its type's slot (prof_esamp: exact,
 * lock-free), and when the sampler says so reads the message, walks the thread's stack and hands
 * them to clrscope-agg via prof_agg_ring: from the callback the ClassID (rec->c) and "\0message",
 * read from the object's System.Exception._message; from the event "type\0message" out of the
 * payload. The callback costs the app less: the event needs the runtime's exception keyword,
 * and with another session at Informational (every profile but cpu and wall) the runtime then
 * also builds its catch/finally/filter events for every handler an exception passes.
 *
 * The aggregator half turns each sample into store rows (PK_EXC, label = type) and (type,
 * message) table rows, each weighted by the events its type counted since that type's previous
 * sample, so the estimated counts add up to the exact totals; once a second it attributes the
 * events counted after a type's last sample to that sample's stack. It also finds where
 * exceptions keep their message (prof_exc_poll), for the callback.
 */
#include "prof_agg.h"
#include "prof_exc.h"
#include "prof_utf8.h"

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
#include "prof_unload.h"
#include "prof_walk.h"

#define EXC_SLOTS 512    /* distinct exception types counted on their own (power of two) */
#define TYPE_TEXT 160    /* bytes of the type name carried in a sample */
#define WTAB_KEYS 4096   /* distinct (type, message) pairs */
#define WTAB_PER_S 512
#define RECENT 256       /* exception objects remembered to tell a rethrow (power of two) */

/* ---- event half (app threads) ---- */

/* Written by the app's threads as they throw (ExceptionThrown or the runtime's event), with
 * atomics only; read by clrscope-agg and the stats readers. */
static struct exc_events_state {
    struct esamp_slot slots[EXC_SLOTS + 1]; /* [EXC_SLOTS] = types past the table */
    /* 1 + the unload epoch of each slot's last event (0: none yet). A slot is keyed by ClassID,
     * and after a module unload that ClassID may be another exception type's: the slot's first
     * event after one is always sampled, so that clrscope-agg can tell the two apart. */
    uint32_t slot_epoch[EXC_SLOTS + 1]; /* atomic */
    struct esamp_global g;
    uint64_t events, sampled, dropped, overflow;
    uint64_t rethrows[EXC_SLOTS + 1]; /* atomic: of each slot's events, the same object again */
    /* The objects thrown last, by address: one thrown again before any GC (an await's
     * ExceptionDispatchInfo.Throw, `throw;`) is a rethrow. After a GC an address may be another
     * object's, so a GC forgets them all (a rethrow right after one counts as a first throw).
     * ExceptionThrown runs in cooperative mode, so no throw is being checked while the runtime
     * has the threads suspended for a GC, when GarbageCollectionStarted clears the list. (An
     * entry keyed by 16 bits of a GC count instead would, after 65,536 GCs, match a new
     * exception at the same address.) Callback source only: the runtime's event does not say
     * which object. */
    uint64_t recent[RECENT]; /* atomic; 0 = empty */
    uint32_t recent_next;    /* atomic */
    int recent_dirty;        /* atomic: something remembered since the last clear */
    /* Bumped each time clrscope-agg empties the type table (reset_type_table), after it did:
     * a sample counted under an older one carries counts of a slot that is gone. */
    uint32_t reset_epoch;
} exc_events;

void prof_exc_gc_started(void)
{
    if (!__atomic_exchange_n(&exc_events.recent_dirty, 0, __ATOMIC_RELAXED))
        return;
    for (uint32_t i = 0; i < RECENT; i++)
        __atomic_store_n(&exc_events.recent[i], 0, __ATOMIC_RELAXED);
}

int prof_exc_thrown_before(ObjectID obj)
{
    uint64_t key = (uint64_t)obj;
    if (!key)
        return 0;
    for (uint32_t i = 0; i < RECENT; i++)
        if (__atomic_load_n(&exc_events.recent[i], __ATOMIC_RELAXED) == key)
            return 1;
    uint32_t at = __atomic_fetch_add(&exc_events.recent_next, 1, __ATOMIC_RELAXED) & (RECENT - 1);
    __atomic_store_n(&exc_events.recent[at], key, __ATOMIC_RELAXED);
    if (!__atomic_load_n(&exc_events.recent_dirty, __ATOMIC_RELAXED))
        __atomic_store_n(&exc_events.recent_dirty, 1, __ATOMIC_RELAXED);
    return 0;
}

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

/* Counts one exception of the type keyed `key` (never 0) in its slot; when the sampler takes it,
 * returns a ring record with the common fields set, for the caller to add type and message and
 * pass to send_sample(); else NULL. */
static struct prof_rec *count_exception(uint64_t key, int again)
{
    int overflow = 0;
    /* read before the slot */
    uint32_t reset = __atomic_load_n(&exc_events.reset_epoch, __ATOMIC_ACQUIRE);
    struct esamp_slot *s = esamp_slot_for(exc_events.slots, EXC_SLOTS, key, &overflow);
    __atomic_add_fetch(&exc_events.events, 1, __ATOMIC_RELAXED);
    uint64_t *re = &exc_events.rethrows[s - exc_events.slots];
    uint64_t rethrows = again ? __atomic_add_fetch(re, 1, __ATOMIC_RELAXED)
                              : __atomic_load_n(re, __ATOMIC_RELAXED);
    if (overflow)
        __atomic_add_fetch(&exc_events.overflow, 1, __ATOMIC_RELAXED);
    uint32_t *se = &exc_events.slot_epoch[s - exc_events.slots];
    uint32_t epoch = prof_unload_epoch() + 1;
    uint32_t was = __atomic_load_n(se, __ATOMIC_RELAXED); /* written only when it changes: */
    if (was != epoch)                                       /* no shared-line writes per event */
        was = __atomic_exchange_n(se, epoch, __ATOMIC_RELAXED);
    uint64_t count, wsum;
    int64_t now_s = prof_now_ns() / 1000000000LL + 1;
    int d = esamp_decide(&exc_events.g, s, 1, (uint32_t)g_cfg.exception_rate, now_s, &count, &wsum);
    if (d == ESAMP_NO && was && was != epoch)
        d = ESAMP_YES; /* the slot's first event since a module unload (see slot_epoch) */
    if (d == ESAMP_NO)
        return NULL;
    struct prof_rec *r = prof_ring_reserve(prof_agg_ring());
    if (!r) {
        __atomic_add_fetch(&exc_events.dropped, 1, __ATOMIC_RELAXED);
        if (d == ESAMP_FIRST)
            esamp_retry(s);
        if (was && was != epoch) /* the next event takes its place */
            __atomic_compare_exchange_n(se, &epoch, was, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
        return NULL;
    }
    r->kind = REC_EXCEPTION;
    r->a = (uint64_t)(s - exc_events.slots) | (uint64_t)reset << 32;
    r->b = count;
    r->c = r->d = 0;
    r->x = (double)rethrows; /* the slot's rethrows so far, as b its events */
    r->t_unix = prof_unix_now();
    r->os_tid = prof_self_tid();
    return r;
}

/* Walks the throwing thread's stack into r and hands it to clrscope-agg. */
static void send_sample(struct prof_rec *r)
{
    int max = g_cfg.max_frames < REC_MAX_FRAMES ? g_cfg.max_frames : REC_MAX_FRAMES;
    r->nframes = (uint32_t)prof_walk_current(r->frames, max, &r->truncated,
                                             r->frames + REC_CHECK_AT);
    r->rt_ips = 1;
    prof_ring_commit(prof_agg_ring(), r);
    __atomic_add_fetch(&exc_events.sampled, 1, __ATOMIC_RELAXED);
}

/* ---- the callback source ---- */

/* Set at Initialize (callback, the string layout); msg_off/msg_state found by clrscope-agg from
 * the class an app thread left in `ask` (atomics); no_message counted by the app's threads. */
static struct exc_callback_state {
    int callback;         /* CLRSCOPE_EXCEPTION_SOURCE: 1 = callback (default), 0 = events */
    ULONG str_len_off, str_buf_off; /* the runtime's string layout */
    ULONG msg_off;        /* System.Exception._message in an exception object, once known */
    int msg_state;        /* 0 not yet known, 1 known, -1 unknowable (samples carry no message) */
    ClassID ask;          /* an exception's class, for clrscope-agg to find msg_off from */
    uint32_t ask_epoch;   /* 1 + the unload epoch ask was taken in (0: not written yet) */
    uint64_t no_message;  /* samples taken before msg_off was known */
} exc_cb;

DWORD prof_exc_event_mask(void)
{
    const char *m = getenv("CLRSCOPE_EXCEPTION_SOURCE");
    exc_cb.callback = 1;
    if (m && !strcmp(m, "events"))
        exc_cb.callback = 0;
    else if (m && *m && strcmp(m, "callback"))
        prof_log(LOG_WARN, "CLRSCOPE_EXCEPTION_SOURCE=\"%.40s\" is neither callback nor events; "
                 "using callback", m);
    if (!exc_cb.callback || !(g_core.profiles & PROFILE_EXCEPTIONS))
        return 0;
    ICorProfilerInfo15 *info = g_core.info;
    if (info->vt->GetStringLayout2(info, &exc_cb.str_len_off, &exc_cb.str_buf_off) < 0 ||
        exc_cb.str_buf_off < sizeof(void *) || exc_cb.str_len_off < sizeof(void *)) {
        exc_cb.msg_state = -1;
        prof_log(LOG_WARN, "the runtime does not give its string layout: exceptions are counted "
                 "and sampled without their messages");
    }
    return COR_PRF_MONITOR_EXCEPTIONS;
}

int prof_exc_uses_events(void)
{
    return !exc_cb.callback;
}

/* The exception's message (System.Exception._message, UTF-8) into out, "" when the field is not
 * known yet; returns 1 when the exception has no message (the field is null). The object stays
 * put: the callback runs in cooperative mode, where no GC can move it. */
static int read_message(ObjectID obj, ClassID cls, char *out, size_t cap)
{
    out[0] = 0;
    int st = __atomic_load_n(&exc_cb.msg_state, __ATOMIC_ACQUIRE);
    if (st != 1) {
        if (!st) {
            ClassID none = 0;
            uint32_t epoch = prof_unload_epoch();
            if (__atomic_compare_exchange_n(&exc_cb.ask, &none, cls, 0, __ATOMIC_ACQ_REL,
                                            __ATOMIC_RELAXED))
                __atomic_store_n(&exc_cb.ask_epoch, epoch + 1, __ATOMIC_RELEASE);
            __atomic_add_fetch(&exc_cb.no_message, 1, __ATOMIC_RELAXED);
        }
        return 0;
    }
    uintptr_t str;
    memcpy(&str, (const char *)obj + exc_cb.msg_off, sizeof str);
    if (!str)
        return 1;
    int32_t len;
    memcpy(&len, (const char *)str + exc_cb.str_len_off, sizeof len);
    if (len <= 0)
        return 0;
    size_t units = (size_t)len < cap ? (size_t)len : cap; /* >= 1 byte each in UTF-8 */
    u16_to_utf8((const BYTE *)str + exc_cb.str_buf_off, units, out, cap);
    return 0;
}

#define CORELIB_TRIES 400 /* clrscope-agg's wake-ups (<= 50 ms apart) spent looking for
                          * System.Exception before the first exception asks */

/* clrscope-agg: finds System.Exception._message, from the moment CoreLib has loaded the class
 * (so that even the first exceptions carry their messages), or else from the first exception's
 * class. */
void prof_exc_poll(void)
{
    static int tries;
    if (!exc_cb.callback || __atomic_load_n(&exc_cb.msg_state, __ATOMIC_ACQUIRE) ||
        !(__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_EXCEPTIONS))
        return;
    ClassID cls = __atomic_load_n(&exc_cb.ask, __ATOMIC_ACQUIRE);
    int asked = cls != 0;
    uint32_t epoch = prof_unload_epoch();
    if (asked) {
        uint32_t e = __atomic_load_n(&exc_cb.ask_epoch, __ATOMIC_ACQUIRE);
        if (!e)
            return; /* the callback is writing it */
        epoch = e - 1;
    } else if (tries >= CORELIB_TRIES) {
        return;
    }
    /* the class's module may have been unloaded since: then a later exception asks again */
    if (!prof_unload_enter(epoch)) {
        __atomic_store_n(&exc_cb.ask_epoch, 0, __ATOMIC_RELAXED);
        __atomic_store_n(&exc_cb.ask, 0, __ATOMIC_RELEASE);
        return;
    }
    if (!asked) {
        tries++;
        cls = prof_symbols_corelib_class("System.Exception");
    }
    ULONG off = cls ? prof_symbols_field_offset(cls, "System.Exception", "_message") : 0;
    prof_unload_leave();
    if (!cls)
        return;
    if (!off && !asked) {
        tries = CORELIB_TRIES; /* the first exception's class will tell */
        return;
    }
    if (!off) {
        __atomic_store_n(&exc_cb.msg_state, -1, __ATOMIC_RELEASE);
        prof_log(LOG_WARN, "System.Exception has no _message field this runtime tells of: "
                 "exceptions are counted and sampled without their messages");
        return;
    }
    exc_cb.msg_off = off;
    prof_log(LOG_DEBUG, "exceptions: System.Exception._message at offset %u (found %s)",
             (unsigned)off, asked ? "from the first exception's class" : "in CoreLib");
    __atomic_store_n(&exc_cb.msg_state, 1, __ATOMIC_RELEASE);
}

void prof_exc_on_throw(ObjectID obj)
{
    if (!obj || !(__atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED) & PROFILE_EXCEPTIONS))
        return;
    ICorProfilerInfo15 *info = g_core.info;
    ClassID cls = 0;
    if (info->vt->GetClassFromObject(info, obj, &cls) < 0 || !cls)
        return;
    /* an odd multiplier maps distinct classes to distinct keys, none of them 0 */
    struct prof_rec *r = count_exception((uint64_t)cls * 0x9E3779B97F4A7C15ull,
                                         prof_exc_thrown_before(obj));
    if (!r)
        return;
    r->c = (uint64_t)cls;
    r->text[0] = 0;
    r->d = (uint64_t)read_message(obj, cls, r->text + 1, REC_TEXT - 1);
    send_sample(r);
}

/* ---- the event source ---- */

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

    struct prof_rec *r = count_exception(u16_hash(data, tunits), 0);
    if (!r)
        return;
    size_t tl = tunits ? u16_to_utf8(data, tunits, r->text, TYPE_TEXT) : 0;
    if (!tl)
        tl = (size_t)(stpcpy(r->text, "[unknown]") - r->text);
    u16_to_utf8(msg, munits, r->text + tl + 1, REC_TEXT - tl - 1);
    send_sample(r);
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

/* clrscope-agg's: what it attributed and the last sample of each type, under `lock`, which the
 * API's readers (prof_exc_read, the stats) take too; never taken by a runtime callback. */
static struct exc_agg_state {
    pthread_once_t once;
    struct prof_wtab *tab;
    pthread_mutex_t lock; /* guards attributed and last: the agg thread and API flushes */
    uint64_t attributed[EXC_SLOTS + 1];
    uint64_t attributed_re[EXC_SLOTS + 1]; /* the same for the rethrows */
    struct last_sample *last[EXC_SLOTS + 1];
    uint32_t epoch[EXC_SLOTS + 1]; /* the unload epoch of each slot's last sample */
    struct esamp_reset reset;
    struct esamp_orphan orphan[EXC_SLOTS + 1];    /* left by the last reset (reset_type_table) */
    struct esamp_orphan orphan_re[EXC_SLOTS + 1]; /* the same for the rethrows (count only) */
} exc_agg = {.once = PTHREAD_ONCE_INIT, .lock = PTHREAD_MUTEX_INITIALIZER};

static void init_tables(void)
{
    exc_agg.tab = prof_wtab_new(g_cfg.history_s, WTAB_KEYS, WTAB_PER_S);
    if (!exc_agg.tab)
        prof_log(LOG_WARN, "out of memory for the exceptions table; /api/v1/exceptions stays "
                 "empty (flame graphs and pprof still work)");
}

struct prof_wtab *prof_exc_table(void)
{
    pthread_once(&exc_agg.once, init_tables);
    return exc_agg.tab;
}

/* The throwing method: the leaf-most frame that is not the runtime's exception machinery, nor
 * the awaiter code that throws a faulted task's exception again in the awaiting method (which
 * is then the site: an await's rethrow showed as TaskAwaiter.ThrowForNonSuccess). */
static const char *throw_site(const char **names, int n)
{
    static const char *const machinery[] = {
        "System.Runtime.EH.",
        "System.Runtime.ExceptionServices.InternalCalls.",
        "System.Runtime.ExceptionServices.ExceptionDispatchInfo.",
        "System.ThrowHelper.",
        "System.Runtime.CompilerServices.TaskAwaiter",
        "System.Runtime.CompilerServices.ValueTaskAwaiter",
        "System.Runtime.CompilerServices.ConfiguredTaskAwaitable",
        "System.Runtime.CompilerServices.ConfiguredValueTaskAwaitable",
        "System.Threading.Tasks.Task.ThrowIfExceptional",
        "System.Threading.Tasks.Task.Wait",
        "System.Threading.Tasks.Task.GetResultCore",
    };
    for (int i = n - 1; i >= 0; i--) {
        const char *f = names[i];
        int skip = f[0] == '[';
        for (size_t k = 0; !skip && k < sizeof machinery / sizeof *machinery; k++)
            skip = !strncmp(f, machinery[k], strlen(machinery[k]));
        if (skip)
            continue;
        return f;
    }
    return n > 0 ? names[n - 1] : "";
}

void prof_exc_consume(const struct prof_rec *rec, const char **names, int n)
{
    struct prof_wtab *tab = prof_exc_table();
    uint32_t slot = (uint32_t)rec->a <= EXC_SLOTS ? (uint32_t)rec->a : EXC_SLOTS;
    pthread_mutex_lock(&exc_agg.lock);
    /* counted before the table was emptied: its slot's events were attributed then (to the
     * slot's previous sample; when it had none, they were kept for this one) */
    uint32_t rec_reset = (uint32_t)(rec->a >> 32);
    uint32_t now_reset = __atomic_load_n(&exc_events.reset_epoch, __ATOMIC_ACQUIRE);
    int stale = rec_reset != now_reset;
    uint64_t w = 0, stale_re = 0, unused;
    if (stale && rec_reset + 1 == now_reset) {
        esamp_orphan_take(&exc_agg.orphan[slot], &w, &unused);
        esamp_orphan_take(&exc_agg.orphan_re[slot], &stale_re, &unused);
    }
    if (!stale) {
        w = rec->b > exc_agg.attributed[slot] ? rec->b - exc_agg.attributed[slot] : 0;
        if (rec->b > exc_agg.attributed[slot])
            exc_agg.attributed[slot] = rec->b;
    }

    size_t tl = strnlen(rec->text, REC_TEXT - 1);
    const char *msg = tl + 1 < REC_TEXT ? rec->text + tl + 1 : "";
    char type[TYPE_TEXT];
    char unnamed[REC_TEXT];
    if (rec->c) { /* from the callback: the class, named here */
        snprintf(type, sizeof type, "%s", prof_symbols_class((ClassID)rec->c));
        if (rec->d) { /* made without a message: what its Message property says then */
            snprintf(unnamed, sizeof unnamed, "Exception of type '%s' was thrown.", type);
            msg = unnamed;
        }
    } else {
        prof_symbols_clean_type(rec->text, type, sizeof type);
    }
    prof_utf8_clean(type); /* cut at TYPE_TEXT, perhaps inside a character */
    const char *site = throw_site(names, n);

    struct last_sample *l = stale ? NULL : exc_agg.last[slot];
    if (l && rec->epoch != exc_agg.epoch[slot] && w > 1) {
        /* the slot's first sample since a module unload, whose ClassID may have been another
         * exception type's before: what it counted since its last sample was that type's */
        int64_t ov[PROF_NVALUES] = {(int64_t)w - 1, 0, 0};
        prof_store_add(PK_EXC, rec->t_unix, l->names, l->n, l->tid, l->type, ov);
        int64_t otv[WTAB_NV] = {(int64_t)w - 1, 0, 0};
        prof_wtab_add(tab, rec->t_unix, l->type, l->msg, 0, l->site, otv);
        w = 1;
    }
    if (!stale)
        exc_agg.epoch[slot] = rec->epoch;
    int64_t v[PROF_NVALUES] = {(int64_t)w, 1, 0};
    prof_store_add(PK_EXC, rec->t_unix, names, n, rec->os_tid, type, v);
    /* of the events this sample stands for, the rethrows (never more than the events: one
     * counted on another thread between the two counters waits for the next sample) */
    uint64_t re = (uint64_t)rec->x;
    int64_t rw = stale                              ? (int64_t)stale_re
                 : re > exc_agg.attributed_re[slot] ? (int64_t)(re - exc_agg.attributed_re[slot])
                                                    : 0;
    if (rw > (int64_t)w)
        rw = (int64_t)w;
    if (!stale)
        exc_agg.attributed_re[slot] += (uint64_t)rw;
    int64_t tv[WTAB_NV] = {(int64_t)w, 1, rw};
    prof_wtab_add(tab, rec->t_unix, type, msg, 0, site, tv);

    if (!l && !stale)
        l = exc_agg.last[slot] = malloc(sizeof *l);
    if (l) {
        l->n = n < REC_MAX_FRAMES + 2 ? n : REC_MAX_FRAMES + 2;
        memcpy(l->names, names, (size_t)l->n * sizeof *names);
        l->tid = rec->os_tid;
        l->site = site;
        memcpy(l->type, type, sizeof l->type);
        snprintf(l->msg, sizeof l->msg, "%s", msg);
    }
    pthread_mutex_unlock(&exc_agg.lock);
}

/* The type table keeps a slot per exception type (ClassID) ever thrown: types past it share one
 * slot, whose events go to whichever of them was sampled last, and each of their throws probes
 * the whole table. Collectible code (plugins, scripts) reloaded gets new ClassIDs for the same
 * types, and generic exception types one per instantiation, so a long-running process could
 * fill it. When types overflow it, at most once a minute,
 * clrscope-agg empties it after the tick has attributed every slot's events: the types thrown
 * from then on get slots of their own again. An event counted while the table is emptied may go
 * to the next type that takes its slot (a few, once a minute at most); the totals stay exact.
 * exc_agg.lock held. */
static void reset_type_table(void)
{
    if (!esamp_reset_due(&exc_agg.reset, __atomic_load_n(&exc_events.overflow, __ATOMIC_RELAXED),
                         prof_now_ns()))
        return;
    for (uint32_t i = 0; i <= EXC_SLOTS; i++) {
        esamp_orphan_keep(&exc_agg.orphan[i], &exc_events.slots[i], exc_agg.last[i] != NULL,
                          exc_agg.attributed[i], exc_agg.attributed[i]);
        struct esamp_slot re = {.count =
                                    __atomic_load_n(&exc_events.rethrows[i], __ATOMIC_RELAXED)};
        esamp_orphan_keep(&exc_agg.orphan_re[i], &re, exc_agg.last[i] != NULL,
                          exc_agg.attributed_re[i], 0);
        esamp_slot_clear(&exc_events.slots[i]);
        __atomic_store_n(&exc_events.rethrows[i], 0, __ATOMIC_RELAXED);
        __atomic_store_n(&exc_events.slot_epoch[i], 0, __ATOMIC_RELAXED);
        exc_agg.attributed[i] = exc_agg.attributed_re[i] = 0;
        exc_agg.epoch[i] = 0;
        free(exc_agg.last[i]);
        exc_agg.last[i] = NULL;
    }
    __atomic_add_fetch(&exc_events.reset_epoch, 1, __ATOMIC_RELEASE);
}

void prof_exc_tick(double now_unix)
{
    struct prof_wtab *tab = prof_exc_table();
    pthread_mutex_lock(&exc_agg.lock);
    for (uint32_t slot = 0; slot <= EXC_SLOTS; slot++) {
        struct last_sample *l = exc_agg.last[slot];
        if (!l)
            continue;
        uint64_t count = __atomic_load_n(&exc_events.slots[slot].count, __ATOMIC_RELAXED);
        if (count <= exc_agg.attributed[slot])
            continue;
        int64_t w = (int64_t)(count - exc_agg.attributed[slot]);
        exc_agg.attributed[slot] = count;
        uint64_t re = __atomic_load_n(&exc_events.rethrows[slot], __ATOMIC_RELAXED);
        int64_t rw =
            re > exc_agg.attributed_re[slot] ? (int64_t)(re - exc_agg.attributed_re[slot]) : 0;
        if (rw > w)
            rw = w;
        exc_agg.attributed_re[slot] += (uint64_t)rw;
        int64_t v[PROF_NVALUES] = {w, 0, 0};
        prof_store_add(PK_EXC, now_unix, l->names, l->n, l->tid, l->type, v);
        int64_t tv[WTAB_NV] = {w, 0, rw};
        prof_wtab_add(tab, now_unix, l->type, l->msg, 0, l->site, tv);
    }
    reset_type_table();
    pthread_mutex_unlock(&exc_agg.lock);
}

/* A copy of s into the block at *p, cleaned as the table cleans its keys. */
static const char *copy_out(char **p, const char *s)
{
    char *c = *p;
    size_t n = strlen(s) + 1;
    memcpy(c, s, n);
    prof_utf8_clean(c);
    *p += n;
    return c;
}

static int unattributed(const char *filter, struct prof_exc_unattributed **out, size_t *nout)
{
    uint32_t *sel = malloc((EXC_SLOTS + 1) * sizeof *sel);
    if (!sel)
        return -1;
    size_t n = 0, nframes = 0, bytes = 0;
    for (uint32_t slot = 0; slot <= EXC_SLOTS; slot++) {
        const struct last_sample *l = exc_agg.last[slot];
        if (!l ||
            __atomic_load_n(&exc_events.slots[slot].count, __ATOMIC_RELAXED) <=
                exc_agg.attributed[slot] ||
            (filter && strcmp(l->type, filter)))
            continue;
        sel[n++] = slot;
        nframes += (size_t)l->n;
        bytes += strlen(l->type) + strlen(l->msg) + strlen(l->site) + 3;
        for (int f = 0; f < l->n; f++)
            bytes += strlen(l->names[f] ? l->names[f] : "[unknown]") + 1;
    }
    /* one block: the entries, their frame arrays, the strings */
    struct prof_exc_unattributed *u = malloc(n * sizeof *u + nframes * sizeof(char *) + bytes + 1);
    if (!u) {
        free(sel);
        return -1;
    }
    const char **fp = (const char **)(void *)(u + n);
    char *p = (char *)(fp + nframes);
    for (size_t i = 0; i < n; i++) {
        uint32_t slot = sel[i];
        const struct last_sample *l = exc_agg.last[slot];
        /* as prof_exc_tick computes them, without moving `attributed` */
        uint64_t count = __atomic_load_n(&exc_events.slots[slot].count, __ATOMIC_RELAXED);
        int64_t w = (int64_t)(count - exc_agg.attributed[slot]);
        uint64_t re = __atomic_load_n(&exc_events.rethrows[slot], __ATOMIC_RELAXED);
        int64_t rw =
            re > exc_agg.attributed_re[slot] ? (int64_t)(re - exc_agg.attributed_re[slot]) : 0;
        u[i].count = w;
        u[i].rethrown = rw > w ? w : rw;
        u[i].frames = fp;
        u[i].nframes = l->n;
        for (int f = 0; f < l->n; f++) {
            const char *name = l->names[f] ? l->names[f] : "[unknown]"; /* as the store */
            size_t len = strlen(name) + 1;
            memcpy(p, name, len);
            *fp++ = p;
            p += len;
        }
        u[i].type = copy_out(&p, l->type);
        u[i].message = copy_out(&p, l->msg);
        u[i].site = copy_out(&p, l->site);
    }
    free(sel);
    *out = u;
    *nout = n;
    return 0;
}

int prof_exc_read(double seconds, const char *filter, struct prof_wtab_row **rows, size_t *nrows,
                  struct prof_exc_unattributed **pending, size_t *npending)
{
    struct prof_wtab *tab = prof_exc_table();
    *pending = NULL;
    *npending = 0;
    /* under the lock the aggregator attributes with: no sample moves events from the one to
     * the other between the two reads */
    pthread_mutex_lock(&exc_agg.lock);
    int rc = prof_wtab_sum(tab, seconds, filter, rows, nrows);
    if (!rc && unattributed(filter, pending, npending)) {
        free(*rows);
        *rows = NULL;
        *nrows = 0;
        rc = -1;
    }
    pthread_mutex_unlock(&exc_agg.lock);
    return rc;
}

void prof_exc_get_stats(struct prof_exc_stats *out)
{
    memset(out, 0, sizeof *out);
    out->events = __atomic_load_n(&exc_events.events, __ATOMIC_RELAXED);
    out->sampled = __atomic_load_n(&exc_events.sampled, __ATOMIC_RELAXED);
    out->dropped = __atomic_load_n(&exc_events.dropped, __ATOMIC_RELAXED);
    out->overflow_events = __atomic_load_n(&exc_events.overflow, __ATOMIC_RELAXED);
    out->no_message = __atomic_load_n(&exc_cb.no_message, __ATOMIC_RELAXED);
    pthread_mutex_lock(&exc_agg.lock);
    out->table_resets = exc_agg.reset.resets;
    pthread_mutex_unlock(&exc_agg.lock);
    for (uint32_t i = 0; i < EXC_SLOTS; i++)
        if (__atomic_load_n(&exc_events.slots[i].key, __ATOMIC_RELAXED))
            out->types++;
    uint64_t keys;
    prof_wtab_stats(prof_exc_table(), &keys, &out->table_dropped);
}

static void exc_poll(int64_t now_ns)
{
    (void)now_ns;
    prof_exc_poll();
}

static size_t exc_mem_bytes(void)
{
    return prof_wtab_mem_bytes(prof_exc_table());
}

const struct prof_kind prof_exc_kind = {
    .name = "exceptions",
    .profile = PROFILE_EXCEPTIONS,
    .records = 1u << REC_EXCEPTION,
    .consume = prof_exc_consume,
    .poll = exc_poll,
    .tick = prof_exc_tick,
    .mem_bytes = exc_mem_bytes,
    .mem_name = "exception_lock_tables",
};
