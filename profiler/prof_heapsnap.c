/* prof_heapsnap.c - placeholder until the heap-snapshot module lands. */
#include "prof_heapsnap.h"

void prof_heapsnap_init(void) {}
void prof_heapsnap_stop(void) {}
void prof_heapsnap_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len) { (void)id; (void)version; (void)data; (void)len; }
