/*
 * web_discovery - the discovery file: where a profiled process tells `clrscope ls` and
 * `clrscope threads` (tools/launcher_discovery.c) its pid, dashboard URL, token and command line.
 * One file per process, PID.json (mode 0600) in its user's own directory:
 * $XDG_RUNTIME_DIR/clrscope when that is set, else /tmp/clrscope-EUID, a real directory of that
 * user's (mode 0700, never a link: prof_files_private_dir). Written once the dashboard listens,
 * removed at exit or at Shutdown. A directory or file that cannot be used (another user took the
 * name first) is one log line: the process is then not listed, and runs on.
 * ctx: web_discovery_write from web_server_start (Initialize's thread), web_discovery_remove
 * from web_server_stop (Shutdown) and at exit (atexit).
 */
#ifndef WEB_DISCOVERY_H
#define WEB_DISCOVERY_H

/* Writes PID.json for the dashboard at http://HOST:PORT/ (host as shown in URLs). */
void web_discovery_write(const char *host, int port);

/* Removes the file written, if any; safe to call more than once. */
void web_discovery_remove(void);

#endif
