/*
 * prof_exporter.c - see prof_exporter.h.
 *
 * One clrscope-export thread does everything: every period it copies the window that just ended
 * out of the store (plus the live-object set), builds ONE pprof holding every enabled profile
 * type with Datadog's sample-type names, writes it to the export directory if asked, and queues
 * it; uploads run on a libcurl multi handle from the same thread, so a slow agent never delays
 * the next profile. The queue is bounded (CLRSCOPE_EXPORT_QUEUE): when full, the oldest profile
 * is dropped and counted. Failed uploads are retried with exponential backoff (1 s doubling up to
 * the period); 4xx replies other than 408/429 drop the profile. Stop wakes the thread through an
 * eventfd, builds the last partial window and gives the uploads at most ~1 s in total.
 *
 * libcurl: CU.global_init() is called once, from this thread, and never undone. It is only
 * thread-safe with respect to other libcurl users in the process when libcurl says so
 * (CURL_VERSION_THREADSAFE, Debian's 7.88 does); .NET itself does not use libcurl.
 */
#include "prof_agg.h"
#include "prof_exporter.h"

#include "curl_dl.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "dd_config.h"
#include "dd_profile.h"
#include "prof_config.h"
#include "prof_core.h"
#include "prof_files.h"
#include "prof_log.h"

#define ORIGIN "clrscope"
#define FLUSH_MS 1000                     /* what stop may spend on the last uploads */
#define CONNECT_TIMEOUT_MS 2000
#define BUILD_LAG_S 1.0                   /* a second is exported once it ended this long ago */
#define MAX_QUEUE 64
#define REPLY_KEEP 160                    /* bytes of an error reply kept for the log */
#define REPLY_MAX (64u << 10)             /* bytes of a reply read at most */

struct item {
    unsigned char *pprof; /* gzip'd */
    size_t len;
    char *event;          /* event.json */
    uint64_t seq;
};

struct stats {
    uint64_t uploads, failures, bytes_sent, built, empty, files, file_errors;
    uint64_t dropped_full, dropped_rejected, dropped_unanswered, build_errors;
    double last_upload, last_attempt; /* unix seconds, 0 = never */
    long last_http;                   /* status of the last completed attempt, 0 = none */
    char last_status[160];            /* "" after a reply, else why there was none */
    char last_error[160];             /* the last failure, kept after later successes */
    size_t queue_bytes;
};

/* The exporter's one state: `cfg` and the flags above the thread's part are written before
 * clrscope-export starts; the middle part is that thread's alone; `st` is guarded by `lock`
 * (read by civetweb's threads for /api/v1/status). */
static struct exporter_state {
    struct dd_config cfg; /* written by prof_exporter_start before the thread, then read-only */
    int uploading;        /* cfg.enabled and libcurl came up */
    int files;            /* cfg.output_dir set */
    int started;
    pthread_t thread;
    int wake_fd;
    int stop;             /* atomic */

    /* clrscope-export thread only */
    CURLM *multi;
    struct curl_slist *headers;
    struct item *queue[MAX_QUEUE];
    int qhead, qlen;
    struct item *cur;
    CURL *easy;
    curl_mime *mime;
    struct body_reader { /* libcurl reads the profile from the item in flight, not a copy */
        const unsigned char *p;
        size_t len, pos;
    } body;
    char reply[REPLY_KEEP];
    size_t reply_len, reply_total;
    int64_t retry_at, deadline; /* CLOCK_MONOTONIC ns; deadline 0 = none */
    int backoff_s, failing;
    int64_t last_to_s;          /* last unix second exported */
    uint64_t seq;
    char **dir_ring;            /* names of the files we wrote, oldest first */
    int dir_next;
    uint64_t logged[10];        /* failure kinds already logged: curl codes, HTTP statuses */

