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
 *   clrscope ls   lists the profiled processes of this host from their discovery files (the
 *       user's own; root's: every user's), each only when written by the user its process runs
 *       as, every field shown with its control bytes escaped.
 *   clrscope threads [--grouped] PID
 *       prints a thread dump of profiled process PID (its /debug/pprof/threads?debug=2, or =1
 *       grouped), found through its discovery file, token included, under the same rule.
 *   clrscope --version
 *       the build's version and commit, and the oldest glibc the library beside it loads on.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <netdb.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "clrscope_commit.h"

#define CLSID_STR "{C1A5C09E-5C0E-4C1B-9A7E-0D5E7C1A5C0E}"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: clrscope run [--port N] [--bind ADDR] [--token T|auto] [--] COMMAND [ARGS...]\n"
            "       clrscope ls\n"
            "       clrscope threads [--grouped] PID\n"
            "       clrscope --help | --version\n\n"
            "run      starts COMMAND (e.g. `dotnet app.dll`) with the clrscope profiler attached;\n"
            "         the dashboard URL is printed on stderr: clrscope: dashboard http://...\n"
            "ls       lists the processes profiled by clrscope on this host with their URLs\n"
            "threads  prints what every managed thread of profiled process PID is doing now:\n"
            "         each thread's stack, state, CPU time, lock waits and deadlocks\n"
            "         (--grouped: identical stacks together)\n\n"
            "Options of run map to environment variables the profiler reads:\n"
            "  --port N      CLRSCOPE_PORT (default 6060; 0 = any free port)\n"
            "  --bind ADDR   CLRSCOPE_BIND (default 127.0.0.1; others need a token)\n"
            "  --token T     CLRSCOPE_TOKEN (auto = a random one per process)\n"
            "Environment: CLRSCOPE_LIB overrides the path of libclrscope.so.\n");
}

/* libclrscope.so next to this executable, else CLRSCOPE_LIB. */
static int find_library(char *out, size_t cap)
{
    const char *env = getenv("CLRSCOPE_LIB");
    if (env && *env) {
        if (realpath(env, out) && access(out, R_OK) == 0)
            return 0;
        fprintf(stderr, "clrscope: CLRSCOPE_LIB=%s is not readable\n", env);
        return -1;
    }
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return -1;
    self[n] = 0;
    char *slash = strrchr(self, '/');
    if (!slash)
        return -1;
    *slash = 0;
    const char *cands[] = {"/libclrscope.so", "/../lib/clrscope/libclrscope.so",
                           "/../lib/libclrscope.so"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0]; i++) {
        char p[PATH_MAX + 64];
        snprintf(p, sizeof p, "%s%s", self, cands[i]);
        if (access(p, R_OK) == 0 && realpath(p, out))
            return 0;
    }
    (void)cap;
    fprintf(stderr, "clrscope: libclrscope.so not found next to %s (set CLRSCOPE_LIB)\n", self);
    return -1;
}

static int valid_port(const char *s)
{
    char *end;
    long v = strtol(s, &end, 10);
    return *s && !*end && v >= 0 && v <= 65535;
}

/* Sets the runtime's variables. When another profiler already holds CORECLR_PROFILER (an APM
 * tracer set up in the environment), it is left in place and clrscope is added to the runtime's
 * notification profilers instead (.NET 8+ loads those beside the main one), so the other tool
 * keeps working. Returns nonzero after a message when the variables cannot be set. */
static int beside_another_profiler(const char *lib)
{
    const char *en = getenv("CORECLR_ENABLE_PROFILING");
    const char *other = getenv("CORECLR_PROFILER");
    if (!(en && !strcmp(en, "1") && other && *other && strcasecmp(other, CLSID_STR))) {
        setenv("CORECLR_ENABLE_PROFILING", "1", 1);
        setenv("CORECLR_PROFILER", CLSID_STR, 1);
        setenv("CORECLR_PROFILER_PATH", lib, 1);
        /* a 64-bit runtime reads the _64 path before the plain one, an arm64 runtime the _ARM64
         * path before both (Datadog's tracer sets it): left set, either would load whatever it
         * names under clrscope's CLSID, or nothing at all */
        if (getenv("CORECLR_PROFILER_PATH_64"))
            setenv("CORECLR_PROFILER_PATH_64", lib, 1);
        if (getenv("CORECLR_PROFILER_PATH_ARM64"))
            setenv("CORECLR_PROFILER_PATH_ARM64", lib, 1);
        return 0;
    }
    /* the runtime reads the first of these lists that is set (the _ARM64 one on arm64 only) */
    const char *var = "CORECLR_NOTIFICATION_PROFILERS";
#if defined(__aarch64__)
    if (getenv("CORECLR_NOTIFICATION_PROFILERS_ARM64"))
        var = "CORECLR_NOTIFICATION_PROFILERS_ARM64";
    else
#endif
    if (getenv("CORECLR_NOTIFICATION_PROFILERS_64"))
        var = "CORECLR_NOTIFICATION_PROFILERS_64";
    const char *list = getenv(var);
    char buf[8192];
    if (list && strcasestr(list, CLSID_STR)) {
        snprintf(buf, sizeof buf, "%s", list); /* already listed (a nested `clrscope run`) */
    } else {
        size_t n = list ? strlen(list) : 0;
        /* entries "path={clsid}" separated and ended by ';' (.NET 9 and 10 drop a last entry
         * without one) */
        int w = snprintf(buf, sizeof buf, "%s%s%s=%s;", n ? list : "",
                         n && list[n - 1] != ';' ? ";" : "", lib, CLSID_STR);
        if (w < 0 || (size_t)w >= sizeof buf) {
            fprintf(stderr, "clrscope: %s is too long to add to\n", var);
            return 1;
        }
    }
    setenv(var, buf, 1);
    setenv("CORECLR_ENABLE_NOTIFICATION_PROFILERS", "1", 1);
    fprintf(stderr, "clrscope: CORECLR_PROFILER is another profiler (%.60s); clrscope loads beside "
            "it, as a notification profiler\n", other);
    return 0;
}

