/* prof_store.c - see prof_store.h. */
#include "prof_store.h"

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "prof_agg.h"
#include "prof_core.h"
#include "prof_intern.h"
#include "prof_log.h"

#define BUCKET_MAX_ENTRIES 32768u
#define GAP_MIN_NS 10000000000LL   /* compactions: at most every 10 s ... */
#define GAP_MAX_NS 600000000000LL  /* ... up to every 10 min while they free little */

struct node {
    uint32_t parent, frame;
};

struct entry {
    uint32_t node, tid, label;
    uint8_t kind, used;
    int64_t v[PROF_NVALUES];
};

/* One generation of the names: the store holds the current one, every view holds the one its
 * names point into, so a generation emptied by a name compaction is freed by the last of them
 * (refs counted under store.lock). */
struct names_gen {
    struct prof_intern t;
    uint32_t refs;
};

struct bucket {
    int64_t second;        /* which second this bucket holds; -1 = empty */
    struct entry *e;
    uint32_t n, cap;       /* cap is a power of two */
};

/* The module's state: written by clrscope's sampler and aggregator threads (prof_store_add) and
 * by Initialize, read by API handlers, every field under `lock`. */
#define PATH_CACHE 16        /* threads whose last path is remembered (power of two) */
#define PATH_CACHE_DEPTH 128 /* frames of it, from the root */

static struct store_state {
    pthread_mutex_t lock;
    int ready;
    struct names_gen *gen; /* the current names; store.gen->t below */
    size_t name_cap;       /* bytes (CLRSCOPE_MAX_NAME_BYTES) */
    struct node *nodes;
    uint32_t nnodes, node_cap, node_max;
    uint32_t *node_slots; /* hash (parent, frame) -> node+1 */
    uint32_t nslots;
    struct bucket *buckets;
    int nbuckets;
    double t_init; /* unix time the store started: no window covers anything before it */
    int64_t compacted_ns; /* CLOCK_MONOTONIC of the last compaction (0 = none yet) */
    int64_t compact_gap_ns; /* the least time to the next: 10 s, doubled (up to 10 min) after
                             * each compaction that freed little (the paths are all in use) */
    int64_t names_compacted_ns, names_gap_ns; /* the same for the names */
    uint64_t dropped_names; /* of the generations before the current one */
    struct prof_store_stats st;
    struct {
        prof_store_scale_fn fn; /* NULL: the values stand as added */
        unsigned mask;
    } scale[PK_COUNT]; /* prof_store_set_scale */
    /* The last path added per thread (PATH_CACHE slots by tid): a thread's next stack mostly
     * shares its root side, whose nodes are then taken without the (parent, frame) table, two
     * cache misses a frame in a tree of many paths (40 % of clrscope-sample's CPU on a deep
     * profile). Valid while `layout` is: the node and name ids change only at a compaction. */
    uint64_t layout;
    struct path_cache {
        uint64_t layout; /* store.layout when it was filled (0: empty) */
        uint32_t tid;
        uint32_t n;
        uint32_t name[PATH_CACHE_DEPTH], node[PATH_CACHE_DEPTH];
    } paths[PATH_CACHE];
} store = {.lock = PTHREAD_MUTEX_INITIALIZER};

static uint32_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

static double unix_now(void)
{
    return prof_unix_now(); /* frozen in a post-mortem server (prof_core_freeze_clock) */
}

static struct names_gen *gen_new(size_t cap)
{
    struct names_gen *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    if (prof_intern_init(&g->t, cap)) {
        prof_intern_free(&g->t);
        free(g);
        return NULL;
    }
    g->refs = 1;
    return g;
}

/* Lock held. */
static void gen_unref(struct names_gen *g)
{
    if (g && --g->refs == 0) {
        prof_intern_free(&g->t);
        free(g);
    }
}

void prof_store_set_scale(int kind, unsigned mask, prof_store_scale_fn fn)
{
    if (kind < 0 || kind >= PK_COUNT)
        return;
    pthread_mutex_lock(&store.lock);
    store.scale[kind].fn = fn;
    store.scale[kind].mask = mask;
    pthread_mutex_unlock(&store.lock);
}

