/*
 * fuzz_flame - the JSON writers: call stacks with frame names of any bytes (quotes, backslashes,
 * control characters, invalid UTF-8) and any values go into the profile store, out as a view, into
 * a trimmed call tree (prof_tree_build, any max_nodes) and through the flame-graph writer of
 * /api/v1/flamegraph (api_flame_emit on api_json's jbuf). The output must parse with cJSON and
 * give back exactly the tree: same names byte for byte (but each byte that belongs to no whole
 * UTF-8 character, which the writer turns into '?': the reply stays valid UTF-8), values, self
 * values and child order. Also jb_str / jb_int / jb_num on their own: each value must parse back
 * to itself, so cleaned. The same view with its native frames folded (native=fold) keeps every
 * row and its value, stays a trie, and has no native frame left under one that is not.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_flame.h"
#include "api_json.h"
#include "fuzz_input.h"
#include "fuzz_runtime.h"
#include "prof_tree.h"
#include "prof_utf8.h"

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    fuzz_runtime_init(PROFILE_ALL);
    return 0;
}

/* What jb_str writes for raw: the same bytes, those of no whole UTF-8 character as '?'. */
static int same_text(const char *written, const char *raw)
{
    char *want = strdup(raw);
    if (!want)
        abort();
    prof_utf8_clean(want);
    int same = !strcmp(written, want);
    for (const unsigned char *p = (const unsigned char *)written; same && *p;) {
        size_t k = prof_utf8_seq(p); /* and the reply is valid UTF-8 */
        same = k != 0;
        p += k;
    }
    free(want);
    return same;
}

static void check_scalars(struct fin *in, char **pool)
{
    struct jbuf b;
    jb_init(&b, 1 << 16);
    int64_t iv = (int64_t)fin_u64(in);
    double dv;
    uint64_t bits = fin_u64(in);
    memcpy(&dv, &bits, sizeof dv);
    jb_lit(&b, "[");
    jb_str(&b, pool[0]);
    jb_lit(&b, ",");
    jb_int(&b, iv);
    jb_lit(&b, ",");
    jb_num(&b, dv);
    jb_lit(&b, "]");
    FUZZ_CHECK(!b.overflow, "overflow");
    cJSON *j = cJSON_Parse(b.p);
    FUZZ_CHECK(j && cJSON_GetArraySize(j) == 3, "jb output does not parse: %s", b.p);
    cJSON *s = cJSON_GetArrayItem(j, 0), *i = cJSON_GetArrayItem(j, 1), *d = cJSON_GetArrayItem(j, 2);
    FUZZ_CHECK(cJSON_IsString(s) && same_text(s->valuestring, pool[0]), "string round trip");
    FUZZ_CHECK(cJSON_IsNumber(i) && i->valuedouble == (double)iv, "int round trip %lld",
               (long long)iv);
    if (isfinite(dv))
        FUZZ_CHECK(cJSON_IsNumber(d) && (d->valuedouble == dv ||
                                         fabs(d->valuedouble - dv) <= 1e-9 * fabs(dv)),
                   "double round trip %.17g -> %.17g", dv, d->valuedouble);
    else
        FUZZ_CHECK(cJSON_IsNull(d), "non-finite double must be null");
    cJSON_Delete(j);
    jb_free(&b);
}

