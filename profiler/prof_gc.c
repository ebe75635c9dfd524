/* prof_gc.c - placeholder until the GC module lands. */
#include "prof_gc.h"

void prof_gc_init(void) {}
void prof_gc_stop(void) {}
void prof_gc_started(int cgen, const BOOL *collected, int reason) { (void)cgen; (void)collected; (void)reason; }
void prof_gc_finished(void) {}
void prof_gc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len) { (void)id; (void)version; (void)data; (void)len; }
void prof_gc_tick(double now_unix) { (void)now_unix; }