/* A row's values of second `sec` as the kind's scale has them (under the lock). */
static void scale_row(int kind, int64_t sec, int64_t v[PROF_NVALUES])
{
    if (kind < 0 || kind >= PK_COUNT || !store.scale[kind].fn)
        return;
    double f = store.scale[kind].fn(sec);
    if (f == 1 || !(f >= 0))
        return;
    for (int k = 0; k < PROF_NVALUES; k++)
        if (store.scale[kind].mask >> k & 1) {
            double x = (double)v[k] * f;
            v[k] = x >= 9.2e18 ? INT64_MAX : (int64_t)llround(x);
        }
}

int prof_store_init(int history_s, int max_nodes, size_t max_name_bytes)
{
    pthread_mutex_lock(&store.lock);
    int rc = -1;
    if (store.ready) {
        rc = 0;
        goto out;
    }
    store.name_cap = max_name_bytes;
    store.gen = gen_new(store.name_cap);
    if (!store.gen)
        goto out;
    store.node_max = (uint32_t)max_nodes;
    store.node_cap = 4096;
    store.nodes = calloc(store.node_cap, sizeof *store.nodes);
    store.nslots = 8192;
    store.node_slots = calloc(store.nslots, sizeof *store.node_slots);
    store.nbuckets = history_s;
    store.compact_gap_ns = GAP_MIN_NS;
    store.names_gap_ns = GAP_MIN_NS;
    store.t_init = unix_now();
    store.buckets = calloc((size_t)history_s, sizeof *store.buckets);
    if (!store.nodes || !store.node_slots || !store.buckets)
        goto out;
    for (int i = 0; i < store.nbuckets; i++)
        store.buckets[i].second = -1;
    store.nodes[0].parent = 0;
    store.nodes[0].frame = prof_intern(&store.gen->t, "all");
    store.nnodes = 1;
    store.layout++;
    store.ready = 1;
    rc = 0;
out:
    if (rc) { /* nothing half made is kept: a later init starts clean */
        free(store.buckets);
        free(store.nodes);
        free(store.node_slots);
        gen_unref(store.gen);
        store.buckets = NULL;
        store.nodes = NULL;
        store.node_slots = NULL;
        store.gen = NULL;
    }
    pthread_mutex_unlock(&store.lock);
    return rc;
}

void prof_store_free(void)
{
    pthread_mutex_lock(&store.lock);
    if (store.ready) {
        for (int i = 0; i < store.nbuckets; i++)
            free(store.buckets[i].e);
        free(store.buckets);
        free(store.nodes);
        free(store.node_slots);
        gen_unref(store.gen); /* a view still out frees it when it is freed */
        store.gen = NULL;
        store.buckets = NULL;
        store.nodes = NULL;
        store.node_slots = NULL;
        store.layout++;
        store.ready = 0;
    }
    pthread_mutex_unlock(&store.lock);
}

static uint32_t *node_slot(uint32_t parent, uint32_t frame)
{
    uint32_t mask = store.nslots - 1;
    for (uint32_t i = mix(((uint64_t)parent << 32) | frame) & mask;; i = (i + 1) & mask) {
        uint32_t v = store.node_slots[i];
        if (!v || (store.nodes[v - 1].parent == parent && store.nodes[v - 1].frame == frame))
            return &store.node_slots[i];
    }
}

static int grow_nodes(void)
{
    if (store.nnodes == store.node_cap) {
        uint32_t nc = store.node_cap * 2;
        struct node *nn = realloc(store.nodes, nc * sizeof *nn);
        if (!nn)
            return -1;
        store.nodes = nn;
        store.node_cap = nc;
    }
    if ((store.nnodes + 1) * 2 > store.nslots) {
        uint32_t ns = store.nslots * 2;
        uint32_t *slots = calloc(ns, sizeof *slots);
        if (!slots)
            return -1;
        free(store.node_slots);
        store.node_slots = slots;
        store.nslots = ns;
        for (uint32_t i = 1; i < store.nnodes; i++)
            *node_slot(store.nodes[i].parent, store.nodes[i].frame) = i + 1;
    }
    return 0;
}

/* Returns the node for parent->frame, creating it; UINT32_MAX when the trie is full (the
 * caller truncates the stack at `parent`: going on from there would graft the rest of the stack
 * onto an ancestor, a path that never ran) and counts the drop. */
