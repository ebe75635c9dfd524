/*
 * prof_stubs - names the runtime's stubs by kind: a frame in executable memory that belongs to no
 * file and to no method the runtime knows ("[native code]") reads "[native stub FixupPrecode]",
 * "[native stub VSD_ResolveStub]", ... where its bytes are those of one of the runtime's stubs.
 * The kinds are the runtime's own names (its perf map and PerfView use them):
 *
 *   FixupPrecode, StubPrecode  the entry of a method, until it is compiled and after (precodes)
 *   CallCountingStub           counts a method's calls for the tiered compilation
 *   VSD_DispatchStub           an interface call at a site that has seen one type
 *   VSD_ResolveStub            an interface call at a site that has seen several (a cache lookup)
 *   VSD_LookupStub             an interface call's first calls (into the runtime's resolver)
 *   VSD_VTableStub             a virtual call through the method table
 *
 * The runtime reports none of this to a profiler, and its perf map only when asked at its start
 * (and then for every method too), so the bytes decide. Precodes and call counting stubs are
 * copies of one template in pages of 16 KB (4 KB on older runtimes), 24 bytes apart, each
 * reaching its data in the page after by a RIP-relative load: a kind is the template's opcodes at
 * the slot the address falls in, and a displacement that lands in that slot's data. The interface
 * dispatch stubs are generated code with their data inline; they are found by their first bytes,
 * the nearest before the address within a stub's length. x86-64 only (elsewhere NULL: the frame
 * keeps "[native code]"); .NET 8, 9 and 10 generate the same bytes.
 *
 * Code is read with process_vm_readv (prof_codemap_read_code: the stub may be freed meanwhile),
 * and each address's answer is kept in a small table, emptied when a module unload starts.
 *
 * ctx: the clrscope-sampler thread and clrscope-agg, under prof_codemap_lock() (prof_natsym_name);
 * prof_stubs_get_stats from any thread.
 */
#ifndef PROF_STUBS_H
#define PROF_STUBS_H

#include <stddef.h>
#include <stdint.h>

/* The frame name of address ip in anonymous executable memory that no method covers: a stub's
 * ("[native stub KIND]"), or NULL when its bytes are no stub's or cannot be read. */
const char *prof_stubs_name(uintptr_t ip);

/* The kind of stub the code bytes b[0..n), read at address `at`, hold at address ip (at <= ip <
 * at + n): a "[native stub KIND]" name, or NULL. `slot` and `slot_n` are the bytes of the 24-byte
 * slot of ip's 16 KB page (slot16) and 4 KB page (slot4), NULL when not read. For the tests. */
const char *prof_stubs_classify(uintptr_t ip, const uint8_t *b, size_t n, uintptr_t at,
                                const uint8_t *slot16, const uint8_t *slot4);

struct prof_stubs_stats {
    uint64_t named;   /* addresses named as a stub */
    uint64_t unknown; /* addresses whose bytes are no stub's known here */
    uint64_t unread;  /* addresses whose code could not be read */
};
void prof_stubs_get_stats(struct prof_stubs_stats *out);

#endif
