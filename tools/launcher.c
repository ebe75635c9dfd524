/*
 * launcher.c - the `clrscope` command.
 *   clrscope run [--port N] [--bind ADDR] [--token T] [--] COMMAND [ARGS...]
 *       runs COMMAND with the profiler attached: sets CORECLR_ENABLE_PROFILING, CORECLR_PROFILER,
 *       CORECLR_PROFILER_PATH (and CLRSCOPE_* for the options) and execs COMMAND, so its output,
 *       signals and exit status are exactly its own. When CORECLR_PROFILER already names another
 *       profiler, that one stays and clrscope is added to CORECLR_NOTIFICATION_PROFILERS.
 *       DOTNET_EnableDiagnostics=0 (which turns profilers off) is narrowed to the diagnostic port
 *       and the debugger.
 *       Before that it checks that the library loads here (dlopen; dlerror() says why not, and
 *       nothing runs) and, where the app's runtimeconfig.json tells, that its runtime is one
 *       clrscope supports (.NET 8 or newer; an older one runs unprofiled, with a line saying so).
 *   clrscope serve [--port N] [--bind ADDR] [--token T] DIR
 *       the dashboard and API, read-only, over the history on disk (CLRSCOPE_HISTORY_DIR) of a
 *       process that has exited: libclrscope.so's clrscope_serve, no .NET needed.
 *   clrscope ls [--all]
 *       lists the profiled processes of this host from their discovery files (the user's own;
 *       root's: every user's), each only when written by the user its process runs as, every
 *       field shown with its control bytes escaped; --all, then the histories on disk.
 *   clrscope threads [--grouped] PID
 *       prints a thread dump of profiled process PID (its /debug/pprof/threads?debug=2, or =1
 *       grouped), found through its discovery file, token included, under the same rule.
 *   clrscope --version
 *       the build's version and commit, and the oldest glibc the library beside it loads on.
 *
 * This file holds main(), the usage text and the dispatch to the commands; `run` and `--version`
 * are in launcher_run.c, `ls` and `threads` in launcher_discovery.c (split by command to keep
 * each file well under the 1,000 lines tests/unit/check_layers.py allows; launcher.h is what
 * they share).
 */
#include <stdio.h>
#include <string.h>

#include "launcher.h"

void usage(FILE *f)
{
    fprintf(f,
            "usage: clrscope run [--port N] [--bind ADDR] [--token T|auto] [--] COMMAND [ARGS...]\n"
            "       clrscope serve [--port N] [--bind ADDR] [--token T|auto] DIR\n"
            "       clrscope ls [--all]\n"
            "       clrscope threads [--grouped] PID\n"
            "       clrscope --help | --version\n\n"
            "run      starts COMMAND (e.g. `dotnet app.dll`) with the clrscope profiler attached;\n"
            "         the dashboard URL is printed on stderr: clrscope: dashboard http://...\n"
            "serve    the dashboard over the history on disk of a process that has exited\n"
            "         (DIR: CLRSCOPE_HISTORY_DIR, or one process's directory in it)\n"
            "ls       lists the processes profiled by clrscope on this host with their URLs\n"
            "         (--all: and the histories on disk, of running and exited processes)\n"
            "threads  prints what every managed thread of profiled process PID is doing now:\n"
            "         each thread's stack, state, CPU time, lock waits and deadlocks\n"
            "         (--grouped: identical stacks together)\n\n"
            "Options of run map to environment variables the profiler reads:\n"
            "  --port N      CLRSCOPE_PORT (default 6060; 0 = any free port)\n"
            "  --bind ADDR   CLRSCOPE_BIND (default 127.0.0.1; others need a token)\n"
            "  --token T     CLRSCOPE_TOKEN (auto = a random one per process)\n"
            "Environment: CLRSCOPE_LIB overrides the path of libclrscope.so.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    if (!strcmp(argv[1], "--version"))
        return cmd_version();
    if (!strcmp(argv[1], "run"))
        return cmd_run(argc - 2, argv + 2);
    if (!strcmp(argv[1], "serve"))
        return cmd_serve(argc - 2, argv + 2);
    if (!strcmp(argv[1], "ls") && argc == 3 && !strcmp(argv[2], "--all"))
        return cmd_ls_all();
    if (!strcmp(argv[1], "ls"))
        return cmd_ls();
    if (!strcmp(argv[1], "threads"))
        return cmd_threads(argc - 2, argv + 2);
    fprintf(stderr, "clrscope: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