static uint32_t child(uint32_t parent, uint32_t frame)
{
    uint32_t *slot = node_slot(parent, frame);
    if (*slot)
        return *slot - 1;
    if (store.nnodes >= store.node_max || grow_nodes()) {
        store.st.dropped_nodes++;
        return UINT32_MAX;
    }
    slot = node_slot(parent, frame); /* the table may have been rebuilt */
    uint32_t id = store.nnodes++;
    store.nodes[id].parent = parent;
    store.nodes[id].frame = frame;
    *slot = id + 1;
    return id;
}

static struct entry *bucket_slot(struct bucket *b, const struct entry *key)
{
    uint32_t mask = b->cap - 1;
    uint64_t h = ((uint64_t)key->node << 32) ^ ((uint64_t)key->tid << 8) ^
                 ((uint64_t)key->label << 20) ^ key->kind;
    for (uint32_t i = mix(h) & mask;; i = (i + 1) & mask) {
        struct entry *e = &b->e[i];
        if (!e->used || (e->node == key->node && e->tid == key->tid && e->label == key->label &&
                         e->kind == key->kind))
            return e;
    }
}

/* Reinserts bucket b's entries into a table of nc slots (grown, or the same size after the
 * nodes were renumbered). */
static int bucket_rehash(struct bucket *b, uint32_t nc)
{
    struct entry *ne = calloc(nc, sizeof *ne);
    if (!ne)
        return -1;
    struct bucket nb = {.second = b->second, .e = ne, .n = b->n, .cap = nc};
    for (uint32_t i = 0; i < b->cap; i++)
        if (b->e[i].used)
            *bucket_slot(&nb, &b->e[i]) = b->e[i];
    free(b->e);
    *b = nb;
    return 0;
}

static struct bucket *bucket_for(int64_t second)
{
    struct bucket *b = &store.buckets[(uint64_t)second % (uint64_t)store.nbuckets];
    if (b->second != second) {
        /* older than the history we keep; unless the bucket is from the future: the wall
         * clock was set back (NTP step, VM restored), and refusing would drop every sample for
         * the length of the step */
        if (b->second > second && b->second <= (int64_t)floor(unix_now()) + 1)
            return NULL;
        store.st.entries -= b->n;
        if (b->cap > 1024) { /* give back memory after a burst */
            free(b->e);
            b->e = NULL;
            b->cap = 0;
        } else if (b->e) {
            memset(b->e, 0, b->cap * sizeof *b->e);
        }
        b->n = 0;
        b->second = second;
    }
    return b;
}

/* remap[i] != 0 marks the nodes in use: marks their ancestors too, then numbers them all in
 * increasing old order (remap[i] = new index + 1; a parent stays before its children). Returns
 * how many. Lock held. */
static uint32_t number_used(uint32_t *remap)
{
    for (uint32_t i = store.nnodes; i-- > 1;)
        if (remap[i])
            remap[store.nodes[i].parent] = 1;
    remap[0] = 1;
    uint32_t n = 0;
    for (uint32_t i = 0; i < store.nnodes; i++)
        if (remap[i])
            remap[i] = ++n;
    return n;
}

/* Rebuilds the node index and every bucket's table after nodes or ids were renumbered. A bucket
 * that finds no memory loses its second's stacks rather than mix them up. Lock held. */
static void reindex(void)
{
    store.layout++; /* the ids changed: the path cache is stale */
    memset(store.node_slots, 0, store.nslots * sizeof *store.node_slots);
    for (uint32_t i = 1; i < store.nnodes; i++)
        *node_slot(store.nodes[i].parent, store.nodes[i].frame) = i + 1;
    for (int i = 0; i < store.nbuckets; i++) {
        struct bucket *b = &store.buckets[i];
        if (b->second < 0 || !b->n)
            continue;
        if (bucket_rehash(b, b->cap)) {
            store.st.entries -= b->n;
            store.st.dropped_entries += b->n;
            free(b->e);
            b->e = NULL;
            b->cap = b->n = 0;
            b->second = -1;
        }
    }
}

/* The next pause after a compaction: 10 s when it freed much, doubled (up to 10 min) while
 * compactions free little (what is held is all in use). */
static int64_t next_gap(int64_t gap, int freed_much)
{
    if (freed_much)
        return GAP_MIN_NS;
    return gap * 2 < GAP_MAX_NS ? gap * 2 : GAP_MAX_NS;
}

