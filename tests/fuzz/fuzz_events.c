/*
 * fuzz_events - the EventPipe payload parsers of the runtime provider's events, as
 * prof_events_delivered routes them: GC (GCStart/End, heap stats, per-heap and global history,
 * suspension), AllocationSampled / GCAllocationTick, ExceptionThrown, ContentionStart/Stop, and
 * System.Runtime's self-describing EventCounters (evc_parse). Then, as clrscope-agg does, the
 * ring is drained into the store and every module's tick and views run over what was parsed,
 * the API's reads of the counts no tick has attributed yet (prof_exc_read, prof_lock_read) first.
 *
 * Input: records of [selector u8][version u8][length u16][payload]. Payloads are copied into
 * exact-size heap blocks so AddressSanitizer sees any read past their end.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "evcounter.h"
#include "fuzz_input.h"
#include "fuzz_runtime.h"
#include "prof_alloc.h"
#include "prof_counters.h"
#include "prof_exc.h"
#include "prof_gc.h"
#include "prof_lock.h"
#include "prof_walk.h"
#include "prof_wtab.h"

static const DWORD gc_ids[] = {1, 2, 3, 4, 7, 8, 9, 35, 204, 205};

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_runtime_init(PROFILE_ALL & ~(unsigned)PROFILE_LIVE); /* live objects need real handles */
    prof_agg_use_ring(prof_ring_new(256));
    if (!prof_agg_ring())
        abort();
    prof_gc_init();
    return 0;
}

static void drain(void)
{
    const char *names[REC_MAX_FRAMES + 2];
    struct prof_rec *r;
    while ((r = prof_ring_peek(prof_agg_ring()))) {
        FUZZ_CHECK(r->nframes <= REC_MAX_FRAMES, "nframes %u", r->nframes);
        FUZZ_CHECK(memchr(r->text, 0, sizeof r->text) != NULL, "record text not terminated");
        if (r->kind == REC_ALLOC_TYPE) { /* a sample the stack budget left out: no frames */
            FUZZ_CHECK(r->nframes == 0, "stackless record with %u frames", r->nframes);
            prof_alloc_consume_type(r);
            prof_ring_release(prof_agg_ring());
            continue;
        }
        int n = prof_walk_names(r->frames, (int)r->nframes, (int)r->truncated, names,
                                REC_MAX_FRAMES + 2);
        switch (r->kind) {
        case REC_ALLOC:
            prof_alloc_consume(r, names, n);
            break;
        case REC_EXCEPTION:
            /* "type\0message": both parts inside the text */
            FUZZ_CHECK(memchr(r->text + strlen(r->text) + 1, 0,
                              sizeof r->text - strlen(r->text) - 1) != NULL,
                       "exception message not terminated");
            prof_exc_consume(r, names, n);
            break;
        case REC_LOCK:
            prof_lock_consume(r, names, n);
            break;
        default:
            FUZZ_CHECK(0, "unexpected record kind %u", r->kind);
        }
        prof_ring_release(prof_agg_ring());
    }
}

/* What the API reads before a tick: the tables and the counts no sample carries yet. */
static void unattributed(void)
{
    struct prof_wtab_row *rows = NULL;
    struct prof_exc_unattributed *eu = NULL;
    size_t nrows = 0, n = 0;
    if (!prof_exc_read(60, NULL, &rows, &nrows, &eu, &n))
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK(eu[i].count > 0 && eu[i].rethrown >= 0 && eu[i].rethrown <= eu[i].count &&
                           eu[i].type && eu[i].message && eu[i].site &&
                           (eu[i].frames || !eu[i].nframes),
                       "unattributed exceptions %lld (%lld rethrown)", (long long)eu[i].count,
                       (long long)eu[i].rethrown);
    free(rows);
    free(eu);
    struct prof_lock_unattributed *lu = NULL;
    if (!prof_lock_read(60, NULL, &rows, &nrows, &lu, &n))
        for (size_t i = 0; i < n; i++)
            FUZZ_CHECK((lu[i].count > 0 || lu[i].wait_ns > 0) && lu[i].lock && lu[i].owner_name &&
                           lu[i].site && (lu[i].frames || !lu[i].nframes),
                       "unattributed contentions %lld (%lld ns)", (long long)lu[i].count,
                       (long long)lu[i].wait_ns);
    free(rows);
    free(lu);
}

