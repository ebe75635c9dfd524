/* prof_lock.c - placeholder until the lock-contention module lands. */
#include "prof_lock.h"

void prof_lock_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len) { (void)id; (void)version; (void)data; (void)len; }
void prof_lock_consume(const struct prof_rec *rec, const char **names, int n) { (void)rec; (void)names; (void)n; }