/* How the runtime reads one of its DWORD knobs: DOTNET_<name>, else COMPlus_<name>, parsed as
 * hex from the start (a value it cannot parse leaves the default). Returns the value, or -1 when
 * the default applies; *var names the variable read. */
static long runtime_knob(const char *name, char *var, size_t cap)
{
    static const char *const prefixes[] = {"DOTNET_", "COMPlus_"};
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++) {
        snprintf(var, cap, "%s%s", prefixes[i], name);
        const char *v = getenv(var);
        if (!v)
            continue;
        char *end;
        unsigned long x = strtoul(v, &end, 16);
        return end == v ? -1 : (long)(x & 0xffffffffUL);
    }
    return -1;
}

/* The runtime loads no profiler when DOTNET_EnableDiagnostics or DOTNET_EnableDiagnostics_Profiler
 * is 0 (hardened container images set the first), so `clrscope run` would start the app without
 * clrscope and without a word. The user asked for the profiler: the general switch is replaced by
 * the two others it stands for (the diagnostic port and the debugger stay off), the profiler's
 * own switch is turned on, each with a line saying so. */
static void let_runtime_load_profilers(void)
{
    char var[64];
    if (runtime_knob("EnableDiagnostics", var, sizeof var) == 0) {
        unsetenv("DOTNET_EnableDiagnostics");
        unsetenv("COMPlus_EnableDiagnostics");
        setenv("DOTNET_EnableDiagnostics_IPC", "0", 1);
        setenv("DOTNET_EnableDiagnostics_Debugger", "0", 1);
        fprintf(stderr, "clrscope: %s=0 keeps the runtime from loading profilers; for this command "
                "it is replaced by DOTNET_EnableDiagnostics_IPC=0 and "
                "DOTNET_EnableDiagnostics_Debugger=0\n", var);
    }
    if (runtime_knob("EnableDiagnostics_Profiler", var, sizeof var) == 0) {
        unsetenv("COMPlus_EnableDiagnostics_Profiler");
        setenv("DOTNET_EnableDiagnostics_Profiler", "1", 1);
        fprintf(stderr, "clrscope: %s=0 keeps the runtime from loading profilers; for this command "
                "it is 1\n", var);
    }
}

/* The file `cmd` runs: a path as given, else the first executable of that name on PATH. */
static int resolve_command(const char *cmd, char *out, size_t cap)
{
    if (strchr(cmd, '/'))
        return snprintf(out, cap, "%s", cmd) < (int)cap ? 0 : -1;
    const char *path = getenv("PATH");
    for (const char *p = path ? path : "/usr/bin:/bin"; *p;) {
        size_t n = strcspn(p, ":");
        if (snprintf(out, cap, "%.*s%s%s", (int)n, p, n ? "/" : "", cmd) < (int)cap &&
            access(out, X_OK) == 0)
            return 0;
        p += n;
        p += *p == ':';
    }
    return -1;
}

/* A Native AOT executable exports DotNetRuntimeDebugHeader and has no CoreCLR, so no profiler
 * can load into it; an apphost, a single-file app (which exports DotNetRuntimeInfo instead) or
 * `dotnet` itself is fine. Reads the ELF section headers and the dynamic string table, every
 * offset and size checked against the file; anything unexpected counts as "not AOT". */
