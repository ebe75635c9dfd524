/*
 * api_routes - the one table of the API's routes (api_routes.c, api_routes[]: one row a line,
 * methods, path pattern, handler) and the matching of a request against it.
 *
 * A pattern is a path whose parts may be {id} (a heap snapshot id: 1 to 9 digits, above 0) or,
 * last, {name} (the rest of the path, not empty). The rows are tried in order and the first
 * pattern that matches is the resource; the rows with that same pattern are its methods. A
 * route's scope is the shortest row pattern without placeholders that the path is, or is under
 * (a pattern with rows under it, like /api/v1/gcdump): what the path answers to at all.
 *
 * Paths are compared as they come, but outside /debug/pprof (where, as in Go, /debug/pprof and
 * /debug/pprof/ differ) trailing slashes are ignored and so are the extra slashes of a run right
 * after the scope (/api/v1/gcdump//3 is /api/v1/gcdump/3).
 *
 * ctx: pure; any thread (web/'s request handler on civetweb workers, tests, fuzz targets).
 */
#ifndef API_ROUTES_H
#define API_ROUTES_H

#include <stddef.h>

#include "api.h"

enum { API_GET = 1, API_POST = 2, API_DELETE = 4 }; /* API_GET: GET and HEAD */

struct api_route {
    unsigned methods;
    const char *pattern;
    api_handler handler;
    /* the 405 message for a method of the scope that this resource does not take; NULL where
     * no other method of the scope can reach it */
    const char *not_allowed;
    /* 1: answers from the profiles' history alone (the store, the marks), so also in a post-mortem
     * server (`clrscope serve`), where the others, which ask the running process, are 404s */
    unsigned history;
};

extern const struct api_route api_routes[];
extern const size_t api_nroutes;

enum api_match_result {
    API_ROUTE_NONE,        /* no route's path: the server's own pages, or 405 */
    API_ROUTE_SCOPE_METHOD, /* a route's path, a method none of its scope takes: 405 "method M
                             * not allowed on <scope>" */
    API_ROUTE_METHOD,      /* the scope takes the method, this resource does not: 405 with the
                            * route's not_allowed */
    API_ROUTE_FOUND,
};

struct api_match {
    const struct api_route *route; /* FOUND and METHOD: the resource's first row */
    const char *scope;              /* all but NONE: the scope's pattern */
    int id;                         /* {id}, 0 when none */
    const char *name;               /* {name}: into the path, name_len bytes */
    size_t name_len;
};

/* The value of an {id} part s[0..n): 1 to 9 digits, above 0; -1 for anything else. */
int api_parse_id(const char *s, size_t n);
/* The method's bit (API_GET for GET and HEAD), 0 for any other. */
unsigned api_method_bit(const char *method);
/* Matches `method` and `path` (the decoded local URI) against the table. */
enum api_match_result api_route_match(const char *method, const char *path, struct api_match *m);

#endif
