/*
 * test_process.c - which command lines are the .NET SDK's own processes (left alone) and which
 * are applications (profiled), as /proc/self/cmdline spells them; and which process is the
 * clrscope dotnet tool's own.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "prof_process.h"

#include "unit_check.h"

/* argv joined with NULs, as the kernel writes cmdline; returns the byte count */
static size_t cmdline(char *buf, size_t cap, const char *const *argv)
{
    size_t n = 0;
    for (int i = 0; argv[i]; i++) {
        size_t l = strlen(argv[i]) + 1;
        if (n + l > cap)
            break;
        memcpy(buf + n, argv[i], l);
        n += l;
    }
    return n;
}

/* sdk: 0 an app, 1 the SDK's command-line host, 2 a program the SDK starts */
static void expect(int sdk, const char *what_has, const char *const *argv)
{
    char buf[1024], what[96];
    size_t n = cmdline(buf, sizeof buf, argv);
    int got = prof_process_is_sdk(buf, n, what, sizeof what);
    char line[512] = "";
    for (int i = 0; argv[i]; i++)
        snprintf(line + strlen(line), sizeof line - strlen(line), "%s%s", i ? " " : "", argv[i]);
    static const char *const kind[] = {"app", "SDK command", "SDK program"};
    CHECK(got == sdk, "%s: %s, expected %s", line, kind[got & 3], kind[sdk]);
    if (sdk && what_has)
        CHECK(strstr(what, what_has) != NULL, "%s: described as \"%s\"", line, what);
}

#define ARGS(...) ((const char *const[]){__VA_ARGS__, NULL})

