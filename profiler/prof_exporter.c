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

static struct {
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
} X = {.wake_fd = -1, .lock = PTHREAD_MUTEX_INITIALIZER};

static int stopping(void)
{
    return __atomic_load_n(&X.stop, __ATOMIC_ACQUIRE);
}

/* ------------------------------------------------------------------------------------------ */
/* Files                                                                                       */

static void write_file(const unsigned char *data, size_t len, double t_to, uint64_t seq)
{
    static int logged;
    const char *dir = X.cfg.output_dir;
    char stamp[48], path[sizeof X.cfg.output_dir + 200], tmp[sizeof path + 8];
    time_t t = (time_t)t_to;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
    snprintf(path, sizeof path, "%s/%.60s_%d_%s_%06llu.pprof", dir, X.cfg.service,
             (int)g_core.pid, stamp, (unsigned long long)seq);
    for (char *p = path + strlen(dir) + 1; *p; p++)
        if (*p == '/')
            *p = '_';
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    int ok = prof_files_mkdirs(dir, 0755) == 0;
    int fd = ok ? prof_files_create(tmp, 0644) : -1;
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (fd >= 0 && !f)
        close(fd);
    ok = f && fwrite(data, 1, len, f) == len;
    if (f && fclose(f))
        ok = 0;
    if (ok && rename(tmp, path))
        ok = 0;
    if (!ok) {
        int err = errno;
        if (fd >= 0)
            unlink(tmp);
        prof_log_once(logged, LOG_WARN, "export: cannot write %s: %s; further file errors are "
                      "counted in /api/v1/status", path, strerror(err));
        pthread_mutex_lock(&X.lock);
        X.st.file_errors++;
        pthread_mutex_unlock(&X.lock);
        return;
    }
    /* Keep only the newest dir_keep files of ours. */
    if (!X.dir_ring)
        X.dir_ring = calloc((size_t)X.cfg.dir_keep, sizeof *X.dir_ring);
    if (X.dir_ring) {
        char **slot = &X.dir_ring[X.dir_next];
        if (*slot) {
            unlink(*slot);
            free(*slot);
        }
        *slot = strdup(path);
        X.dir_next = (X.dir_next + 1) % X.cfg.dir_keep;
    }
    pthread_mutex_lock(&X.lock);
    X.st.files++;
    pthread_mutex_unlock(&X.lock);
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
    pthread_mutex_lock(&X.lock);
    int cap = X.cfg.queue_cap;
    if (X.qlen == cap) {
        if (front) { /* the retried one is the oldest of all */
            drop = it;
            it = NULL;
        } else {
            drop = X.queue[X.qhead];
            X.qhead = (X.qhead + 1) % cap;
            X.qlen--;
            X.st.queue_bytes -= item_bytes(drop);
        }
        X.st.dropped_full++;
    }
    if (it) {
        if (front) {
            X.qhead = (X.qhead + cap - 1) % cap;
            X.queue[X.qhead] = it;
        } else {
            X.queue[(X.qhead + X.qlen) % cap] = it;
        }
        X.qlen++;
        X.st.queue_bytes += item_bytes(it);
    }
    pthread_mutex_unlock(&X.lock);
    item_free(drop);
}

static struct item *dequeue(void)
{
    pthread_mutex_lock(&X.lock);
    struct item *it = NULL;
    if (X.qlen) {
        it = X.queue[X.qhead];
        X.qhead = (X.qhead + 1) % X.cfg.queue_cap;
        X.qlen--;
        X.st.queue_bytes -= item_bytes(it);
    }
    pthread_mutex_unlock(&X.lock);
    return it;
}

/* Builds the profile of the seconds since the last one and hands it on. `final`: at stop, the
 * current (partial) second is included. */