    pthread_mutex_t lock;       /* guards st (status readers are civetweb threads) */
    struct stats st;
} exporter = {.wake_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static int stopping(void)
{
    return __atomic_load_n(&exporter.stop, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                       */

/* Writes one profile to the export directory as a new 0600 file, relative to the directory's
 * descriptor: the directory is made 0700 when missing and used only while it is fit for it
 * (prof_files_dir_open: not a link, this user's or root's, writable by no one else unless
 * sticky); else nothing is written (one log line, counted in file_errors). */
static void write_file(const unsigned char *data, size_t len, double t_to, uint64_t seq)
{
    static int logged, refused_logged;
    const char *dir = exporter.cfg.output_dir;
    char stamp[48], name[200], tmp[sizeof name + 8], why[200];
    time_t t = (time_t)t_to;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(name, sizeof name, "%.60s_%d_%s_%06llu.pprof", exporter.cfg.service,
             (int)g_core.pid, stamp, (unsigned long long)seq);
    for (char *p = name; *p; p++)
        if (*p == '/')
            *p = '_';
    snprintf(tmp, sizeof tmp, "%s.tmp", name);
    int dfd = prof_files_dir_open(dir, 0, NULL, why, sizeof why);
    if (dfd < 0) {
        prof_log_once(refused_logged, LOG_WARN, "export: not writing profiles to %s: %s; further "
                      "file errors are counted in /api/v1/status", dir, why);
        pthread_mutex_lock(&exporter.lock);
        exporter.st.file_errors++;
        pthread_mutex_unlock(&exporter.lock);
        return;
    }
    int fd = prof_files_create_at(dfd, tmp, 0600);
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    int ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f))
        ok = 0;
    if (ok && renameat(dfd, tmp, dfd, name))
        ok = 0;
    if (!ok) {
        int err = errno;
        if (fd >= 0)
            unlinkat(dfd, tmp, 0);
        close(dfd);
        prof_log_once(logged, LOG_WARN, "export: cannot write %s/%s: %s; further file errors are "
                      "counted in /api/v1/status", dir, name, strerror(err));
        pthread_mutex_lock(&exporter.lock);
        exporter.st.file_errors++;
        pthread_mutex_unlock(&exporter.lock);
        return;
    }
    /* Keep only the newest dir_keep files of ours: by name, in this directory, and only a file
     * of this user's (in a shared directory, never another user's of the same name). */
    if (!exporter.dir_ring)
        exporter.dir_ring = calloc((size_t)exporter.cfg.dir_keep, sizeof *exporter.dir_ring);
    if (exporter.dir_ring) {
        char **slot = &exporter.dir_ring[exporter.dir_next];
        struct stat st;
        if (*slot) {
            if (!fstatat(dfd, *slot, &st, AT_SYMLINK_NOFOLLOW) && st.st_uid == geteuid())
                unlinkat(dfd, *slot, 0);
            free(*slot);
        }
        *slot = strdup(name);
        exporter.dir_next = (exporter.dir_next + 1) % exporter.cfg.dir_keep;
    }
    close(dfd);
    pthread_mutex_lock(&exporter.lock);
    exporter.st.files++;
    pthread_mutex_unlock(&exporter.lock);
}

/* ------------------------------------------------------------------------------------------ */
/* The queue (clrscope-export thread; the lock only keeps the counters readable)              */

static void item_free(struct item *it)
{
    if (!it)
        return;
    free(it->pprof);
    free(it->event);
    free(it);
}

static size_t item_bytes(const struct item *it)
{
    return it->len + strlen(it->event);
}

/* Adds `it` at the back (newest) or, for a retry, at the front; when full the oldest goes. */
static void enqueue(struct item *it, int front)
{
    struct item *drop = NULL;
    pthread_mutex_lock(&exporter.lock);
    int cap = exporter.cfg.queue_cap;
    if (exporter.qlen == cap) {
        if (front) { /* the retried one is the oldest of all */
            drop = it;
            it = NULL;
        } else {
            drop = exporter.queue[exporter.qhead];
            exporter.qhead = (exporter.qhead + 1) % cap;
            exporter.qlen--;
            exporter.st.queue_bytes -= item_bytes(drop);
        }
        exporter.st.dropped_full++;
    }
    if (it) {
        if (front) {
            exporter.qhead = (exporter.qhead + cap - 1) % cap;
            exporter.queue[exporter.qhead] = it;
        } else {
            exporter.queue[(exporter.qhead + exporter.qlen) % cap] = it;
        }
        exporter.qlen++;
        exporter.st.queue_bytes += item_bytes(it);
    }
    pthread_mutex_unlock(&exporter.lock);
    item_free(drop);
}

static struct item *dequeue(void)
{
    pthread_mutex_lock(&exporter.lock);
    struct item *it = NULL;
    if (exporter.qlen) {
        it = exporter.queue[exporter.qhead];
        exporter.qhead = (exporter.qhead + 1) % exporter.cfg.queue_cap;
        exporter.qlen--;
        exporter.st.queue_bytes -= item_bytes(it);
    }
    pthread_mutex_unlock(&exporter.lock);
    return it;
}

/* Builds the profile of the seconds since the last one and hands it on. `final`: at stop, the
 * current (partial) second is included. */
static void export_window(int final)
{
    double now = prof_unix_now();
    int64_t to_s = final ? (int64_t)floor(now) : (int64_t)floor(now - BUILD_LAG_S) - 1;
    int64_t from_s = exporter.last_to_s + 1;
    if (to_s < from_s)
        return;
    int64_t oldest = (int64_t)floor(now) - g_cfg.history_s + 1;
    if (from_s < oldest)
        from_s = oldest;
    exporter.last_to_s = to_s;
    unsigned on = __atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED);
    unsigned char *built = NULL, *data = NULL;
    size_t len = 0;
    struct prof_scratch mem = {0}; /* the encoder's memory: the views, tables, zlib's state */
    int64_t t0 = prof_now_ns();
    double t_from = (double)from_s, t_to = final ? now : (double)(to_s + 1);
    int rc = dd_profile_build(from_s, to_s, t_to, on, exporter.cfg.structured_frames, &mem,
                              &built, &len);
    /* what is kept (the file, the queue) is the compressed profile alone, a fraction of what
     * building it took */
    if (rc == 0 && !(data = malloc(len ? len : 1)))
        rc = -1;
    if (rc == 0)
        memcpy(data, built, len);
    prof_scratch_release(&mem);
    if (rc) {
        static int logged;
        pthread_mutex_lock(&exporter.lock);
        if (rc > 0)
            exporter.st.empty++;
        else
            exporter.st.build_errors++;
        pthread_mutex_unlock(&exporter.lock);
        if (rc < 0)
            prof_log_once(logged, LOG_WARN, "export: building a profile failed (out of memory?); "
                          "that window is skipped, further failures are counted");
        return;
    }
    uint64_t seq = exporter.seq++;
    prof_log(LOG_DEBUG, "export: profile %llu covers %lld..%lld: %zu bytes built in %.1f ms",
             (unsigned long long)seq, (long long)from_s, (long long)to_s, len,
             (double)(prof_now_ns() - t0) / 1e6);
    pthread_mutex_lock(&exporter.lock);
    exporter.st.built++;
    pthread_mutex_unlock(&exporter.lock);
    if (exporter.files)
        write_file(data, len, t_to, seq);
    if (!exporter.uploading) {
        free(data);
        return;
    }
    struct item *it = calloc(1, sizeof *it);
    char *ev = dd_event_json(&exporter.cfg, t_from, t_to, on, seq);
    if (!it || !ev) {
        free(it);
        free(ev);
        free(data);
        pthread_mutex_lock(&exporter.lock);
        exporter.st.build_errors++;
        pthread_mutex_unlock(&exporter.lock);
        return;
    }
    it->pprof = data;
    it->len = len;
    it->event = ev;
    it->seq = seq;
    enqueue(it, 0);
}

