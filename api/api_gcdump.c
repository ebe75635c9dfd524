/* api_gcdump.c - heap snapshots over HTTP.
 *
 *   POST   /api/v1/gcdump[?force=1]          202 {"id","status":"running"}; 409 while one runs;
 *                                            413 when a guard refuses (heap size, memory); 429
 *                                            sooner than CLRSCOPE_DUMP_MIN_INTERVAL_S after the
 *                                            previous start (Retry-After)
 *   GET    /api/v1/gcdump                    {"snapshots":[...]} newest first
 *   GET    /api/v1/gcdump/ID[?limit&search&sort]  status, progress, error, totals, types
 *   GET    /api/v1/gcdump/ID/file            the .gcdump (attachment); 410 when the file is no
 *                                            longer the one written
 *   GET    /api/v1/gcdump/ID/paths?type=T    shortest chains of types from roots to T
 *   GET    /api/v1/gcdump/diff?a=ID&b=ID     per-type count and byte deltas, b - a
 *   DELETE /api/v1/gcdump/ID
 *
 * One handler per route (api_routes.c); any other path below /api/v1/gcdump is a 404 JSON error
 * (api_gcdump_unknown). Snapshot data is read under the module's list lock (never taken by
 * runtime callbacks); the file is handed to the server as a descriptor opened under it. The
 * details, paths, file and diff of a snapshot count as reading it (prof_heapsnap_find_read),
 * which CLRSCOPE_DUMP_KEEP takes into account; the list does not.
 */
#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api.h"
#include "api_json.h"
#include "api_routes.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_heapsnap.h"

#define BASE "/api/v1/gcdump"
#define DEFAULT_LIMIT 1000
#define MAX_REPLY (64u << 20)

static const char *status_name(int st)
{
    return st == HS_DONE ? "done" : st == HS_FAILED ? "failed" : "running";
}

static int reply_jbuf(struct api_reply *out, int status, struct jbuf *b)
{
    return api_reply_jbuf(out, status, API_JSON, b, "reply too large; use ?limit= or ?search=");
}

static void kv_int(struct jbuf *b, const char *k, int64_t v)
{
    jb_raw(b, ",", 1);
    jb_str(b, k);
    jb_raw(b, ":", 1);
    jb_int(b, v);
}

static void kv_num(struct jbuf *b, const char *k, double v)
{
    jb_raw(b, ",", 1);
    jb_str(b, k);
    jb_raw(b, ":", 1);
    jb_num(b, v);
}

static void kv_str(struct jbuf *b, const char *k, const char *v)
{
    jb_raw(b, ",", 1);
    jb_str(b, k);
    jb_raw(b, ":", 1);
    if (v)
        jb_str(b, v);
    else
        jb_lit(b, "null");
}

