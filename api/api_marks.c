/*
 * api_marks.c - /api/v1/marks: name a moment (POST), list the kept ones (GET).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "api.h"
#include "prof_core.h"
#include "prof_marks.h"

static cJSON *mark_json(const struct prof_mark *m)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "id", m->id);
    cJSON_AddNumberToObject(o, "t", m->t);
    cJSON_AddStringToObject(o, "label", m->label);
    return o;
}

int api_marks_list(const struct api_req *q, struct api_reply *out)
{
    (void)q;
    struct prof_mark *marks = malloc(PROF_MARKS_MAX * sizeof *marks);
    if (!marks)
        return api_reply_error(out, 503, "out of memory");
    uint64_t dropped = 0;
    size_t n = prof_marks_list(marks, PROF_MARKS_MAX, &dropped);
    cJSON *o = cJSON_CreateObject();
    cJSON *arr = cJSON_AddArrayToObject(o, "marks");
    for (size_t i = 0; i < n; i++)
        cJSON_AddItemToArray(arr, mark_json(&marks[i]));
    cJSON_AddNumberToObject(o, "max", PROF_MARKS_MAX);
    cJSON_AddNumberToObject(o, "dropped", (double)dropped);
    free(marks);
    return api_reply_json(out, 200, o);
}

/* The label and time of a new mark from the body {"label": "...", "t": T} (both optional; T unix
 * seconds, or seconds relative to now when 0 or less) or the query's `label`. */
int api_marks_create(const struct api_req *q, struct api_reply *out)
{
    double now = prof_unix_now(), t = now;
    char *label = calloc(1, PROF_MARK_LABEL_MAX * 4);
    if (!label)
        return api_reply_error(out, 503, "out of memory");
    int rc = api_query_str(q, "label", label, PROF_MARK_LABEL_MAX * 4, out);
    if (rc < 0) {
        free(label);
        return 400;
    }
    if (q->body_len) {
        cJSON *b = cJSON_ParseWithLength(q->body, q->body_len);
        const cJSON *l = b ? cJSON_GetObjectItemCaseSensitive(b, "label") : NULL;
        const cJSON *tt = b ? cJSON_GetObjectItemCaseSensitive(b, "t") : NULL;
        const char *why = NULL;
        if (!cJSON_IsObject(b))
            why = "the body must be a JSON object: {\"label\": \"...\", \"t\": unix seconds}";
        else if (l && !cJSON_IsString(l))
            why = "\"label\" must be a string";
        else if (tt && (!cJSON_IsNumber(tt) || !isfinite(tt->valuedouble) ||
                        (tt->valuedouble > 0 && (tt->valuedouble < 1e9 ||
                                                 tt->valuedouble > now + 60))))
            why = "\"t\" must be unix seconds (not in the future) or seconds relative to now (-60)";
        if (!why && l) {
            strncpy(label, l->valuestring, PROF_MARK_LABEL_MAX * 4 - 1);
            label[PROF_MARK_LABEL_MAX * 4 - 1] = 0;
        }
        if (!why && tt)
            t = tt->valuedouble > 0 ? tt->valuedouble : now + tt->valuedouble;
        cJSON_Delete(b);
        if (why) {
            free(label);
            return api_reply_error(out, 400, "%s", why);
        }
    }
    struct prof_mark m;
    prof_marks_add(label, t, &m);
    free(label);
    return api_reply_json(out, 201, mark_json(&m));
}