/* ------------------------------------------------------------------------------------------ */
/* Uploads                                                                                     */

static size_t on_reply(char *ptr, size_t size, size_t n, void *ud)
{
    (void)ud;
    size_t bytes = size * n;
    /* an agent's answer is a few bytes: one that does not end would keep this thread reading
     * until the request's timeout; past REPLY_MAX the transfer stops (its status is known) */
    exporter.reply_total += bytes;
    if (exporter.reply_total > REPLY_MAX)
        return 0;
    size_t room = sizeof exporter.reply - 1 - exporter.reply_len;
    size_t take = bytes < room ? bytes : room;
    memcpy(exporter.reply + exporter.reply_len, ptr, take);
    exporter.reply_len += take;
    exporter.reply[exporter.reply_len] = 0;
    return bytes;
}

/* Aborts a transfer once stop's deadline has passed (the multi loop also enforces it). */
static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)ud;
    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    return exporter.deadline && prof_now_ns() > exporter.deadline;
}

static struct curl_slist *make_headers(void)
{
    const struct dd_config *c = &exporter.cfg;
    char line[400];
    struct curl_slist *h = NULL, *n;
    const char *fixed[] = {"Connection: close", "DD-EVP-ORIGIN: " ORIGIN,
                           "DD-EVP-ORIGIN-VERSION: " CLRSCOPE_VERSION,
                           "Expect:" /* no 100-continue round trip */};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        if (!(n = CU.slist_append(h, fixed[i])))
            goto fail;
        h = n;
    }
    const char *names[] = {"DD-API-KEY", "Datadog-Container-ID", "Datadog-Entity-ID",
                           "Datadog-External-Env"};
    const char *vals[] = {c->agentless ? c->api_key : "", c->container_id, c->entity_id,
                          c->external_env};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (!vals[i][0])
            continue;
        snprintf(line, sizeof line, "%s: %s", names[i], vals[i]);
        if (!(n = CU.slist_append(h, line)))
            goto fail;
        h = n;
    }
    return h;
fail:
    CU.slist_free_all(h);
    return NULL;
}

/* http and https only, by the option the loaded libcurl knows (CURLOPT_PROTOCOLS_STR is 7.85+;
 * the older one is deprecated in newer headers but is all an older library understands). */
