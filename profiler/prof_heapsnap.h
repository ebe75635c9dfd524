/*
 * prof_heapsnap - heap snapshots on demand (gcdump): an in-process EventPipe session with the
 * heap-dump keywords makes the runtime walk the heap in an induced full GC; bulk node/edge/type/root
 * events are parsed into a compact graph, written as a .gcdump file, and summarised per type.
 */
#ifndef PROF_HEAPSNAP_H
#define PROF_HEAPSNAP_H

#include "clr_abi.h"

void prof_heapsnap_init(void);
void prof_heapsnap_stop(void);
/* Heap-dump and type events (ids 15-23, 36-38) and GCStart/GCEnd (1, 2); GC threads. */
void prof_heapsnap_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len);

#endif
