// TestApp: the .NET workloads clrscope's integration tests run under the profiler.
//
// One executable, many modes: `TestApp MODE [--seconds N] [--exit N] [--truth-every-second] ...`.
// Every long-running mode prints `ready pid=<pid>` once its workload is set up, runs until the
// duration elapses (or SIGTERM/SIGINT, or stdin closing in `wait` mode), then prints its ground
// truth as one JSON object on a stdout line starting with `truth: ` and writes the same JSON to the
// file named by $CLRSCOPE_TRUTH. See tests/apps/README.md for every mode and truth field.
using System.Diagnostics;
using System.Runtime;
using System.Runtime.InteropServices;
using System.Text.Json.Nodes;

namespace TestApp;

/// <summary>A workload. Setup runs before `ready`, Run until the stop token fires.</summary>
public abstract class Mode
{
    public virtual void Setup(Options o) { }

    /// <summary>Runs the workload; returns once stop is signalled and every worker has finished.</summary>
    public abstract void Run(Options o, CancellationToken stop);

    /// <summary>Adds the mode's own truth fields. Called from any thread, possibly while Run works.</summary>
    public abstract void AddTruth(JsonObject t);
}

public static class Program
{
    const string Usage =
        "usage: TestApp MODE [--seconds N] [--exit N] [--truth-every-second] [mode options]\n" +
        "modes: hello, version, cpu-split, cpu-generic, gc-heavy, cpu-only, alloc-mix, leak, bgc-live, exceptions,\n" +
        "       contention, heap, threads, wait, unload, thread-churn, osr-loop,\n" +
        "       dynamic-code, bursts, pool-starve, phases, many-stacks, hostile,\n" +
        "       jit-storm, native-burn, wall-mix, late-module, inlined, stubs   (see tests/apps/README.md)";

    static readonly CancellationTokenSource StopSource = new();
    static readonly object TruthLock = new();
    static string? stoppedBy;
    static bool finalEmitted;
    static Options options = new();
    static Mode? current;
    static Stopwatch? runClock;
    // Kept in statics: a collected registration would silently unregister the handler.
    static PosixSignalRegistration? sigterm, sigint;

    public static int Main(string[] args)
    {
        try
        {
            options = Options.Parse(args);
        }
        catch (ArgumentException e)
        {
            Console.Error.WriteLine("TestApp: " + e.Message);
            Console.Error.WriteLine(Usage);
            return 2;
        }

        switch (options.Mode)
        {
            case "hello":
                return Hello();
            case "version":
                Console.WriteLine(Environment.Version.ToString());
                return options.ExitCode;
        }

        current = CreateMode(options.Mode);
        if (current == null)
        {
            Console.Error.WriteLine($"TestApp: unknown mode '{options.Mode}'");
            Console.Error.WriteLine(Usage);
            return 2;
        }

        sigterm = PosixSignalRegistration.Create(PosixSignal.SIGTERM, ctx => { ctx.Cancel = true; RequestStop("SIGTERM"); });
        sigint = PosixSignalRegistration.Create(PosixSignal.SIGINT, ctx => { ctx.Cancel = true; RequestStop("SIGINT"); });

        current.Setup(options);
        runClock = Stopwatch.StartNew();
        Console.WriteLine($"ready pid={Environment.ProcessId}");

        using var deadline = options.Seconds > 0
            ? new Timer(_ => RequestStop("duration"), null, TimeSpan.FromSeconds(options.Seconds), Timeout.InfiniteTimeSpan)
            : null;
        using var periodic = options.TruthEverySecond
            ? new Timer(_ => EmitTruth(false), null, 1000, 1000)
            : null;

        current.Run(options, StopSource.Token);
        EmitTruth(true);
        return options.ExitCode;
    }