/* The fields every view of a snapshot shares (opens the object, leaves it open). */
static void snapshot_head(struct jbuf *b, const struct hs_snapshot *s)
{
    int st = __atomic_load_n(&s->status, __ATOMIC_ACQUIRE);
    jb_lit(b, "{\"id\":");
    jb_int(b, s->id);
    kv_str(b, "status", status_name(st));
    kv_str(b, "phase", s->phase);
    kv_num(b, "progress", __atomic_load_n(&s->progress, __ATOMIC_RELAXED) / 1000.0);
    kv_str(b, "error", st == HS_FAILED ? s->error : NULL);
    kv_num(b, "t", s->t);
    kv_num(b, "duration_s", st == HS_RUNNING ? prof_unix_now() - s->t : s->duration_s);
    jb_lit(b, ",\"forced\":");
    jb_raw(b, s->forced ? "true" : "false", s->forced ? 4 : 5);
    kv_int(b, "heap_estimate_bytes", (int64_t)s->heap_estimate);
    if (st == HS_RUNNING) {
        jb_lit(b, ",\"objects\":null,\"bytes\":null");
        return;
    }
    kv_int(b, "objects", (int64_t)s->objects);
    kv_int(b, "bytes", (int64_t)s->bytes);
    kv_int(b, "references", (int64_t)s->references);
    kv_int(b, "roots", (int64_t)s->roots);
    kv_int(b, "unresolved_references", (int64_t)s->unresolved_references);
    kv_int(b, "unreachable_objects", (int64_t)s->unreachable_objects);
    kv_int(b, "unreachable_bytes", (int64_t)s->unreachable_bytes);
    kv_num(b, "gc_pause_ms", s->gc_pause_ms);
    jb_lit(b, ",\"timings_ms\":{\"gc\":");
    jb_num(b, s->gc_pause_ms);
    kv_num(b, "index", s->ms_index);
    kv_num(b, "dominators", s->ms_dominators);
    kv_num(b, "paths", s->ms_paths);
    kv_num(b, "names", s->ms_names);
    kv_num(b, "write", s->ms_write);
    kv_num(b, "summary", s->ms_summary);
    jb_raw(b, "}", 1);
    jb_lit(b, ",\"retained_approximate\":");
    jb_raw(b, s->approximate ? "true" : "false", s->approximate ? 4 : 5);
    kv_int(b, "types_total", s->nrows);
    if (s->file[0]) {
        char url[64];
        snprintf(url, sizeof url, BASE "/%d/file", s->id);
        kv_str(b, "file", url);
        kv_int(b, "file_bytes", (int64_t)s->file_bytes);
    } else {
        kv_str(b, "file", NULL);
    }
}

int api_gcdump_list(const struct api_req *q, struct api_reply *out)
{
    (void)q;
    struct jbuf b;
    jb_init(&b, MAX_REPLY);
    jb_lit(&b, "{\"snapshots\":[");
    prof_heapsnap_lock();
    int n = prof_heapsnap_count();
    const struct hs_snapshot *running = NULL;
    for (int i = 0; i < n; i++) {
        const struct hs_snapshot *s = prof_heapsnap_at(i);
        if (i)
            jb_raw(&b, ",", 1);
        snapshot_head(&b, s);
        jb_raw(&b, "}", 1);
        if (__atomic_load_n(&s->status, __ATOMIC_ACQUIRE) == HS_RUNNING)
            running = s;
    }
    jb_lit(&b, "],\"running\":");
    if (running)
        jb_int(&b, running->id);
    else
        jb_lit(&b, "null");
    prof_heapsnap_unlock();
    kv_int(&b, "keep", g_cfg.dump_keep);
    kv_str(&b, "dir", g_cfg.dump_dir);
    kv_int(&b, "max_heap_bytes", g_cfg.dump_max_heap);
    kv_int(&b, "min_interval_s", g_cfg.dump_min_interval_s);
    jb_raw(&b, "}", 1);
    return reply_jbuf(out, 200, &b);
}

/* A refusal on the wire: its status and the JSON "reason". */
struct refusal_http {
    int status;
    const char *reason;
};

static const struct refusal_http *refusal_http(enum hs_reason why)
{
    static const struct refusal_http busy = {409, "busy"}, too_big = {413, "heap_too_large"},
                                     low_memory = {413, "low_memory"},
                                     rate_limited = {429, "rate_limited"},
                                     unavailable = {503, "unavailable"};
    switch (why) {
    case HS_BUSY:
        return &busy;
    case HS_RATE_LIMITED:
        return &rate_limited;
    case HS_TOO_BIG:
        return &too_big;
    case HS_LOW_MEMORY:
        return &low_memory;
    case HS_UNAVAILABLE:
        break;
    }
    return &unavailable;
}