static CURLcode restrict_protocols(CURL *e)
{
    if (CU.version_num >= 0x075500)
        return CU.easy_setopt(e, CURLOPT_PROTOCOLS_STR, "http,https");
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
    return CU.easy_setopt(e, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#pragma GCC diagnostic pop
}

/* The profile part's body, read by libcurl straight from the item in flight (which outlives
 * the request: end_request frees the request before the item is freed or queued again). */
static size_t body_read(char *buf, size_t size, size_t n, void *arg)
{
    struct body_reader *r = arg;
    size_t want = size * n, left = r->len - r->pos;
    if (want > left)
        want = left;
    memcpy(buf, r->p + r->pos, want);
    r->pos += want;
    return want;
}

/* libcurl rewinds a body it must send again (a connection reused and closed under it). */
static int body_seek(void *arg, curl_off_t off, int origin)
{
    struct body_reader *r = arg;
    curl_off_t base = origin == SEEK_SET ? 0 : origin == SEEK_CUR ? (curl_off_t)r->pos
                      : origin == SEEK_END ? (curl_off_t)r->len : -1;
    if (base < 0 || off < -base || base + off > (curl_off_t)r->len)
        return CURL_SEEKFUNC_FAIL;
    r->pos = (size_t)(base + off);
    return CURL_SEEKFUNC_OK;
}

static CURL *make_request(const struct item *it, long timeout_ms, curl_mime **mime_out)
{
    CURL *e = CU.easy_init();
    if (!e)
        return NULL;
    curl_mime *mime = CU.mime_init(e);
    curl_mimepart *p1 = mime ? CU.mime_addpart(mime) : NULL;
    curl_mimepart *p2 = mime ? CU.mime_addpart(mime) : NULL;
    int ok = p1 && p2 && !CU.mime_name(p1, "event") && !CU.mime_filename(p1, "event.json") &&
             !CU.mime_type(p1, "application/json") &&
             !CU.mime_data(p1, it->event, CURL_ZERO_TERMINATED) &&
             !CU.mime_name(p2, "profile.pprof") && !CU.mime_filename(p2, "profile.pprof") &&
             !CU.mime_type(p2, "application/octet-stream") &&
             !CU.mime_data_cb(p2, (curl_off_t)it->len, body_read, body_seek, NULL,
                              &exporter.body);
    exporter.body = (struct body_reader){.p = it->pprof, .len = it->len};
    ok = ok && !CU.easy_setopt(e, CURLOPT_URL, exporter.cfg.url);
    if (ok && exporter.cfg.unix_socket[0])
        ok = !CU.easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, exporter.cfg.unix_socket);
    ok = ok && !CU.easy_setopt(e, CURLOPT_MIMEPOST, mime) &&
         !CU.easy_setopt(e, CURLOPT_HTTPHEADER, exporter.headers) &&
         !CU.easy_setopt(e, CURLOPT_USERAGENT, "clrscope/" CLRSCOPE_VERSION) &&
         !restrict_protocols(e) &&
         !CU.easy_setopt(e, CURLOPT_NOSIGNAL, 1L) &&
         !CU.easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, (long)CONNECT_TIMEOUT_MS) &&
         !CU.easy_setopt(e, CURLOPT_TIMEOUT_MS, timeout_ms) &&
         !CU.easy_setopt(e, CURLOPT_WRITEFUNCTION, on_reply) &&
         !CU.easy_setopt(e, CURLOPT_NOPROGRESS, 0L) &&
         !CU.easy_setopt(e, CURLOPT_XFERINFOFUNCTION, on_progress);
    /* Aborting must not wait for a DNS lookup thread (7.87+). */
    if (ok && CU.version_num >= 0x075700)
        CU.easy_setopt(e, CURLOPT_QUICK_EXIT, 1L);
    if (!ok) {
        CU.mime_free(mime);
        CU.easy_cleanup(e);
        return NULL;
    }
    *mime_out = mime;
    return e;
}

static void end_request(void)
{
    if (!exporter.easy)
        return;
    CU.multi_remove_handle(exporter.multi, exporter.easy);
    CU.easy_cleanup(exporter.easy);
    CU.mime_free(exporter.mime);
    exporter.easy = NULL;
    exporter.mime = NULL;
}