/* Walks JSON and tree together, depth first, without recursion. */
static void compare(const cJSON *root, const struct prof_tree *t)
{
    size_t cap = t->n + 1, sp = 0;
    const cJSON **js = malloc(cap * sizeof *js);
    uint32_t *ts = malloc(cap * sizeof *ts);
    if (!js || !ts)
        abort();
    js[sp] = root;
    ts[sp++] = 0;
    size_t seen = 0;
    while (sp) {
        const cJSON *j = js[--sp];
        uint32_t node = ts[sp];
        seen++;
        FUZZ_CHECK(node < t->n, "node %u", node);
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(j, "name");
        const cJSON *value = cJSON_GetObjectItemCaseSensitive(j, "value");
        const cJSON *self = cJSON_GetObjectItemCaseSensitive(j, "self");
        const cJSON *kids = cJSON_GetObjectItemCaseSensitive(j, "children");
        FUZZ_CHECK(cJSON_IsString(name) && same_text(name->valuestring, t->name[node]),
                   "node %u name", node);
        FUZZ_CHECK(cJSON_IsNumber(value) && value->valuedouble == (double)t->value[node],
                   "node %u value", node);
        FUZZ_CHECK(cJSON_IsNumber(self) && self->valuedouble == (double)t->self[node],
                   "node %u self", node);
        FUZZ_CHECK(cJSON_IsArray(kids), "node %u children", node);
        uint32_t c = t->first_child[node];
        const cJSON *k;
        cJSON_ArrayForEach(k, kids) {
            FUZZ_CHECK(c != UINT32_MAX, "node %u: more children in JSON than in the tree", node);
            FUZZ_CHECK(sp < cap, "more JSON nodes than tree nodes");
            js[sp] = k;
            ts[sp++] = c;
            c = t->next_sibling[c];
        }
        FUZZ_CHECK(c == UINT32_MAX, "node %u: children missing from the JSON", node);
    }
    FUZZ_CHECK(seen == t->n, "JSON has %zu nodes, tree %zu", seen, t->n);
    free(js);
    free(ts);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct fin in = {data, size};
    char *pool[12];
    for (int i = 0; i < 12; i++)
        pool[i] = fin_str(&in, 48);
    check_scalars(&in, pool);
    /* a third of the names native frames, for native=fold */
    for (int i = 8; i < 12; i++) {
        size_t n = strlen(pool[i]);
        char *nat = malloc(n + 10);
        if (!nat)
            abort();
        memcpy(nat, "[native ", 8);
        memcpy(nat + 8, pool[i], n);
        memcpy(nat + 8 + n, "]", 2);
        free(pool[i]);
        pool[i] = nat;
    }
    prof_store_free();
    int max_store_nodes = 64 + fin_u8(&in) * 4;
    size_t max_name_bytes = (size_t)(64 + fin_u8(&in)) << 10;
    if (prof_store_init(30, max_store_nodes, max_name_bytes))
        abort();
    size_t max_nodes = 16 + fin_u8(&in) * 2;
    int slot = fin_u8(&in) % PROF_NVALUES;
    double now = prof_unix_now();
    for (int s = 0; fin_more(&in) && s < 200; s++) {
        const char *frames[16];
        int n = fin_u8(&in) % 16;
        for (int k = 0; k < n; k++)
            frames[k] = pool[fin_u8(&in) % 12];
        int64_t v[PROF_NVALUES];
        for (int k = 0; k < PROF_NVALUES; k++)
            v[k] = (int64_t)(fin_u32(&in) % 1000000); /* values the profiles produce: >= 0 */
        uint8_t lab = fin_u8(&in);
        prof_store_add(PK_CPU, now - lab % 20, frames, n, fin_u8(&in), lab & 0x80 ? pool[lab % 12] : NULL, v);
    }
    struct prof_view v;
    if (prof_store_view(PK_CPU, 30, NULL, &v))
        goto out;
    struct prof_tree t;
    if (!prof_tree_build(&v, slot, max_nodes, &t)) {
        FUZZ_CHECK(t.n >= 1 && t.n <= max_nodes + 1, "tree of %zu nodes for max %zu", t.n, max_nodes);
        struct jbuf b;
        jb_init(&b, 64u << 20);
        api_flame_emit(&b, &t);
        FUZZ_CHECK(!b.overflow, "flame JSON overflow");
        cJSON *j = cJSON_ParseWithLength(b.p, b.len);
        FUZZ_CHECK(j != NULL, "flame JSON does not parse");
        compare(j, &t);
        cJSON_Delete(j);
        jb_free(&b);
        prof_tree_free(&t);
    }
    /* two windows: the last 10 s against the 20 before, and the whole view against itself */
    struct prof_view va, vb;
    int64_t now_s = (int64_t)now;
    if (!prof_store_view_range(PK_CPU, now_s - 30, now_s - 11, NULL, &va)) {
        if (!prof_store_view_range(PK_CPU, now_s - 10, now_s, NULL, &vb)) {
            if (!prof_tree_build_diff(&va, &vb, slot, max_nodes, &t)) {
                FUZZ_CHECK(t.n >= 1 && t.n <= max_nodes + 1, "diff tree of %zu nodes", t.n);
                for (size_t i = 0; i < t.n; i++)
                    FUZZ_CHECK(t.value[i] >= t.self[i] && t.base[i] >= t.base_self[i] &&
                                   t.self[i] >= 0 && t.base_self[i] >= 0,
                               "diff node %zu", i);
                FUZZ_CHECK(t.total == t.value[0] && t.base_total == t.base[0], "diff totals");
                prof_tree_free(&t);
            }
            struct prof_top_diff d;
            if (!prof_tree_top_diff(&va, &vb, slot, 0, &d))
                for (size_t i = 0; i < d.n; i++)
                    FUZZ_CHECK(d.rows[i].self <= d.rows[i].total &&
                                   d.rows[i].base_self <= d.rows[i].base_total,
                               "diff row %zu", i);
            prof_top_diff_free(&d);
            prof_view_free(&vb);
        }
        prof_view_free(&va);
    }
    if (!prof_tree_build_diff(&v, &v, slot, max_nodes, &t)) {
        for (size_t i = 0; i < t.n; i++)
            FUZZ_CHECK(t.value[i] == t.base[i] && t.self[i] == t.base_self[i],
                       "a window against itself differs at node %zu", i);
        prof_tree_free(&t);
    }
    /* native=fold: every row kept with its values, the trie still a trie (parents first), no
     * native frame left under one that is not, and a tree built from it */
    int64_t before = 0, after = 0;
    for (size_t r = 0; r < v.nrows; r++)
        before += v.rows[r].v[slot];
    size_t nnodes = v.nnodes, folded = 0;
    if (!prof_view_fold_native(&v, &folded)) {
        FUZZ_CHECK(v.nnodes + folded <= nnodes && v.nnodes >= 1, "fold: %zu nodes from %zu", v.nnodes, nnodes);
        unsigned char *anchored = calloc(v.nnodes, 1);
        if (!anchored)
            abort();
        for (size_t i = 1; i < v.nnodes; i++) {
            FUZZ_CHECK(v.parent[i] < i, "fold: node %zu's parent %u", i, v.parent[i]);
            int native = !strncmp(v.name[i], "[native ", 8);
            FUZZ_CHECK(!(native && anchored[v.parent[i]]), "fold: native frame %zu left", i);
            anchored[i] = anchored[v.parent[i]] || !native;
        }
        free(anchored);
        for (size_t r = 0; r < v.nrows; r++) {
            FUZZ_CHECK(v.rows[r].node < v.nnodes, "fold: row %zu's node", r);
            after += v.rows[r].v[slot];
        }
        FUZZ_CHECK(before == after, "fold: rows' total %lld, was %lld", (long long)after,
                   (long long)before);
        if (!prof_tree_build(&v, slot, max_nodes, &t)) {
            FUZZ_CHECK(t.total == t.value[0], "folded tree's total");
            prof_tree_free(&t);
        }
    }
    struct prof_top top;
    if (!prof_tree_top(&v, slot, 50, &top))
        for (size_t i = 0; i < top.n; i++)
            FUZZ_CHECK(top.rows[i].self <= top.rows[i].total && top.rows[i].self >= 0,
                       "top row %zu", i);
    prof_top_free(&top);
    prof_view_free(&v);
out:
    for (int i = 0; i < 12; i++)
        free(pool[i]);
    return 0;
}