    static Mode? CreateMode(string name) => name switch
    {
        "cpu-split" => new CpuSplitMode(),
        "cpu-generic" => new CpuGenericMode(),
        "gc-heavy" => new GcHeavyMode(),
        "cpu-only" => new CpuOnlyMode(),
        "alloc-mix" => new Alloc.AllocMixMode(),
        "leak" => new Live.LeakMode(),
        "bgc-live" => new Live.BgcLiveMode(),
        "exceptions" => new Errors.ExceptionsMode(),
        "exception-storm" => new Errors.ExceptionStormMode(),
        "contention" => new Locks.ContentionMode(),
        "heap" => new Heap.HeapMode(),
        "heap-bench" => new Heap.HeapBenchMode(),
        "threads" => new Threads.ThreadsMode(),
        "wait" => new Waiting.WaitMode(),
        "demo" => new DemoMode(),
        "unload" => new Unload.UnloadMode(),
        "thread-churn" => new Churn.ThreadChurnMode(),
        "osr-loop" => new Osr.OsrLoopMode(),
        "dynamic-code" => new Dynamic.DynamicCodeMode(),
        "bursts" => new Bursts.BurstsMode(),
        "phases" => new Phases.PhasesMode(),
        "late-module" => new LateModule.LateModuleMode(),
        "inlined" => new Inlined.InlinedMode(),
        "pool-starve" => new Starve.PoolStarveMode(),
        "many-stacks" => new Stacks.ManyStacksMode(),
        "hostile" => new Hostile.HostileMode(),
        "jit-storm" => new JitStorm.JitStormMode(),
        "native-burn" => new NativeBurn.NativeBurnMode(),
        "wall-mix" => new WallMix.WallMixMode(),
        "stubs" => new Stubs.StubsMode(),
        _ => null,
    };

    static int Hello()
    {
        // Output is exactly one line so a test can compare it byte for byte with and without the
        // profiler. No ready/truth lines here; the truth file is still written when asked for.
        Console.WriteLine("hello from TestApp");
        string? path = Environment.GetEnvironmentVariable("CLRSCOPE_TRUTH");
        if (!string.IsNullOrEmpty(path))
        {
            var t = new JsonObject
            {
                ["mode"] = "hello",
                ["pid"] = Environment.ProcessId,
                ["final"] = true,
                ["exit_code"] = options.ExitCode,
                ["runtime_version"] = Environment.Version.ToString(),
                ["framework_description"] = RuntimeInformation.FrameworkDescription,
            };
            WriteTruthFile(path, t.ToJsonString());
        }
        return options.ExitCode;
    }

    /// <summary>Asks the workload to stop; the first reason given is the one reported.</summary>
    public static void RequestStop(string reason)
    {
        Interlocked.CompareExchange(ref stoppedBy, reason, null);
        StopSource.Cancel();
    }

    /// <summary>Seconds since `ready` was printed.</summary>
    public static double ElapsedSeconds => runClock?.Elapsed.TotalSeconds ?? 0;

    /// <summary>Prints a `truth: ` line and rewrites $CLRSCOPE_TRUTH. Nothing is emitted after the final one.</summary>
    public static void EmitTruth(bool final)
    {
        lock (TruthLock)
        {
            if (finalEmitted)
                return;
            var t = new JsonObject
            {
                ["mode"] = options.Mode,
                ["pid"] = Environment.ProcessId,
                ["final"] = final,
                ["stopped_by"] = final ? stoppedBy ?? "done" : null,
                ["exit_code"] = options.ExitCode,
                ["elapsed_s"] = ElapsedSeconds,
                ["unix_s"] = DateTimeOffset.UtcNow.ToUnixTimeMilliseconds() / 1000.0,
                ["runtime_version"] = Environment.Version.ToString(),
                ["framework_description"] = RuntimeInformation.FrameworkDescription,
            };
            AddRuntimeTruth(t);
            current?.AddTruth(t);
            string json = t.ToJsonString();
            Console.WriteLine("truth: " + json);
            string? path = Environment.GetEnvironmentVariable("CLRSCOPE_TRUTH");
            if (!string.IsNullOrEmpty(path))
                WriteTruthFile(path, json);
            finalEmitted = final;
        }
    }

