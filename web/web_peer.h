/*
 * web_peer - whether the client of a request still waits for the answer.
 * civetweb gives a handler no socket, and a handler that waits (a profile collected over the
 * next N seconds) would otherwise wait out a client that has gone, as Go's net/http/pprof does
 * not. The request's socket is found once among the process's descriptors by its two ends (the
 * client's address and port, the server's port); the connection is open until the handler
 * returns, so the descriptor stays that socket meanwhile. web_server offers it to a waiting
 * handler as api_req.client_gone, the socket looked for at the handler's first question.
 * ctx: the civetweb worker that serves the request.
 */
#ifndef WEB_PEER_H
#define WEB_PEER_H

struct mg_connection;

/* The descriptor of the request's socket, or -1 when it cannot be told (no /proc, no spare
 * descriptor to list it with, no stream socket with both ends, or two of them): then nothing
 * is known of the client. A client that shuts its sending side after the request counts as
 * gone (as in Go); one whose unread bytes are still queued counts as there. */
int web_peer_socket(const struct mg_connection *c);

/* 1 when the client has closed its side or reset the connection, 0 while it is open (or data
 * from it is waiting) or when fd is -1. Never blocks, never consumes a byte. */
int web_peer_gone(int fd);

#endif