static void views(void)
{
    double now = prof_unix_now();
    unattributed();
    prof_gc_tick(now);
    prof_exc_tick(now);
    prof_lock_tick(now);
    struct prof_gc_view gv;
    if (!prof_gc_view(60, 50, &gv))
        prof_gc_view_free(&gv);
    struct prof_gc_totals gt;
    prof_gc_get_totals(&gt);
    struct prof_wtab *tabs[2] = {prof_exc_table(), prof_lock_table()};
    for (int i = 0; i < 2; i++) {
        struct prof_wtab_row *rows = NULL;
        size_t nrows = 0;
        if (tabs[i] && !prof_wtab_sum(tabs[i], 60, NULL, &rows, &nrows))
            free(rows);
    }
    struct prof_lock_window lw;
    prof_lock_window(60, &lw);
    for (int k = PK_ALLOC; k < PK_COUNT; k++) {
        struct prof_view v;
        if (!prof_store_view(k, 60, NULL, &v))
            prof_view_free(&v);
    }
    struct prof_counter ctr[16];
    prof_counters_snapshot(ctr, 16);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fin in = {data, size};
    /* the allocation method is chosen per session (runtime version): alternate between inputs */
    setenv("CLRSCOPE_ALLOC_METHOD", size & 1 ? "tick" : "auto", 1);
    UINT64 kw;
    UINT32 level;
    prof_alloc_session_needs(&kw, &level);
    int events = 0;
    while (fin_more(&in) && events++ < 256) {
        uint8_t sel = fin_u8(&in), version = fin_u8(&in);
        size_t len;
        uint8_t *p = fin_payload(&in, fin_u16(&in), &len);
        switch (sel % 8) {
        case 0:
        case 1:
            prof_gc_on_event(gc_ids[(sel >> 3) % (sizeof gc_ids / sizeof gc_ids[0])], version, p,
                             (ULONG)len);
            break;
        case 2:
            prof_alloc_on_event(sel & 8 ? 303 : 10, version, p, (ULONG)len);
            break;
        case 3:
            prof_exc_on_event(80, version, p, (ULONG)len);
            break;
        case 4:
            prof_lock_on_event(sel & 8 ? 81 : 91, version, p, (ULONG)len);
            break;
        case 5: {
            /* EventCounters: metadata then payload, split where the version byte says */
            size_t cut = len ? (size_t)version * len / 256 : 0;
            uint8_t *meta = malloc(cut ? cut : 1), *pay = malloc(len - cut ? len - cut : 1);
            if (!meta || !pay)
                abort();
            memcpy(meta, p, cut);
            memcpy(pay, p + cut, len - cut);
            struct evc_value v;
            if (!evc_parse(meta, cut, pay, len - cut, &v)) {
                FUZZ_CHECK(memchr(v.name, 0, sizeof v.name) && memchr(v.units, 0, sizeof v.units),
                           "counter strings not terminated");
            }
            prof_counters_on_event(meta, (ULONG)cut, pay, (ULONG)(len - cut));
            free(meta);
            free(pay);
            break;
        }
        case 6: /* a suspension's beginning and end: paired per thread, app-thread GC CPU */
            prof_gc_on_event(9, version, p, (ULONG)len);
            break;
        default:
            prof_gc_on_event(3, version, p, (ULONG)len);
            break;
        }
        free(p);
        if (events % 64 == 0)
            drain();
    }
    drain();
    views();
    return 0;
}