static int is_native_aot(const char *file)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    int aot = 0;
    struct stat st;
    Elf64_Ehdr eh;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || pread(fd, &eh, sizeof eh, 0) != sizeof eh ||
        memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shnum > 4096 ||
        eh.e_shoff > (Elf64_Off)st.st_size ||
        (Elf64_Off)st.st_size - eh.e_shoff < (Elf64_Off)eh.e_shnum * sizeof(Elf64_Shdr))
        goto out;
    for (unsigned i = 0; i < eh.e_shnum && !aot; i++) {
        Elf64_Shdr sh, str;
        if (pread(fd, &sh, sizeof sh, (off_t)(eh.e_shoff + i * sizeof sh)) != sizeof sh ||
            sh.sh_type != SHT_DYNSYM || sh.sh_link >= eh.e_shnum ||
            pread(fd, &str, sizeof str, (off_t)(eh.e_shoff + sh.sh_link * sizeof str)) !=
                sizeof str ||
            str.sh_size == 0 || str.sh_size > (16u << 20) || str.sh_offset > (Elf64_Off)st.st_size ||
            (Elf64_Off)st.st_size - str.sh_offset < str.sh_size)
            continue;
        char *names = malloc(str.sh_size);
        if (names && pread(fd, names, str.sh_size, (off_t)str.sh_offset) == (ssize_t)str.sh_size) {
            static const char want[] = "DotNetRuntimeDebugHeader";
            for (size_t at = 0; at < str.sh_size && !aot; at += strnlen(names + at, str.sh_size - at) + 1)
                aot = !strncmp(names + at, want, str.sh_size - at) &&
                      str.sh_size - at >= sizeof want;
        }
        free(names);
    }
out:
    close(fd);
    return aot;
}

/* "2.34" > "2.17" > "2.3.4": compares dotted version numbers. */
static int version_cmp(const char *a, const char *b)
{
    for (;;) {
        char *ea, *eb;
        unsigned long x = strtoul(a, &ea, 10), y = strtoul(b, &eb, 10);
        if (x != y)
            return x < y ? -1 : 1;
        if (*ea != '.' || *eb != '.')
            return (*ea == '.') - (*eb == '.');
        a = ea + 1;
        b = eb + 1;
    }
}

/* The oldest glibc ELF file `file` loads on: the highest GLIBC_x.y among the versions its
 * .gnu.version_r section needs, into out. Every offset and count is checked against the file.
 * Returns 0, or -1 when the file cannot say. */
static int glibc_needed(const char *file, char *out, size_t cap)
{
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char *data = NULL;
    struct stat st;
    Elf64_Ehdr eh;
    out[0] = 0;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || st.st_size > (256 << 20) ||
        pread(fd, &eh, sizeof eh, 0) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_shentsize != sizeof(Elf64_Shdr) ||
        (data = malloc((size_t)st.st_size)) == NULL ||
        pread(fd, data, (size_t)st.st_size, 0) != st.st_size)
        goto out;
    size_t size = (size_t)st.st_size;
    if (eh.e_shoff > size || (size - eh.e_shoff) / sizeof(Elf64_Shdr) < eh.e_shnum)
        goto out;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        Elf64_Shdr sh, str; /* copied: the file's offsets need not be aligned */
        memcpy(&sh, data + eh.e_shoff + i * sizeof sh, sizeof sh);
        if (sh.sh_type != SHT_GNU_verneed || sh.sh_link >= eh.e_shnum)
            continue;
        memcpy(&str, data + eh.e_shoff + sh.sh_link * sizeof str, sizeof str);
        if (sh.sh_offset > size || size - sh.sh_offset < sh.sh_size ||
            str.sh_offset > size || size - str.sh_offset < str.sh_size)
            continue;
        const char *names = data + str.sh_offset;
        size_t at = 0, end = sh.sh_size;
        for (unsigned n = 0; n < 64 && at + sizeof(Elf64_Verneed) <= end; n++) {
            Elf64_Verneed vn;
            memcpy(&vn, data + sh.sh_offset + at, sizeof vn);
            size_t aux = at + vn.vn_aux;
            for (unsigned k = 0; k < vn.vn_cnt && k < 64 && aux + sizeof(Elf64_Vernaux) <= end; k++) {
                Elf64_Vernaux va;
                memcpy(&va, data + sh.sh_offset + aux, sizeof va);
                if (va.vna_name < str.sh_size &&
                    memchr(names + va.vna_name, 0, str.sh_size - va.vna_name) &&
                    !strncmp(names + va.vna_name, "GLIBC_", 6) &&
                    (!out[0] || version_cmp(names + va.vna_name + 6, out) > 0))
                    snprintf(out, cap, "%s", names + va.vna_name + 6);
                if (!va.vna_next)
                    break;
                aux += va.vna_next;
            }
            if (!vn.vn_next)
                break;
            at += vn.vn_next;
        }
    }
out:
    free(data);
    close(fd);
    return out[0] ? 0 : -1;
}

/* Loads the library the way the runtime will (every symbol bound now), so that a library that
 * cannot load here is named with the loader's reason before the app starts: the runtime itself
 * says nothing and runs the app unprofiled. Loading runs none of clrscope's code (it has no
 * constructor); it is unloaded again before the exec. Returns 0 when it loads. */
static int library_loads(const char *lib)
{
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    if (h) {
        int ok = dlsym(h, "DllGetClassObject") != NULL;
        if (!ok)
            fprintf(stderr, "clrscope: %s loads but exports no DllGetClassObject: it is not "
                    "clrscope's profiler library\n", lib);
        dlclose(h);
        return ok ? 0 : -1;
    }
    const char *why = dlerror();
    char need[32], glibc[48] = "";
    if (!glibc_needed(lib, need, sizeof need))
        snprintf(glibc, sizeof glibc, " %s or newer", need);
    fprintf(stderr, "clrscope: the profiler library cannot load here, so the app would run "
            "unprofiled: %s\n", why ? why : "(no reason given)");
    fprintf(stderr, "clrscope: it needs x86-64 Linux with glibc%s (this system has glibc %s); "
            "`ldd %s` lists the files it needs, docs/troubleshooting.md the other checks\n",
            glibc, gnu_get_libc_version(), lib);
    return -1;
}

