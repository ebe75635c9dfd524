/*
 * dd_profile - what the exporter sends: ONE pprof holding every enabled profile type under the
 * sample-type names Datadog's backend accepts (libdatadog's list), and the event.json beside it.
 *
 *   cpu      cpu-samples/count, cpu/nanoseconds        store PK_CPU (v0, v1)
 *   wall     wall/nanoseconds                          store PK_WALL (v1)
 *   alloc    alloc-samples/count, alloc-size/bytes     store PK_ALLOC (v0, v1: upscaled)
 *   exc      exception/count                           store PK_EXC (v0: upscaled)
 *   lock     lock-count/count, lock-time/nanoseconds   store PK_LOCK (v0, v1: upscaled)
 *   live     inuse-objects/count, inuse-space/bytes    prof_live_view() at build time
 * period_type RealTime/Nanoseconds (as Datadog's .NET profiler); labels "thread id", "thread
 * name", "allocation class", "exception type".
 *
 * ctx: the clrscope-export thread (any clrscope thread would do; nothing here is shared).
 */
#ifndef DD_PROFILE_H
#define DD_PROFILE_H

#include <stddef.h>
#include <stdint.h>

#include "dd_config.h"
#include "prof_scratch.h"

#ifndef CLRSCOPE_VERSION
#define CLRSCOPE_VERSION "0.1.0"
#endif

/* Builds the gzip'd pprof of unix seconds from_s..to_s for the PROFILE_* bits in `on`, frame
 * names in Datadog's structured form when `structured` (dd_frame_structured); its time span ends
 * at t_end when that cuts the last second short (as event.json says). Returns 0 with the
 * buffer in *out, 1 when there is nothing to send, -1 on failure. The encoder works in `mem`
 * (an arena of the caller's), where *out stays until the arena is released. */
int dd_profile_build(int64_t from_s, int64_t to_s, double t_end, unsigned on, int structured,
                     struct prof_scratch *mem, unsigned char **out, size_t *len);

/* The event.json of one upload (attachments, tags_profiler, start, end, family, version,
 * internal, info). Returns an owned string (free()), NULL when out of memory. */
char *dd_event_json(const struct dd_config *c, double t_from, double t_to, unsigned on,
                    uint64_t seq);

#endif
