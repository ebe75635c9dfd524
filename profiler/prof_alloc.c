/* prof_alloc.c - placeholder until the allocation module lands. */
#include "prof_alloc.h"

void prof_alloc_session_needs(UINT64 *keywords, UINT32 *level) { *keywords = 0; *level = 4; }
void prof_alloc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len) { (void)id; (void)version; (void)data; (void)len; }
void prof_alloc_consume(const struct prof_rec *rec, const char **names, int n) { (void)rec; (void)names; (void)n; }
