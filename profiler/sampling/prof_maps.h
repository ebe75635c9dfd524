/*
 * prof_maps - what the frame-pointer walks (prof_sighandler) read besides the stack: a snapshot of
 * /proc/self/maps (which ranges are thread stacks, which hold code and whose: "[native
 * libcoreclr.so]", "[native code]" for JIT code), and the tables learned as frames are named
 * (frameless methods and OSR return addresses from prof_codemap, hidden frame records from
 * prof_walk's calibration).
 *
 * Each is immutable once built and published with one atomic exchange into g_sig (maps, codes,
 * osr, hidden), where the signal handler and the self-walks read it without a lock; a replaced one
 * is freed only once g_sig.inflight (handlers and self-walks running) has been seen 0 after the
 * swap (prof_maps_maintain). The tables are published only while the snapshot is kept current
 * (prof_maps_keep): by the signal sampler, or without it by the sampler thread's maps keeper for
 * the allocation walks.
 *
 * Refreshes: reading /proc/self/maps (~1,100 lines in an ASP.NET Core server) costs ~1.5 ms of
 * CPU, mostly the kernel's: every 2 s that was 0.2 % of the server's CPU on the bench. Code mapped
 * since the snapshot, a new library and a new thread's stack each ask for a refresh (the hints:
 * prof_maps_refresh, and the misses the walks count in g_sig), so the period is only a safety net.
 *
 * ctx: the clrscope-sampler thread, and clrscope-agg (prof_maps_set_hidden, and the lookups
 * through prof_codemap_returns), each holding prof_codemap_lock() around its calls; also
 * prof_maps_take, prof_maps_keep, prof_maps_start and prof_maps_stop from prof_sampler_start and
 * prof_sampler_stop, before the sampler thread starts and after it has ended. Never a runtime
 * callback, never in signal context.
 */
#ifndef PROF_MAPS_H
#define PROF_MAPS_H

#include <stddef.h>
#include <stdint.h>

/* Takes a snapshot now and publishes it: 1 when the mappings changed since the last one (or
 * there was none), 0 when not, -1 when /proc/self/maps could not be read (logged once; the last
 * one stays). */
int prof_maps_take(void);
/* From now on the snapshot is kept current (prof_maps_maintain on every sampler tick): the tables
 * are published, and self-walks may use them (g_sig.self_walk). */
void prof_maps_keep(void);
/* Without the signal sampler: takes the snapshot when there is none, then prof_maps_keep. 0, or
 * -1 when /proc/self/maps cannot be read (nothing kept). */
int prof_maps_start(void);
/* The snapshot is no longer kept current: self-walks go back to the runtime's walk until
 * prof_maps_keep. Frees what no handler can still see; the current snapshots stay (a signal
 * already queued may still read them). */
void prof_maps_stop(void);
/* Housekeeping, once a tick: refreshes the snapshot when due (the period, a hint, a walk's
 * miss), frees what the handlers can no longer see. */
void prof_maps_maintain(int64_t now_ns);

/* "[native libfoo.so]" for an address in an executable file mapping, "[native code]" otherwise.
 * Valid until the next prof_maps_maintain(). */
const char *prof_maps_native_name(uintptr_t ip);
/* 1 when ip lies in an executable mapping of the current snapshot. */
int prof_maps_is_code(uintptr_t ip);
/* Asks for a new snapshot at a coming prof_maps_maintain(): `sure` (an address that must be code
 * is in no known mapping, a new thread's stack) at most 10 times a second, otherwise (a hint)
 * once a second. */
void prof_maps_refresh(int sure);
/* A thread's stack is about to be sampled: takes a snapshot now unless one was taken within the
 * last 0.1 s (then asks for one as prof_maps_refresh(1) does), so that the first samples of a
 * new thread find its stack. The sampler thread. */
void prof_maps_refresh_for_thread(void);

/* Publishes the frameless methods the handler may hop over: {lo, hi, frame} triples, copied. */
void prof_maps_set_frameless(const uintptr_t (*ranges)[3], size_t n);
/* Publishes the return addresses behind which the signal walk looks for an OSR method's Tier0
 * record (struct prof_sig_osrs), copied. */
void prof_maps_set_osr(const uintptr_t *ra, size_t n);
/* Publishes where self-walks find the frame records the chain passes over (copied; see
 * prof_sighandler.h). */
struct prof_sig_hidden;
void prof_maps_set_hidden(const struct prof_sig_hidden *h, size_t n);

struct prof_maps_stats {
    uint64_t refreshes;   /* /proc/self/maps snapshots taken */
    uint64_t osr_returns; /* return addresses in the published OSR table */
};
void prof_maps_get_stats(struct prof_maps_stats *out);

#endif
