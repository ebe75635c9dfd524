/* prof_tree.c - see prof_tree.h. */
#include "prof_tree.h"

#include <stdlib.h>
#include <string.h>

#include "prof_scratch.h"

struct sort_item {
    uint32_t parent;
    const char *name;
    uint32_t idx;
};

static int cmp_items(const void *a, const void *b)
{
    const struct sort_item *x = a, *y = b;
    if (x->parent != y->parent)
        return x->parent < y->parent ? -1 : 1;
    int c = strcmp(x->name, y->name);
    if (c)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* Per-node self and inclusive values over the whole view. */
static int sums(const struct prof_view *v, int slot, struct prof_scratch *tmp, int64_t **self_out,
                int64_t **incl_out)
{
    int64_t *self = prof_scratch_calloc(tmp, v->nnodes ? v->nnodes : 1, sizeof *self);
    int64_t *incl = prof_scratch_calloc(tmp, v->nnodes ? v->nnodes : 1, sizeof *incl);
    if (!self || !incl)
        return -1;
    for (size_t i = 0; i < v->nrows; i++)
        self[v->rows[i].node] += v->rows[i].v[slot];
    memcpy(incl, self, v->nnodes * sizeof *incl);
    for (size_t i = v->nnodes; i-- > 1;)
        incl[v->parent[i]] += incl[i];
    *self_out = self;
    *incl_out = incl;
    return 0;
}

/* The trimmed tree of a call-path trie with one or two value sets (nset): values per trie node
 * (self[k], incl[k]), trimmed by key[] (the larger keys kept). Set 0 goes to value/self, set 1
 * to base/base_self. */
struct trie_sums {
    size_t nnodes;
    const uint32_t *parent;
    const char *const *name;
    int nset;
    int64_t *self[2], *incl[2];
    int64_t *samples; /* inclusive samples of set 0, or NULL */
    double *key;
};

static int cmp_desc_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

static int build(const struct trie_sums *s, size_t max_nodes, struct prof_tree *t)
{
    memset(t, 0, sizeof *t);
    struct prof_scratch tmp = {0}; /* what only the build needs */
    double *sorted = NULL;
    uint32_t *map = NULL, *parent = NULL, *other = NULL;
    struct sort_item *items = NULL;
    if (max_nodes < 16)
        max_nodes = 16;
    /* threshold: keep the (max_nodes/2) largest keys, leaving room for "[other]" */
    double thr = 0;
    size_t budget = max_nodes / 2;
    if (s->nnodes > budget) {
        sorted = prof_scratch_alloc(&tmp, s->nnodes * sizeof *sorted);
        if (!sorted)
            goto fail;
        memcpy(sorted, s->key, s->nnodes * sizeof *sorted);
        prof_scratch_sort(&tmp, sorted, s->nnodes, sizeof *sorted, cmp_desc_d);
        thr = sorted[budget - 1];
        prof_scratch_free(&tmp, sorted);
    }
    size_t cap = max_nodes + 1;
    int two = s->nset > 1;
    map = prof_scratch_alloc(&tmp, s->nnodes * sizeof *map);
    t->name = prof_scratch_alloc(&t->mem, cap * sizeof *t->name);
    t->value = prof_scratch_calloc(&t->mem, cap, sizeof *t->value);
    t->self = prof_scratch_calloc(&t->mem, cap, sizeof *t->self);
    if (two) {
        t->base = prof_scratch_calloc(&t->mem, cap, sizeof *t->base);
        t->base_self = prof_scratch_calloc(&t->mem, cap, sizeof *t->base_self);
    }
    if (s->samples && !(t->samples = prof_scratch_calloc(&t->mem, cap, sizeof *t->samples)))
        goto fail;
    t->first_child = prof_scratch_alloc(&t->mem, cap * sizeof *t->first_child);
    t->next_sibling = prof_scratch_alloc(&t->mem, cap * sizeof *t->next_sibling);
    parent = prof_scratch_alloc(&tmp, cap * sizeof *parent);
    other = prof_scratch_alloc(&tmp, cap * sizeof *other); /* kept node -> its "[other]" node */
    if (!map || !t->name || !t->value || !t->self || !t->first_child || !t->next_sibling ||
        !parent || !other || (two && (!t->base || !t->base_self)))
        goto fail;
    size_t n = 1;
    t->name[0] = "all";
    t->value[0] = s->incl[0][0];
    t->self[0] = s->self[0][0];
    if (two) {
        t->base[0] = s->incl[1][0];
        t->base_self[0] = s->self[1][0];
    }
    if (t->samples)
        t->samples[0] = s->samples[0];
    parent[0] = 0;
    other[0] = UINT32_MAX;
    map[0] = 0;
    for (size_t i = 1; i < s->nnodes; i++) {
        uint32_t pk = map[s->parent[i]];
        if (s->key[i] > 0 && s->key[i] >= thr && pk != UINT32_MAX && n < max_nodes) {
            map[i] = (uint32_t)n;
            t->name[n] = s->name[i];
            t->value[n] = s->incl[0][i];
            t->self[n] = s->self[0][i];
            if (two) {
                t->base[n] = s->incl[1][i];
                t->base_self[n] = s->self[1][i];
            }
            if (t->samples)
                t->samples[n] = s->samples[i];
            parent[n] = pk;
            other[n] = UINT32_MAX;
            n++;
            continue;
        }
        map[i] = UINT32_MAX;
        if (pk == UINT32_MAX || s->key[i] <= 0)
            continue; /* folded into an ancestor's "[other]" already, or empty */
        t->trimmed++;
        if (other[pk] == UINT32_MAX && n < cap) {
            other[pk] = (uint32_t)n;
            t->name[n] = "[other]";
            parent[n] = pk;
            other[n] = UINT32_MAX;
            n++;
        }
        /* into the parent's "[other]"; with no room left for one, into the parent's self (its
         * inclusive value holds the child's already) */
        uint32_t o = other[pk] != UINT32_MAX ? other[pk] : pk;
        if (o != pk) {
            t->value[o] += s->incl[0][i];
            if (two)
                t->base[o] += s->incl[1][i];
            if (t->samples)
                t->samples[o] += s->samples[i];
        }
        t->self[o] += s->incl[0][i];
        if (two)
            t->base_self[o] += s->incl[1][i];
    }
    t->n = n;
    t->total = s->incl[0][0];
    t->base_total = two ? s->incl[1][0] : 0;
    /* children lists sorted by name */
    items = prof_scratch_alloc(&tmp, n * sizeof *items);
    if (!items)
        goto fail;
    for (size_t i = 0; i < n; i++) {
        items[i].parent = i ? parent[i] : UINT32_MAX;
        items[i].name = t->name[i];
        items[i].idx = (uint32_t)i;
        t->first_child[i] = UINT32_MAX;
        t->next_sibling[i] = UINT32_MAX;
    }
    prof_scratch_sort(&tmp, items, n, sizeof *items, cmp_items);
    for (size_t k = n; k-- > 0;) {
        if (items[k].parent == UINT32_MAX)
            continue;
        uint32_t i = items[k].idx, p = items[k].parent;
        t->next_sibling[i] = t->first_child[p];
        t->first_child[p] = i;
    }
    prof_scratch_release(&tmp);
    return 0;
fail:
    prof_scratch_release(&tmp);
    prof_tree_free(t);
    return -1;
}

int prof_tree_build(const struct prof_view *v, int slot, size_t max_nodes, struct prof_tree *t)
{
    return prof_tree_build_sampled(v, slot, -1, max_nodes, t);
}

int prof_tree_build_sampled(const struct prof_view *v, int slot, int samples_slot,
                            size_t max_nodes, struct prof_tree *t)
{
    memset(t, 0, sizeof *t);
    struct prof_scratch tmp = {0};
    struct trie_sums s = {.nnodes = v->nnodes, .parent = v->parent, .name = v->name, .nset = 1};
    int64_t *samples_self = NULL;
    int rc = -1;
    if (samples_slot >= PROF_NVALUES)
        samples_slot = -1;
    if (v->nnodes && !sums(v, slot, &tmp, &s.self[0], &s.incl[0]) &&
        (samples_slot < 0 || !sums(v, samples_slot, &tmp, &samples_self, &s.samples)) &&
        (s.key = prof_scratch_alloc(&tmp, v->nnodes * sizeof *s.key))) {
        for (size_t i = 0; i < v->nnodes; i++)
            s.key[i] = (double)s.incl[0][i];
        rc = build(&s, max_nodes, t);
    }
    prof_scratch_release(&tmp);
    return rc;
}

/* ---- two windows ---- */

static uint64_t name_hash(const char *p)
{
    uint64_t h = 1469598103934665603ull;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ull;
    return h;
}

/* The union of two views' tries: a's nodes keep their numbers, b's are looked up by (parent,
 * name) and appended when a has no such path. Names compare as strings (the two views may hold
 * different generations of the store's names). */
struct merged {
    size_t n, cap;
    uint32_t *parent;
    const char **name;
    uint64_t *hash;  /* of each node's name */
    uint32_t *slots; /* open addressing over the nodes, UINT32_MAX = empty */
    size_t nslots;
    uint32_t *map_b; /* b's node -> merged node */
};

static size_t slot_of(const struct merged *m, uint32_t parent, uint64_t nh)
{
    uint64_t h = (nh ^ ((uint64_t)parent * 0x9E3779B97F4A7C15ull)) * 0xff51afd7ed558ccdull;
    return (size_t)(h >> 17) & (m->nslots - 1);
}

/* The merged node for (parent, name): found, or added; `add` adds one in any case (a's nodes
 * keep their numbers even if a path were there twice; the first is the one b finds). */
static uint32_t merged_node(struct merged *m, uint32_t parent, const char *name, uint64_t nh,
                            int add)
{
    size_t k = slot_of(m, parent, nh);
    uint32_t found = UINT32_MAX;
    for (;;) {
        uint32_t i = m->slots[k];
        if (i == UINT32_MAX)
            break;
        if (m->parent[i] == parent && m->hash[i] == nh &&
            (m->name[i] == name || !strcmp(m->name[i], name))) {
            found = i;
            break;
        }
        k = (k + 1) & (m->nslots - 1);
    }
    if (found != UINT32_MAX && !add)
        return found;
    uint32_t i = (uint32_t)m->n++;
    m->parent[i] = parent;
    m->name[i] = name;
    m->hash[i] = nh;
    if (found == UINT32_MAX)
        m->slots[k] = i;
    return i;
}

static int merge(const struct prof_view *a, const struct prof_view *b, struct prof_scratch *tmp,
                 struct merged *m)
{
    memset(m, 0, sizeof *m);
    m->cap = a->nnodes + b->nnodes;
    m->nslots = 16;
    while (m->nslots < m->cap * 2)
        m->nslots *= 2;
    m->parent = prof_scratch_alloc(tmp, m->cap * sizeof *m->parent);
    m->name = prof_scratch_alloc(tmp, m->cap * sizeof *m->name);
    m->hash = prof_scratch_alloc(tmp, m->cap * sizeof *m->hash);
    m->slots = prof_scratch_alloc(tmp, m->nslots * sizeof *m->slots);
    m->map_b = prof_scratch_alloc(tmp, (b->nnodes ? b->nnodes : 1) * sizeof *m->map_b);
    if (!m->parent || !m->name || !m->hash || !m->slots || !m->map_b)
        return -1;
    memset(m->slots, 0xff, m->nslots * sizeof *m->slots);
    /* node 0, the root, is the root of both */
    m->parent[0] = 0;
    m->name[0] = "all";
    m->hash[0] = 0;
    m->n = 1;
    for (size_t i = 1; i < a->nnodes; i++)
        merged_node(m, a->parent[i], a->name[i], name_hash(a->name[i]), 1);
    m->map_b[0] = 0;
    for (size_t i = 1; i < b->nnodes; i++)
        m->map_b[i] = merged_node(m, m->map_b[b->parent[i]], b->name[i],
                                  name_hash(b->name[i]), 0);
    return 0;
}

int prof_tree_build_diff(const struct prof_view *a, const struct prof_view *b, int slot,
                         size_t max_nodes, struct prof_tree *t)
{
    memset(t, 0, sizeof *t);
    if (!a->nnodes || !b->nnodes)
        return -1;
    struct prof_scratch tmp = {0};
    struct merged m;
    int rc = -1;
    struct trie_sums s = {.nset = 2};
    if (merge(a, b, &tmp, &m))
        goto out;
    s.nnodes = m.n;
    s.parent = m.parent;
    s.name = m.name;
    for (int k = 0; k < 2; k++) {
        s.self[k] = prof_scratch_calloc(&tmp, m.n, sizeof *s.self[k]);
        s.incl[k] = prof_scratch_calloc(&tmp, m.n, sizeof *s.incl[k]);
    }
    s.key = prof_scratch_alloc(&tmp, m.n * sizeof *s.key);
    if (!s.self[0] || !s.self[1] || !s.incl[0] || !s.incl[1] || !s.key)
        goto out;
    /* set 0 = b (the window compared), set 1 = a (the base); a's nodes keep their numbers */
    for (size_t i = 0; i < b->nrows; i++)
        s.self[0][m.map_b[b->rows[i].node]] += b->rows[i].v[slot];
    for (size_t i = 0; i < a->nrows; i++)
        s.self[1][a->rows[i].node] += a->rows[i].v[slot];
    for (int k = 0; k < 2; k++) {
        memcpy(s.incl[k], s.self[k], m.n * sizeof *s.incl[k]);
        for (size_t i = m.n; i-- > 1;)
            s.incl[k][m.parent[i]] += s.incl[k][i];
    }
    /* trimmed by the larger of each window's share, so a path that vanished or appeared in
     * one window is kept like one that ran in both */
    double ta = s.incl[1][0] > 0 ? (double)s.incl[1][0] : 1;
    double tb = s.incl[0][0] > 0 ? (double)s.incl[0][0] : 1;
    for (size_t i = 0; i < m.n; i++) {
        double x = (double)s.incl[0][i] / tb, y = (double)s.incl[1][i] / ta;
        s.key[i] = x > y ? x : y;
    }
    rc = build(&s, max_nodes, t);
out:
    prof_scratch_release(&tmp);
    return rc;
}

void prof_tree_free(struct prof_tree *t)
{
    prof_scratch_release(&t->mem);
    memset(t, 0, sizeof *t);
}

static int cmp_top(const void *a, const void *b)
{
    const struct prof_top_row *x = a, *y = b;
    if (x->self != y->self)
        return x->self < y->self ? 1 : -1;
    return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

int prof_tree_top(const struct prof_view *v, int slot, size_t limit, struct prof_top *out)
{
    memset(out, 0, sizeof *out);
    struct prof_scratch tmp = {0};
    int64_t *self = NULL, *incl = NULL;
    if (!v->nnodes || sums(v, slot, &tmp, &self, &incl)) {
        prof_scratch_release(&tmp);
        return -1;
    }
    /* group by interned name pointer: names are unique pointers per distinct string */
    size_t cap = 1024, n = 0;
    while (cap < v->nnodes * 2)
        cap *= 2;
    struct prof_top_row *tab = prof_scratch_calloc(&tmp, cap, sizeof *tab);
    if (!tab) {
        prof_scratch_release(&tmp);
        return -1;
    }
    for (size_t i = 1; i < v->nnodes; i++) {
        if (!incl[i])
            continue;
        const char *nm = v->name[i];
        int recursive = 0;
        for (uint32_t a = v->parent[i]; a != 0; a = v->parent[a])
            if (v->name[a] == nm) {
                recursive = 1;
                break;
            }
        uintptr_t h = ((uintptr_t)nm >> 4) * 0x9E3779B97F4A7C15ull;
        size_t k = (size_t)(h >> 20) & (cap - 1);
        while (tab[k].name && tab[k].name != nm)
            k = (k + 1) & (cap - 1);
        if (!tab[k].name) {
            tab[k].name = nm;
            n++;
        }
        tab[k].self += self[i];
        if (!recursive)
            tab[k].total += incl[i];
    }
    size_t j = 0;
    for (size_t k = 0; k < cap; k++)
        if (tab[k].name)
            tab[j++] = tab[k];
    prof_scratch_sort(&tmp, tab, j, sizeof *tab, cmp_top);
    if (limit && j > limit)
        j = limit;
    /* the table was sized for every node; the answer keeps the rows it shows */
    out->rows = prof_scratch_alloc(&out->mem, (j ? j : 1) * sizeof *out->rows);
    if (out->rows) {
        memcpy(out->rows, tab, j * sizeof *tab);
        out->n = j;
    }
    prof_scratch_release(&tmp);
    return out->rows ? 0 : -1;
}

void prof_top_free(struct prof_top *t)
{
    prof_scratch_release(&t->mem);
    memset(t, 0, sizeof *t);
}

static int cmp_top_name(const void *a, const void *b)
{
    return strcmp(((const struct prof_top_row *)a)->name, ((const struct prof_top_row *)b)->name);
}

struct diff_sort {
    double key;
    struct prof_top_diff_row row;
};

static int cmp_diff_key(const void *a, const void *b)
{
    double x = ((const struct diff_sort *)a)->key, y = ((const struct diff_sort *)b)->key;
    if (x != y)
        return x < y ? 1 : -1;
    return strcmp(((const struct diff_sort *)a)->row.name, ((const struct diff_sort *)b)->row.name);
}

static double share(int64_t v, int64_t total)
{
    return total > 0 ? (double)v / (double)total : 0;
}

int prof_tree_top_diff(const struct prof_view *a, const struct prof_view *b, int slot,
                       size_t limit, struct prof_top_diff *out)
{
    memset(out, 0, sizeof *out);
    struct prof_top ta_ = {0}, tb_ = {0};
    struct prof_scratch tmp = {0};
    int rc = -1;
    if (prof_tree_top(a, slot, 0, &ta_) || prof_tree_top(b, slot, 0, &tb_))
        goto out;
    struct prof_top_row *ra = ta_.rows, *rb = tb_.rows;
    size_t na = ta_.n, nb = tb_.n;
    int64_t ta = 0, tb = 0;
    for (size_t i = 0; i < a->nrows; i++)
        ta += a->rows[i].v[slot];
    for (size_t i = 0; i < b->nrows; i++)
        tb += b->rows[i].v[slot];
    prof_scratch_sort(&tmp, ra, na, sizeof *ra, cmp_top_name);
    prof_scratch_sort(&tmp, rb, nb, sizeof *rb, cmp_top_name);
    struct diff_sort *d = prof_scratch_alloc(&tmp, (na + nb + 1) * sizeof *d);
    if (!d)
        goto out;
    size_t n = 0, i = 0, j = 0;
    while (i < na || j < nb) {
        int c = i == na ? 1 : j == nb ? -1 : strcmp(ra[i].name, rb[j].name);
        struct prof_top_diff_row r = {0};
        if (c <= 0) {
            r.name = ra[i].name;
            r.base_self = ra[i].self;
            r.base_total = ra[i].total;
            i++;
        }
        if (c >= 0) {
            r.name = rb[j].name;
            r.self = rb[j].self;
            r.total = rb[j].total;
            j++;
        }
        if (!r.self && !r.base_self)
            continue; /* on the stack in both windows, never at its top: no change to show */
        double k = share(r.self, tb) - share(r.base_self, ta);
        d[n].key = k < 0 ? -k : k;
        d[n].row = r;
        n++;
    }
    prof_scratch_sort(&tmp, d, n, sizeof *d, cmp_diff_key);
    if (limit && n > limit)
        n = limit;
    out->rows = prof_scratch_alloc(&out->mem, (n ? n : 1) * sizeof *out->rows);
    if (!out->rows)
        goto out;
    for (size_t k = 0; k < n; k++)
        out->rows[k] = d[k].row;
    out->n = n;
    rc = 0;
out:
    prof_top_free(&ta_);
    prof_top_free(&tb_);
    prof_scratch_release(&tmp);
    return rc;
}

void prof_top_diff_free(struct prof_top_diff *t)
{
    prof_scratch_release(&t->mem);
    memset(t, 0, sizeof *t);
}

/* ---- folding native frames into their managed callers ---- */

static int is_native(const char *name)
{
    return name && !strncmp(name, "[native ", 8);
}

/* The group a native frame goes into with native=group, or NULL for one that keeps its name (an
 * app's own library, clrscope's). */
static const char *native_group(const char *f)
{
    static const char *const sys[] = {"libc.so", "libm.so", "ld-linux", "libpthread", "libdl.so",
                                      "librt.so", "libstdc++", "libgcc_s", "linux-vdso",
                                      "libSystem."};
    if (!is_native(f))
        return NULL;
    const char *lib = f + 8; /* after "[native " */
    if (!strncmp(lib, "code]", 5) || !strncmp(lib, "stub ", 5))
        return "[native stubs]";
    if (!strncmp(lib, "libcoreclr.so", 13))
        return "[native runtime]";
    if (!strncmp(lib, "libclrjit.so", 12))
        return "[native JIT]";
    if (!strncmp(lib, "libclrgc", 8))
        return "[native GC]";
    for (size_t i = 0; i < sizeof sys / sizeof sys[0]; i++)
        if (!strncmp(lib, sys[i], strlen(sys[i])))
            return "[native system]";
    return NULL;
}

/* fold (group 0): a native frame under a frame that is not native goes into it. group: a
 * native frame takes its group's name, and goes into its parent when that has the same. */
static int rebuild(struct prof_view *v, int group, size_t *folded)
{
    size_t n = v->nnodes;
    *folded = 0;
    if (n < 2)
        return 0;
    size_t cap = 16;
    while (cap < 2 * n)
        cap <<= 1;
    /* anchored[i]: node i or one of its ancestors is a frame that is not native (the root is
     * not); newid[i]: the node i becomes (its nearest kept ancestor's when it is folded) */
    unsigned char *anchored = prof_scratch_alloc(&v->mem, n);
    uint32_t *newid = prof_scratch_alloc(&v->mem, n * sizeof *newid);
    uint32_t *slot = prof_scratch_alloc(&v->mem, cap * sizeof *slot); /* (parent, name) -> id */
    uint32_t *parent = prof_scratch_alloc(&v->mem, n * sizeof *parent);
    const char **name = prof_scratch_alloc(&v->mem, n * sizeof *name);
    if (!anchored || !newid || !slot || !parent || !name) {
        prof_scratch_free(&v->mem, anchored);
        prof_scratch_free(&v->mem, newid);
        prof_scratch_free(&v->mem, slot);
        prof_scratch_free(&v->mem, parent);
        prof_scratch_free(&v->mem, name);
        return -1;
    }
    memset(slot, 0xff, cap * sizeof *slot);
    anchored[0] = 0;
    newid[0] = 0;
    parent[0] = 0;
    name[0] = v->name[0];
    size_t m = 1;
    for (size_t i = 1; i < n; i++) {
        uint32_t p = v->parent[i];
        int native = is_native(v->name[i]);
        const char *nm = v->name[i];
        anchored[i] = anchored[p] || !native;
        if (group) {
            const char *g = native_group(nm);
            nm = g ? g : nm;
            if (g && newid[p] && name[newid[p]] == g) {
                newid[i] = newid[p];
                (*folded)++;
                continue;
            }
        } else if (native && anchored[p]) {
            newid[i] = newid[p];
            (*folded)++;
            continue;
        }
        uint32_t np = newid[p];
        uint32_t h = (uint32_t)(name_hash(nm) ^ (np * 2654435761u)) & (uint32_t)(cap - 1);
        for (;; h = (h + 1) & (uint32_t)(cap - 1)) {
            uint32_t id = slot[h];
            if (id == UINT32_MAX) {
                slot[h] = (uint32_t)m;
                parent[m] = np;
                name[m] = nm;
                newid[i] = (uint32_t)m++;
                break;
            }
            if (parent[id] == np && (name[id] == nm || !strcmp(name[id], nm))) {
                newid[i] = id;
                break;
            }
        }
    }
    for (size_t r = 0; r < v->nrows; r++)
        v->rows[r].node = newid[v->rows[r].node];
    if (group)
        *folded = n - m; /* into a parent of the same group, or a sibling that became one */
    memcpy(v->parent, parent, m * sizeof *parent);
    memcpy(v->name, name, m * sizeof *name);
    v->nnodes = m;
    prof_scratch_free(&v->mem, anchored);
    prof_scratch_free(&v->mem, newid);
    prof_scratch_free(&v->mem, slot);
    prof_scratch_free(&v->mem, parent);
    prof_scratch_free(&v->mem, name);
    return 0;
}

int prof_view_fold_native(struct prof_view *v, size_t *folded)
{
    return rebuild(v, 0, folded);
}

int prof_view_group_native(struct prof_view *v, size_t *merged)
{
    return rebuild(v, 1, merged);
}