int api_gcdump_create(const struct api_req *q, struct api_reply *out)
{
    long force = 0;
    char fbuf[16];
    int fr = api_query_str(q, "force", fbuf, sizeof fbuf, out);
    if (fr < 0)
        return 400;
    if (fr > 0)
        force = !strcmp(fbuf, "1") || !strcasecmp(fbuf, "true") || !strcasecmp(fbuf, "yes");
    struct hs_refusal why;
    int id = prof_heapsnap_request((int)force, &why);
    cJSON *o = cJSON_CreateObject();
    if (id > 0) {
        cJSON_AddNumberToObject(o, "id", id);
        cJSON_AddStringToObject(o, "status", "running");
        return api_reply_json(out, 202, o);
    }
    const struct refusal_http *h = refusal_http(why.reason);
    cJSON_AddStringToObject(o, "error", why.message);
    cJSON_AddStringToObject(o, "reason", h->reason);
    if (why.running_id)
        cJSON_AddNumberToObject(o, "running_id", why.running_id);
    if (why.heap_bytes >= 0)
        cJSON_AddNumberToObject(o, "heap_bytes", (double)why.heap_bytes);
    if (why.limit_bytes >= 0)
        cJSON_AddNumberToObject(o, "limit_bytes", (double)why.limit_bytes);
    if (why.available_bytes >= 0)
        cJSON_AddNumberToObject(o, "available_bytes", (double)why.available_bytes);
    if (why.needed_bytes >= 0)
        cJSON_AddNumberToObject(o, "needed_bytes", (double)why.needed_bytes);
    if (why.reason != HS_RATE_LIMITED)
        return api_reply_json(out, h->status, o);
    cJSON_AddNumberToObject(o, "retry_after_s", why.retry_after_s);
    char after[16];
    snprintf(after, sizeof after, "%d", why.retry_after_s);
    int st = api_reply_json(out, h->status, o);
    api_reply_header(out, "Retry-After", after);
    return st;
}

/* Case-insensitive substring test. */
static int contains_ci(const char *hay, const char *needle)
{
    if (!*needle)
        return 1;
    for (; *hay; hay++) {
        size_t i = 0;
        while (needle[i] && hay[i] &&
               tolower((unsigned char)hay[i]) == tolower((unsigned char)needle[i]))
            i++;
        if (!needle[i])
            return 1;
    }
    return 0;
}

enum sort_key { SORT_RETAINED, SORT_BYTES, SORT_COUNT, SORT_TYPE };

/* qsort_r's comparison: `key` points to the enum sort_key */
static int cmp_rows(const void *a, const void *b, void *key)
{
    const struct hs_row *x = *(const struct hs_row *const *)a, *y = *(const struct hs_row *const *)b;
    uint64_t vx = 0, vy = 0;
    switch (*(const int *)key) {
    case SORT_BYTES: vx = x->bytes; vy = y->bytes; break;
    case SORT_COUNT: vx = x->count; vy = y->count; break;
    case SORT_TYPE: return strcmp(x->type, y->type);
    default: vx = x->retained; vy = y->retained; break;
    }
    if (vx != vy)
        return vx < vy ? 1 : -1;
    return strcmp(x->type, y->type);
}

int api_gcdump_details(const struct api_req *q, struct api_reply *out)
{
    int id = q->id;
    long limit;
    if (api_query_long(q, "limit", DEFAULT_LIMIT, 0, 10000000, &limit, out) < 0)
        return 400;
    char search[256], sort[32];
    if (api_query_str(q, "search", search, sizeof search, out) < 0 ||
        api_query_str(q, "sort", sort, sizeof sort, out) < 0)
        return 400;
    int key = SORT_RETAINED;
    if (sort[0]) {
        if (!strcmp(sort, "bytes"))
            key = SORT_BYTES;
        else if (!strcmp(sort, "count"))
            key = SORT_COUNT;
        else if (!strcmp(sort, "type"))
            key = SORT_TYPE;
        else if (strcmp(sort, "retained"))
            return api_reply_error(out, 400, "sort must be retained, bytes, count or type");
    }
    struct jbuf b;
    jb_init(&b, MAX_REPLY);
    prof_heapsnap_lock();
    const struct hs_snapshot *s = prof_heapsnap_find_read(id);
    if (!s) {
        prof_heapsnap_unlock();
        jb_free(&b);
        return api_reply_error(out, 404, "no heap snapshot %d", id);
    }
    snapshot_head(&b, s);
    jb_lit(&b, ",\"types\":[");
    if (__atomic_load_n(&s->status, __ATOMIC_ACQUIRE) != HS_RUNNING && s->nrows) {
        const struct hs_row **sel = malloc((size_t)s->nrows * sizeof *sel);
        uint32_t nsel = 0;
        for (uint32_t i = 0; sel && i < s->nrows; i++)
            if (contains_ci(s->rows[i].type, search))
                sel[nsel++] = &s->rows[i];
        if (sel && key != SORT_RETAINED) {
            qsort_r(sel, nsel, sizeof *sel, cmp_rows, &key);
        }
        for (uint32_t i = 0; sel && i < nsel && i < (uint32_t)limit; i++) {
            const struct hs_row *row = sel[i];
            jb_raw(&b, i ? ",{\"type\":" : "{\"type\":", i ? 9 : 8);
            jb_str(&b, row->type);
            kv_int(&b, "count", (int64_t)row->count);
            kv_int(&b, "bytes", (int64_t)row->bytes);
            kv_int(&b, "retained", (int64_t)row->retained);
            jb_raw(&b, "}", 1);
        }
        jb_lit(&b, "]");
        kv_int(&b, "types_matched", nsel);
        free(sel);
    } else {
        jb_lit(&b, "]");
    }
    prof_heapsnap_unlock();
    jb_raw(&b, "}", 1);
    return reply_jbuf(out, 200, &b);
}

