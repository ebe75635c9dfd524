/*
 * prof_tree - turns a prof_view (call-path trie + rows) into what readers need: per-node self and
 * inclusive values for one value slot, a trimmed tree for flame graphs (at most max_nodes nodes,
 * small subtrees folded into one "[other]" node per parent), the same over two windows (a
 * differential flame graph), and a top-functions table.
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
    int64_t *base, *base_self; /* prof_tree_build_diff: the base window's values (else NULL) */
    int64_t *samples;         /* prof_tree_build_sampled: the samples behind each inclusive
                               * value (else NULL) */
    uint32_t *first_child;    /* UINT32_MAX = none; children sorted by name */
    uint32_t *next_sibling;
    int64_t total, base_total;
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

/* Folds native frames ("[native …]": the runtime, the JIT, its stubs, system libraries) into the
 * managed frame above them, in place: a native frame with a frame that is not native above it
 * goes, its time becomes that frame's own, and the paths that then meet are merged; native frames
 * nearer the root than any other (a thread's start, a runtime thread) stay. *folded counts the
 * nodes removed. 0, or -1 (out of memory: the view is unchanged). */
int prof_view_fold_native(struct prof_view *v, size_t *folded);
/* Groups native frames, in place: each takes the name of its group, "[native runtime]"
 * (libcoreclr), "[native JIT]" (libclrjit), "[native GC]" (libclrgc), "[native stubs]" (the
 * runtime's generated code, "[native code]" and "[native stub …]") or "[native system]" (the C and C++ runtimes, the
 * loader, the runtime's System.*.Native shims); other libraries (an app's own) keep their names.
 * A frame whose parent has its group's name goes into it, and the paths that then meet are
 * merged. *merged counts the nodes removed. 0, or -1 (out of memory: the view is unchanged). */
int prof_view_group_native(struct prof_view *v, size_t *merged);
/* value_slot selects v[value_slot] of each row. */
int prof_tree_build(const struct prof_view *v, int value_slot, size_t max_nodes,
                    struct prof_tree *out);
/* The same, with each node's inclusive sum of v[samples_slot] too (out->samples): the samples
 * an estimated value stands on, from which its interval follows (a node folded into "[other]"
 * adds its samples there, as it adds its value). */
int prof_tree_build_sampled(const struct prof_view *v, int value_slot, int samples_slot,
                            size_t max_nodes, struct prof_tree *out);
/* The tree of two windows of one profile: value/self are b's, base/base_self a's, over the union
 * of their call paths (matched by frame names from the root). Trimmed by the larger of a node's
 * two shares of its window's total, so paths that appeared or vanished stay. */
int prof_tree_build_diff(const struct prof_view *a, const struct prof_view *b, int slot,
                         size_t max_nodes, struct prof_tree *out);
void prof_tree_free(struct prof_tree *t);
/* Top functions by self value (recursion counted once per stack for total), `limit` rows at
 * most (0: all). Free with prof_top_free, also after a failure. */
int prof_tree_top(const struct prof_view *v, int value_slot, size_t limit, struct prof_top *out);
void prof_top_free(struct prof_top *t);

struct prof_top_diff_row {
    const char *name;
    int64_t self, total;           /* in b, the window compared */
    int64_t base_self, base_total; /* in a, the base */
};

struct prof_top_diff {
    struct prof_top_diff_row *rows;
    size_t n;
    struct prof_scratch mem; /* rows */
};

/* Functions by the change of their self value's share of its window's total, largest change
 * (gain or loss) first; a function in one window only has zeros for the other; one with no self
 * value in either is left out. Names point into the views. Free with prof_top_diff_free, also
 * after a failure. */
int prof_tree_top_diff(const struct prof_view *a, const struct prof_view *b, int slot,
                       size_t limit, struct prof_top_diff *out);
void prof_top_diff_free(struct prof_top_diff *t);

#endif