static int cmd_version(void)
{
    printf("clrscope %s (commit %s)\n", CLRSCOPE_VERSION, CLRSCOPE_COMMIT);
    char lib[PATH_MAX], glibc[32];
    if (find_library(lib, sizeof lib))
        return 1;
    if (glibc_needed(lib, glibc, sizeof glibc))
        printf("library %s: the glibc it needs is unknown (this system has %s)\n", lib,
               gnu_get_libc_version());
    else
        printf("library %s: needs glibc %s or newer (this system has %s)\n", lib, glibc,
               gnu_get_libc_version());
    return 0;
}

/* The major version of the .NET runtime `argv` will run on, when the app's runtimeconfig.json
 * says so for sure: the runtime a self-contained app carries, or the framework a framework-
 * dependent one asks for when it may not roll forward to another major version (the host's
 * default). `dotnet [exec] [host options] APP.dll ...` and an apphost are understood. Returns 0
 * when it cannot tell; *config names the file read. */
static int runtime_major(char **argv, char *config, size_t cap)
{
    char file[PATH_MAX];
    const char *app = NULL;
    const char *base = strrchr(argv[0], '/');
    base = base ? base + 1 : argv[0];
    config[0] = 0;
    if (!strcmp(base, "dotnet")) {
        for (int i = 1; argv[i] && !app; i++) {
            const char *a = argv[i];
            if (!strcmp(a, "exec") && i == 1)
                continue;
            if (!strcmp(a, "--roll-forward") || !strcmp(a, "--fx-version"))
                return 0; /* another framework than the file's */
            if (!strcmp(a, "--runtimeconfig") && argv[i + 1])
                snprintf(config, cap, "%s", argv[i + 1]);
            if (a[0] == '-') {
                i += argv[i + 1] != NULL; /* every host option takes a value */
                continue;
            }
            size_t n = strlen(a);
            if (n < 5 || strcmp(a + n - 4, ".dll"))
                return 0; /* an SDK command (`dotnet run`): its app is not known yet */
            app = a;
        }
        if (!app)
            return 0;
        if (!config[0] &&
            snprintf(config, cap, "%.*s.runtimeconfig.json", (int)(strlen(app) - 4), app) >= (int)cap)
            return 0;
    } else {
        if (resolve_command(argv[0], file, sizeof file) ||
            snprintf(config, cap, "%s.runtimeconfig.json", file) >= (int)cap)
            return 0;
    }
    char text[16384];
    int fd = open(config, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, text, sizeof text - 1) : -1;
    if (fd >= 0)
        close(fd);
    if (n <= 0)
        return 0;
    text[n] = 0;
    int self_contained = strstr(text, "\"includedFrameworks\"") != NULL;
    const char *roll = getenv("DOTNET_ROLL_FORWARD");
    const char *in_file = strstr(text, "\"rollForward\"");
    if (!self_contained && ((roll && *roll) || in_file))
        return 0; /* may roll forward: which runtime runs is the host's choice */
    const char *fx = strstr(text, "\"Microsoft.NETCore.App\"");
    if (!fx)
        fx = strstr(text, "\"Microsoft.AspNetCore.App\""); /* the same major version */
    const char *ver = fx ? strstr(fx, "\"version\"") : NULL;
    if (!ver || (ver = strchr(ver + 9, '"')) == NULL)
        return 0;
    long major = strtol(ver + 1, NULL, 10);
    return major > 0 && major < 1000 ? (int)major : 0;
}

static int cmd_run(int argc, char **argv)
{
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        if ((!strcmp(a, "--port") || !strcmp(a, "--bind") || !strcmp(a, "--token")) &&
            i + 1 >= argc) {
            fprintf(stderr, "clrscope: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "--port")) {
            if (!valid_port(argv[++i])) {
                fprintf(stderr, "clrscope: --port must be 0..65535, not '%s'\n", argv[i]);
                return 2;
            }
            setenv("CLRSCOPE_PORT", argv[i], 1);
        } else if (!strcmp(a, "--bind")) {
            setenv("CLRSCOPE_BIND", argv[++i], 1);
        } else if (!strcmp(a, "--token")) {
            setenv("CLRSCOPE_TOKEN", argv[++i], 1);
        } else if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "clrscope: unknown option %s\n", a);
            usage(stderr);
            return 2;
        } else {
            break;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "clrscope: run needs a command, e.g. clrscope run -- dotnet app.dll\n");
        return 2;
    }
    char lib[PATH_MAX];
    if (find_library(lib, sizeof lib) || library_loads(lib))
        return 127;
    char config[PATH_MAX];
    int major = runtime_major(&argv[i], config, sizeof config);
    if (major && major < 8) {
        fprintf(stderr, "clrscope: %s asks for .NET %d; clrscope needs .NET 8 or newer, so the "
                "app runs unprofiled\n", config, major);
        execvp(argv[i], &argv[i]);
        fprintf(stderr, "clrscope: cannot run %s: %s\n", argv[i], strerror(errno));
        return errno == ENOENT ? 127 : 126;
    }
    if (beside_another_profiler(lib))
        return 2;
    let_runtime_load_profilers();
    char file[PATH_MAX];
    if (!resolve_command(argv[i], file, sizeof file) && is_native_aot(file))
        fprintf(stderr, "clrscope: %s is a Native AOT app: it has no CoreCLR runtime for a "
                "profiler to load into, so it runs unprofiled (publish it without PublishAot, "
                "e.g. self-contained or single-file, to profile it)\n", argv[i]);
    execvp(argv[i], &argv[i]);
    fprintf(stderr, "clrscope: cannot run %s: %s\n", argv[i], strerror(errno));
    return errno == ENOENT ? 127 : 126;
}

