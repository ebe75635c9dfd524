/*
 * api - the JSON and pprof endpoint handlers. Each takes the parsed request, replies, and returns
 * the HTTP status it sent. They run on civetweb workers (100 KB stacks): no recursion, no large
 * stack buffers; heavy data is copied out of the profiler's stores under their locks.
 */
#ifndef API_H
#define API_H

#include "web_util.h"

int api_status(const struct web_req *r);
int api_flamegraph(const struct web_req *r);
int api_top(const struct web_req *r);
int api_gc(const struct web_req *r);
int api_allocations(const struct web_req *r);
int api_live(const struct web_req *r);
int api_exceptions(const struct web_req *r);
int api_locks(const struct web_req *r);
int api_gcdump(const struct web_req *r);   /* /api/v1/gcdump and below; GET, POST, DELETE */
int api_pprof(const struct web_req *r);    /* /debug/pprof/ and below */
/* /debug/pprof/profile and wall waiting out their window now, and those whose client left */
void api_pprof_waits(int *waiting, uint64_t *abandoned);
int api_metrics(const struct web_req *r);
int api_counters(const struct web_req *r);
int api_threads(const struct web_req *r);  /* /api/v1/threads: a thread dump */
/* /debug/pprof/threads and its alias goroutine (`name`): the dump as pprof or text (debug=1, 2) */
int api_threads_pprof(const struct web_req *r, const char *name);
/* "running", "sleeping", … for a /proc state letter */
const char *api_thread_state_name(char state);

#endif
