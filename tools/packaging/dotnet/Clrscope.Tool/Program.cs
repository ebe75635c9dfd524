// Program.cs - the `clrscope` dotnet tool: runs the native launcher shipped beside it for this
// machine (native/linux-x64/clrscope or native/linux-arm64/clrscope, tools/launcher.c) with the
// same arguments. The launcher replaces this process (execv), so what it runs keeps this
// process's id, standard streams, signals and exit status, exactly as when the launcher is
// started directly. Where clrscope cannot run (not x86-64 or arm64 Linux with glibc, or arm64
// with a package packed without it) it says so in one line and exits with status 1.
using System;
using System.IO;
using System.Runtime.InteropServices;

static class Program
{
    const int SIGPIPE = 13;
    const int SIG_SETMASK = 2;

    [DllImport("libc", SetLastError = true)]
    static extern int execv(string path, string?[] argv);

    [DllImport("libc", SetLastError = true)]
    static extern int access(string path, int mode);

    [DllImport("libc", SetLastError = true)]
    static extern int setenv(string name, string value, int overwrite);

    [DllImport("libc")]
    static extern IntPtr signal(int signum, IntPtr handler);

    [DllImport("libc")]
    static extern int sigprocmask(int how, byte[] set, byte[]? oldset);

    static int Main(string[] args)
    {
        string? why = Unsupported();
        if (why != null)
        {
            Console.Error.WriteLine($"clrscope: {why}; clrscope runs on x86-64 (linux-x64) and arm64 (linux-arm64) Linux with glibc only");
            return 1;
        }
        var (rid, loader) = Platform()!.Value;
        string launcher = Launcher(rid);
        if (!File.Exists(launcher))
        {
            Console.Error.WriteLine($"clrscope: the launcher is missing from the tool's package ({launcher}); reinstall the tool");
            return 127;
        }
        // A package keeps no file mode: the tool's files are extracted executable by their owner
        // only (the user who installed the tool). Anyone else runs the launcher through the
        // dynamic loader, told where the library is (it looks beside its own executable, which
        // is then the loader).
        var argv = new string?[args.Length + 2];
        argv[0] = "clrscope";
        Array.Copy(args, 0, argv, 1, args.Length);
        string program = launcher;
        const int X_OK = 1;
        if (access(launcher, X_OK) != 0)
        {
            program = loader;
            setenv("CLRSCOPE_LIB", Path.Combine(Path.GetDirectoryName(launcher)!, "libclrscope.so"), 0);
            argv = new string?[args.Length + 3];
            argv[0] = "clrscope";
            argv[1] = launcher;
            Array.Copy(args, 0, argv, 2, args.Length);
        }
        // The runtime ignores SIGPIPE and may block signals on this thread; both would be
        // inherited through exec by the launcher and the app it runs.
        signal(SIGPIPE, IntPtr.Zero);
        sigprocmask(SIG_SETMASK, new byte[128], null);
        execv(program, argv);
        int errno = Marshal.GetLastPInvokeError();
        Console.Error.WriteLine($"clrscope: cannot run {program}: {Marshal.GetPInvokeErrorMessage(errno)}");
        return 126;
    }

    // This machine's directory in the package and glibc's dynamic loader there (at the path each
    // ABI fixes), or null for an architecture clrscope is not built for.
    static (string Rid, string Loader)? Platform() => RuntimeInformation.OSArchitecture switch
    {
        Architecture.X64 => ("linux-x64", "/lib64/ld-linux-x86-64.so.2"),
        Architecture.Arm64 => ("linux-arm64", "/lib/ld-linux-aarch64.so.1"),
        _ => null,
    };

    static string Launcher(string rid) =>
        Path.Combine(AppContext.BaseDirectory, "native", rid, "clrscope");

    // Why clrscope cannot run here, or null when it can.
    static string? Unsupported()
    {
        if (!OperatingSystem.IsLinux())
            return $"this is {RuntimeInformation.OSDescription}";
        var p = Platform();
        if (p == null)
            return $"this machine is {RuntimeInformation.OSArchitecture.ToString().ToLowerInvariant()}";
        if (RuntimeInformation.RuntimeIdentifier.Contains("musl"))
            return "this system's C library is musl (Alpine), not glibc";
        if (p.Value.Rid != "linux-x64" && !File.Exists(Launcher(p.Value.Rid)))
            return $"this package carries no {p.Value.Rid} build";
        if (!File.Exists(p.Value.Loader))
            return $"this system has no glibc ({p.Value.Loader} is missing)";
        return null;
    }
}
