/*
 * prof_maps.c - see prof_maps.h: builds the /proc/self/maps snapshots and the walk tables,
 * publishes them to the signal handler, decides when a refresh is due, and frees what the
 * handlers can no longer see. The clrscope-sampler thread (and clrscope-agg for the hidden-record
 * table and the lookups), under prof_codemap_lock(). Nothing here runs in signal context.
 */
#include "prof_maps.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "prof_core.h"
#include "prof_log.h"
#include "prof_sighandler.h"
#include "prof_utf8.h"

#define MAPS_PERIOD_NS 10000000000LL /* refresh /proc/self/maps at least this often */
#define MAPS_MIN_GAP_NS 100000000LL /* at most this often when a refresh is sure to help */
#define MAPS_HINT_GAP_NS 1000000000LL /* and this often on a mere hint */
#define MAPS_THREAD_CREDIT_NS 10000000LL /* CPU the refreshes for new threads may spend at once */
#define PHANTOMS 8 /* pages remembered as holding no code after a refresh */

/* Every field is written under prof_codemap_lock() by the clrscope-sampler thread, and by
 * clrscope-agg where noted (or, at the sampler's start and stop, by the thread that starts or
 * stops it, while no sampler thread runs); read under the same lock. */
struct maps_state {
    int kept;              /* prof_maps_keep was called: snapshots are kept current, tables
                            * are published */
    int64_t taken_at;      /* when the last snapshot was taken */
    int dirty;             /* atomic: a refresh was asked for: bit 0 a hint, bit 1 sure
                            * (prof_maps_refresh: the sampler thread, its wall asks without the
                            * code map's lock, clrscope-agg through the code map) */
    /* how soon a walk's miss gets a refresh (see prof_maps_maintain) */
    uint64_t miss_seen, code_miss_seen; /* g_sig.maps_miss and g_sig.code_miss at the last one */
    int64_t miss_gap_ns, code_gap_ns;
    uintptr_t phantom[PHANTOMS]; /* pages of return addresses no refresh explained */
    int next_phantom;
    /* snapshots and tables swapped out, freed once no handler runs (clrscope-agg too) */
    void **retired;
    size_t nretired, capretired;
    uint64_t refreshes;    /* snapshots taken (the sampler thread only) */
    int64_t cost_ns;       /* the last one's CPU time (prof_maps_refresh_for_thread) */
    int64_t credit_ns, credit_at; /* what refreshes for new threads may still spend, and when
                                   * that was reckoned */
    size_t osr_returns;    /* in the published OSR table */
    int failure_logged;    /* atomic (prof_log_once) */
};

static struct maps_state maps;

/* ---- the snapshot ---- */

static int cmp_range(const void *a, const void *b)
{
    const struct prof_sig_range *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static char *read_maps(size_t *len)
{
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (cap - n < 4096) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
            cap *= 2;
        }
        ssize_t got = read(fd, buf + n, cap - n - 1);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0)
            break;
        n += (size_t)got;
    }
    close(fd);
    if (buf)
        buf[n] = 0;
    *len = n;
    return buf;
}

/* Name of an executable mapping as the flame graph shows it. */
static void exec_name(const char *path, size_t plen, char *out, size_t cap)
{
    if (plen && path[0] == '/' && strncmp(path, "/memfd:", 7)) {
        const char *base = path + plen;
        while (base > path && base[-1] != '/')
            base--;
        size_t blen = (size_t)(path + plen - base);
        const char *del = " (deleted)";
        if (blen > strlen(del) && !memcmp(base + blen - strlen(del), del, strlen(del)))
            blen -= strlen(del);
        snprintf(out, cap, "[native %.*s]", (int)blen, base);
    } else {
        snprintf(out, cap, "[native code]");
    }
    prof_utf8_clean(out); /* a file name in another encoding, or cut at cap inside a character */
}