/* Drops the nodes no bucket within the history uses (nor any of their descendants), renumbers
 * the rest in their old order (a parent keeps a smaller number than its children) and empties
 * expired buckets. Returns how many nodes went, -1 when out of memory. Lock held. */
static int64_t compact_nodes(int64_t now_s)
{
    uint32_t *remap = calloc(store.nnodes, sizeof *remap); /* old -> new + 1; 0 = dropped */
    if (!remap)
        return -1;
    int64_t oldest = now_s - store.nbuckets + 1;
    for (int i = 0; i < store.nbuckets; i++) {
        struct bucket *b = &store.buckets[i];
        if (b->second < 0)
            continue;
        if (b->second < oldest || b->second > now_s + 1) { /* expired, or from before a clock
                                                              * step back: no window reaches it */
            store.st.entries -= b->n;
            free(b->e);
            b->e = NULL;
            b->cap = b->n = 0;
            b->second = -1;
            continue;
        }
        for (uint32_t k = 0; k < b->cap; k++)
            if (b->e[k].used)
                remap[b->e[k].node] = 1;
    }
    uint32_t n = number_used(remap);
    for (uint32_t i = 0; i < store.nnodes; i++) /* new index <= old: moves only downwards */
        if (remap[i]) {
            store.nodes[remap[i] - 1].parent = i ? remap[store.nodes[i].parent] - 1 : 0;
            store.nodes[remap[i] - 1].frame = store.nodes[i].frame;
        }
    uint32_t before = store.nnodes;
    if (before > store.st.nodes_peak)
        store.st.nodes_peak = before;
    store.nnodes = n;
    for (int i = 0; i < store.nbuckets; i++) {
        struct bucket *b = &store.buckets[i];
        for (uint32_t k = 0; b->second >= 0 && k < b->cap; k++)
            if (b->e[k].used)
                b->e[k].node = remap[b->e[k].node] - 1;
    }
    reindex();
    free(remap);
    store.st.compactions++;
    store.st.compacted_nodes += before - n;
    return before - n;
}

/* The trie only grows while samples come in, but the buckets that use its nodes expire after
 * the history: over days, call paths seen once (lock ids, generated methods, short-lived code)
 * would fill it and every new path would be cut. When it is 7/8 full, at most every 10 s (up to
 * 10 min while compactions free little), it is compacted. Lock held. */
static void maybe_compact(void)
{
    if (store.nnodes < store.node_max - store.node_max / 8)
        return;
    int64_t now = prof_now_ns();
    if (store.compacted_ns && now - store.compacted_ns < store.compact_gap_ns)
        return;
    store.compacted_ns = now;
    int64_t freed = compact_nodes((int64_t)floor(unix_now()));
    if (freed >= 0)
        store.compact_gap_ns = next_gap(store.compact_gap_ns, freed >= store.node_max / 16);
}

/* Id `id` of generation `from` in generation `to`, interned there on first use (remap[id] =
 * new id + 1). Lock held. */
static uint32_t carry(const struct prof_intern *from, struct prof_intern *to, uint32_t *remap,
                      uint32_t id)
{
    if (id >= from->n)
        return 0;
    if (!remap[id])
        remap[id] = (id == from->overflow_id ? to->overflow_id
                                             : prof_intern(to, prof_intern_str(from, id))) + 1;
    return remap[id] - 1;
}

/* The names only grow too: every frame and label ever stored would stay, and once their bytes
 * reached the cap every new one would be "[overflow]" for the process's life (lock labels, one
 * per contended lock, and generated methods fill them). When they pass 7/8
 * of CLRSCOPE_MAX_NAME_BYTES (paced as the trie's compactions), the trie is compacted, then the
 * names its nodes and the buckets within the history still use are copied into a new generation
 * and renumbered there, when that frees at least 1/16 of the cap. Views hold the generation their
 * names point into: the old one is freed by the last of them. Lock held. */