static void export_window(int final)
{
    double now = prof_unix_now();
    int64_t to_s = final ? (int64_t)floor(now) : (int64_t)floor(now - BUILD_LAG_S) - 1;
    int64_t from_s = X.last_to_s + 1;
    if (to_s < from_s)
        return;
    int64_t oldest = (int64_t)floor(now) - g_cfg.history_s + 1;
    if (from_s < oldest)
        from_s = oldest;
    X.last_to_s = to_s;
    unsigned on = __atomic_load_n(&g_core.profiles, __ATOMIC_RELAXED);
    unsigned char *data = NULL;
    size_t len = 0;
    int64_t t0 = prof_now_ns();
    double t_from = (double)from_s, t_to = final ? now : (double)(to_s + 1);
    int rc = dd_profile_build(from_s, to_s, t_to, on, X.cfg.structured_frames, &data, &len);
    if (rc) {
        static int logged;
        pthread_mutex_lock(&X.lock);
        if (rc > 0)
            X.st.empty++;
        else
            X.st.build_errors++;
        pthread_mutex_unlock(&X.lock);
        if (rc < 0)
            prof_log_once(logged, LOG_WARN, "export: building a profile failed (out of memory?); "
                          "that window is skipped, further failures are counted");
        return;
    }
    uint64_t seq = X.seq++;
    prof_log(LOG_DEBUG, "export: profile %llu covers %lld..%lld: %zu bytes built in %.1f ms",
             (unsigned long long)seq, (long long)from_s, (long long)to_s, len,
             (double)(prof_now_ns() - t0) / 1e6);
    pthread_mutex_lock(&X.lock);
    X.st.built++;
    pthread_mutex_unlock(&X.lock);
    if (X.files)
        write_file(data, len, t_to, seq);
    if (!X.uploading) {
        free(data);
        return;
    }
    struct item *it = calloc(1, sizeof *it);
    char *ev = dd_event_json(&X.cfg, t_from, t_to, on, seq);
    if (!it || !ev) {
        free(it);
        free(ev);
        free(data);
        pthread_mutex_lock(&X.lock);
        X.st.build_errors++;
        pthread_mutex_unlock(&X.lock);
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
    X.reply_total += bytes;
    if (X.reply_total > REPLY_MAX)
        return 0;
    size_t room = sizeof X.reply - 1 - X.reply_len;
    size_t take = bytes < room ? bytes : room;
    memcpy(X.reply + X.reply_len, ptr, take);
    X.reply_len += take;
    X.reply[X.reply_len] = 0;
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
    return X.deadline && prof_now_ns() > X.deadline;
}

static struct curl_slist *make_headers(void)
{
    const struct dd_config *c = &X.cfg;
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
             !CU.mime_data(p2, (const char *)it->pprof, it->len);
    ok = ok && !CU.easy_setopt(e, CURLOPT_URL, X.cfg.url);
    if (ok && X.cfg.unix_socket[0])
        ok = !CU.easy_setopt(e, CURLOPT_UNIX_SOCKET_PATH, X.cfg.unix_socket);
    ok = ok && !CU.easy_setopt(e, CURLOPT_MIMEPOST, mime) &&
         !CU.easy_setopt(e, CURLOPT_HTTPHEADER, X.headers) &&
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
    if (!X.easy)
        return;
    CU.multi_remove_handle(X.multi, X.easy);
    CU.easy_cleanup(X.easy);
    CU.mime_free(X.mime);
    X.easy = NULL;
    X.mime = NULL;
}

static void start_upload(void)
{
    X.cur = dequeue();
    if (!X.cur)
        return;
    long timeout_ms = X.cfg.timeout_s * 1000L;
    if (X.deadline) {
        long left = (long)((X.deadline - prof_now_ns()) / 1000000);
        timeout_ms = left < 1 ? 1 : left < timeout_ms ? left : timeout_ms;
    }
    X.reply_len = X.reply_total = 0;
    X.reply[0] = 0;
    X.easy = make_request(X.cur, timeout_ms, &X.mime);
    if (!X.easy || CU.multi_add_handle(X.multi, X.easy)) {
        static int logged;
        prof_log_once(logged, LOG_WARN, "export: cannot set up an upload request (out of "
                      "memory?); retrying later");
        if (X.easy) {
            CU.easy_cleanup(X.easy);
            CU.mime_free(X.mime);
        }
        X.easy = NULL;
        X.mime = NULL;
        enqueue(X.cur, 1);
        X.cur = NULL;
        X.retry_at = prof_now_ns() + 1000000000LL;
        return;
    }
    pthread_mutex_lock(&X.lock);
    X.st.last_attempt = prof_unix_now();
    pthread_mutex_unlock(&X.lock);
}

/* Logs the first failure of each kind (curl code or HTTP status) once, saying what becomes of
 * the profile: sent again later, or dropped. */
static void log_failure(int kind, const char *what, const char *fate)
{
    if (kind < 0 || kind >= 640)
        kind = 639;
    uint64_t bit = 1ull << (kind % 64);
    if (X.logged[kind / 64] & bit) {
        prof_log(LOG_DEBUG, "export: upload failed again: %s", what);
        return;
    }
    X.logged[kind / 64] |= bit;
    prof_log(LOG_WARN, "export: upload to %s failed: %s; %s (further failures of this kind are "
             "only counted, see /api/v1/status)", X.cfg.endpoint, what, fate);
}

static void finish_upload(CURLcode rc)
{
    long http = 0;
    curl_off_t sent = 0, body = -1, retry_after = 0;
    CU.easy_getinfo(X.easy, CURLINFO_RESPONSE_CODE, &http);
    CU.easy_getinfo(X.easy, CURLINFO_SIZE_UPLOAD_T, &sent);
    CU.easy_getinfo(X.easy, CURLINFO_CONTENT_LENGTH_UPLOAD_T, &body); /* 7.55, -1: unknown */
    if (CU.version_num >= 0x074200) /* 7.66: Retry-After, in seconds (either of its forms) */
        CU.easy_getinfo(X.easy, CURLINFO_RETRY_AFTER, &retry_after);
    end_request();
    struct item *it = X.cur;
    X.cur = NULL;
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
                     X.cfg.endpoint, http);
        } else if (X.failing) {
            prof_log_once(again, LOG_INFO, "export: uploads to %s work again (later recoveries "
                          "are logged at debug level)", X.cfg.endpoint);
            prof_log(LOG_DEBUG, "export: uploads work again");
        }
        pthread_mutex_lock(&X.lock);
        X.st.uploads++;
        X.st.bytes_sent += (uint64_t)sent;
        X.st.last_upload = prof_unix_now();
        X.st.last_http = http;
        X.st.last_status[0] = 0;
        pthread_mutex_unlock(&X.lock);
        X.failing = 0;
        X.backoff_s = 0;
        X.retry_at = 0;
        item_free(it);
        return;
    }
    char what[sizeof X.st.last_error];
    if (rc != CURLE_OK)
        snprintf(what, sizeof what, "%s", CU.easy_strerror(rc));
    else
        snprintf(what, sizeof what, "HTTP %ld%s%.100s", http, X.reply[0] ? ": " : "", X.reply);
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
    pthread_mutex_lock(&X.lock);
    X.st.failures++;
    X.st.last_http = rc == CURLE_OK ? http : 0;
    snprintf(X.st.last_status, sizeof X.st.last_status, "%s", rc == CURLE_OK ? "" : what);
    snprintf(X.st.last_error, sizeof X.st.last_error, "%s", what);
    if (unanswered)
        X.st.dropped_unanswered++;
    else if (!retry)
        X.st.dropped_rejected++;
    pthread_mutex_unlock(&X.lock);
    X.failing = 1;
    if (!retry) {
        item_free(it);
        return;
    }
    int cap = X.cfg.period_s < 60 ? X.cfg.period_s : 60;
    X.backoff_s = X.backoff_s ? X.backoff_s * 2 : 1;
    if (X.backoff_s > cap)
        X.backoff_s = cap;
    /* the agent's Retry-After, when it asks for longer, up to 5 minutes (what arrives in the
     * meantime waits in the queue, whose oldest profiles go when it is full) */
    int wait_s = X.backoff_s;
    if (retry_after > wait_s)
        wait_s = retry_after < 300 ? (int)retry_after : 300;
    X.retry_at = prof_now_ns() + (int64_t)wait_s * 1000000000LL;
    enqueue(it, 1);
}