int api_gcdump_paths(const struct api_req *q, struct api_reply *out)
{
    int id = q->id;
    char type[512];
    int has = api_query_str(q, "type", type, sizeof type, out);
    if (has < 0)
        return 400;
    if (has == 0 || !type[0])
        return api_reply_error(out, 400, "query parameter 'type' is required");
    struct jbuf b;
    jb_init(&b, MAX_REPLY);
    prof_heapsnap_lock();
    const struct hs_snapshot *s = prof_heapsnap_find_read(id);
    int st = s ? __atomic_load_n(&s->status, __ATOMIC_ACQUIRE) : HS_FAILED;
    const struct hs_row *row = NULL;
    for (uint32_t i = 0; s && st != HS_RUNNING && i < s->nrows && !row; i++)
        if (!strcmp(s->rows[i].type, type))
            row = &s->rows[i];
    if (!s || st == HS_RUNNING || !row) {
        prof_heapsnap_unlock();
        jb_free(&b);
        if (!s)
            return api_reply_error(out, 404, "no heap snapshot %d", id);
        if (st == HS_RUNNING)
            return api_reply_error(out, 409, "heap snapshot %d is still running", id);
        return api_reply_error(out, 404, "no type named '%.300s' in heap snapshot %d", type,
                               id);
    }
    jb_lit(&b, "{\"id\":");
    jb_int(&b, id);
    kv_str(&b, "type", row->type);
    kv_int(&b, "count", (int64_t)row->count);
    kv_int(&b, "retained", (int64_t)row->retained);
    jb_lit(&b, ",\"paths\":[");
    for (uint32_t k = 0; k < row->npaths; k++) {
        jb_raw(&b, k ? ",[" : "[", k ? 2 : 1);
        for (uint32_t e = 0; e < row->paths[k].len; e++) {
            if (e)
                jb_raw(&b, ",", 1);
            jb_str(&b, s->pathv[row->paths[k].at + e]);
        }
        jb_raw(&b, "]", 1);
    }
    jb_raw(&b, "]}", 2);
    prof_heapsnap_unlock();
    return reply_jbuf(out, 200, &b);
}

struct drow {
    const char *type;
    int64_t ca, cb, ba, bb;
};

static int cmp_name(const void *a, const void *b)
{
    return strcmp((*(const struct hs_row *const *)a)->type, (*(const struct hs_row *const *)b)->type);
}

static int cmp_delta(const void *a, const void *b)
{
    const struct drow *x = a, *y = b;
    int64_t dx = llabs(x->bb - x->ba), dy = llabs(y->bb - y->ba);
    if (dx != dy)
        return dx < dy ? 1 : -1;
    int64_t cx = llabs(x->cb - x->ca), cy = llabs(y->cb - y->ca);
    if (cx != cy)
        return cx < cy ? 1 : -1;
    return strcmp(x->type, y->type);
}