    /// <summary>Process CPU and GC figures, the same in every mode.</summary>
    static void AddRuntimeTruth(JsonObject t)
    {
        using (var p = Process.GetCurrentProcess())
        {
            t["process_cpu_s"] = p.TotalProcessorTime.TotalSeconds;
            t["process_user_cpu_s"] = p.UserProcessorTime.TotalSeconds;
            t["process_system_cpu_s"] = p.PrivilegedProcessorTime.TotalSeconds;
        }
        t["gen0_collections"] = GC.CollectionCount(0);
        t["gen1_collections"] = GC.CollectionCount(1);
        t["gen2_collections"] = GC.CollectionCount(2);
        t["gc_pause_ms"] = GC.GetTotalPauseDuration().TotalMilliseconds;
        t["total_allocated_bytes"] = GC.GetTotalAllocatedBytes(true);
        t["server_gc"] = GCSettings.IsServerGC;
        t["gc_mode"] = GCSettings.IsServerGC ? "server" : "workstation";
        t["gc_latency_mode"] = GCSettings.LatencyMode.ToString();
        t["gc_heap_size_bytes"] = GC.GetGCMemoryInfo().HeapSizeBytes;
    }

    /// <summary>Writes via a temporary file and rename, so a reader never sees half a JSON object.</summary>
    static void WriteTruthFile(string path, string json)
    {
        try
        {
            string tmp = path + ".tmp." + Environment.ProcessId;
            File.WriteAllText(tmp, json + "\n");
            File.Move(tmp, path, true);
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            Console.Error.WriteLine($"TestApp: cannot write truth file {path}: {e.Message}");
        }
    }

    /// <summary>Starts a named foreground thread.</summary>
    public static Thread StartThread(string name, Action body)
    {
        var th = new Thread(() => body()) { Name = name };
        th.Start();
        return th;
    }
}

/// <summary>Command-line options. `--name value` or `--name=value`; flags take no value.</summary>
public sealed class Options
{
    public string Mode = "";
    public double Seconds = 10;
    public int ExitCode;
    public bool TruthEverySecond;
    public double FreeAfter = -1;
    public int Threads = -1;     // -1: the mode's default
    public int HoldMs = 5;
    public int Storm = 20000;
    public int Arguments = 2000;
    public int Rare = 3;
    public int Unnamed = 40;
    public int Depth;
    public double MbPerSecond = 100;
    public string LockKind = "monitor";
    public int BigMb;
    public int LargeEvery;
    public int Spinners;
    public int OsNamed;
    public int LockWaiters;
    public int Deadlocks;
    public bool StaleWait;
    public double ExhaustFds = -1;
    public int ManyLocks;
    public int ManyTypes;
    public double CallMs = 2;    // dynamic-code: CPU of one call of a dynamic method
    public double SwitchS;       // phases: seconds before the hot path changes (default 8)
    public double BurstMs;       // cpu-only with --pause-ms: CPU of each burst (default 100)
    public int PauseMs;          // cpu-only: sleep between bursts (0 = spin without pause)
    public int TakeSignal;       // hostile: the signal whose disposition it takes (0 = none)
    public int Spawn;            // hostile: child processes to start
    public int CrashAfterMs = -1; // hostile: an unhandled exception this long after ready
    public bool PinvokePoll;     // wall-mix: a thread blocked in libc's poll by P/Invoke
    public int DutyPeriodMs;     // wall-mix: the duty thread's fixed cycle (0: random lengths)

