/*
 * web_server - the dashboard's HTTP server (civetweb) inside the profiled process.
 * Started from Initialize on civetweb's own threads; binds CLRSCOPE_BIND:CLRSCOPE_PORT (next free
 * port of the following 15 when taken, any port for 0); writes the stderr line and the discovery
 * file; checks the token, the Host header and the method of every request; stopped at Shutdown.
 * A failure is one log line: the app and the other profiles run on.
 */
#ifndef WEB_SERVER_H
#define WEB_SERVER_H

int web_server_start(void);
void web_server_stop(void);
int web_server_port(void);
/* Constant-time comparison of a presented token with the configured one. */
int web_token_ok(const char *presented, const char *expected);

#endif