static const struct hs_row **sorted_rows(const struct hs_snapshot *s)
{
    const struct hs_row **v = malloc(((size_t)s->nrows + 1) * sizeof *v);
    if (!v)
        return NULL;
    for (uint32_t i = 0; i < s->nrows; i++)
        v[i] = &s->rows[i];
    qsort(v, s->nrows, sizeof *v, cmp_name);
    return v;
}

int api_gcdump_diff(const struct api_req *q, struct api_reply *out)
{
    long a, bid, limit;
    if (api_query_long(q, "a", 0, 1, 999999999, &a, out) < 0 ||
        api_query_long(q, "b", 0, 1, 999999999, &bid, out) < 0 ||
        api_query_long(q, "limit", DEFAULT_LIMIT, 0, 10000000, &limit, out) < 0)
        return 400;
    if (!a || !bid)
        return api_reply_error(out, 400, "query parameters 'a' and 'b' (snapshot ids) are "
                               "required");
    char all[8];
    if (api_query_str(q, "all", all, sizeof all, out) < 0)
        return 400;
    int show_all = !strcmp(all, "1") || !strcasecmp(all, "true");
    prof_heapsnap_lock();
    const struct hs_snapshot *sa = prof_heapsnap_find_read((int)a),
                             *sb = prof_heapsnap_find_read((int)bid);
    if (!sa || !sb) {
        prof_heapsnap_unlock();
        return api_reply_error(out, 404, "no heap snapshot %ld", !sa ? a : bid);
    }
    if (__atomic_load_n(&sa->status, __ATOMIC_ACQUIRE) != HS_DONE ||
        __atomic_load_n(&sb->status, __ATOMIC_ACQUIRE) != HS_DONE) {
        prof_heapsnap_unlock();
        return api_reply_error(out, 409, "both snapshots must be done to compare them");
    }
    const struct hs_row **ra = sorted_rows(sa), **rb = sorted_rows(sb);
    struct drow *d = malloc(((size_t)sa->nrows + sb->nrows + 1) * sizeof *d);
    if (!ra || !rb || !d) {
        prof_heapsnap_unlock();
        free(ra);
        free(rb);
        free(d);
        return api_reply_error(out, 500, "out of memory");
    }
    size_t nd = 0;
    uint32_t i = 0, j = 0;
    while (i < sa->nrows || j < sb->nrows) {
        int c = i >= sa->nrows ? 1 : j >= sb->nrows ? -1 : strcmp(ra[i]->type, rb[j]->type);
        struct drow x = {0};
        if (c <= 0) {
            x.type = ra[i]->type;
            x.ca = (int64_t)ra[i]->count;
            x.ba = (int64_t)ra[i]->bytes;
            i++;
        }
        if (c >= 0) {
            x.type = rb[j]->type;
            x.cb = (int64_t)rb[j]->count;
            x.bb = (int64_t)rb[j]->bytes;
            j++;
        }
        if (show_all || x.ca != x.cb || x.ba != x.bb)
            d[nd++] = x;
    }
    qsort(d, nd, sizeof *d, cmp_delta);
    struct jbuf b;
    jb_init(&b, MAX_REPLY);
    jb_lit(&b, "{\"a\":");
    jb_int(&b, a);
    kv_int(&b, "b", bid);
    kv_int(&b, "objects_delta", (int64_t)sb->objects - (int64_t)sa->objects);
    kv_int(&b, "bytes_delta", (int64_t)sb->bytes - (int64_t)sa->bytes);
    kv_int(&b, "types_changed", (int64_t)nd);
    jb_lit(&b, ",\"types\":[");
    for (size_t k = 0; k < nd && k < (size_t)limit; k++) {
        jb_raw(&b, k ? ",{\"type\":" : "{\"type\":", k ? 9 : 8);
        jb_str(&b, d[k].type);
        kv_int(&b, "count_a", d[k].ca);
        kv_int(&b, "count_b", d[k].cb);
        kv_int(&b, "count_delta", d[k].cb - d[k].ca);
        kv_int(&b, "bytes_a", d[k].ba);
        kv_int(&b, "bytes_b", d[k].bb);
        kv_int(&b, "bytes_delta", d[k].bb - d[k].ba);
        jb_raw(&b, "}", 1);
    }
    jb_raw(&b, "]}", 2);
    prof_heapsnap_unlock();
    free(ra);
    free(rb);
    free(d);
    return reply_jbuf(out, 200, &b);
}