    public static Options Parse(string[] args)
    {
        var o = new Options();
        if (args.Length == 0 || args[0].StartsWith("-", StringComparison.Ordinal))
            throw new ArgumentException("missing MODE");
        o.Mode = args[0];
        for (int i = 1; i < args.Length; i++)
        {
            string a = args[i];
            if (!a.StartsWith("--", StringComparison.Ordinal))
                throw new ArgumentException($"unexpected argument '{a}'");
            string name = a[2..];
            string? value = null;
            int eq = name.IndexOf('=');
            if (eq >= 0)
            {
                value = name[(eq + 1)..];
                name = name[..eq];
            }
            if (name == "truth-every-second")
            {
                o.TruthEverySecond = true;
                continue;
            }
            if (name == "stale-wait")
            {
                o.StaleWait = true;
                continue;
            }
            if (name == "pinvoke-poll")
            {
                o.PinvokePoll = true;
                continue;
            }
            if (value == null)
            {
                if (i + 1 >= args.Length)
                    throw new ArgumentException($"--{name} needs a value");
                value = args[++i];
            }
            switch (name)
            {
                case "seconds": o.Seconds = ParseDouble(name, value); break;
                case "exit": o.ExitCode = ParseInt(name, value); break;
                case "free-after": o.FreeAfter = ParseDouble(name, value); break;
                case "threads": o.Threads = ParseInt(name, value); break;
                case "hold-ms": o.HoldMs = ParseInt(name, value); break;
                case "storm": o.Storm = ParseInt(name, value); break;
                case "arguments": o.Arguments = ParseInt(name, value); break;
                case "rare": o.Rare = ParseInt(name, value); break;
                case "unnamed": o.Unnamed = ParseInt(name, value); break;
                case "depth": o.Depth = Math.Max(0, ParseInt(name, value)); break;
                case "mb-per-s": o.MbPerSecond = ParseDouble(name, value); break;
                case "duty-period-ms": o.DutyPeriodMs = Math.Clamp(ParseInt(name, value), 0, 10000); break;
                case "big-mb": o.BigMb = Math.Max(0, ParseInt(name, value)); break;
                case "large-every": o.LargeEvery = Math.Max(0, ParseInt(name, value)); break;
                case "spinners": o.Spinners = Math.Max(0, ParseInt(name, value)); break;
                case "os-named": o.OsNamed = Math.Max(0, ParseInt(name, value)); break;
                case "lock-waiters": o.LockWaiters = Math.Max(0, ParseInt(name, value)); break;
                case "deadlocks": o.Deadlocks = Math.Max(0, ParseInt(name, value)); break;
                case "exhaust-fds": o.ExhaustFds = ParseDouble(name, value); break;
                case "many-locks": o.ManyLocks = Math.Max(0, ParseInt(name, value)); break;
                case "many-types": o.ManyTypes = Math.Max(0, ParseInt(name, value)); break;
                case "switch-s": o.SwitchS = ParseDouble(name, value); break;
                case "burst-ms": o.BurstMs = ParseDouble(name, value); break;
                case "pause-ms": o.PauseMs = Math.Max(0, ParseInt(name, value)); break;
                case "take-signal": o.TakeSignal = Math.Clamp(ParseInt(name, value), 0, 64); break;
                case "spawn": o.Spawn = Math.Max(0, ParseInt(name, value)); break;
                case "crash-after-ms": o.CrashAfterMs = Math.Max(0, ParseInt(name, value)); break;
                case "call-ms": o.CallMs = Math.Clamp(ParseDouble(name, value), 0.05, 100); break;
                case "lock-kind":
                    o.LockKind = value is "monitor" or "lock" ? value
                        : throw new ArgumentException($"--lock-kind: '{value}' is neither monitor nor lock");
                    break;
                default: throw new ArgumentException($"unknown option --{name}");
            }
        }
        return o;
    }

    static int ParseInt(string name, string v) =>
        int.TryParse(v, System.Globalization.NumberStyles.Integer, System.Globalization.CultureInfo.InvariantCulture, out int r)
            ? r : throw new ArgumentException($"--{name}: '{v}' is not an integer");

    static double ParseDouble(string name, string v) =>
        double.TryParse(v, System.Globalization.NumberStyles.Float, System.Globalization.CultureInfo.InvariantCulture, out double r)
            ? r : throw new ArgumentException($"--{name}: '{v}' is not a number");
}

/// <summary>Per-thread CPU time from clock_gettime(CLOCK_THREAD_CPUTIME_ID).</summary>
public static class ThreadCpu
{
    [StructLayout(LayoutKind.Sequential)]
    struct Timespec
    {
        public long Sec;
        public long Nsec;
    }

    const int ClockThreadCpuTimeId = 3;

    [DllImport("libc", EntryPoint = "clock_gettime")]
    static extern int ClockGetTime(int clock, out Timespec ts);

    /// <summary>CPU time consumed so far by the calling thread, in milliseconds.</summary>
    public static double NowMs()
    {
        ClockGetTime(ClockThreadCpuTimeId, out Timespec ts);
        return ts.Sec * 1000.0 + ts.Nsec / 1e6;
    }
}
