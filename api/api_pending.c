/* api_pending.c - endpoints whose modules have not landed yet answer 501 with a clear reason. */
#include "api.h"

#define PENDING(fn, what)                                                                          \
    int fn(const struct web_req *r)                                                                \
    {                                                                                              \
        return web_reply_error(r->conn, 501, what " is not available in this build yet");         \
    }

PENDING(api_gc, "the GC view")
PENDING(api_allocations, "the allocations table")
PENDING(api_live, "the live-objects table")
PENDING(api_exceptions, "the exceptions table")
PENDING(api_locks, "the lock-contention table")
PENDING(api_gcdump, "heap snapshots")
PENDING(api_metrics, "/metrics")