static void maybe_compact_names(void)
{
    struct prof_intern *old = &store.gen->t;
    if (old->bytes < store.name_cap - store.name_cap / 8)
        return;
    int64_t now = prof_now_ns();
    if (store.names_compacted_ns && now - store.names_compacted_ns < store.names_gap_ns)
        return;
    store.names_compacted_ns = now;
    if (old->bytes > store.st.string_bytes_peak)
        store.st.string_bytes_peak = old->bytes;
    if (compact_nodes((int64_t)floor(unix_now())) < 0)
        return;
    uint32_t *remap = calloc(old->n, sizeof *remap);
    if (!remap)
        return;
    /* First what a copy would free, marking the ids in use (no hashing): with 16 MiB of names
     * all in use the copy holds the lock ~0.1 s, not worth it when it frees little */
    for (uint32_t i = 0; i < store.nnodes; i++)
        remap[store.nodes[i].frame] = 1;
    for (int i = 0; i < store.nbuckets; i++) {
        struct bucket *b = &store.buckets[i];
        for (uint32_t k = 0; b->second >= 0 && k < b->cap; k++)
            if (b->e[k].used)
                remap[b->e[k].label] = 1;
    }
    size_t unused = 0;
    for (uint32_t id = 0; id < old->n; id++)
        if (!remap[id] && id != old->overflow_id)
            unused += prof_intern_cost(old, id);
    struct names_gen *g = unused >= store.name_cap / 16 ? gen_new(store.name_cap) : NULL;
    if (!g) {
        free(remap);
        store.names_gap_ns = next_gap(store.names_gap_ns, 0);
        return;
    }
    memset(remap, 0, old->n * sizeof *remap);
    remap[0] = 1; /* "" (no label) stays id 0 */
    for (uint32_t i = 0; i < store.nnodes; i++)
        store.nodes[i].frame = carry(old, &g->t, remap, store.nodes[i].frame);
    for (int i = 0; i < store.nbuckets; i++) {
        struct bucket *b = &store.buckets[i];
        for (uint32_t k = 0; b->second >= 0 && k < b->cap; k++)
            if (b->e[k].used)
                b->e[k].label = carry(old, &g->t, remap, b->e[k].label);
    }
    free(remap);
    reindex(); /* the nodes' and entries' hashes changed with their ids */
    store.st.name_compactions++;
    store.st.freed_names += old->n - g->t.n;
    store.dropped_names += old->dropped;
    gen_unref(store.gen);
    store.gen = g;
    store.names_gap_ns = GAP_MIN_NS; /* it freed at least 1/16 of the cap, counted above */
}

void prof_store_add(int kind, double t_unix, const char *const *frames, int nframes, uint32_t tid,
                    const char *label, const int64_t v[PROF_NVALUES])
{
    if (kind < 0 || kind >= PK_COUNT)
        return;
    pthread_mutex_lock(&store.lock);
    if (!store.ready)
        goto out;
    maybe_compact();
    maybe_compact_names();
    struct prof_intern *names = &store.gen->t;
    uint32_t node = 0;
    struct path_cache *pc = &store.paths[(tid * 2654435761u) >> 16 & (PATH_CACHE - 1)];
    int same = pc->layout == store.layout && pc->tid == tid; /* the prefix so far is pc's */
    uint32_t kept = 0;
    for (int i = 0; i < nframes; i++) {
        uint32_t name = prof_intern(names, frames[i] ? frames[i] : "[unknown]");
        uint32_t c;
        if (same && (uint32_t)i < pc->n && pc->name[i] == name) {
            c = pc->node[i];
        } else {
            same = 0;
            c = child(node, name);
        }
        if (c == UINT32_MAX)
            break;
        node = c;
        if (i < PATH_CACHE_DEPTH) {
            pc->name[i] = name;
            pc->node[i] = c;
            kept = (uint32_t)i + 1;
        }
    }
    pc->layout = store.layout;
    pc->tid = tid;
    pc->n = kept;
    struct entry key = {.node = node,
                        .tid = tid,
                        .label = label && *label ? prof_intern(names, label) : 0,
                        .kind = (uint8_t)kind,
                        .used = 1};
    struct bucket *b = bucket_for((int64_t)floor(t_unix));
    if (!b) {
        store.st.dropped_entries++;
        goto out;
    }
    if ((b->n + 1) * 4 > b->cap * 3) {
        if (b->cap >= BUCKET_MAX_ENTRIES || bucket_rehash(b, b->cap ? b->cap * 2 : 64)) {
            /* Full: fold the sample into the root so totals stay right, lose only the stack. */
            key.node = 0;
            key.tid = 0;
            key.label = 0;
            store.st.dropped_entries++;
            if (!b->cap)
                goto out;
            struct entry *e0 = bucket_slot(b, &key);
            if (!e0->used && b->n + 1 >= b->cap)
                goto out;
        }
    }
    struct entry *e = bucket_slot(b, &key);
    if (!e->used) {
        *e = key;
        b->n++;
        store.st.entries++;
    }
    for (int i = 0; i < PROF_NVALUES; i++) {
        int64_t x = v[i] < 0 ? 0 : v[i] > PROF_VALUE_MAX ? PROF_VALUE_MAX : v[i];
        e->v[i] = e->v[i] > INT64_MAX - x ? INT64_MAX : e->v[i] + x;
    }
    store.st.samples_added++;
out:
    pthread_mutex_unlock(&store.lock);
}