/* Runs the transfer in flight, if any; returns 1 when one finished. */
static int pump(void)
{
    if (!X.easy)
        return 0;
    int running = 0;
    CU.multi_perform(X.multi, &running);
    int done = 0;
    CURLMsg *m;
    int left;
    while ((m = CU.multi_info_read(X.multi, &left)))
        if (m->msg == CURLMSG_DONE && m->easy_handle == X.easy) {
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
    if (X.multi) {
        struct curl_waitfd w = {.fd = X.wake_fd, .events = CURL_WAIT_POLLIN};
        CU.multi_poll(X.multi, &w, 1, (int)ms, NULL);
    } else {
        struct pollfd p = {.fd = X.wake_fd, .events = POLLIN};
        poll(&p, 1, (int)ms);
    }
}

/* At stop: the last window, then at most FLUSH_MS for whatever is queued or in flight. */
static void flush(void)
{
    int64_t t0 = prof_now_ns();
    X.deadline = t0 + FLUSH_MS * 1000000LL;
    uint64_t drain;
    if (read(X.wake_fd, &drain, sizeof drain) < 0) {
        /* nothing to drain: stop was seen through the flag */
    }
    export_window(1);
    int64_t t1 = prof_now_ns();
    if (!X.multi)
        return;
    while (prof_now_ns() < X.deadline) {
        if (!X.easy && X.qlen)
            start_upload();
        if (!X.easy)
            break;
        if (pump()) {
            if (X.failing) /* the agent is not taking them: do not hold up the exit */
                break;
            continue;
        }
        wait_ms((long)((X.deadline - prof_now_ns()) / 1000000) + 1);
    }
    if (X.easy) {
        end_request();
        enqueue(X.cur, 1);
        X.cur = NULL;
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
    X.multi = CU.multi_init();
    X.headers = make_headers();
    if (!X.multi || !X.headers) {
        prof_log_once(logged, LOG_ERROR, "export: out of memory setting up libcurl; profiles "
                      "are not uploaded");
        if (X.multi)
            CU.multi_cleanup(X.multi);
        X.multi = NULL;
        return -1;
    }
    return 0;
}

static void *export_main(void *arg)
{
    (void)arg;
    prof_name_thread("export");
    char why[sizeof X.st.last_error];
    if (X.uploading && init_curl(why, sizeof why)) {
        X.uploading = 0;
        pthread_mutex_lock(&X.lock);
        snprintf(X.st.last_error, sizeof X.st.last_error, "%s", why);
        snprintf(X.st.last_status, sizeof X.st.last_status, "%.*s",
                 (int)sizeof X.st.last_status - 1, X.st.last_error); /* cut to fit */
        pthread_mutex_unlock(&X.lock);
    }
    const int64_t period = (int64_t)X.cfg.period_s * 1000000000LL;
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
        if (X.multi) {
            if (!X.easy && X.qlen && now >= X.retry_at)
                start_upload();
            if (pump())
                continue; /* maybe the next one can go at once */
        }
        int64_t until = next;
        if (X.multi && !X.easy && X.qlen && X.retry_at < until)
            until = X.retry_at;
        wait_ms((long)((until - now + 999999) / 1000000));
    }
    flush();
    return NULL;
}

/* ------------------------------------------------------------------------------------------ */
/* Public                                                                                      */

void prof_exporter_start(void)
{
    if (X.started)
        return;
    static struct dd_config cfg; /* status readers may already run: publish it under the lock */
    dd_config_load(&cfg, g_core.process_name);
    pthread_mutex_lock(&X.lock);
    X.cfg = cfg;
    pthread_mutex_unlock(&X.lock);
    X.uploading = X.cfg.enabled;
    X.files = X.cfg.output_dir[0] != 0;
    if (!X.uploading && !X.files)
        return;
    X.last_to_s = (int64_t)floor(g_core.start_unix) - 1;
    X.wake_fd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    if (X.wake_fd < 0 || pthread_create(&X.thread, NULL, export_main, NULL)) {
        prof_log(LOG_ERROR, "export: cannot start the export thread (%s); profiles are not "
                 "exported", strerror(errno));
        if (X.wake_fd >= 0)
            close(X.wake_fd);
        X.wake_fd = -1;
        X.uploading = X.files = 0;
        return;
    }
    X.started = 1;
    if (X.cfg.period_s > g_cfg.history_s)
        prof_log(LOG_WARN, "export: DD_PROFILING_UPLOAD_PERIOD=%d is longer than the history "
                 "kept (CLRSCOPE_HISTORY_S=%d); each profile covers only its last %d s",
                 X.cfg.period_s, g_cfg.history_s, g_cfg.history_s);
    if (X.uploading)
        prof_log(LOG_INFO, "export: a profile every %d s to %s (service %s, env %s)",
                 X.cfg.period_s, X.cfg.endpoint, X.cfg.service, X.cfg.env);
    if (X.files)
        prof_log(LOG_INFO, "export: a profile every %d s written to %s", X.cfg.period_s,
                 X.cfg.output_dir);
}

void prof_exporter_stop(void)
{
    if (!X.started)
        return;
    int64_t t0 = prof_now_ns();
    __atomic_store_n(&X.stop, 1, __ATOMIC_RELEASE);
    uint64_t one = 1;
    if (write(X.wake_fd, &one, sizeof one) < 0) {
        /* the eventfd cannot be full after one write; the thread also polls the flag */
    }
    pthread_join(X.thread, NULL);
    X.started = 0;
    close(X.wake_fd);
    X.wake_fd = -1;
    /* libcurl stays initialised (other users may share it); the queue goes. */
    while (X.qlen)
        item_free(dequeue());
    if (X.multi)
        CU.multi_cleanup(X.multi);
    X.multi = NULL;
    if (X.headers) /* else libcurl may never have been loaded */
        CU.slist_free_all(X.headers);
    X.headers = NULL;
    if (X.dir_ring)
        for (int i = 0; i < X.cfg.dir_keep; i++)
            free(X.dir_ring[i]);
    free(X.dir_ring);
    X.dir_ring = NULL;
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
    /* The lock also covers X.cfg being published at start; holding it here costs microseconds. */
    pthread_mutex_lock(&X.lock);
    const struct stats st = X.st;
    int qlen = X.qlen;
    const struct dd_config *c = &X.cfg;
    int on = X.uploading;
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
    if (X.started || on) {
        cJSON_AddBoolToObject(obj, "agentless", c->agentless);
        cJSON_AddStringToObject(obj, "service", c->service);
        cJSON_AddStringToObject(obj, "env", c->env);
        cJSON_AddStringToObject(obj, "version", c->version);
        cJSON_AddStringToObject(obj, "runtime_id", c->runtime_id);
        cJSON_AddStringToObject(obj, "frames", c->structured_frames ? "structured" : "plain");
    }
    if (X.files) {
        cJSON_AddStringToObject(obj, "export_dir", c->output_dir);
        cJSON_AddNumberToObject(obj, "files_written", (double)st.files);
        cJSON_AddNumberToObject(obj, "file_errors", (double)st.file_errors);
    } else {
        cJSON_AddNullToObject(obj, "export_dir");
    }
    pthread_mutex_unlock(&X.lock);
}

size_t prof_exporter_queue_bytes(void)
{
    pthread_mutex_lock(&X.lock);
    size_t b = X.st.queue_bytes;
    pthread_mutex_unlock(&X.lock);
    return b;
}

const struct prof_kind prof_exporter_kind = {
    .name = "export",
    .mem_bytes = prof_exporter_queue_bytes,
    .mem_name = "export_queue",
};
