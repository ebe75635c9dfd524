/*
 * api - the JSON, text and pprof endpoints: a parsed request in, a reply out.
 *
 * Each handler is an api_handler: it reads the request (api_reply.h: method, path, what its
 * route captured, the query through api_query_*), reads what capture publishes, fills `out`
 * and returns the status it put there. web/ finds the handler in the route table
 * (api_routes.h), calls it on a civetweb worker and sends the reply.
 *
 * A handler may: read capture's views and statistics (prof_*_view, _get_stats, the heap
 * snapshots under their lock), each copied out under the module's own lock; ask capture for what
 * its endpoint exists for (start or delete a heap snapshot, take a thread dump); wait, polling
 * q->client_gone, when its endpoint is defined to (a profile of the next N seconds).
 * A handler may not: send anything or touch a socket (no civetweb, no web/ header); change
 * capture's figures (no ticks, no aggregator calls: what it shows is read-only); recurse, or put
 * large buffers on its stack (civetweb workers have 100 KB stacks: big buffers are malloc'd);
 * block without bound.
 *
 * ctx: handlers on any thread but the runtime's callbacks and clrscope's own (civetweb workers;
 * tests and fuzz targets call them directly). api_pprof_waits and api_thread_state_name
 * anywhere.
 */
#ifndef API_H
#define API_H

#include <stdint.h>

#include "api_reply.h"

typedef int (*api_handler)(const struct api_req *q, struct api_reply *out);

int api_status(const struct api_req *q, struct api_reply *out);
int api_flamegraph(const struct api_req *q, struct api_reply *out);
int api_top(const struct api_req *q, struct api_reply *out);
int api_gc(const struct api_req *q, struct api_reply *out);
int api_allocations(const struct api_req *q, struct api_reply *out);
int api_live(const struct api_req *q, struct api_reply *out);
int api_exceptions(const struct api_req *q, struct api_reply *out);
int api_locks(const struct api_req *q, struct api_reply *out);
int api_metrics(const struct api_req *q, struct api_reply *out);
int api_counters(const struct api_req *q, struct api_reply *out);
int api_threads(const struct api_req *q, struct api_reply *out); /* /api/v1/threads */
int api_budget(const struct api_req *q, struct api_reply *out);  /* /api/v1/budget */
/* /api/v1/flamegraph/diff: one profile over two windows */
int api_flamegraph_diff(const struct api_req *q, struct api_reply *out);
int api_marks_list(const struct api_req *q, struct api_reply *out);   /* GET  /api/v1/marks */
int api_marks_create(const struct api_req *q, struct api_reply *out); /* POST /api/v1/marks */
struct cJSON;
/* Adds the overhead governor's `budget` object to a status reply (api_budget.c). */
void api_budget_status(struct cJSON *status);

/* Heap snapshots (api_gcdump.c); {id} is q->id, {name} what follows /api/v1/gcdump/. */
int api_gcdump_list(const struct api_req *q, struct api_reply *out);    /* GET    /api/v1/gcdump */
int api_gcdump_create(const struct api_req *q, struct api_reply *out);  /* POST   /api/v1/gcdump */
int api_gcdump_diff(const struct api_req *q, struct api_reply *out);    /* GET    …/diff */
int api_gcdump_details(const struct api_req *q, struct api_reply *out); /* GET    …/{id} */
int api_gcdump_delete(const struct api_req *q, struct api_reply *out);  /* DELETE …/{id} */
int api_gcdump_file(const struct api_req *q, struct api_reply *out);    /* GET    …/{id}/file */
int api_gcdump_paths(const struct api_req *q, struct api_reply *out);   /* GET    …/{id}/paths */
int api_gcdump_unknown(const struct api_req *q, struct api_reply *out); /* …/{name}: the 404 */

/* /debug/pprof, as Go's net/http/pprof serves it (api_profiles.c, api_threads.c). */
int api_pprof_redirect(const struct api_req *q, struct api_reply *out); /* /debug/pprof */
int api_pprof_index(const struct api_req *q, struct api_reply *out);    /* /debug/pprof/ */
/* /debug/pprof/<profile>, the name the path's last part: profile and wall wait out the next
 * `seconds` (120 at most: 400 over it) unless wait=0 (two at once at most: 429 for a third;
 * API_NO_REPLY when the client leaves meanwhile); allocs, heap, exceptions, lock (mutex, block)
 * the past window */
int api_pprof_profile(const struct api_req *q, struct api_reply *out);
/* /debug/pprof/threads and goroutine: the thread dump as pprof, or text (debug=1, 2) */
int api_pprof_threads(const struct api_req *q, struct api_reply *out);
int api_pprof_unknown(const struct api_req *q, struct api_reply *out); /* …/{name}: the 404 */
/* The profile requests waiting out their window now, and those whose client left meanwhile. */
void api_pprof_waits(int *waiting, uint64_t *abandoned);

/* "running", "sleeping", … for a /proc state letter */
const char *api_thread_state_name(char state);

#endif
