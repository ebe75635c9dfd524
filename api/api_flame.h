/*
 * api_flame - the flame-graph JSON of /api/v1/flamegraph, written from a trimmed call tree.
 * ctx: pure; the thread that owns the buffer (api_flamegraph on a civetweb worker, fuzz_flame).
 */
#ifndef API_FLAME_H
#define API_FLAME_H

#include "api_json.h"
#include "prof_tree.h"

/* Appends {"name","value","self","children":[...]} for node 0 of `t` and its subtree to `b`,
 * depth first without recursion (civetweb stacks are small). Sets b->overflow on allocation
 * failure. Pure: the flame-graph fuzz target parses its output back. */
void api_flame_emit(struct jbuf *b, const struct prof_tree *t);

#endif
