/* prof_process.c - see prof_process.h. */
#include "prof_process.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#define MAX_ARGS 64

/* the SDK's own programs, run as `dotnet [exec …] PATH/NAME` */
static const char *const SDK_PROGRAMS[] = {
    "MSBuild.dll",        "VBCSCompiler.dll",      "csc.dll",
    "vbc.dll",            "dotnet.dll",            "dotnet-watch.dll",
    "vstest.console.dll", "datacollector.dll",     "NuGet.Build.Tasks.Console.dll",
    "illink.dll",         "crossgen2.dll",         "NuGet.CommandLine.XPlat.dll",
    "rzc.dll",
};

/* the `dotnet` host's options that take a value, before the application path (the host
 * compares them without case) */
static const char *const HOST_VALUE_OPTIONS[] = {
    "--additionalprobingpath", "--additional-deps", "--depsfile",
    "--fx-version",            "--roll-forward",    "--roll-forward-on-no-candidate-fx",
    "--runtimeconfig",
};

static const char *base_name(const char *p)
{
    const char *s = strrchr(p, '/');
    return s ? s + 1 : p;
}

static int ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), m = strlen(tail);
    return n >= m && !strcasecmp(s + n - m, tail);
}

static int takes_value(const char *opt)
{
    for (size_t i = 0; i < sizeof HOST_VALUE_OPTIONS / sizeof *HOST_VALUE_OPTIONS; i++)
        if (!strcasecmp(opt, HOST_VALUE_OPTIONS[i]))
            return 1;
    return 0;
}

int prof_process_is_sdk(const char *args, size_t len, char *what, size_t cap)
{
    const char *argv[MAX_ARGS];
    int argc = 0, cut = 0;
    if (cap)
        what[0] = 0;
    /* split; a last argument without its NUL (a read cut off) is left out */
    for (size_t i = 0; i < len;) {
        const char *a = args + i;
        size_t n = strnlen(a, len - i);
        if (i + n >= len || argc == MAX_ARGS) {
            cut = 1; /* not NUL-terminated within len, or too many: the rest is unknown */
            break;
        }
        argv[argc++] = a;
        i += n + 1;
    }
    if (argc == 0)
        return PROF_PROCESS_APP;
    if (strcmp(base_name(argv[0]), "dotnet")) {
        /* an app's own launcher (apphost), or one of the SDK's programs started by its own
         * launcher from inside the SDK (the compiler server: sdk/<version>/Roslyn/bincore/) */
        const char *prog = base_name(argv[0]);
        size_t n = strlen(prog);
        if (!strstr(argv[0], "/sdk/"))
            return PROF_PROCESS_APP;
        for (size_t k = 0; k < sizeof SDK_PROGRAMS / sizeof *SDK_PROGRAMS; k++)
            if (!strncasecmp(prog, SDK_PROGRAMS[k], n) && !strcasecmp(SDK_PROGRAMS[k] + n, ".dll")) {
                if (cap)
                    snprintf(what, cap, "the .NET SDK's %.*s", (int)n, SDK_PROGRAMS[k]);
                return PROF_PROCESS_SDK_PROGRAM;
            }
        return PROF_PROCESS_APP;
    }
    int i = 1;
    int exec = i < argc && !strcasecmp(argv[i], "exec");
    if (exec)
        i++;
    int opts = 0;
    for (; i < argc && takes_value(argv[i]); i += 2)
        opts++;
    const char *app = i < argc ? argv[i] : NULL;
    /* Doubt makes it an app: left unprofiled by mistake, an app would just be missing. */
    if (!app && (exec || opts || cut))
        return PROF_PROCESS_APP; /* its path was cut off, or the host will refuse it anyway */
    int app_path = app && (exec || app[0] == '/' || ends_with(app, ".dll") || ends_with(app, ".exe"));
    if (!app_path) {
        /* an option this list does not know, then (after its value) an app */
        for (int k = i + 1; app && app[0] == '-' && k < argc && k <= i + 8; k++)
            if (ends_with(argv[k], ".dll") || ends_with(argv[k], ".exe"))
                return PROF_PROCESS_APP;
        if (app && app[0] == '-' && cut)
            return PROF_PROCESS_APP;
        /* a command for the SDK (run, build, test, watch, --info) or no argument at all */
        if (cap)
            snprintf(what, cap, "the .NET SDK's `dotnet%s%.40s`", app ? " " : "", app ? app : "");
        return PROF_PROCESS_SDK_COMMAND;
    }
    const char *prog = base_name(app);
    for (size_t k = 0; k < sizeof SDK_PROGRAMS / sizeof *SDK_PROGRAMS; k++)
        if (!strcasecmp(prog, SDK_PROGRAMS[k])) {
            if (cap)
                snprintf(what, cap, "the .NET SDK's %s", SDK_PROGRAMS[k]);
            return PROF_PROCESS_SDK_PROGRAM;
        }
    return PROF_PROCESS_APP;
}

int prof_process_is_clrscope_tool(const char *args, size_t len, const char *exe)
{
    if (exe && !strcmp(base_name(exe), "clrscope")) {
        char store[4096];
        struct stat st;
        int dir = (int)(base_name(exe) - exe); /* with its '/'; 0 for a bare name */
        int n = snprintf(store, sizeof store, "%.*s.store/clrscope", dir, exe);
        if (n > 0 && (size_t)n < sizeof store && !stat(store, &st) && S_ISDIR(st.st_mode))
            return 1;
    }
    if (!len || strcmp(base_name(args), "dotnet"))
        return 0;
    for (size_t i = strnlen(args, len) + 1; i < len; i += strnlen(args + i, len - i) + 1) {
        const char *a = args + i;
        if (strnlen(a, len - i) == len - i)
            break; /* not NUL-terminated: cut off */
        if (ends_with(a, "/clrscope.dll") && strstr(a, "/.store/clrscope/"))
            return 1;
    }
    return 0;
}

size_t prof_process_read_cmdline(char *buf, size_t cap)
{
    if (!cap)
        return 0;
    buf[0] = 0;
    FILE *f = fopen("/proc/self/cmdline", "re");
    if (!f)
        return 0;
    size_t n = fread(buf, 1, cap - 1, f);
    fclose(f);
    buf[n] = 0;
    return n;
}
