/*
 * prof_tree - turns a prof_view (call-path trie + rows) into what readers need: per-node self and
 * inclusive values for one value slot, a trimmed tree for flame graphs (at most max_nodes nodes,
 * small subtrees folded into one "[other]" node per parent), and a top-functions table.
 * Iterative throughout; all memory in scratch arenas (prof_scratch): a tree or a table is made
 * for one answer, and what it took goes back to the system when it is freed.
 *
 * ctx: any thread (API handlers on civetweb's 100 KB stacks); it reads only the view it is given.
 */
#ifndef PROF_TREE_H
#define PROF_TREE_H

#include <stddef.h>
#include <stdint.h>

#include "prof_store.h"

struct prof_tree {
    size_t n;                 /* kept nodes; node 0 is the root */
    const char **name;
    int64_t *value;           /* inclusive */
    int64_t *self;
    uint32_t *first_child;    /* UINT32_MAX = none; children sorted by name */
    uint32_t *next_sibling;
    int64_t total;
    size_t trimmed;           /* nodes folded into "[other]" */
    struct prof_scratch mem;  /* the arrays above */
};

struct prof_top_row {
    const char *name;
    int64_t self, total;
};

struct prof_top {
    struct prof_top_row *rows; /* by self value, largest first */
    size_t n;
    struct prof_scratch mem;   /* rows */
};

/* value_slot selects v[value_slot] of each row. */
int prof_tree_build(const struct prof_view *v, int value_slot, size_t max_nodes,
                    struct prof_tree *out);
void prof_tree_free(struct prof_tree *t);
/* Top functions by self value (recursion counted once per stack for total), `limit` rows at
 * most (0: all). Free with prof_top_free, also after a failure. */
int prof_tree_top(const struct prof_view *v, int value_slot, size_t limit, struct prof_top *out);
void prof_top_free(struct prof_top *t);

#endif