/* Builds a snapshot in one allocation: header, rw ranges, exec ranges, then exec names. */
static struct prof_sig_maps *build_maps(void)
{
    size_t len = 0;
    char *text = read_maps(&len);
    if (!text)
        return NULL;
    size_t lines = 1, name_bytes = 0; /* + 1: the last line may lack its newline */
    for (size_t i = 0; i < len; i++)
        lines += text[i] == '\n';
    name_bytes = len + lines * 16; /* generous: names are shorter than their lines + 16 */
    size_t bytes = sizeof(struct prof_sig_maps) + 2 * lines * sizeof(struct prof_sig_range) +
                   name_bytes;
    char *mem = malloc(bytes);
    if (!mem) {
        free(text);
        return NULL;
    }
    struct prof_sig_maps *m = (struct prof_sig_maps *)mem;
    struct prof_sig_range *rw = (struct prof_sig_range *)(m + 1), *ex = rw + lines;
    char *names = (char *)(ex + lines), *names_end = mem + bytes;
    uint32_t nrw = 0, nex = 0;
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        unsigned long lo, hi;
        char perms[8];
        int path_at = 0;
        if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &path_at) < 3)
            continue;
        const char *path = path_at > 0 ? line + path_at : "";
        if (perms[0] == 'r' && perms[1] == 'w' && nrw < lines)
            rw[nrw++] = (struct prof_sig_range){
                .lo = lo, .hi = hi, .flags = strcmp(path, "[stack]") ? 0 : PROF_SIG_R_MAIN_STACK};
        if (perms[2] == 'x' && nex < lines) {
            char name[300];
            exec_name(path, strlen(path), name, sizeof name);
            size_t nl = strlen(name) + 1;
            if (names + nl > names_end)
                continue;
            memcpy(names, name, nl);
            ex[nex++] = (struct prof_sig_range){.lo = lo, .hi = hi, .name = names};
            names += nl;
        }
    }
    free(text);
    qsort(rw, nrw, sizeof *rw, cmp_range);
    qsort(ex, nex, sizeof *ex, cmp_range);
    m->rw = rw;
    m->exec = ex;
    m->nrw = nrw;
    m->nexec = nex;
#if defined(__aarch64__)
    m->new_code_hi = (uintptr_t)1 << 48; /* arm64's user space (48-bit addresses) */
#else
    m->new_code_hi = (uintptr_t)1 << 47; /* x86-64's user space without a hint for more */
#endif
    /* The kernel's layouts keep every mapping below the main thread's stack, which then bounds
     * where new code can appear. qemu-user places the guest's stack right above the program and
     * maps the libraries and the JIT's code upward from there: a stack below any code bounds
     * nothing (and taken as the bound it would call every newly mapped method a non-address). */
    uintptr_t code_hi = 0;
    for (uint32_t i = 0; i < nex; i++)
        code_hi = ex[i].hi > code_hi ? ex[i].hi : code_hi;
    for (uint32_t i = 0; i < nrw; i++)
        if ((rw[i].flags & PROF_SIG_R_MAIN_STACK) && rw[i].lo >= code_hi)
            m->new_code_hi = rw[i].lo;
    return m;
}

/* Frees `mem` once no handler may still read it (at the next reclaim that sees none running). */
static void retire(void *mem)
{
    if (maps.nretired == maps.capretired) {
        size_t nc = maps.capretired ? maps.capretired * 2 : 64;
        void **r = realloc(maps.retired, nc * sizeof *r);
        if (!r)
            return; /* leak it rather than free what a handler may read */
        maps.retired = r;
        maps.capretired = nc;
    }
    maps.retired[maps.nretired++] = mem;
}

/* Everything retired before this call was swapped out before the handler count read 0. */
static void reclaim(void)
{
    if (!maps.nretired || __atomic_load_n(&g_sig.inflight, __ATOMIC_SEQ_CST))
        return;
    for (size_t i = 0; i < maps.nretired; i++)
        free(maps.retired[i]);
    maps.nretired = 0;
}

static int same_ranges(const struct prof_sig_range *a, uint32_t na,
                       const struct prof_sig_range *b, uint32_t nb)
{
    if (na != nb)
        return 0;
    for (uint32_t i = 0; i < na; i++)
        if (a[i].lo != b[i].lo || a[i].hi != b[i].hi)
            return 0;
    return 1;
}

/* Takes a new snapshot; returns 1 if the mappings changed since the last one (or there was none),
 * 0 if not, -1 if /proc/self/maps could not be read. */
static int refresh_maps(int64_t now)
{
    maps.taken_at = now;
    __atomic_store_n(&maps.dirty, 0, __ATOMIC_RELAXED);
    struct timespec c0, c1;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
    struct prof_sig_maps *m = build_maps();
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
    maps.cost_ns = (int64_t)(c1.tv_sec - c0.tv_sec) * 1000000000 + (c1.tv_nsec - c0.tv_nsec);
    if (!m) {
        prof_log_once(maps.failure_logged, LOG_WARN, "cpu sampler: cannot read /proc/self/maps; "
                      "stacks keep the last known layout");
        return -1;
    }
    struct prof_sig_maps *old = __atomic_exchange_n(&g_sig.maps, m, __ATOMIC_SEQ_CST);
    int changed = !old || !same_ranges(old->exec, old->nexec, m->exec, m->nexec) ||
                  !same_ranges(old->rw, old->nrw, m->rw, m->nrw);
    if (old)
        retire(old);
    maps.refreshes++;
    return changed;
}

