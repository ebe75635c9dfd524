/* prof_exc - exceptions thrown, by type, message and stack, with a per-second adaptive cap. */
#ifndef PROF_EXC_H
#define PROF_EXC_H

#include "clr_abi.h"
#include "prof_ring.h"

void prof_exc_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len);
void prof_exc_consume(const struct prof_rec *rec, const char **names, int n);

#endif
