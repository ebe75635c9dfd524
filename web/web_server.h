/*
 * web_server - the dashboard's HTTP server (civetweb) inside the profiled process.
 * Binds CLRSCOPE_BIND:CLRSCOPE_PORT (next free port of the following 15 when taken, any port for
 * 0); writes the stderr line and the discovery file. For every request it checks the Host
 * header, serves the dashboard's own files (web_assets) to anyone, and for the rest requires the
 * token when one is set (429 during a back-off after wrong tokens, web_clients), or else a
 * loopback client of the process's own user or root (CLRSCOPE_ALLOW_USERS=any: any); then asks
 * the API's route table (api_routes.h) for its handler, the 405s and the 404s, checks the Origin
 * of a POST or DELETE, calls the handler with the parsed request and sends its reply (web_util).
 * Starts the descriptor guard (web_fdguard) and counts the connections its workers hold for the
 * shedding of idle ones (web_shed). A failure is one log line: the app and the other profiles
 * run on.
 * ctx: web_server_start from Initialize (prof_entry, once capture runs), web_server_stop at
 * Shutdown; the connection callbacks and the request handler on civetweb's worker threads;
 * web_token_ok anywhere.
 */
#ifndef WEB_SERVER_H
#define WEB_SERVER_H

int web_server_start(void);
void web_server_stop(void);
int web_server_port(void);
/* Constant-time comparison of a presented token with the configured one. */
int web_token_ok(const char *presented, const char *expected);

#endif
