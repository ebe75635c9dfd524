/*
 * api_threads.c - thread dumps (prof_tdump): GET /api/v1/threads as JSON, and
 * /debug/pprof/threads (alias goroutine, Go's name) as pprof (debug=0), stacks grouped as text
 * (debug=1) or each thread's stack as text (debug=2), as Go serves its goroutine dump.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "api.h"
#include "api_json.h"
#include "pprof_encoder.h"
#include "prof_core.h"
#include "prof_counters.h"
#include "prof_tdump.h"
#include "prof_threads.h"

#define TAKE_TIMEOUT_MS 3000

const char *api_thread_state_name(char s)
{
    switch (s) {
    case 'R':
        return "running";
    case 'S':
        return "sleeping";
    case 'D':
        return "disk-wait";
    case 'T':
    case 't':
        return "stopped";
    case 'Z':
        return "zombie";
    case 'X':
    case 'x':
        return "dead";
    case 'I':
        return "idle";
    default:
        return "unknown";
    }
}

/* Takes (or reuses) a dump; NULL with a 503 in `out` when there is none. HEAD is answered from
 * the newest dump, whatever its age: a probe's HEAD does not stop the world. */
static struct prof_tdump *take(const struct api_req *q, struct api_reply *out)
{
    struct prof_tdump *d = NULL;
    const char *why = NULL;
    int rc = prof_tdump_take(TAKE_TIMEOUT_MS, !strcmp(q->method, "HEAD"), &d, &why);
    if (rc == TDUMP_OK)
        return d;
    api_reply_error(out, 503, "no thread dump: %s", why ? why : "unknown reason");
    return NULL;
}

static void tb_str(struct jbuf *b, const char *s)
{
    jb_raw(b, s, strlen(s));
}

/* Text the app chose (thread names) or its metadata holds (frame names), for a terminal: control
 * bytes become '?', so a thread named with escape sequences cannot drive the reader's terminal. */
static void tb_text(struct jbuf *b, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != 0x7f)
            continue;
        jb_raw(b, run, (size_t)(s - run));
        jb_raw(b, "?", 1);
        run = s + 1;
    }
    jb_raw(b, run, (size_t)(s - run));
}