int prof_maps_take(void)
{
    return refresh_maps(prof_now_ns());
}

void prof_maps_keep(void)
{
    maps.kept = 1;
    __atomic_store_n(&g_sig.self_walk, 1, __ATOMIC_RELEASE);
}

int prof_maps_start(void)
{
    if (!__atomic_load_n(&g_sig.maps, __ATOMIC_SEQ_CST))
        refresh_maps(prof_now_ns());
    if (!__atomic_load_n(&g_sig.maps, __ATOMIC_SEQ_CST))
        return -1;
    prof_maps_keep();
    return 0;
}

void prof_maps_stop(void)
{
    /* the snapshots are no longer refreshed: self-walks go back to the runtime's walk */
    __atomic_store_n(&g_sig.self_walk, 0, __ATOMIC_RELEASE);
    reclaim();
}

/* ---- lookups ---- */

static const struct prof_sig_range *exec_range(uintptr_t ip)
{
    /* written and read under prof_codemap_lock() */
    const struct prof_sig_maps *m = g_sig.maps;
    uint32_t lo = 0, hi = m ? m->nexec : 0;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        if (ip < m->exec[mid].lo)
            hi = mid;
        else if (ip >= m->exec[mid].hi)
            lo = mid + 1;
        else
            return &m->exec[mid];
    }
    return NULL;
}

const char *prof_maps_native_name(uintptr_t ip)
{
    const struct prof_sig_range *r = exec_range(ip);
    return r ? r->name : "[native code]";
}

int prof_maps_is_code(uintptr_t ip)
{
    return exec_range(ip) != NULL;
}

void prof_maps_refresh(int sure)
{
    __atomic_fetch_or(&maps.dirty, sure ? 2 : 1, __ATOMIC_RELAXED);
    if (sure)
        prof_sig_wake_sampler(); /* (napping through idle ticks, it would refresh only at the next) */
}

/* A new thread's first samples need its stack in the snapshot: a refresh at once while these
 * refreshes have taken under 0.1 % of a core (a credit of 0.1 % of the time passed, up to 10 ms,
 * that each refresh spends: ~0.2-0.4 ms for a small app, ~1.5 ms for an ASP.NET Core server, so
 * an app's start-up burst of threads gets one each, and a thread pool that keeps starting
 * threads one every 1.5 s at most), else at the next prof_maps_maintain. Left to
 * prof_maps_maintain alone, a new thread's walks found no stack and kept only their leaf until
 * the refresh it asked for, up to MAPS_MIN_GAP_NS later. */
void prof_maps_refresh_for_thread(void)
{
    int64_t now = prof_now_ns();
    if (!maps.credit_at)
        maps.credit_ns = MAPS_THREAD_CREDIT_NS;
    else
        maps.credit_ns += (now - maps.credit_at) / 1000;
    maps.credit_at = now;
    if (maps.credit_ns > MAPS_THREAD_CREDIT_NS)
        maps.credit_ns = MAPS_THREAD_CREDIT_NS;
    if (maps.kept && maps.credit_ns >= maps.cost_ns) {
        refresh_maps(now);
        maps.credit_ns -= maps.cost_ns;
    } else {
        prof_maps_refresh(1);
    }
}

/* ---- the walk tables ---- */

