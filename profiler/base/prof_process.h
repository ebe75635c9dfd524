/*
 * prof_process - whether this process is the .NET SDK's own tooling, which clrscope leaves alone.
 *
 * `clrscope run -- dotnet run` (or `dotnet watch`, `dotnet test`) puts the profiler into every .NET
 * process of the tree: the SDK's command-line host, the MSBuild nodes and the compiler server it
 * starts for the build, and at last the app. Each would take a dashboard port (6060, 6061, ...)
 * and print its own URL, and the first, the one users open, would be the SDK's, not their app's;
 * MSBuild nodes and the compiler server also stay alive for minutes after a build (node reuse),
 * holding their ports. So clrscope stays passive in them (one log line each) unless
 * CLRSCOPE_PROFILE_SDK=1.
 *
 * A process is the SDK's when it was started as the `dotnet` host with a command instead of an
 * application path (`dotnet run`, `dotnet build`, `dotnet --info`), or runs one of the SDK's own
 * programs (`dotnet [exec [options]] …/MSBuild.dll`; also VBCSCompiler.dll, csc.dll, vbc.dll,
 * dotnet.dll, dotnet-watch.dll, vstest.console.dll, datacollector.dll,
 * NuGet.Build.Tasks.Console.dll), or their own launchers inside the SDK's directory
 * (…/sdk/<version>/Roslyn/bincore/VBCSCompiler). Test hosts (testhost.dll) run the user's tests
 * and are profiled.
 *
 * The clrscope dotnet tool's own process is left alone too, without a word.
 *
 * ctx: any thread; pure functions of their arguments but prof_process_read_cmdline and
 * prof_process_is_clrscope_tool.
 */
#ifndef PROF_PROCESS_H
#define PROF_PROCESS_H

#include <stddef.h>

enum { PROF_PROCESS_APP = 0, PROF_PROCESS_SDK_COMMAND = 1, PROF_PROCESS_SDK_PROGRAM = 2 };

/* `args` holds `len` bytes of NUL-separated arguments, as /proc/self/cmdline. Returns
 * PROF_PROCESS_SDK_COMMAND for the SDK's command-line host (`dotnet run`: what the user typed),
 * PROF_PROCESS_SDK_PROGRAM for a program the SDK starts (MSBuild, the compilers), and describes
 * it in `what` (e.g. "the .NET SDK's `dotnet run`"); PROF_PROCESS_APP for an application (or when
 * unsure). A program the SDK starts must print nothing on stderr: MSBuild fails a build on a
 * compiler's stderr line. */
int prof_process_is_sdk(const char *args, size_t len, char *what, size_t cap);

/* Whether this is the clrscope dotnet tool's own process (tools/packaging/dotnet/Clrscope.Tool),
 * which replaces itself with the native launcher at once: its shim `exe` (an executable named
 * clrscope with the SDK's .store/clrscope directory beside it), or `dotnet [exec]
 * …/.store/clrscope/…/clrscope.dll` in `args` (as prof_process_is_sdk's). Where the profiler's
 * variables are set for every process (an image that profiles its app), the runtime loads
 * clrscope into the tool too: there it must take no port, print nothing and leave no discovery
 * file behind the exec. Looks for the .store directory on the file system. */
int prof_process_is_clrscope_tool(const char *args, size_t len, const char *exe);

/* /proc/self/cmdline into buf (NUL-separated, NUL-terminated); its length, 0 when unreadable. */
size_t prof_process_read_cmdline(char *buf, size_t cap);

#endif