/* Minimal reader for the discovery file we write ourselves: "key":value pairs. */
static void json_field(const char *json, const char *key, char *out, size_t cap)
{
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    out[0] = 0;
    const char *p = strstr(json, pat);
    if (!p)
        return;
    p += strlen(pat);
    p += strspn(p, " \t\r\n");
    if (*p == '"') {
        p++;
        size_t n = strcspn(p, "\"");
        snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    } else {
        size_t n = strcspn(p, ",}");
        snprintf(out, cap, "%.*s", (int)(n < cap ? n : cap - 1), p);
    }
}

/* "<digits>.json": the pid it names, else 0 */
static long pid_of_name(const char *name)
{
    size_t digits = strspn(name, "0123456789");
    if (!digits || digits > 9 || strcmp(name + digits, ".json"))
        return 0;
    return strtol(name, NULL, 10);
}

/* A discovery file whose process is gone (killed before it could remove it) is removed, but only
 * when nothing else can be meant: its name and content name the same pid, it was written in this
 * pid namespace (a container sharing the directory sees other pids), it is a regular file of
 * ours, and it is still the file just read (not rewritten meanwhile by a new process that was
 * given the same pid). */
static void remove_stale(DIR *d, const char *name, long pid, const char *pid_ns,
                         const struct stat *read_st)
{
    char own_ns[64];
    ssize_t n = readlink("/proc/self/ns/pid", own_ns, sizeof own_ns - 1);
    if (n <= 0 || pid_of_name(name) != pid)
        return;
    own_ns[n] = 0;
    struct stat st;
    if (strcmp(pid_ns, own_ns) || fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) ||
        !S_ISREG(st.st_mode) || st.st_uid != geteuid() || st.st_ino != read_st->st_ino ||
        st.st_dev != read_st->st_dev)
        return;
    unlinkat(dirfd(d), name, 0);
}

/* The effective uid of process pid: the user its files are created as. From /proc/PID/status,
 * which says it even of a process that is not dumpable (its /proc/PID belongs to root). -1 when
 * it cannot be read (gone, or hidden from this user). */
static long process_euid(long pid)
{
    char path[32], line[256];
    snprintf(path, sizeof path, "/proc/%ld/status", pid);
    FILE *f = fopen(path, "re");
    if (!f)
        return -1;
    long euid = -1;
    while (fgets(line, sizeof line, f)) {
        unsigned long real, eff;
        if (!strncmp(line, "Uid:", 4)) {
            if (sscanf(line + 4, "%lu %lu", &real, &eff) == 2 && eff <= 0xffffffffUL)
                euid = (long)eff;
            break;
        }
    }
    fclose(f);
    return euid;
}

/* Whether a discovery file owned by file_uid may speak for a process running as proc_euid: it
 * was written by that user, or by root (who can write any file anyway). A file another user
 * wrote naming someone else's process (a URL and token of theirs for root to follow, a name
 * planted for a pid to come) does not. */
static int speaks_for(uid_t file_uid, long proc_euid)
{
    return proc_euid >= 0 && (file_uid == (uid_t)proc_euid || file_uid == 0);
}

/* s for the terminal: printable ASCII as it is, any other byte as \xNN (a file can hold escape
 * sequences; the profiler writes none), at most max bytes of s, then "..." when cut. */
static const char *shown(const char *s, size_t max, char *out, size_t cap)
{
    size_t i = 0, j = 0;
    for (; s[i] && i < max && j + 8 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f)
            out[j++] = (char)c;
        else
            j += (size_t)snprintf(out + j, cap - j, "\\x%02x", c);
    }
    if (s[i])
        j += (size_t)snprintf(out + j, cap - j, "...");
    out[j] = 0;
    return out;
}

/* 1 when s is all printable ASCII but spaces (a URL or token the profiler writes), else 0. */
static int plain(const char *s)
{
    for (; *s; s++)
        if ((unsigned char)*s <= 0x20 || (unsigned char)*s >= 0x7f)
            return 0;
    return 1;
}

/* Reads discovery file `name` of directory d into buf: only a regular file of this user's (root:
 * anyone's), never through a link. Returns 0, or -1 with nothing read; *st_out (may be NULL) is
 * the file read. */
