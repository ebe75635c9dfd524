/*
 * hs_gcdump - part of the heap snapshot (prof_heapsnap.h), the step after the analysis: the
 * .gcdump format writer (gcdump_write, struct gd_*). Writes a graph as a .gcdump file, the
 * format dotnet-gcdump, PerfView and Visual Studio read: a FastSerialization stream
 * ("!FastSerialization.1") whose entry object is a GCHeapDump (version 10, readers >= 8)
 * holding a Graphs.MemoryGraph (version 1).
 *
 * Written from the format's public definition (microsoft/perfview src/FastSerialization,
 * src/MemoryGraph/graph.cs, src/HeapDump/GCHeapDump.cs; dotnet/diagnostics src/Tools/dotnet-gcdump
 * keeps copies). What goes out:
 *   header    int32 20 + "!FastSerialization.1"
 *   object    BeginObject(4), its type (an inline SerializationType object: BeginObject,
 *             NullReference(1), int32 version, int32 minimum reader version, string full name,
 *             EndObject(6)), the fields, EndObject
 *   strings   int32 UTF-16 length (-1 = null), then each UTF-16 unit as 1-3 UTF-8-style bytes
 *   Graph     int64 total size, int32 root index, int32 type count + (string name, int32 size,
 *             string module) each, int32 node count + int32 blob offset each, int32 blob length
 *             + blob; node record = compressed (type << 1 | explicit-size bit) [, compressed size],
 *             compressed child count, compressed (child - node) each; compressed int = signed,
 *             7 bits per byte, most significant group first, high bit = more bytes. Type 0 is
 *             "UNDEFINED" and the blob starts with its record (the Graph's "undefined node").
 *   MemoryGraph  the Graph, int32 count + int64 address each, tagged byte Is64Bit
 *   GCHeapDump   MemoryGraph, bool Is64Bit, float count and size multipliers (1), null JSHeapInfo,
 *             null DotNetHeapInfo, string log, int64 .NET ticks, machine, process, int32 pid,
 *             int64 commit, int64 working set, int32 0 (no per-type multipliers), tagged string
 *             creation tool
 *   trailer   unbalanced EndObject, forward-reference table (int32 0), its label, the trailer's
 *             label (4-byte labels: the file must stay below 2 GiB).
 *
 * The graph is pulled through callbacks, node by node, twice (offsets, then records), so the
 * writer needs no memory proportional to the heap.
 *
 * ctx: clrscope-heap (through prof_heapsnap_write_graph, which lays a heap_graph out as
 * gd_source callbacks), or a test's or fuzz target's thread; no global state.
 */
#ifndef HS_GCDUMP_H
#define HS_GCDUMP_H

#include <stdint.h>
#include <stdio.h>

#define GD_SKIP 0xffffffffu /* a child entry to leave out */

struct gd_node {
    uint32_t type;         /* 1..ntypes */
    uint32_t size;
    uint64_t addr;         /* 0 for pseudo nodes */
    const uint32_t *kids;  /* child = kids[k] + kid_bias; entries equal to GD_SKIP are left out */
    uint32_t nkids;
    uint32_t kid_bias;
};

struct gd_source {
    void *ctx;
    uint32_t ntypes;
    const char *(*type_name)(void *ctx, uint32_t type);   /* type in 1..ntypes */
    const char *(*type_module)(void *ctx, uint32_t type); /* may be NULL or return NULL */
    uint32_t nnodes;
    uint32_t root;
    void (*node)(void *ctx, uint32_t index, struct gd_node *out);
};

struct gd_meta {
    const char *process_name;
    int32_t pid;
    double unix_time;      /* collection time, seconds since the epoch */
    const char *machine;
    int64_t commit, working_set;
    const char *log;
    const char *tool;
};

/* Writes the whole file to `f` (buffered by the caller's FILE). 0 on success; -1 with a reason
 * in err (I/O error, file over 2 GiB, out of memory). */
int gcdump_write(FILE *f, const struct gd_source *src, const struct gd_meta *meta, char *err,
                 size_t errcap);

/* The compressed-int encoding of the node blob (exposed for unit tests): writes 1-5 bytes. */
int gcdump_cint(int32_t v, uint8_t *out);

#endif
