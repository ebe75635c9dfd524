/*
 * launcher.h - what the files of the `clrscope` launcher share: the usage text and the commands
 * main() dispatches to. The launcher is split by command so that no file grows past the 1,000
 * lines tests/unit/check_layers.py allows:
 *   launcher.c            main(): usage and dispatch;
 *   launcher_run.c        `clrscope run`, `clrscope serve` and `clrscope --version` (the
 *                         library, the runtime's variables, the app's checks);
 *   launcher_discovery.c  `clrscope ls` and `clrscope threads` (the discovery files, read under
 *                         the owner rules, and the HTTP GET of a thread dump).
 * Internal to the launcher: everything else stays static in its file.
 */
#ifndef CLRSCOPE_LAUNCHER_H
#define CLRSCOPE_LAUNCHER_H

#include <stdio.h>

/* The usage text, on f (stdout for --help, stderr after a mistake). launcher.c. */
void usage(FILE *f);

/* `clrscope --version`: returns the exit status. launcher_run.c. */
int cmd_version(void);
/* `clrscope run [OPTIONS] [--] COMMAND...` (argv after "run"): execs COMMAND, else returns the
 * exit status. launcher_run.c. */
int cmd_run(int argc, char **argv);
/* `clrscope serve [OPTIONS] DIR` (argv after "serve"): the dashboard over the history on disk of
 * a process that has exited (libclrscope.so's clrscope_serve); returns the exit status once
 * interrupted. launcher_run.c. */
int cmd_serve(int argc, char **argv);
/* `clrscope ls`: returns the exit status. launcher_discovery.c. */
int cmd_ls(void);
/* `clrscope ls --all`: the same, then the histories on disk (CLRSCOPE_HISTORY_DIR), each
 * process's span and whether it runs. launcher_discovery.c. */
int cmd_ls_all(void);
/* `clrscope threads [--grouped] PID` (argv after "threads"): returns the exit status.
 * launcher_discovery.c. */
int cmd_threads(int argc, char **argv);

#endif