static int read_discovery(DIR *d, const char *name, char *buf, size_t cap, struct stat *st_out)
{
    int fd = openat(dirfd(d), name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd < 0)
        return -1;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode) || (st.st_uid != geteuid() && geteuid() != 0)) {
        close(fd);
        return -1;
    }
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        return -1;
    buf[n] = 0;
    if (st_out)
        *st_out = st;
    return 0;
}

/* Opens a directory of discovery files of user `uid`: a real directory (not a link), owned by
 * uid, that no one else can write to, so that every file in it was put there by uid (or root).
 * NULL when it is missing or not such a directory (errno: ENOENT, or EPERM and ENOTDIR). */
static DIR *open_user_dir(const char *path, uid_t uid)
{
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    DIR *d = NULL;
    if (fstat(fd, &st) || st.st_uid != uid || (st.st_mode & 022))
        errno = EPERM;
    else
        d = fdopendir(fd);
    if (!d)
        close(fd);
    return d;
}

/* A directory of discovery files, found: its path and the open directory. */
typedef int (*dir_visit)(DIR *d, const char *path, void *ctx);

/* Opens one user's directory for visit; a directory of this user's that exists but may not be
 * trusted gets a line on stderr, another user's (root's listing) counts in *refused. Returns
 * visit's result, 0 when not visited. */
static int visit_user_dir(const char *path, uid_t uid, dir_visit visit, void *ctx, int *refused)
{
    DIR *d = open_user_dir(path, uid);
    if (!d) {
        if (errno == ENOENT)
            return 0;
        if (uid == geteuid())
            fprintf(stderr, "clrscope: %s is not read: it is not a directory of this user's that "
                    "no one else can write to\n", path);
        else
            (*refused)++;
        return 0;
    }
    int r = visit(d, path, ctx);
    closedir(d);
    return r;
}

/* Calls visit on every directory discovery files are in, until it returns nonzero (returned):
 * the user's own: $XDG_RUNTIME_DIR/clrscope when that is the user's own 0700 runtime directory
 * (as the profiler's prof_runtime_dir), and /tmp/clrscope-EUID; for root also every other
 * /tmp/clrscope-UID that belongs to the uid its name says, or only that of `only_uid` when it
 * is not -1 (the user of the one process looked for). */
static int each_discovery_dir(dir_visit visit, void *ctx, long only_uid)
{
    uid_t me = geteuid();
    int refused = 0, r = 0;
    const char *rt = getenv("XDG_RUNTIME_DIR");
    struct stat st;
    char path[400];
    if (rt && rt[0] == '/' && strlen(rt) <= 300 && !stat(rt, &st) && S_ISDIR(st.st_mode) &&
        st.st_uid == me && !(st.st_mode & 077)) {
        snprintf(path, sizeof path, "%s/clrscope", rt);
        r = visit_user_dir(path, me, visit, ctx, &refused);
    }
    if (r)
        return r;
    if (me != 0 || only_uid >= 0) {
        uid_t uid = me != 0 ? me : (uid_t)only_uid;
        snprintf(path, sizeof path, "/tmp/clrscope-%u", (unsigned)uid);
        r = visit_user_dir(path, uid, visit, ctx, &refused);
        if (refused)
            fprintf(stderr, "clrscope: %s is not read: it is not a directory of uid %u's that "
                    "no one else can write to\n", path, (unsigned)uid);
        return r;
    }
    DIR *tmp = opendir("/tmp");
    struct dirent *e;
    while (tmp && !r && (e = readdir(tmp))) {
        const char *digits = e->d_name + strlen("clrscope-");
        size_t nd = strspn(digits, "0123456789");
        if (strncmp(e->d_name, "clrscope-", strlen("clrscope-")) || !nd || nd > 10 ||
            digits[nd] || (nd > 1 && digits[0] == '0'))
            continue;
        unsigned long long uid = strtoull(digits, NULL, 10);
        if (uid > 0xfffffffeULL)
            continue;
        snprintf(path, sizeof path, "/tmp/%s", e->d_name);
        r = visit_user_dir(path, (uid_t)uid, visit, ctx, &refused);
    }
    if (tmp)
        closedir(tmp);
    if (refused)
        fprintf(stderr, "clrscope: %d /tmp/clrscope-UID director%s not read: not a directory of "
                "that uid's that no one else can write to\n", refused, refused == 1 ? "y" : "ies");
    return r;
}

/* What `clrscope ls` counts over the directories. */
struct listing {
    int shown;        /* processes listed */
    int untrusted;    /* files not written by their process's user */
    char own_ns[64];  /* this process's pid namespace */
};