static void start_upload(void)
{
    exporter.cur = dequeue();
    if (!exporter.cur)
        return;
    long timeout_ms = exporter.cfg.timeout_s * 1000L;
    if (exporter.deadline) {
        long left = (long)((exporter.deadline - prof_now_ns()) / 1000000);
        timeout_ms = left < 1 ? 1 : left < timeout_ms ? left : timeout_ms;
    }
    exporter.reply_len = exporter.reply_total = 0;
    exporter.reply[0] = 0;
    exporter.easy = make_request(exporter.cur, timeout_ms, &exporter.mime);
    if (!exporter.easy || CU.multi_add_handle(exporter.multi, exporter.easy)) {
        static int logged;
        prof_log_once(logged, LOG_WARN, "export: cannot set up an upload request (out of "
                      "memory?); retrying later");
        if (exporter.easy) {
            CU.easy_cleanup(exporter.easy);
            CU.mime_free(exporter.mime);
        }
        exporter.easy = NULL;
        exporter.mime = NULL;
        enqueue(exporter.cur, 1);
        exporter.cur = NULL;
        exporter.retry_at = prof_now_ns() + 1000000000LL;
        return;
    }
    pthread_mutex_lock(&exporter.lock);
    exporter.st.last_attempt = prof_unix_now();
    pthread_mutex_unlock(&exporter.lock);
}

/* Logs the first failure of each kind (curl code or HTTP status) once, saying what becomes of
 * the profile: sent again later, or dropped. */
static void log_failure(int kind, const char *what, const char *fate)
{
    if (kind < 0 || kind >= 640)
        kind = 639;
    uint64_t bit = 1ull << (kind % 64);
    if (exporter.logged[kind / 64] & bit) {
        prof_log(LOG_DEBUG, "export: upload failed again: %s", what);
        return;
    }
    exporter.logged[kind / 64] |= bit;
    prof_log(LOG_WARN, "export: upload to %s failed: %s; %s (further failures of this kind are "
             "only counted, see /api/v1/status)", exporter.cfg.endpoint, what, fate);
}

static void finish_upload(CURLcode rc)
{
    long http = 0;
    curl_off_t sent = 0, body = -1, retry_after = 0;
    CU.easy_getinfo(exporter.easy, CURLINFO_RESPONSE_CODE, &http);
    CU.easy_getinfo(exporter.easy, CURLINFO_SIZE_UPLOAD_T, &sent);
    CU.easy_getinfo(exporter.easy, CURLINFO_CONTENT_LENGTH_UPLOAD_T, &body); /* 7.55, -1: unknown */
    if (CU.version_num >= 0x074200) /* 7.66: Retry-After, in seconds (either of its forms) */
        CU.easy_getinfo(exporter.easy, CURLINFO_RETRY_AFTER, &retry_after);
    end_request();
    struct item *it = exporter.cur;
    exporter.cur = NULL;
    /* A final status came: it is the agent's verdict, whatever became of the rest of the
     * answer (cut at REPLY_MAX, or a connection closed, reset or timed out in its body). A 2xx
     * counted as a failure would say the profile was lost when the agent took it. */
    if (rc != CURLE_OK && http >= 200)
        rc = CURLE_OK;
    if (rc == CURLE_OK && http >= 200 && http < 300) {
        static int first, again;
        if (!first) {
            first = 1;
            prof_log(LOG_INFO, "export: first profile delivered to %s (HTTP %ld)",
                     exporter.cfg.endpoint, http);
        } else if (exporter.failing) {
            prof_log_once(again, LOG_INFO, "export: uploads to %s work again (later recoveries "
                          "are logged at debug level)", exporter.cfg.endpoint);
            prof_log(LOG_DEBUG, "export: uploads work again");
        }
        pthread_mutex_lock(&exporter.lock);
        exporter.st.uploads++;
        exporter.st.bytes_sent += (uint64_t)sent;
        exporter.st.last_upload = prof_unix_now();
        exporter.st.last_http = http;
        exporter.st.last_status[0] = 0;
        pthread_mutex_unlock(&exporter.lock);
        exporter.failing = 0;
        exporter.backoff_s = 0;
        exporter.retry_at = 0;
        item_free(it);
        return;
    }
    char what[sizeof exporter.st.last_error];
    if (rc != CURLE_OK)
        snprintf(what, sizeof what, "%s", CU.easy_strerror(rc));
    else
        snprintf(what, sizeof what, "HTTP %ld%s%.100s", http, exporter.reply[0] ? ": " : "",
                 exporter.reply);
    for (char *p = what; *p; p++)
        if ((unsigned char)*p < 0x20)
            *p = ' ';
    int retry = rc != CURLE_OK || http == 408 || http == 429 || http >= 500 || http < 200;
    /* the whole request went out but no answer came (a timeout, a reset, a close, a reply that
     * is no HTTP: an agent restarting, a proxy failing): the agent may well have taken it, and
     * sending it again would count its samples twice (the intake does not deduplicate) */
    /* "whole" is the body with its multipart framing, as curl counts `sent`; the two parts
     * alone (a lower bound) only when curl does not know it */
    uint64_t whole = body > 0 ? (uint64_t)body : (uint64_t)it->len + strlen(it->event);
    int unanswered = rc != CURLE_OK && (uint64_t)sent >= whole;
    if (unanswered)
        retry = 0;
    log_failure(rc != CURLE_OK ? (int)rc : (int)http, what,
                retry ? "the profile is sent again later, with backoff"
                : unanswered ? "the whole profile was sent: not sent again (it may have arrived)"
                             : "the agent refused it: dropped");
    pthread_mutex_lock(&exporter.lock);
    exporter.st.failures++;
    exporter.st.last_http = rc == CURLE_OK ? http : 0;
    snprintf(exporter.st.last_status, sizeof exporter.st.last_status, "%s",
             rc == CURLE_OK ? "" : what);
    snprintf(exporter.st.last_error, sizeof exporter.st.last_error, "%s", what);
    if (unanswered)
        exporter.st.dropped_unanswered++;
    else if (!retry)
        exporter.st.dropped_rejected++;
    pthread_mutex_unlock(&exporter.lock);
    exporter.failing = 1;
    if (!retry) {
        item_free(it);
        return;
    }
    int cap = exporter.cfg.period_s < 60 ? exporter.cfg.period_s : 60;
    exporter.backoff_s = exporter.backoff_s ? exporter.backoff_s * 2 : 1;
    if (exporter.backoff_s > cap)
        exporter.backoff_s = cap;
    /* the agent's Retry-After, when it asks for longer, up to 5 minutes (what arrives in the
     * meantime waits in the queue, whose oldest profiles go when it is full) */
    int wait_s = exporter.backoff_s;
    if (retry_after > wait_s)
        wait_s = retry_after < 300 ? (int)retry_after : 300;
    exporter.retry_at = prof_now_ns() + (int64_t)wait_s * 1000000000LL;
    enqueue(it, 1);
}

