/* prof_tree.c - see prof_tree.h. */
#include "prof_tree.h"

#include <stdlib.h>
#include <string.h>

static int cmp_desc(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

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

int prof_tree_build(const struct prof_view *v, int slot, size_t max_nodes, struct prof_tree *t)
{
    memset(t, 0, sizeof *t);
    struct prof_scratch tmp = {0}; /* what only the build needs */
    int64_t *self = NULL, *incl = NULL, *sorted = NULL;
    if (!v->nnodes || sums(v, slot, &tmp, &self, &incl))
        goto fail;
    if (max_nodes < 16)
        max_nodes = 16;
    /* threshold: keep the (max_nodes/2) largest inclusive values, leaving room for "[other]" */
    int64_t thr = 1;
    size_t budget = max_nodes / 2;
    if (v->nnodes > budget) {
        sorted = prof_scratch_alloc(&tmp, v->nnodes * sizeof *sorted);
        if (!sorted)
            goto fail;
        memcpy(sorted, incl, v->nnodes * sizeof *sorted);
        prof_scratch_sort(&tmp, sorted, v->nnodes, sizeof *sorted, cmp_desc);
        thr = sorted[budget - 1];
        if (thr < 1)
            thr = 1;
        prof_scratch_free(&tmp, sorted);
    }
    uint32_t *map = prof_scratch_alloc(&tmp, v->nnodes * sizeof *map);
    size_t cap = max_nodes + 1;
    t->name = prof_scratch_alloc(&t->mem, cap * sizeof *t->name);
    t->value = prof_scratch_calloc(&t->mem, cap, sizeof *t->value);
    t->self = prof_scratch_calloc(&t->mem, cap, sizeof *t->self);
    t->first_child = prof_scratch_alloc(&t->mem, cap * sizeof *t->first_child);
    t->next_sibling = prof_scratch_alloc(&t->mem, cap * sizeof *t->next_sibling);
    uint32_t *parent = prof_scratch_alloc(&tmp, cap * sizeof *parent);
    uint32_t *other = prof_scratch_alloc(&tmp, cap * sizeof *other); /* node -> its "[other]" */
    if (!map || !t->name || !t->value || !t->self || !t->first_child || !t->next_sibling ||
        !parent || !other)
        goto fail;
    size_t n = 0;
    t->name[0] = "all";
    t->value[0] = incl[0];
    t->self[0] = self[0];
    parent[0] = 0;
    other[0] = UINT32_MAX;
    map[0] = 0;
    n = 1;
    for (size_t i = 1; i < v->nnodes; i++) {
        uint32_t pk = map[v->parent[i]];
        if (incl[i] >= thr && pk != UINT32_MAX && n < max_nodes) {
            map[i] = (uint32_t)n;
            t->name[n] = v->name[i];
            t->value[n] = incl[i];
            t->self[n] = self[i];
            parent[n] = pk;
            other[n] = UINT32_MAX;
            n++;
            continue;
        }
        map[i] = UINT32_MAX;
        if (pk == UINT32_MAX || incl[i] == 0)
            continue; /* folded into an ancestor's "[other]" already */
        t->trimmed++;
        if (other[pk] == UINT32_MAX && n < cap) {
            other[pk] = (uint32_t)n;
            t->name[n] = "[other]";
            parent[n] = pk;
            other[n] = UINT32_MAX;
            n++;
        }
        uint32_t o = other[pk] != UINT32_MAX ? other[pk] : pk;
        t->value[o] += incl[i];
        t->self[o] += incl[i];
    }
    t->n = n;
    t->total = incl[0];
    /* children lists sorted by name */
    struct sort_item *items = prof_scratch_alloc(&tmp, n * sizeof *items);
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