static int list_dir(DIR *d, const char *dir, void *ctx)
{
    (void)dir;
    struct listing *ls = ctx;
    struct dirent *e;
    while ((e = readdir(d))) {
        long name_pid = pid_of_name(e->d_name);
        char buf[4096];
        struct stat read_st;
        if (!name_pid || read_discovery(d, e->d_name, buf, sizeof buf, &read_st))
            continue;
        char pid[16], url[256], cmd[600], token[256], pid_ns[64];
        json_field(buf, "pid", pid, sizeof pid);
        json_field(buf, "url", url, sizeof url);
        json_field(buf, "cmdline", cmd, sizeof cmd);
        json_field(buf, "token", token, sizeof token);
        json_field(buf, "pid_ns", pid_ns, sizeof pid_ns);
        long p = strtol(pid, NULL, 10);
        if (p <= 0)
            continue; /* not a discovery file */
        if (kill((pid_t)p, 0) && errno == ESRCH) {
            if (pid_ns[0])
                remove_stale(d, e->d_name, p, pid_ns, &read_st); /* gone without cleaning up */
            continue;
        }
        if (pid_ns[0] && strcmp(pid_ns, ls->own_ns))
            continue; /* its pid is another process here: nothing to check the file against */
        if (p != name_pid || !speaks_for(read_st.st_uid, process_euid(p))) {
            ls->untrusted++;
            continue;
        }
        char u[4 * 120 + 8], t[4 * 256 + 8], c[4 * 300 + 8];
        shown(url, 120, u, sizeof u);
        shown(cmd, 300, c, sizeof c);
        if (!ls->shown)
            printf("%-8s %-34s %s\n", "PID", "URL", "COMMAND");
        if (token[0] && strcmp(token, "null"))
            printf("%-8ld %s?token=%s %s\n", p, u, shown(token, 256, t, sizeof t), c);
        else
            printf("%-8ld %-34s %s\n", p, u, c);
        ls->shown++;
    }
    return 0;
}

static int cmd_ls(void)
{
    struct listing ls = {0};
    ssize_t nl = readlink("/proc/self/ns/pid", ls.own_ns, sizeof ls.own_ns - 1);
    ls.own_ns[nl > 0 ? nl : 0] = 0;
    each_discovery_dir(list_dir, &ls, -1);
    if (!ls.shown)
        printf("no profiled processes found\n");
    fflush(stdout);
    if (ls.untrusted)
        fprintf(stderr, "clrscope: %d discovery file%s not listed: not written by the user of "
                "the process %s\n", ls.untrusted, ls.untrusted == 1 ? "" : "s",
                ls.untrusted == 1 ? "it names" : "they name");
    return 0;
}

/* GET path from http://HOST:PORT/ (the discovery file's url) with the token; the body goes to
 * stdout on 200. Returns the exit status: 0, or 1 with a message. */
static int http_get_print(const char *url, const char *token, const char *path)
{
    char host[256], port[16];
    const char *h = url + strlen("http://");
    if (strncmp(url, "http://", 7))
        goto bad_url;
    const char *end = h[0] == '[' ? strchr(h, ']') : NULL; /* [v6]:port */
    const char *colon = strchr(end ? end : h, ':');
    if (!colon)
        goto bad_url;
    const char *hs = end ? h + 1 : h;
    size_t hl = (size_t)((end ? end : colon) - hs);
    size_t pl = strspn(colon + 1, "0123456789");
    if (!hl || hl >= sizeof host || !pl || pl >= sizeof port)
        goto bad_url;
    memcpy(host, hs, hl);
    host[hl] = 0;
    memcpy(port, colon + 1, pl);
    port[pl] = 0;
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *ai = NULL;
    if (getaddrinfo(host, port, &hints, &ai) || !ai) {
        fprintf(stderr, "clrscope: cannot resolve %s\n", host);
        return 1;
    }
    int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct timeval tv = {.tv_sec = 15};
    if (fd >= 0) {
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    }
    if (fd < 0 || connect(fd, ai->ai_addr, ai->ai_addrlen)) {
        fprintf(stderr, "clrscope: cannot connect to %s: %s\n", url, strerror(errno));
        freeaddrinfo(ai);
        if (fd >= 0)
            close(fd);
        return 1;
    }
    freeaddrinfo(ai);
    char req[1024];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.0\r\nHost: %.*s\r\n%s%s%sConnection: close\r\n\r\n",
                     path, (int)(colon + 1 + pl - h), h, token[0] ? "Authorization: Bearer " : "",
                     token, token[0] ? "\r\n" : "");
    if (n <= 0 || (size_t)n >= sizeof req ||
        send(fd, req, (size_t)n, MSG_NOSIGNAL) != (ssize_t)n) {
        fprintf(stderr, "clrscope: cannot send the request to %s\n", url);
        close(fd);
        return 1;
    }
    /* the reply: the status line and headers, then the body, streamed to stdout */
    char buf[16384];
    size_t have = 0;
    char *body = NULL;
    ssize_t r = 0;
    while (!body && have < sizeof buf - 1 && (r = read(fd, buf + have, sizeof buf - 1 - have)) > 0) {
        have += (size_t)r;
        buf[have] = 0;
        body = strstr(buf, "\r\n\r\n");
    }
    int status = 0;
    if (!body || sscanf(buf, "HTTP/%*s %d", &status) != 1) {
        fprintf(stderr, "clrscope: %s from %s\n",
                have >= sizeof buf - 1 ? "reply headers too long" : "no complete reply", url);
        close(fd);
        return 1;
    }
    *body = 0; /* the headers alone, for Content-Length */
    body += 4;
    long long want = -1;
    for (char *hdr = strstr(buf, "\r\n"); hdr; hdr = strstr(hdr + 2, "\r\n"))
        if (!strncasecmp(hdr + 2, "Content-Length:", 15))
            want = strtoll(hdr + 17, NULL, 10);
    FILE *out = status == 200 ? stdout : stderr;
    if (status != 200)
        fprintf(stderr, "clrscope: %s answered %d: ", url, status);
    long long got = 0;
    for (size_t len = have - (size_t)(body - buf);; len = (size_t)r, body = buf) {
        /* no control bytes but line ends and tabs reach the terminal */
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)body[i];
            fputc(c >= 0x20 || c == '\n' || c == '\t' ? (c == 0x7f ? '?' : c) : '?', out);
        }
        got += (long long)len;
        if ((r = read(fd, buf, sizeof buf)) <= 0)
            break;
    }
    int failed = r < 0 || (want >= 0 && got != want);
    if (status != 200)
        fputc('\n', stderr);
    close(fd);
    if (failed) {
        fflush(stdout);
        fprintf(stderr, "clrscope: the reply from %s ended early (%lld of %lld bytes)%s\n", url,
                got, want, r < 0 ? ": timed out or failed" : "");
        return 1;
    }
    return status == 200 ? 0 : 1;
