/* prof_lock - lock contention: wait time and count by stack and lock, upscaled by duration. */
#ifndef PROF_LOCK_H
#define PROF_LOCK_H

#include "clr_abi.h"
#include "prof_ring.h"

void prof_lock_on_event(DWORD id, DWORD version, const BYTE *data, ULONG len);
void prof_lock_consume(const struct prof_rec *rec, const char **names, int n);

#endif