static void window(double seconds, int64_t *from, int64_t *to, double now)
{
    if (!(seconds > 0))
        seconds = 60;
    if (seconds > store.nbuckets)
        seconds = store.nbuckets;
    *to = (int64_t)floor(now);
    *from = *to - (int64_t)ceil(seconds) + 1;
}

/* range = 0: the last `seconds`; else whole unix seconds from_s..to_s within the history. */
static int view_window(int kind, double seconds, int range, int64_t from_s, int64_t to_s,
                       const char *filter, struct prof_view *out)
{
    memset(out, 0, sizeof *out);
    out->kind = kind;
    double now = unix_now();
    pthread_mutex_lock(&store.lock);
    int rc = -1;
    uint32_t *remap = NULL;
    if (!store.ready)
        goto out;
    out->names = store.gen; /* its names point into this generation: it lives as long as the view */
    store.gen->refs++;
    int64_t from, to;
    window(seconds, &from, &to, now);
    out->t_from = (double)from;
    out->t_to = now;
    if (range) {
        int64_t oldest = to - store.nbuckets + 1;
        from = from_s > oldest ? from_s : oldest;
        to = to_s < to ? to_s : to;
        out->t_from = (double)from;
        out->t_to = (double)(to + 1);
    }
    /* a window that reaches back before the store started covers only the time since */
    if (out->t_from < store.t_init && store.t_init < out->t_to)
        out->t_from = store.t_init;
    uint32_t want_label = UINT32_MAX;
    if (filter) {
        want_label = prof_intern_find(&store.gen->t, filter);
        if (want_label == UINT32_MAX) { /* nothing has that label: an empty view */
            rc = 0;
            goto alloc_root;
        }
    }
    size_t nrows = 0, cap = 256;
    out->rows = prof_scratch_alloc(&out->mem, cap * sizeof *out->rows);
    remap = prof_scratch_calloc(&out->mem, store.nnodes, sizeof *remap); /* old -> new + 1 */
    if (!out->rows || !remap)
        goto out;
    for (int64_t s = from; s <= to; s++) {
        struct bucket *b = &store.buckets[(uint64_t)s % (uint64_t)store.nbuckets];
        if (b->second != s)
            continue;
        for (uint32_t i = 0; i < b->cap; i++) {
            struct entry *e = &b->e[i];
            if (!e->used || e->kind != kind || (filter && e->label != want_label))
                continue;
            if (nrows == cap) {
                cap *= 2;
                struct prof_row *nr = prof_scratch_realloc(&out->mem, out->rows, cap * sizeof *nr);
                if (!nr)
                    goto out;
                out->rows = nr;
            }
            struct prof_row *r = &out->rows[nrows++];
            r->node = e->node;
            r->tid = e->tid;
            r->label = prof_intern_str(&store.gen->t, e->label);
            memcpy(r->v, e->v, sizeof r->v);
            scale_row(kind, s, r->v);
            remap[e->node] = 1;
        }
    }
    out->nrows = nrows;
    size_t nn = number_used(remap);
    out->parent = prof_scratch_alloc(&out->mem, nn * sizeof *out->parent);
    out->name = prof_scratch_alloc(&out->mem, nn * sizeof *out->name);
    if (!out->parent || !out->name)
        goto out;
    for (uint32_t i = 0; i < store.nnodes; i++)
        if (remap[i]) {
            uint32_t k = remap[i] - 1;
            out->parent[k] = i ? remap[store.nodes[i].parent] - 1 : 0;
            out->name[k] = prof_intern_str(&store.gen->t, store.nodes[i].frame);
        }
    out->nnodes = nn;
    for (size_t i = 0; i < nrows; i++)
        out->rows[i].node = remap[out->rows[i].node] - 1;
    rc = 0;
    goto out;
alloc_root:
    out->parent = prof_scratch_calloc(&out->mem, 1, sizeof *out->parent);
    out->name = prof_scratch_alloc(&out->mem, sizeof *out->name);
    if (out->parent && out->name) {
        out->name[0] = "all";
        out->nnodes = 1;
    } else {
        rc = -1;
    }
out:
    pthread_mutex_unlock(&store.lock);
    prof_scratch_free(&out->mem, remap);
    if (rc)
        prof_view_free(out);
    return rc;
}

