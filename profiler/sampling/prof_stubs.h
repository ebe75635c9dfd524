/*
 * prof_stubs - names the runtime's stubs by kind: a frame in executable memory that belongs to no
 * file and to no method the runtime knows ("[native code]") reads "[native stub FixupPrecode]",
 * "[native stub VSD_ResolveStub]", ... where its bytes are those of one of the runtime's stubs.
 * The kinds are the runtime's own names for them (its precode types and stub code block kinds):
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
 * the nearest before the address within a stub's length. Only addresses in executable memory
 * that the maps snapshot knows are looked at. x86-64 only (elsewhere NULL: the frame
 * keeps "[native code]"); .NET 8, 9 and 10 generate the same bytes.
 *
 * Code is read with process_vm_readv (prof_codemap_read_code: the stub may be freed meanwhile),
 * and each address's answer is kept in a small table, emptied when a module unload starts.
 *
 * ctx: the clrscope-sampler thread, under prof_codemap_lock() (naming a signal sample's frames:
 * prof_natsym_name, and the leaf's caller in prof_codemap_stack.c); prof_stubs_get_stats from any
 * thread.
 */
#ifndef PROF_STUBS_H
#define PROF_STUBS_H

#include <stddef.h>
#include <stdint.h>

/* The frame name of address ip in anonymous executable memory that no method covers: a stub's
 * ("[native stub KIND]"), or NULL when its bytes are no stub's or cannot be read. */
const char *prof_stubs_name(uintptr_t ip);

/* The kind of stub the code bytes b[0..n), read at address `at`, hold at address ip (at <= ip <
 * at + n): a "[native stub KIND]" name, or NULL. slot16 and slot4 are the 24 bytes of ip's slot
 * in its 16 KB and its 4 KB page, NULL when not read. For the tests. */
const char *prof_stubs_classify(uintptr_t ip, const uint8_t *b, size_t n, uintptr_t at,
                                const uint8_t *slot16, const uint8_t *slot4);

/* Counted when an address is looked at (the first time, and again once the table has dropped it:
 * another address took its entry, or an unload emptied the table). */
struct prof_stubs_stats {
    uint64_t named;   /* named as a stub */
    uint64_t unknown; /* bytes that are no stub's known here */
    uint64_t unread;  /* code that could not be read (each attempt: such an address is not kept) */
};
void prof_stubs_get_stats(struct prof_stubs_stats *out);

#endif
