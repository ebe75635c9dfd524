/*
 * launcher_run.c - `clrscope run` and `clrscope --version`, the launcher's commands that start
 * an app under the profiler or describe the library (main() and the usage text: launcher.c).
 *   run: finds libclrscope.so (beside the launcher, else CLRSCOPE_LIB) and checks that it loads
 *   here (dlopen; dlerror() says why not, with the glibc it needs), reads the app's
 *   runtimeconfig.json for its .NET version (older than 8: run unprofiled, with a line), sets the
 *   runtime's profiler variables (beside another profiler as a notification profiler when
 *   CORECLR_PROFILER names one), narrows DOTNET_EnableDiagnostics=0, warns of a Native AOT app,
 *   and execs the command, so its output, signals and exit status are exactly its own.
 *   --version: the build's version and commit, and the oldest glibc the library loads on.
 * Kept apart from the discovery commands (launcher_discovery.c): nothing here reads discovery
 * files or speaks HTTP.
 */
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <gnu/libc-version.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "clrscope_commit.h"
#include "launcher.h"

#define CLSID_STR "{C1A5C09E-5C0E-4C1B-9A7E-0D5E7C1A5C0E}"

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

int cmd_version(void)
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

/* One of the dashboard's options (--port, --bind, --token) at argv[*i], taken into its variable
 * (*i moves past its value): 1; 0 when argv[*i] is none of them; -1 (said) for a missing or bad
 * value. */
static int dashboard_option(int argc, char **argv, int *i)
{
    const char *a = argv[*i], *var = !strcmp(a, "--port")    ? "CLRSCOPE_PORT"
                                     : !strcmp(a, "--bind")  ? "CLRSCOPE_BIND"
                                     : !strcmp(a, "--token") ? "CLRSCOPE_TOKEN"
                                                             : NULL;
    if (!var)
        return 0;
    if (*i + 1 >= argc) {
        fprintf(stderr, "clrscope: %s needs a value\n", a);
        return -1;
    }
    const char *v = argv[++*i];
    if (!strcmp(a, "--port") && !valid_port(v)) {
        fprintf(stderr, "clrscope: --port must be 0..65535, not '%s'\n", v);
        return -1;
    }
    setenv(var, v, 1);
    return 1;
}

int cmd_run(int argc, char **argv)
{
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            i++;
            break;
        }
        int taken = dashboard_option(argc, argv, &i);
        if (taken < 0)
            return 2;
        if (taken)
            continue;
        if (a[0] == '-' && a[1] == '-') {
            fprintf(stderr, "clrscope: unknown option %s\n", a);
            usage(stderr);
            return 2;
        }
        break;
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

/* The process directory to serve: DIR itself when it holds process.json, else the one under DIR
 * whose process.json is newest (the others are listed). 0, or -1 (said on stderr). */
static int pick_process_dir(const char *dir, char *out, size_t cap)
{
    char p[PATH_MAX + 32];
    snprintf(p, sizeof p, "%s/process.json", dir);
    if (access(p, R_OK) == 0) {
        snprintf(out, cap, "%s", dir);
        return 0;
    }
    DIR *d = opendir(dir);
    if (!d) {
        fprintf(stderr, "clrscope: cannot read %s: %s\n", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    time_t best = 0;
    int n = 0;
    out[0] = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.')
            continue;
        struct stat st;
        snprintf(p, sizeof p, "%s/%s/process.json", dir, e->d_name);
        if (stat(p, &st))
            continue;
        n++;
        if (n > 1)
            fprintf(stderr, "clrscope: %s holds the history of several processes; serving the "
                    "newest (name one: clrscope serve %s/NAME)\n", dir, dir);
        if (st.st_mtime >= best) {
            best = st.st_mtime;
            snprintf(out, cap, "%s/%s", dir, e->d_name);
        }
    }
    closedir(d);
    if (!out[0]) {
        fprintf(stderr, "clrscope: %s holds no clrscope history (no process.json in it or its "
                "directories)\n", dir);
        return -1;
    }
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    int i = 0;
    for (; i < argc; i++) {
        int taken = dashboard_option(argc, argv, &i);
        if (taken < 0)
            return 2;
        if (taken)
            continue;
        if (argv[i][0] == '-') {
            fprintf(stderr, "clrscope: unknown option %s\n", argv[i]);
            usage(stderr);
            return 2;
        }
        break;
    }
    if (i + 1 != argc) {
        fprintf(stderr, "clrscope: serve needs one directory: a history directory "
                "(CLRSCOPE_HISTORY_DIR) or one process's directory in it\n");
        return 2;
    }
    char pdir[PATH_MAX];
    if (pick_process_dir(argv[i], pdir, sizeof pdir))
        return 1;
    char lib[PATH_MAX];
    if (find_library(lib, sizeof lib) || library_loads(lib))
        return 1;
    void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    int (*serve)(const char *) = h ? (int (*)(const char *))dlsym(h, "clrscope_serve") : NULL;
    if (!serve) {
        fprintf(stderr, "clrscope: %s has no post-mortem server (clrscope_serve): a library of "
                "another version?\n", lib);
        return 1;
    }
    return serve(pdir);
}
