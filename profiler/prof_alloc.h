/*
 * prof_alloc - allocation sampling by type and stack (AllocationSampled on .NET 10+,
 * GCAllocationTick on .NET 8/9), upscaled to estimated counts and bytes.
 */
#ifndef PROF_ALLOC_H
#define PROF_ALLOC_H

#include "clr_abi.h"
#include "prof_ring.h"

/* EventPipe keywords/level the allocation profile needs on this runtime. */
void prof_alloc_session_needs(UINT64 *keywords, UINT32 *level);
/* On the allocating thread, inside EventPipeEventDelivered (ids 10 and 303). */
void prof_alloc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len);
/* On clrscope-agg: a REC_ALLOC record with its frames named (root first). */
void prof_alloc_consume(const struct prof_rec *rec, const char **names, int n);

#endif