int api_gcdump_file(const struct api_req *q, struct api_reply *out)
{
    int id = q->id;
    char why[400] = "";
    prof_heapsnap_lock();
    const struct hs_snapshot *s = prof_heapsnap_find_read(id);
    int st = s ? __atomic_load_n(&s->status, __ATOMIC_ACQUIRE) : HS_FAILED;
    /* the file is opened only once the snapshot is done: a 409 leaves no descriptor behind; and
     * only while it is the file written, in the directory it was written in */
    errno = 0;
    int fd = s && st != HS_RUNNING && s->file[0] ? prof_heapsnap_open_file(s, why, sizeof why)
                                                 : -1;
    int err = errno;
    prof_heapsnap_unlock();
    if (!s)
        return api_reply_error(out, 404, "no heap snapshot %d", id);
    if (st == HS_RUNNING)
        return api_reply_error(out, 409, "heap snapshot %d is still running", id);
    if (fd == -2)
        return api_reply_error(out, 410, "the file of heap snapshot %d is not served: %s", id,
                               why);
    if (fd < 0) {
        char e[128] = "";
        if (st != HS_FAILED && err) {
            char tmp[128];
            snprintf(e, sizeof e, ": %s", strerror_r(err, tmp, sizeof tmp));
        }
        return api_reply_error(out, 404, "heap snapshot %d has no file%s%s", id,
                               st == HS_FAILED ? " (it failed)" : "", e);
    }
    struct stat sb;
    if (fstat(fd, &sb)) {
        close(fd);
        return api_reply_error(out, 500, "cannot read the snapshot file");
    }
    char len[32], disp[128];
    snprintf(len, sizeof len, "%lld", (long long)sb.st_size);
    snprintf(disp, sizeof disp, "attachment; filename=\"clrscope-%d-%d.gcdump\"", (int)g_core.pid,
             id);
    /* the headers of a download, and only those (the server closes the descriptor once the
     * bytes are sent, or before it replies to a HEAD) */
    api_reply_static(out, 200, NULL, "", 0);
    out->verbatim = 1;
    out->fd = fd;
    out->fd_len = (int64_t)sb.st_size;
    api_reply_header(out, "Content-Type", "application/octet-stream");
    api_reply_header(out, "Content-Length", len);
    api_reply_header(out, "Content-Disposition", disp);
    api_reply_header(out, "Cache-Control", "no-store");
    api_reply_header(out, "X-Content-Type-Options", "nosniff");
    return 200;
}

int api_gcdump_delete(const struct api_req *q, struct api_reply *out)
{
    int id = q->id;
    int rc = prof_heapsnap_delete(id);
    if (rc == -1)
        return api_reply_error(out, 404, "no heap snapshot %d", id);
    if (rc == -2)
        return api_reply_error(out, 409, "heap snapshot %d is still running", id);
    cJSON *o = cJSON_CreateObject();
    cJSON_AddNumberToObject(o, "deleted", id);
    return api_reply_json(out, 200, o);
}

/* Any other path below /api/v1/gcdump/ ({name}: what follows it): its first part is no
 * snapshot id, or what follows the id is no resource of a snapshot. */
int api_gcdump_unknown(const struct api_req *q, struct api_reply *out)
{
    const char *p = q->name ? q->name : "";
    size_t plen = q->name ? q->name_len : 0;
    const char *slash = memchr(p, '/', plen);
    size_t idlen = slash ? (size_t)(slash - p) : plen;
    if (api_parse_id(p, idlen) < 0)
        return api_reply_error(out, 404, "no such heap snapshot: '%.*s'",
                               (int)(idlen > 40 ? 40 : idlen), p);
    return api_reply_error(out, 404, "no such heap snapshot resource");
}
