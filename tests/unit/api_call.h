/*
 * api_call.h - calling the API's handlers as web_server does, without a server: the request is
 * matched against the route table (api_route_match), its handler called with the parsed request,
 * and the reply checked (status, content type, JSON body) with the CHECK macro of unit_check.h.
 * Include unit_check.h first.
 */
#ifndef API_CALL_H
#define API_CALL_H

#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "api_routes.h"

/* What the server would give a handler beyond the request line (NULL: none). */
static struct api_req g_call_extras;

/* Matches `method` and `target` (path?query) and calls the route's handler into `out` (which
 * the caller frees). Returns the status; -405 when the route table refuses the method (web/
 * answers 405), -404 when no route has the path (web/ looks for a page of the dashboard).
 * Checks with CHECK: call it from the test's main thread. */
static inline int api_call(const char *method, const char *target, struct api_reply *out)
{
    const char *qm = strchr(target, '?');
    char *path = strndup(target, qm ? (size_t)(qm - target) : strlen(target));
    api_reply_init(out);
    struct api_match m;
    enum api_match_result res = path ? api_route_match(method, path, &m) : API_ROUTE_NONE;
    if (res != API_ROUTE_FOUND) {
        free(path);
        return res == API_ROUTE_NONE ? -404 : -405;
    }
    struct api_req q = g_call_extras;
    q.method = method;
    q.path = path;
    q.query = qm ? qm + 1 : NULL;
    q.id = m.id;
    q.name = m.name;
    q.name_len = m.name_len;
    int status = m.route->handler(&q, out);
    free(path);
    CHECK(status == out->status, "%s %s: returned %d, reply says %d", method, target, status,
          out->status);
    CHECK(out->len == 0 || out->body, "%s %s: %zu bytes and no body", method, target, out->len);
    return status;
}

/* The reply's body as JSON (cJSON_Delete it), after checking its status and content type;
 * NULL when either is wrong or it does not parse. */
static inline cJSON *api_json(const char *method, const char *target, int want_status)
{
    struct api_reply r;
    int st = api_call(method, target, &r);
    cJSON *j = NULL;
    CHECK(st == want_status, "%s %s: status %d, want %d (%.*s)", method, target, st, want_status,
          (int)(r.len > 300 ? 300 : r.len), r.body ? r.body : "");
    if (st == want_status) {
        CHECK(r.content_type && !strcmp(r.content_type, API_JSON), "%s %s: content type %s",
              method, target, r.content_type ? r.content_type : "(none)");
        j = cJSON_ParseWithLength(r.body, r.len);
        CHECK(j != NULL, "%s %s: the body is not JSON: %.200s", method, target,
              r.body ? r.body : "");
    }
    api_reply_free(&r);
    return j;
}

/* A 4xx/5xx with {"error": "..."} whose message contains `part`. */
static inline void api_refused(const char *method, const char *target, int want_status, const char *part)
{
    cJSON *j = api_json(method, target, want_status);
    const cJSON *e = cJSON_GetObjectItem(j, "error");
    CHECK(cJSON_IsString(e) && strstr(e->valuestring, part), "%s %s: error %s, want \"%s\" in it",
          method, target, cJSON_IsString(e) ? e->valuestring : "(none)", part);
    cJSON_Delete(j);
}

/* A number of a JSON object by a path of keys ("a", "b": o.a.b); NAN when there is none. */
static inline double jnum(const cJSON *o, const char *a, const char *b)
{
    const cJSON *v = cJSON_GetObjectItem(o, a);
    if (b)
        v = cJSON_GetObjectItem(v, b);
    return cJSON_IsNumber(v) ? v->valuedouble : NAN;
}

#endif
