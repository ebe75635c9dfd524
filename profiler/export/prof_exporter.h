/*
 * prof_exporter - continuous pprof export to the Datadog agent (DD_* variables), on its own
 * clrscope-export thread, with a bounded queue, timeouts and retry with backoff.
 */
#ifndef PROF_EXPORTER_H
#define PROF_EXPORTER_H

#include <stddef.h>

typedef struct cJSON cJSON;

void prof_exporter_start(void);
void prof_exporter_stop(void);
/* Adds enabled, last_upload, last_status, failures, bytes_sent, dropped, ... to `obj`. */
void prof_exporter_status_json(cJSON *obj);
/* Bytes of profiles waiting in the upload queue. */
size_t prof_exporter_queue_bytes(void);

struct prof_kind;
/* The aggregator's row: the export queue's memory. */
extern const struct prof_kind prof_exporter_kind;

#endif