static int cmp_code(const void *a, const void *b)
{
    const struct prof_sig_code *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

void prof_maps_set_frameless(const uintptr_t (*ranges)[3], size_t n)
{
    if (!maps.kept)
        return;
    struct prof_sig_codes *c = malloc(sizeof *c + (n ? n : 1) * sizeof c->c[0]);
    if (!c)
        return;
    c->n = (uint32_t)n;
    for (size_t i = 0; i < n; i++)
        c->c[i] = (struct prof_sig_code){.lo = ranges[i][0], .hi = ranges[i][1],
                                         .frame = ranges[i][2]};
    qsort(c->c, n, sizeof c->c[0], cmp_code);
    struct prof_sig_codes *old = __atomic_exchange_n(&g_sig.codes, c, __ATOMIC_SEQ_CST);
    if (old)
        retire(old);
}

static int cmp_uintptr(const void *a, const void *b)
{
    uintptr_t x = *(const uintptr_t *)a, y = *(const uintptr_t *)b;
    return x < y ? -1 : x > y;
}

void prof_maps_set_osr(const uintptr_t *ra, size_t n)
{
    if (!maps.kept)
        return;
    struct prof_sig_osrs *t = malloc(sizeof *t + (n ? n : 1) * sizeof t->ra[0]);
    if (!t)
        return;
    t->n = (uint32_t)n;
    memcpy(t->ra, ra, n * sizeof *ra);
    qsort(t->ra, n, sizeof t->ra[0], cmp_uintptr);
    struct prof_sig_osrs *old = __atomic_exchange_n(&g_sig.osr, t, __ATOMIC_SEQ_CST);
    if (old)
        retire(old);
    maps.osr_returns = n;
}

static int cmp_hidden(const void *a, const void *b)
{
    const struct prof_sig_hidden *x = a, *y = b;
    return x->ra < y->ra ? -1 : x->ra > y->ra;
}

void prof_maps_set_hidden(const struct prof_sig_hidden *h, size_t n)
{
    if (!maps.kept)
        return;
    struct prof_sig_hiddens *t = malloc(sizeof *t + (n ? n : 1) * sizeof t->h[0]);
    if (!t)
        return;
    t->n = (uint32_t)n;
    memcpy(t->h, h, n * sizeof *h);
    qsort(t->h, n, sizeof t->h[0], cmp_hidden);
    struct prof_sig_hiddens *old = __atomic_exchange_n(&g_sig.hidden, t, __ATOMIC_SEQ_CST);
    if (old)
        retire(old);
}

/* ---- when to refresh ---- */

static int64_t doubled(int64_t gap)
{
    return gap * 2 < MAPS_PERIOD_NS ? gap * 2 : MAPS_PERIOD_NS;
}

static int is_phantom(uintptr_t page)
{
    for (int i = 0; i < PHANTOMS; i++)
        if (maps.phantom[i] == page)
            return 1;
    return 0;
}

/* A signal walk cut at an address that could be code mapped since the snapshot asks for a
 * refresh (g_sig.code_miss, the address in g_sig.miss_ra): the JIT maps new code at startup and
 * on tier-up, and until a refresh every sample through that code loses its callers (at startup
 * that was most of a second's samples). But such an address can also be a stale word in a frame
 * chain that no refresh explains (a phantom), which would ask again at every tick. So the
 * refresh comes after code_gap_ns (MAPS_MIN_GAP_NS); if it explains the address, fine; if not,
 * the address's page joins the phantoms (never asking again) and code_gap_ns doubles, up to
 * MAPS_PERIOD_NS, until a refresh explains one.
 * Other misses (a stack missing from the snapshot, a self-walk cut at unknown code) ask after
 * miss_gap_ns, which doubles the same way while their refreshes change nothing. */
void prof_maps_maintain(int64_t now)
{
    uint64_t miss = __atomic_load_n(&g_sig.maps_miss, __ATOMIC_RELAXED);
    uint64_t code_miss = __atomic_load_n(&g_sig.code_miss, __ATOMIC_RELAXED);
    uintptr_t ra = __atomic_load_n(&g_sig.miss_ra, __ATOMIC_RELAXED);
    int64_t since = now - maps.taken_at;
    int missed = miss != maps.miss_seen;
    int code = code_miss != maps.code_miss_seen && ra && !is_phantom(ra >> 12);
    if (!maps.miss_gap_ns)
        maps.miss_gap_ns = maps.code_gap_ns = MAPS_MIN_GAP_NS;
    int dirty = __atomic_load_n(&maps.dirty, __ATOMIC_RELAXED);
    if (since >= MAPS_PERIOD_NS || (code && since >= maps.code_gap_ns) ||
        (missed && since >= maps.miss_gap_ns) || ((dirty & 2) && since >= MAPS_MIN_GAP_NS) ||
        (dirty && since >= MAPS_HINT_GAP_NS)) {
        int only_missed = missed && !code && !dirty && since < MAPS_PERIOD_NS;
        maps.miss_seen = miss;
        maps.code_miss_seen = code_miss;
        int changed = refresh_maps(now);
        if (changed > 0)
            maps.miss_gap_ns = MAPS_MIN_GAP_NS;
        else if (changed == 0 && only_missed)
            maps.miss_gap_ns = doubled(maps.miss_gap_ns);
        if (code && changed >= 0) {
            if (prof_maps_is_code(ra)) {
                maps.code_gap_ns = MAPS_MIN_GAP_NS;
            } else {
                maps.phantom[maps.next_phantom] = ra >> 12;
                maps.next_phantom = (maps.next_phantom + 1) % PHANTOMS;
                maps.code_gap_ns = doubled(maps.code_gap_ns);
            }
        }
    }
    reclaim();
}

void prof_maps_get_stats(struct prof_maps_stats *out)
{
    out->refreshes = maps.refreshes;
    out->osr_returns = maps.osr_returns;
}
