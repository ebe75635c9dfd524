/* hs_summary.c - a snapshot's per-type summary for the API: one row per type name (the types
 * of one name merged), sorted by retained size, with up to HG_MAX_PATHS root paths each, written
 * as strings into the snapshot's own scratch memory. Runs on clrscope-heap before the snapshot is
 * published; no state of its own. */
#include "hs_int.h"

#include <stdlib.h>
#include <string.h>

#include "hs_graph.h"
#include "prof_scratch.h"

struct namerow {
    const char *name;
    uint32_t t;
};

static int cmp_namerow(const void *a, const void *b)
{
    const struct namerow *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : (x->t > y->t) - (x->t < y->t);
}

static int cmp_retained(const void *a, const void *b)
{
    const struct hs_row *x = a, *y = b;
    if (x->retained != y->retained)
        return x->retained < y->retained ? 1 : -1;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return strcmp(x->type, y->type);
}

/* The per-type table (types with the same name merged) and its root paths. */
int hs_summary_build(struct hs_snapshot *s, const struct heap_graph *g, const char **tnames)
{
    struct prof_scratch tmp = {0}; /* this function's own tables */
    struct namerow *nr = prof_scratch_calloc(&tmp, (size_t)g->ntypes + 1, sizeof *nr);
    s->rows = prof_scratch_calloc(&s->mem, (size_t)g->ntypes + 1, sizeof *s->rows);
    /* path strings: labels and type names; static labels are copied into `owned` */
    size_t owned_cap = 1, npv = 0;
    for (uint32_t t = 0; t < g->ntypes; t++)
        for (uint32_t k = 0; k < g->types[t].npaths; k++)
            npv += g->paths[g->types[t].path_at[k]];
    for (uint32_t i = 0; i < g->nstatics; i++)
        owned_cap += strlen(g->statics[i].field) + 300;
    s->pathv = prof_scratch_calloc(&s->mem, npv + 1, sizeof *s->pathv);
    s->owned = prof_scratch_alloc(&s->mem, owned_cap);
    /* static labels, once each */
    const char **slabel = prof_scratch_calloc(&tmp, g->nstatics + 1, sizeof *slabel);
    if (!nr || !s->rows || !s->pathv || !s->owned || !slabel) {
        prof_scratch_release(&tmp);
        return -1;
    }
    size_t used = 0;
    for (uint32_t i = 0; i < g->nstatics; i++) {
        char *l = hs_static_label(&tmp, g, i);
        if (!l)
            continue;
        size_t n = strlen(l) + 1;
        if (used + n <= owned_cap) {
            memcpy(s->owned + used, l, n);
            slabel[i] = s->owned + used;
            used += n;
        }
    }
    for (uint32_t t = 0; t < g->ntypes; t++)
        nr[t] = (struct namerow){tnames[t], t};
    qsort(nr, g->ntypes, sizeof *nr, cmp_namerow);
    uint32_t nrows = 0;
    for (uint32_t i = 0; i < g->ntypes; i++) {
        const struct hg_type *ty = &g->types[nr[i].t];
        struct hs_row *row;
        if (nrows && !strcmp(s->rows[nrows - 1].type, nr[i].name)) {
            row = &s->rows[nrows - 1];
        } else {
            row = &s->rows[nrows++];
            row->type = nr[i].name;
        }
        row->count += ty->count;
        row->bytes += ty->bytes;
        row->retained += ty->retained;
        for (uint32_t k = 0; k < ty->npaths && row->npaths < HG_MAX_PATHS; k++) {
            const uint32_t *p = g->paths + ty->path_at[k];
            uint32_t len = p[0];
            struct hs_path *hp = &row->paths[row->npaths++];
            hp->at = s->npathv;
            hp->len = len;
            for (uint32_t e = 0; e < len; e++) {
                uint32_t v = p[1 + e];
                const char *str;
                if (e == 0)
                    str = v < HG_CAT_COUNT ? hg_cat_name(v)
                          : (v - HG_CAT_COUNT < g->nstatics && slabel[v - HG_CAT_COUNT])
                              ? slabel[v - HG_CAT_COUNT]
                              : "[static var]";
                else if (v == HG_PATH_ELLIPSIS)
                    str = "...";
                else
                    str = v < g->ntypes ? tnames[v] : "?";
                s->pathv[s->npathv++] = str;
            }
        }
    }
    prof_scratch_release(&tmp);
    qsort(s->rows, nrows, sizeof *s->rows, cmp_retained);
    s->nrows = nrows;
    return 0;
}