int main(void)
{
    /* the SDK's command-line host */
    expect(1, "`dotnet run`", ARGS("dotnet", "run", "-c", "Release"));
    expect(1, "`dotnet run`", ARGS("/usr/share/dotnet/dotnet", "run", "--project", "x/app.csproj"));
    expect(1, "`dotnet watch`", ARGS("dotnet", "watch"));
    expect(1, "`dotnet test`", ARGS("dotnet", "test", "tests/x.dll"));
    expect(1, "`dotnet --info`", ARGS("dotnet", "--info"));
    expect(1, "`dotnet`", ARGS("dotnet"));
    /* the SDK's programs */
    expect(2, "MSBuild.dll", ARGS("/usr/share/dotnet/dotnet", "exec", "/usr/share/dotnet/sdk/10.0.100/MSBuild.dll",
                                  "/nologo", "/nodemode:1", "/nodeReuse:true"));
    expect(2, "MSBuild.dll", ARGS("dotnet", "/usr/share/dotnet/sdk/10.0.100/msbuild.dll", "-version"));
    expect(2, "VBCSCompiler.dll", ARGS("dotnet", "exec", "--runtimeconfig", "/s/bincore/VBCSCompiler.runtimeconfig.json",
                                       "/s/bincore/VBCSCompiler.dll", "-pipename:x"));
    expect(2, "dotnet-watch.dll", ARGS("dotnet", "exec", "--roll-forward", "Major",
                                       "/sdk/10.0.100/DotnetTools/dotnet-watch/10.0.100/tools/net10.0/any/dotnet-watch.dll"));
    expect(2, "vstest.console.dll", ARGS("dotnet", "exec", "/sdk/10.0.100/vstest.console.dll", "--port:1"));
    expect(2, "VBCSCompiler", ARGS("/usr/share/dotnet/sdk/10.0.401/Roslyn/bincore/VBCSCompiler",
                                   "-pipename:Dv7Ncqi9"));
    expect(2, "csc", ARGS("/usr/share/dotnet/sdk/10.0.401/Roslyn/bincore/csc", "/noconfig", "@x.rsp"));
    expect(2, "illink.dll", ARGS("dotnet", "exec", "/root/.nuget/packages/microsoft.net.illink.tasks/10.0.0/tools/net10.0/illink.dll", "@rsp"));
    /* applications */
    expect(0, NULL, ARGS("dotnet", "Exec", "app.dll"));
    expect(0, NULL, ARGS("dotnet", "--roll-forward-on-no-candidate-fx", "2", "--fx-version", "8.0.1", "app.dll"));
    expect(0, NULL, ARGS("dotnet", "--ROLL-FORWARD", "Major", "app.dll"));
    expect(0, NULL, ARGS("dotnet", "--new-option", "a", "--other", "b", "App.exe"));
    expect(0, NULL, ARGS("dotnet", "exec", "--runtimeconfig", "x.json")); /* app cut off */
    expect(0, NULL, ARGS("dotnet", "/srv/my app/My App.dll")); /* spaces in the path */
    expect(0, NULL, ARGS("/srv/VBCSCompiler", "-pipename:x")); /* not in an SDK directory */
    expect(0, NULL, ARGS("/usr/share/dotnet/sdk/10.0.401/Roslyn/bincore/VBCS"));
    expect(0, NULL, ARGS("dotnet", "app.dll"));
    expect(0, NULL, ARGS("dotnet", "bin/Release/net10.0/app.dll", "run", "build"));
    expect(0, NULL, ARGS("/usr/bin/dotnet", "/srv/app/App.dll", "--urls", "http://*:80"));
    expect(0, NULL, ARGS("dotnet", "exec", "--runtimeconfig", "t.runtimeconfig.json", "--depsfile",
                         "t.deps.json", "/src/bin/testhost.dll", "--port", "1"));
    expect(0, NULL, ARGS("dotnet", "exec", "app.dll"));
    expect(0, NULL, ARGS("dotnet", "--roll-forward", "LatestMajor", "app.dll"));
    expect(0, NULL, ARGS("dotnet", "--some-new-host-option", "x", "app.dll"));
    expect(0, NULL, ARGS("./MyApp", "run"));
    expect(0, NULL, ARGS("/opt/app/MyApp"));
    expect(0, NULL, ARGS("dotnet-counters", "monitor")); /* a tool's apphost, not the SDK */
    /* nothing to read */
    char what[8];
    CHECK(prof_process_is_sdk("", 0, what, sizeof what) == 0, "empty command line: an app");
    CHECK(prof_process_is_sdk("dotnet", 6, what, sizeof what) == 0,
          "an argument cut off without its NUL is left out (then nothing is left)");
    /* a command line cut off after the host's options: the app may be in what was cut */
    char cutbuf[] = "dotnet\0--depsfile\0x.deps.json\0/some/very/long/pa";
    CHECK(prof_process_is_sdk(cutbuf, sizeof cutbuf - 1, what, sizeof what) == PROF_PROCESS_APP,
          "cut off after host options: an app");
    char cutbuf2[] = "dotnet\0--unknown\0/some/very/long/pa";
    CHECK(prof_process_is_sdk(cutbuf2, sizeof cutbuf2 - 1, what, sizeof what) == PROF_PROCESS_APP,
          "cut off after an unknown option: an app");
    /* more arguments than are read: the first ones decide */
    char many[64 * 3 + 16];
    size_t mn = 0;
    memcpy(many, "dotnet\0run\0", 11);
    mn = 11;
    for (int k = 0; k < 64; k++) {
        memcpy(many + mn, "-x", 3);
        mn += 3;
    }
    CHECK(prof_process_is_sdk(many, mn, what, sizeof what) == PROF_PROCESS_SDK_COMMAND,
          "`dotnet run` with 64 more arguments: still the SDK's");
    char small[4];
    expect(1, NULL, ARGS("dotnet", "run"));
    CHECK(prof_process_is_sdk("dotnet\0run\0", 11, small, sizeof small) == PROF_PROCESS_SDK_COMMAND &&
              strlen(small) == 3,
          "the description fits its buffer");
    /* the clrscope dotnet tool's own process: run as `dotnet …/clrscope.dll` from the tool
     * store, or from its shim, an executable named clrscope beside the .store/clrscope folder */
    char buf[1024];
    const char *const *tool = ARGS("/usr/share/dotnet/dotnet",
        "/home/u/.dotnet/tools/.store/clrscope/0.1.0/clrscope/0.1.0/tools/net8.0/any/clrscope.dll", "ls");
    size_t tn = cmdline(buf, sizeof buf, tool);
    CHECK(prof_process_is_clrscope_tool(buf, tn, "/usr/share/dotnet/dotnet"), "dotnet …/clrscope.dll: the tool");
    CHECK(prof_process_is_clrscope_tool(buf, tn - 3, "/usr/share/dotnet/dotnet"),
          "without its last argument: still the tool");
    CHECK(!prof_process_is_clrscope_tool(buf, tn - 6, "/usr/share/dotnet/dotnet"),
          "the path cut off before its end: not known to be the tool");
    tn = cmdline(buf, sizeof buf, ARGS("dotnet", "/srv/app/clrscope.dll"));
    CHECK(!prof_process_is_clrscope_tool(buf, tn, "/usr/share/dotnet/dotnet"),
          "an app named clrscope.dll outside a tool store: an app");
    char dir[] = "/tmp/clrscope-test-process-XXXXXX", shim[128], store[128];
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(shim, sizeof shim, "%s/clrscope", dir);
    snprintf(store, sizeof store, "%s/.store", dir);
    tn = cmdline(buf, sizeof buf, ARGS("clrscope", "ls"));
    CHECK(!prof_process_is_clrscope_tool(buf, tn, shim), "no .store/clrscope beside it: an app");
    mkdir(store, 0700);
    snprintf(store + strlen(store), sizeof store - strlen(store), "/clrscope");
    mkdir(store, 0700);
    CHECK(prof_process_is_clrscope_tool(buf, tn, shim), "the shim beside .store/clrscope: the tool");
    snprintf(shim, sizeof shim, "%s/myapp", dir);
    CHECK(!prof_process_is_clrscope_tool(buf, tn, shim), "another executable there: an app");
    rmdir(store);
    *strrchr(store, '/') = 0;
    rmdir(store);
    rmdir(dir);
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