static void iso_time(double t, char *out, size_t cap)
{
    time_t s = (time_t)t;
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(out, cap, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* The threads of group g are d->threads[first .. first + count). */
static uint32_t group_start(const struct prof_tdump *d, uint32_t g)
{
    uint32_t lo = 0, hi = d->nthreads;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (d->threads[mid].group < g)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static const struct prof_tdump_thread *find_tid(const struct prof_tdump *d, uint64_t tid)
{
    for (uint32_t i = 0; i < d->nthreads; i++)
        if (d->threads[i].tid == tid)
            return &d->threads[i];
    return NULL;
}

/* The owner's name: from the dump, else the thread registry (a thread that is not managed). */
static const char *owner_name(const struct prof_tdump *d, uint64_t owner, char *buf, size_t cap)
{
    buf[0] = 0;
    if (!owner || owner > UINT32_MAX)
        return buf;
    const struct prof_tdump_thread *o = find_tid(d, owner);
    if (o) {
        snprintf(buf, cap, "%s", o->name);
        return buf;
    }
    return prof_threads_name_of((uint32_t)owner, buf, cap);
}

/* The threads of deadlock `k` in wait order (each waits for a lock the next one holds), at most
 * `cap` (d->nthreads holds any cycle); returns how many. */
static uint32_t cycle_of(const struct prof_tdump *d, uint32_t k, const struct prof_tdump_thread **out,
                         uint32_t cap)
{
    const struct prof_tdump_thread *start = NULL;
    for (uint32_t i = 0; i < d->nthreads && !start; i++)
        if (d->threads[i].deadlock == k)
            start = &d->threads[i];
    uint32_t n = 0;
    for (const struct prof_tdump_thread *t = start; t && n < cap; t = find_tid(d, t->lock_owner)) {
        if (n && t == start)
            break;
        out[n++] = t;
    }
    return n;
}


/* The runtime's latest threadpool-queue-length counter: work items waiting for a pool thread;
 * -1 when the counters are off or have not come yet. */
static double queue_length(void)
{
    struct prof_counter *c = malloc(PROF_COUNTERS_MAX * sizeof *c);
    double v = -1;
    if (!c)
        return v;
    int n = prof_counters_snapshot(c, PROF_COUNTERS_MAX);
    for (int i = 0; i < n; i++)
        if (!strcmp(c[i].name, "threadpool-queue-length"))
            v = c[i].value;
    free(c);
    return v;
}

int api_threads(const struct api_req *q, struct api_reply *out)
{
    struct prof_tdump *d = take(q, out);
    if (!d)
        return 503;
    struct jbuf b;
    jb_init(&b, 64u << 20);
    jb_lit(&b, "{\"t\":");
    jb_num(&b, d->t_unix);
    jb_lit(&b, ",\"age_s\":");
    jb_num(&b, (double)(prof_now_ns() - d->t_mono_ns) / 1e9);
    jb_lit(&b, ",\"seq\":");
    jb_int(&b, (int64_t)d->seq);
    jb_lit(&b, ",\"suspend_ms\":");
    jb_num(&b, (double)d->suspend_ns / 1e6);
    jb_lit(&b, ",\"threads_total\":");
    jb_int(&b, d->nthreads);
    jb_lit(&b, ",\"omitted\":");
    jb_int(&b, d->omitted);
    uint32_t by_state[8] = {0};
    static const char letters[] = "RSDTZXI?";
    for (uint32_t i = 0; i < d->nthreads; i++) {
        char st = d->threads[i].state;
        const char *p = strchr(letters, st == 't' ? 'T' : st == 'x' ? 'X' : st);
        by_state[p && *p ? p - letters : 7]++;
    }
    jb_lit(&b, ",\"states\":{");
    int first = 1;
    for (int k = 0; k < 8; k++) {
        if (!by_state[k])
            continue;
        if (!first)
            jb_lit(&b, ",");
        first = 0;
        jb_str(&b, api_thread_state_name(letters[k]));
        jb_lit(&b, ":");
        jb_int(&b, by_state[k]);
    }
    struct prof_tdump_pool pool;
    prof_tdump_pool(d, &pool);
    double ql = queue_length();
    jb_lit(&b, "},\"thread_pool\":{\"workers\":");
    jb_int(&b, pool.workers);
    jb_lit(&b, ",\"idle\":");
    jb_int(&b, pool.idle);
    jb_lit(&b, ",\"busy\":");
    jb_int(&b, pool.busy);
    jb_lit(&b, ",\"blocked\":");
    jb_int(&b, pool.blocked);
    jb_lit(&b, ",\"queue_length\":");
    if (ql >= 0)
        jb_num(&b, ql);
    else
        jb_lit(&b, "null");
    jb_lit(&b, ",\"starvation_likely\":");
    jb_raw(&b, pool.starvation_likely ? "true" : "false", pool.starvation_likely ? 4 : 5);
    jb_lit(&b, ",\"blocked_at\":[");
    for (uint32_t i = 0; i < pool.nsites; i++) {
        if (i)
            jb_lit(&b, ",");
        jb_lit(&b, "{\"frame\":");
        jb_str(&b, pool.site[i]);
        jb_lit(&b, ",\"count\":");
        jb_int(&b, pool.site_count[i]);
        jb_lit(&b, "}");
    }
    jb_lit(&b, "]},\"deadlocks\":[");
    const struct prof_tdump_thread **cyc =
        prof_scratch_calloc(&b.mem, d->nthreads ? d->nthreads : 1, sizeof *cyc);
    for (uint32_t k = 1; cyc && k <= d->ndeadlocks; k++) {
        uint32_t m = cycle_of(d, k, cyc, d->nthreads);
        if (k > 1)
            jb_lit(&b, ",");
        jb_lit(&b, "{\"threads\":[");
        for (uint32_t i = 0; i < m; i++) {
            char lock[32];
            snprintf(lock, sizeof lock, "0x%llx", (unsigned long long)cyc[i]->lock_id);
            if (i)
                jb_lit(&b, ",");
            jb_lit(&b, "{\"tid\":");
            jb_int(&b, cyc[i]->tid);
            jb_lit(&b, ",\"name\":");
            jb_str(&b, cyc[i]->name);
            jb_lit(&b, ",\"waits_for_lock\":");
            jb_str(&b, lock);
            jb_lit(&b, ",\"held_by\":");
            jb_int(&b, (int64_t)cyc[i]->lock_owner);
            jb_lit(&b, "}");
        }
        jb_lit(&b, "]}");
    }
    prof_scratch_free(&b.mem, cyc);
    jb_lit(&b, "],\"groups\":[");
    uint32_t t = 0;
    for (uint32_t g = 0; g < d->ngroups; g++) {
        const struct prof_tdump_group *gr = &d->groups[g];
        if (g)
            jb_lit(&b, ",");
        jb_lit(&b, "{\"count\":");
        jb_int(&b, gr->nthreads);
        jb_lit(&b, ",\"truncated\":");
        jb_raw(&b, gr->truncated ? "true" : "false", gr->truncated ? 4 : 5);
        jb_lit(&b, ",\"frames\":[");
        for (uint32_t f = 0; f < gr->nframes; f++) {
            if (f)
                jb_lit(&b, ",");
            jb_str(&b, d->frames[gr->first_frame + f]);
        }
        jb_lit(&b, "],\"threads\":[");
        for (uint32_t k = 0; t < d->nthreads && d->threads[t].group == g; t++, k++) {
            const struct prof_tdump_thread *th = &d->threads[t];
            if (k)
                jb_lit(&b, ",");
            jb_lit(&b, "{\"tid\":");
            jb_int(&b, th->tid);
            jb_lit(&b, ",\"name\":");
            jb_str(&b, th->name);
            jb_lit(&b, ",\"state\":");
            jb_str(&b, api_thread_state_name(th->state));
            jb_lit(&b, ",\"cpu_s\":");
            if (th->cpu_ns >= 0)
                jb_num(&b, (double)th->cpu_ns / 1e9);
            else
                jb_lit(&b, "null");
            if (th->wait_ns) {
                char lock[32], oname[48];
                snprintf(lock, sizeof lock, "0x%llx", (unsigned long long)th->lock_id);
                jb_lit(&b, ",\"waiting_for\":{\"lock\":");
                jb_str(&b, lock);
                jb_lit(&b, ",\"owner_tid\":");
                if (th->lock_owner && th->lock_owner <= UINT32_MAX)
                    jb_int(&b, (int64_t)th->lock_owner);
                else
                    jb_lit(&b, "null");
                jb_lit(&b, ",\"owner_name\":");
                jb_str(&b, owner_name(d, th->lock_owner, oname, sizeof oname));
                jb_lit(&b, ",\"for_s\":");
                jb_num(&b, (double)th->wait_ns / 1e9);
                jb_lit(&b, "}");
            }
            if (th->deadlock) {
                jb_lit(&b, ",\"deadlock\":");
                jb_int(&b, th->deadlock);
            }
            jb_lit(&b, "}");
        }
        jb_lit(&b, "]}");
    }
    jb_lit(&b, "]}");
    prof_tdump_release(d);
    return api_reply_jbuf(out, 200, API_JSON, &b, "thread dump too large");
}

static void text_thread_name(struct jbuf *b, uint64_t tid, const char *name)
{
    jb_printf(b, "%llu", (unsigned long long)tid);
    if (name && name[0]) {
        tb_str(b, " \"");
        tb_text(b, name);
        tb_str(b, "\"");
    }
}

/* A group's stack, leaf first, one frame a line after `prefix`, then a blank line. */
static void text_stack(struct jbuf *b, const struct prof_tdump *d,
                       const struct prof_tdump_group *gr, const char *prefix)
{
    for (uint32_t f = 0; f < gr->nframes; f++) {
        tb_str(b, prefix);
        tb_text(b, d->frames[gr->first_frame + f]);
        tb_str(b, "\n");
    }
    if (gr->truncated) {
        tb_str(b, prefix);
        tb_str(b, "[truncated]\n");
    }
    tb_str(b, "\n");
}

static void text_wait(struct jbuf *b, const struct prof_tdump *d,
                      const struct prof_tdump_thread *th)
{
    char oname[48];
    jb_printf(b, "waiting %.3f s for lock 0x%llx", (double)th->wait_ns / 1e9,
              (unsigned long long)th->lock_id);
    if (th->lock_owner && th->lock_owner <= UINT32_MAX) {
        tb_str(b, " held by thread ");
        text_thread_name(b, th->lock_owner, owner_name(d, th->lock_owner, oname, sizeof oname));
    }
}

static void text_header(struct jbuf *b, const struct prof_tdump *d, const char *what)
{
    char when[32];
    iso_time(d->t_unix, when, sizeof when);
    jb_printf(b, "threads %s: total %u in %u stacks", what, d->nthreads, d->ngroups);
    if (d->omitted)
        jb_printf(b, " (%u more omitted: CLRSCOPE_MAX_THREADS)", d->omitted);
    jb_printf(b, "; pid %d, .NET %s, taken %s (runtime suspended %.2f ms)\n\n", (int)g_core.pid,
              g_core.runtime_version, when, (double)d->suspend_ns / 1e6);
    struct prof_tdump_pool pool;
    prof_tdump_pool(d, &pool);
    if (pool.workers) {
        double ql = queue_length();
        jb_printf(b, "thread pool: %u workers, %u idle, %u running work items (%u of them blocked)",
                  pool.workers, pool.idle, pool.busy, pool.blocked);
        if (ql >= 0)
            jb_printf(b, ", %.0f items queued", ql);
        tb_str(b, "\n");
        if (pool.starvation_likely)
            tb_str(b, "THREAD POOL STARVATION likely: no worker is idle and most are blocked in "
                      "their work item; work queued now waits for the pool to add threads\n");
        for (uint32_t i = 0; i < pool.nsites; i++) {
            jb_printf(b, "  %u blocked at ", pool.site_count[i]);
            tb_text(b, pool.site[i]);
            tb_str(b, "\n");
        }
        tb_str(b, "\n");
    }
    const struct prof_tdump_thread **cyc =
        prof_scratch_calloc(&b->mem, d->nthreads ? d->nthreads : 1, sizeof *cyc);
    for (uint32_t k = 1; cyc && k <= d->ndeadlocks; k++) {
        uint32_t m = cycle_of(d, k, cyc, d->nthreads);
        jb_printf(b, "DEADLOCK %u of %u: %u threads, each waiting for a lock the next one holds\n",
                  k, d->ndeadlocks, m);
        for (uint32_t i = 0; i < m; i++) {
            tb_str(b, "  thread ");
            text_thread_name(b, cyc[i]->tid, cyc[i]->name);
            tb_str(b, " ");
            text_wait(b, d, cyc[i]);
            tb_str(b, "\n");
        }
        tb_str(b, "\n");
    }
    prof_scratch_free(&b->mem, cyc);
}

/* debug=1: one entry per distinct stack, with how many threads, their names and states. */
static void text_grouped(struct jbuf *b, const struct prof_tdump *d)
{
    text_header(b, d, "profile");
    for (uint32_t g = 0; g < d->ngroups; g++) {
        const struct prof_tdump_group *gr = &d->groups[g];
        uint32_t s = group_start(d, g);
        jb_printf(b, "%u @", gr->nthreads);
        for (uint32_t k = 0; k < gr->nthreads && k < 8; k++) {
            const struct prof_tdump_thread *th = &d->threads[s + k];
            tb_str(b, k ? ", " : " ");
            text_thread_name(b, th->tid, th->name);
            jb_printf(b, " [%s]", api_thread_state_name(th->state));
        }
        if (gr->nthreads > 8)
            jb_printf(b, " and %u more", gr->nthreads - 8);
        tb_str(b, "\n");
        for (uint32_t k = 0, shown = 0; k < gr->nthreads && shown < 8; k++) {
            const struct prof_tdump_thread *th = &d->threads[s + k];
            if (!th->wait_ns)
                continue;
            shown++;
            tb_str(b, "#  thread ");
            text_thread_name(b, th->tid, th->name);
            tb_str(b, " is ");
            text_wait(b, d, th);
            tb_str(b, th->deadlock ? " (DEADLOCK)\n" : "\n");
        }
        text_stack(b, d, gr, "#\t");
    }
}

/* debug=2: every thread, its name, state and CPU time, then its stack (leaf first). */
static void text_each(struct jbuf *b, const struct prof_tdump *d)
{
    text_header(b, d, "dump");
    for (uint32_t i = 0; i < d->nthreads; i++) {
        const struct prof_tdump_thread *th = &d->threads[i];
        const struct prof_tdump_group *gr = &d->groups[th->group];
        tb_str(b, "thread ");
        text_thread_name(b, th->tid, th->name);
        if (th->cpu_ns >= 0)
            jb_printf(b, " [%s, %.3f s CPU]", api_thread_state_name(th->state),
                      (double)th->cpu_ns / 1e9);
        else
            jb_printf(b, " [%s]", api_thread_state_name(th->state));
        if (th->wait_ns) {
            tb_str(b, " ");
            text_wait(b, d, th);
            if (th->deadlock)
                jb_printf(b, " (DEADLOCK %u)", th->deadlock);
        }
        tb_str(b, ":\n");
        text_stack(b, d, gr, "\t");
    }
}

/* debug=0: one sample per thread (threads/count), labelled with its id, name and state; built in
 * `mem`, where *out stays. */
static int build_pprof(const struct prof_tdump *d, struct prof_scratch *mem, unsigned char **out,
                       size_t *len)
{
    const pprof_value_type types[] = {{"threads", "count"}};
    const struct pprof_opts opts = {.gzip_level = 1, .alloc = prof_scratch_resize,
                                    .alloc_ctx = mem};
    pprof_builder *pb = pprof_new_opts(types, 1, types[0], 1, &opts);
    if (!pb)
        return -1;
    pprof_set_time(pb, (int64_t)(d->t_unix * 1e9), 0);
    uint32_t deepest = 0;
    for (uint32_t g = 0; g < d->ngroups; g++)
        if (d->groups[g].nframes > deepest)
            deepest = d->groups[g].nframes;
    const char **stack = prof_scratch_alloc(mem, (deepest + 1) * sizeof *stack);
    if (!stack) {
        pprof_free(pb);
        return -1;
    }
    int rc = 0;
    for (uint32_t i = 0; i < d->nthreads && rc == 0; i++) {
        const struct prof_tdump_thread *th = &d->threads[i];
        const struct prof_tdump_group *gr = &d->groups[th->group];
        char tid[16];
        snprintf(tid, sizeof tid, "%u", th->tid);
        const char *keys[3] = {"thread id", "state", "thread name"};
        const char *strs[3] = {tid, api_thread_state_name(th->state), th->name};
        int64_t one = 1;
        const char *const *frames = d->frames + gr->first_frame;
        int nf = (int)gr->nframes;
        if (gr->truncated) { /* a [truncated] root, as in the CPU and wall profiles */
            memcpy(stack, frames, (size_t)nf * sizeof *stack);
            stack[nf++] = "[truncated]";
            frames = stack;
        }
        if (pprof_add_sample(pb, frames, nf, &one, keys, strs, NULL, th->name[0] ? 3 : 2) < 0)
            rc = -1;
    }
    char comment[160];
    snprintf(comment, sizeof comment, "clrscope thread dump of pid %d, runtime %s, %u threads",
             (int)g_core.pid, g_core.runtime_version, d->nthreads);
    pprof_add_comment(pb, comment);
    if (rc == 0)
        rc = pprof_finish(pb, out, len);
    pprof_free(pb);
    prof_scratch_free(mem, stack);
    return rc;
}

int api_pprof_threads(const struct api_req *q, struct api_reply *out)
{
    const char *slash = strrchr(q->path, '/');
    const char *name = slash ? slash + 1 : q->path; /* threads, or Go's name goroutine */
    long debug;
    if (api_query_long(q, "debug", 0, 0, 2, &debug, out) < 0)
        return 400;
    struct prof_tdump *d = take(q, out);
    if (!d)
        return 503;
    if (debug == 0) {
        unsigned char *buf = NULL;
        size_t len = 0;
        struct prof_scratch mem = {0}; /* released once the reply is sent */
        if (build_pprof(d, &mem, &buf, &len)) {
            prof_scratch_release(&mem);
            api_reply_error(out, 503, "could not build the profile (out of memory)");
        } else if (api_reply_scratch(out, 200, "application/octet-stream", buf, len, &mem) == 200) {
            char disp[96];
            snprintf(disp, sizeof disp, "attachment; filename=\"%s.pb.gz\"", name);
            api_reply_header(out, "Content-Disposition", disp);
        }
    } else {
        struct jbuf b;
        jb_init(&b, 64u << 20);
        if (debug == 1)
            text_grouped(&b, d);
        else
            text_each(&b, d);
        api_reply_jbuf(out, 200, "text/plain; charset=utf-8", &b, "thread dump too large");
    }
    prof_tdump_release(d);
    return out->status;
}
