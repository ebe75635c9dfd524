/*
 * web_fdguard - keeps the dashboard's accept loop from spinning when the process has run out of
 * file descriptors.
 *
 * civetweb's master thread polls its listening socket and accepts. When no descriptor is free
 * (EMFILE, or ENFILE system-wide) accept fails, silently, the connection stays queued and poll
 * reports it again at once: the master burns a whole core (measured: 0.97 of a core) until
 * descriptors come back, and the browser waits for nothing. An app that leaks descriptors is just
 * the app someone opens the dashboard of.
 *
 * The guard holds one spare descriptor (/dev/null, taken from the app's budget) and looks every
 * FDGUARD_PERIOD_NS (from clrscope-agg): when a connection is queued and no descriptor can be
 * had, it gives the spare up for an accept of its own, answers 503 with a JSON error that says
 * why, closes, and takes the spare back. civetweb's spinning accept may take the freed place
 * first (it then serves the request itself), and the app may take it back before the guard does:
 * without a spare, the guard drops the queue (its clients see a reset at once) by making the
 * socket stop listening and listen again on its address, which needs no descriptor; the spare is
 * taken again at a later look. One log line when descriptors run out, one when they are back.
 * The listening socket is made non-blocking, so that the guard and civetweb can race for a
 * connection without either waiting in accept (accepted sockets do not inherit the flag).
 *
 * ctx: web_fdguard_start once (web_server_start; it adds the watch to clrscope-agg's loop with
 * prof_agg_add); web_fdguard_watch on clrscope-agg only; web_fdguard_get_stats and
 * web_fdguard_find anywhere.
 */
#ifndef WEB_FDGUARD_H
#define WEB_FDGUARD_H

#include <stdint.h>

#define FDGUARD_PERIOD_NS 50000000LL

/* Guards the listening socket bound to `port` (found among the process's descriptors). Returns
 * 0, or -1 when it is not found or no spare can be had (logged; the dashboard runs unguarded). */
int web_fdguard_start(int port);
/* Looks at most once per FDGUARD_PERIOD_NS; `now` is prof_now_ns(). */
void web_fdguard_watch(int64_t now);

struct web_fdguard_stats {
    int guarded;            /* the listening socket was found and a spare held at the start */
    int spare_held;         /* a spare descriptor is held now */
    int out_of_fds;         /* a look found connections queued and no descriptor free, and no
                             * descriptor has been free since */
    uint64_t refused;       /* connections answered 503 for want of descriptors */
    uint64_t resets;        /* queues dropped for want of a spare to answer with */
};
void web_fdguard_get_stats(struct web_fdguard_stats *out);
/* The first of the process's descriptors for which match(fd, arg) holds, or -1 (none, or no
 * descriptor to list them with); *matches counts them, up to 2 (the listing stops there). For
 * sockets clrscope's code holds but civetweb does not hand out. Any clrscope thread. */
int web_fdguard_find(int (*match)(int fd, void *arg), void *arg, int *matches);
/* Tests: gives the spare up (closed), as when the app took its place. */
void web_fdguard_lose_spare(void);

#endif