int prof_store_view(int kind, double seconds, const char *filter, struct prof_view *out)
{
    return view_window(kind, seconds, 0, 0, 0, filter, out);
}

int prof_store_view_range(int kind, int64_t from_s, int64_t to_s, const char *filter,
                          struct prof_view *out)
{
    return view_window(kind, 0, 1, from_s, to_s, filter, out);
}

void prof_view_free(struct prof_view *v)
{
    if (v->names) {
        pthread_mutex_lock(&store.lock);
        gen_unref(v->names);
        pthread_mutex_unlock(&store.lock);
    }
    prof_scratch_release(&v->mem);
    memset(v, 0, sizeof *v);
}

size_t prof_store_mem_bytes(void)
{
    pthread_mutex_lock(&store.lock);
    size_t b = 0;
    if (store.ready) {
        b = (size_t)store.node_cap * sizeof *store.nodes +
            (size_t)store.nslots * sizeof *store.node_slots +
            (size_t)store.nbuckets * sizeof *store.buckets;
        for (int i = 0; i < store.nbuckets; i++)
            b += (size_t)store.buckets[i].cap * sizeof(struct entry);
        const struct prof_intern *t = &store.gen->t;
        b += (size_t)t->cap * sizeof *t->strs + (size_t)t->nslots * sizeof *t->slots + t->bytes +
             t->n;
    }
    pthread_mutex_unlock(&store.lock);
    return b;
}

void prof_store_get_stats(struct prof_store_stats *s)
{
    pthread_mutex_lock(&store.lock);
    store.st.nodes = store.nnodes;
    store.st.node_cap = store.node_max;
    if (store.ready) {
        store.st.strings = store.gen->t.n;
        store.st.string_bytes = store.gen->t.bytes;
        store.st.dropped_strings = store.dropped_names + store.gen->t.dropped;
        if (store.st.string_bytes > store.st.string_bytes_peak)
            store.st.string_bytes_peak = store.st.string_bytes;
    }
    if (store.st.nodes > store.st.nodes_peak)
        store.st.nodes_peak = store.st.nodes;
    store.st.string_cap = store.name_cap;
    *s = store.st;
    pthread_mutex_unlock(&store.lock);
}

void prof_store_totals(int kind, double seconds, int64_t out[PROF_NVALUES])
{
    memset(out, 0, PROF_NVALUES * sizeof *out);
    double now = unix_now();
    pthread_mutex_lock(&store.lock);
    if (store.ready) {
        int64_t from, to;
        window(seconds, &from, &to, now);
        for (int64_t s = from; s <= to; s++) {
            struct bucket *b = &store.buckets[(uint64_t)s % (uint64_t)store.nbuckets];
            if (b->second != s)
                continue;
            for (uint32_t i = 0; i < b->cap; i++)
                if (b->e[i].used && b->e[i].kind == kind) {
                    int64_t v[PROF_NVALUES];
                    memcpy(v, b->e[i].v, sizeof v);
                    scale_row(kind, s, v);
                    for (int k = 0; k < PROF_NVALUES; k++)
                        out[k] += v[k];
                }
        }
    }
    pthread_mutex_unlock(&store.lock);
}

const struct prof_kind prof_store_kind = {
    .name = "store",
    .mem_bytes = prof_store_mem_bytes,
    .mem_name = "store",
};
