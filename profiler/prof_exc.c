/* prof_exc.c - placeholder until the exceptions module lands. */
#include "prof_exc.h"

void prof_exc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len) { (void)id; (void)version; (void)data; (void)len; }
void prof_exc_consume(const struct prof_rec *rec, const char **names, int n) { (void)rec; (void)names; (void)n; }