/* Runs the transfer in flight, if any; returns 1 when one finished. */
static int pump(void)
{
    if (!exporter.easy)
        return 0;
    int running = 0;
    CU.multi_perform(exporter.multi, &running);
    int done = 0;
    CURLMsg *m;
    int left;
    while ((m = CU.multi_info_read(exporter.multi, &left)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == exporter.easy) {
            finish_upload(m->data.result);
            done = 1;
        }
    return done;
}

/* Waits up to `ms` for the transfer's sockets or for stop. */
static void wait_ms(long ms)
{
    if (ms < 0)
        ms = 0;
    if (exporter.multi) {
        struct curl_waitfd w = {.fd = exporter.wake_fd, .events = CURL_WAIT_POLLIN};
        CU.multi_poll(exporter.multi, &w, 1, (int)ms, NULL);
    } else {
        struct pollfd p = {.fd = exporter.wake_fd, .events = POLLIN};
        poll(&p, 1, (int)ms);
    }
}

/* At stop: the last window, then at most FLUSH_MS for whatever is queued or in flight. */
static void flush(void)
{
    int64_t t0 = prof_now_ns();
    exporter.deadline = t0 + FLUSH_MS * 1000000LL;
    uint64_t drain;
    if (read(exporter.wake_fd, &drain, sizeof drain) < 0) {
        /* nothing to drain: stop was seen through the flag */
    }
    export_window(1);
    int64_t t1 = prof_now_ns();
    if (!exporter.multi)
        return;
    while (prof_now_ns() < exporter.deadline) {
        if (!exporter.easy && exporter.qlen)
            start_upload();
        if (!exporter.easy)
            break;
        if (pump()) {
            if (exporter.failing) /* the agent is not taking them: do not hold up the exit */
                break;
            continue;
        }
        wait_ms((long)((exporter.deadline - prof_now_ns()) / 1000000) + 1);
    }
    if (exporter.easy) {
        end_request();
        enqueue(exporter.cur, 1);
        exporter.cur = NULL;
    }
    prof_log(LOG_DEBUG, "export: stopped: last profile built in %.0f ms, uploads %.0f ms",
             (double)(t1 - t0) / 1e6, (double)(prof_now_ns() - t1) / 1e6);
}

static int init_curl(char *why, size_t cap)
{
    static int logged;
    snprintf(why, cap, "libcurl could not be initialised");
    if (curl_dl_load(why, cap)) {
        prof_log_once(logged, LOG_ERROR, "export: %s; profiles are not uploaded (the export "
                      "directory, if set, still gets them)", why);
        return -1;
    }
    if (CU.global_init(CURL_GLOBAL_DEFAULT)) {
        prof_log_once(logged, LOG_ERROR, "export: libcurl failed to initialise; profiles are "
                      "not uploaded");
        return -1;
    }
    const curl_version_info_data *v = CU.version_info(CURLVERSION_NOW);
    if (v && !(v->features & CURL_VERSION_THREADSAFE))
        prof_log(LOG_DEBUG, "export: libcurl %s is not built thread-safe; another libcurl user "
                 "initialising it at the same moment would race with us", v->version);
    exporter.multi = CU.multi_init();
    exporter.headers = make_headers();
    if (!exporter.multi || !exporter.headers) {
        prof_log_once(logged, LOG_ERROR, "export: out of memory setting up libcurl; profiles "
                      "are not uploaded");
        if (exporter.multi)
            CU.multi_cleanup(exporter.multi);
        exporter.multi = NULL;
        return -1;
    }
    return 0;
}

static void *export_main(void *arg)
{
    (void)arg;
    prof_name_thread("export");
    char why[sizeof exporter.st.last_error];
    if (exporter.uploading && init_curl(why, sizeof why)) {
        exporter.uploading = 0;
        pthread_mutex_lock(&exporter.lock);
        snprintf(exporter.st.last_error, sizeof exporter.st.last_error, "%s", why);
        snprintf(exporter.st.last_status, sizeof exporter.st.last_status, "%.*s",
                 (int)sizeof exporter.st.last_status - 1, exporter.st.last_error); /* cut to fit */
        pthread_mutex_unlock(&exporter.lock);
    }
    const int64_t period = (int64_t)exporter.cfg.period_s * 1000000000LL;
    int64_t next = prof_now_ns() + period;
    while (!stopping()) {
        int64_t now = prof_now_ns();
        if (now >= next) {
            export_window(0);
            next += period;
            now = prof_now_ns();
            if (next <= now)
                next = now + period;
        }
        if (exporter.multi) {
            if (!exporter.easy && exporter.qlen && now >= exporter.retry_at)
                start_upload();
            if (pump())
                continue; /* maybe the next one can go at once */
        }
        int64_t until = next;
        if (exporter.multi && !exporter.easy && exporter.qlen && exporter.retry_at < until)
            until = exporter.retry_at;
        wait_ms((long)((until - now + 999999) / 1000000));
    }
    flush();
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Public                                                                                      */

void prof_exporter_start(void)
{
    if (exporter.started)
        return;
    static struct dd_config cfg; /* status readers may already run: publish it under the lock */
    dd_config_load(&cfg, g_core.process_name);
    pthread_mutex_lock(&exporter.lock);
    exporter.cfg = cfg;
    pthread_mutex_unlock(&exporter.lock);
    exporter.uploading = exporter.cfg.enabled;
    exporter.files = exporter.cfg.output_dir[0] != 0;
    if (!exporter.uploading && !exporter.files)
        return;
    exporter.last_to_s = (int64_t)floor(g_core.start_unix) - 1;
    exporter.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (exporter.wake_fd < 0 || pthread_create(&exporter.thread, NULL, export_main, NULL)) {
        prof_log(LOG_ERROR, "export: cannot start the export thread (%s); profiles are not "
                 "exported", strerror(errno));
        if (exporter.wake_fd >= 0)
            close(exporter.wake_fd);
        exporter.wake_fd = -1;
        exporter.uploading = exporter.files = 0;
        return;
    }
    exporter.started = 1;
    if (exporter.cfg.period_s > g_cfg.history_s)
        prof_log(LOG_WARN, "export: DD_PROFILING_UPLOAD_PERIOD=%d is longer than the history "
                 "kept (CLRSCOPE_HISTORY_S=%d); each profile covers only its last %d s",
                 exporter.cfg.period_s, g_cfg.history_s, g_cfg.history_s);
    if (exporter.uploading)
        prof_log(LOG_INFO, "export: a profile every %d s to %s (service %s, env %s)",
                 exporter.cfg.period_s, exporter.cfg.endpoint, exporter.cfg.service,
                 exporter.cfg.env);
    if (exporter.files)
        prof_log(LOG_INFO, "export: a profile every %d s written to %s", exporter.cfg.period_s,
                 exporter.cfg.output_dir);
}

void prof_exporter_stop(void)
{
    if (!exporter.started)
        return;
    int64_t t0 = prof_now_ns();
    __atomic_store_n(&exporter.stop, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(exporter.wake_fd, &one, sizeof one) < 0) {
        /* the eventfd cannot be full after one write; the thread also polls the flag */
    }
    pthread_join(exporter.thread, NULL);
    exporter.started = 0;
    close(exporter.wake_fd);
    exporter.wake_fd = -1;
    /* libcurl stays initialised (other users may share it); the queue goes. */
    while (exporter.qlen)
        item_free(dequeue());
    if (exporter.multi)
        CU.multi_cleanup(exporter.multi);
    exporter.multi = NULL;
    if (exporter.headers) /* else libcurl may never have been loaded */
        CU.slist_free_all(exporter.headers);
    exporter.headers = NULL;
    if (exporter.dir_ring)
        for (int i = 0; i < exporter.cfg.dir_keep; i++)
            free(exporter.dir_ring[i]);
    free(exporter.dir_ring);
    exporter.dir_ring = NULL;
    prof_log(LOG_DEBUG, "export: stopped in %.0f ms", (double)(prof_now_ns() - t0) / 1e6);
}

static void add_time(cJSON *o, const char *key, double t)
{
    if (t > 0)
        cJSON_AddNumberToObject(o, key, t);
    else
        cJSON_AddNullToObject(o, key);
}

void prof_exporter_status_json(cJSON *obj)
{
    /* The lock also covers exporter.cfg being published at start; holding it here costs microseconds. */
    pthread_mutex_lock(&exporter.lock);
    const struct stats st = exporter.st;
    int qlen = exporter.qlen;
    const struct dd_config *c = &exporter.cfg;
    int on = exporter.uploading;
    cJSON_AddBoolToObject(obj, "enabled", on);
    if (!on && c->beside_datadog)
        cJSON_AddStringToObject(obj, "off_because", "Datadog's profiler exports from this process "
                                "(CLRSCOPE_EXPORT=1 to send from clrscope too)");
    if (on)
        cJSON_AddStringToObject(obj, "endpoint", c->endpoint);
    else
        cJSON_AddNullToObject(obj, "endpoint");
    cJSON_AddNumberToObject(obj, "period_s", c->period_s ? c->period_s : 60);
    add_time(obj, "last_upload", st.last_upload);
    if (st.last_http)
        cJSON_AddNumberToObject(obj, "last_status", (double)st.last_http);
    else if (st.last_status[0])
        cJSON_AddStringToObject(obj, "last_status", st.last_status);
    else
        cJSON_AddNullToObject(obj, "last_status");
    cJSON_AddNumberToObject(obj, "uploads", (double)st.uploads);
    cJSON_AddNumberToObject(obj, "failures", (double)st.failures);
    cJSON_AddNumberToObject(obj, "bytes_sent", (double)st.bytes_sent);
    cJSON_AddNumberToObject(obj, "dropped", (double)(st.dropped_full + st.dropped_rejected +
                                                     st.dropped_unanswered));
    cJSON_AddNumberToObject(obj, "queue", qlen);
    cJSON_AddNumberToObject(obj, "queue_cap", c->queue_cap);
    cJSON_AddNumberToObject(obj, "queue_bytes", (double)st.queue_bytes);
    cJSON *drops = cJSON_AddObjectToObject(obj, "drops");
    cJSON_AddNumberToObject(drops, "queue_full", (double)st.dropped_full);
    cJSON_AddNumberToObject(drops, "rejected", (double)st.dropped_rejected);
    cJSON_AddNumberToObject(drops, "unanswered", (double)st.dropped_unanswered);
    add_time(obj, "last_attempt", st.last_attempt);
    if (st.last_error[0])
        cJSON_AddStringToObject(obj, "last_error", st.last_error);
    else
        cJSON_AddNullToObject(obj, "last_error");
    cJSON_AddNumberToObject(obj, "profiles", (double)st.built);
    cJSON_AddNumberToObject(obj, "empty_windows", (double)st.empty);
    cJSON_AddNumberToObject(obj, "build_errors", (double)st.build_errors);
    if (exporter.started || on) {
        cJSON_AddBoolToObject(obj, "agentless", c->agentless);
        cJSON_AddStringToObject(obj, "service", c->service);
        cJSON_AddStringToObject(obj, "env", c->env);
        cJSON_AddStringToObject(obj, "version", c->version);
        cJSON_AddStringToObject(obj, "runtime_id", c->runtime_id);
        cJSON_AddStringToObject(obj, "frames", c->structured_frames ? "structured" : "plain");
    }
    if (exporter.files) {
        cJSON_AddStringToObject(obj, "export_dir", c->output_dir);
        cJSON_AddNumberToObject(obj, "files_written", (double)st.files);
        cJSON_AddNumberToObject(obj, "file_errors", (double)st.file_errors);
    } else {
        cJSON_AddNullToObject(obj, "export_dir");
    }
    pthread_mutex_unlock(&exporter.lock);
}

size_t prof_exporter_queue_bytes(void)
{
    pthread_mutex_lock(&exporter.lock);
    size_t b = exporter.st.queue_bytes;
    pthread_mutex_unlock(&exporter.lock);
    return b;
}

const struct prof_kind prof_exporter_kind = {
    .name = "export",
    .mem_bytes = prof_exporter_queue_bytes,
    .mem_name = "export_queue",
};