bad_url:
    fprintf(stderr, "clrscope: the discovery file's url '%s' is not http://HOST:PORT/\n", url);
    return 1;
}

/* What `clrscope threads` looks for in each discovery directory, and its exit status. */
struct thread_dump {
    long pid;
    long proc_euid;   /* the user the process runs as */
    int grouped;
    char own_ns[64];  /* this process's pid namespace */
    int status;       /* set when the dump was asked for */
};

/* Asks the process of want->pid for its thread dump when directory d has its discovery file,
 * written by the process's user in this pid namespace. Returns 1 once asked (want->status). */
static int dump_threads(DIR *d, const char *dir, void *ctx)
{
    (void)dir;
    struct thread_dump *want = ctx;
    char name[32], buf[4096], url[256], token[256], fpid[16], pid_ns[64];
    struct stat fst;
    snprintf(name, sizeof name, "%ld.json", want->pid);
    if (read_discovery(d, name, buf, sizeof buf, &fst) || !speaks_for(fst.st_uid, want->proc_euid))
        return 0;
    json_field(buf, "pid", fpid, sizeof fpid);
    json_field(buf, "url", url, sizeof url);
    json_field(buf, "token", token, sizeof token);
    json_field(buf, "pid_ns", pid_ns, sizeof pid_ns);
    if (strtol(fpid, NULL, 10) != want->pid || !url[0] || !plain(url) || !plain(token) ||
        (pid_ns[0] && strcmp(pid_ns, want->own_ns)))
        return 0;
    if (!strcmp(token, "null"))
        token[0] = 0;
    want->status = http_get_print(url, token, want->grouped ? "/debug/pprof/threads?debug=1"
                                                            : "/debug/pprof/threads?debug=2");
    return 1;
}

static int cmd_threads(int argc, char **argv)
{
    int grouped = 0;
    const char *pid_arg = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--grouped"))
            grouped = 1;
        else if (!pid_arg && argv[i][0] != '-')
            pid_arg = argv[i];
        else {
            fprintf(stderr, "clrscope: threads: unexpected argument '%s'\n", argv[i]);
            return 2;
        }
    }
    char *end = NULL;
    long pid = pid_arg ? strtol(pid_arg, &end, 10) : 0;
    if (!pid_arg || *end || pid <= 0 || pid > 999999999) {
        fprintf(stderr, "clrscope: threads needs the pid of a profiled process (clrscope ls "
                        "lists them)\n");
        return 2;
    }
    /* the process must be there, and be the file's writer: a file a killed process left (whose
     * port another process may have now), or one another user planted for root to follow, is
     * not used */
    struct thread_dump want = {.pid = pid, .grouped = grouped};
    if ((kill((pid_t)pid, 0) && errno != EPERM) || (want.proc_euid = process_euid(pid)) < 0) {
        fprintf(stderr, "clrscope: no process %ld\n", pid);
        return 1;
    }
    ssize_t nl = readlink("/proc/self/ns/pid", want.own_ns, sizeof want.own_ns - 1);
    want.own_ns[nl > 0 ? nl : 0] = 0;
    if (each_discovery_dir(dump_threads, &want, want.proc_euid))
        return want.status;
    fprintf(stderr, "clrscope: no profiled process %ld found (clrscope ls lists them; a process "
                    "with the dashboard off has none)\n", pid);
    return 1;
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
    if (!strcmp(argv[1], "ls"))
        return cmd_ls();
    if (!strcmp(argv[1], "threads"))
        return cmd_threads(argc - 2, argv + 2);
    fprintf(stderr, "clrscope: unknown command '%s'\n", argv[1]);
    usage(stderr);
    return 2;
}
