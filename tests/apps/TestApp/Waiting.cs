// wait: a mostly idle process for generic integration tests. Every 10 ms it spins ~0.5 ms in
// TestApp.Waiting.Idle.LittleWork on the main thread. It stops when the duration elapses
// (--seconds 0 = never), on SIGTERM/SIGINT, or when stdin reaches end-of-file -- the latter only
// when stdin is a pipe or socket, so running it with stdin on /dev/null or a terminal does not
// end it at once. --exhaust-fds S: 1.5 s after `ready` (the runtime has started its threads by
// then) the main thread opens /dev/null until the process has no file descriptor left, prints
// `exhausted fds=N`, holds them S seconds (taking again, every 10 ms, any descriptor that others
// closed meanwhile, as a leaking app does), closes them and prints `released fds=N`.
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Waiting;

public static class Idle
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long LittleWork(double ms)
    {
        long acc = 0;
        long t0 = Stopwatch.GetTimestamp();
        while (Stopwatch.GetElapsedTime(t0).TotalMilliseconds < ms)
            acc ^= CpuWork.SpinLeaf(2_000);
        return acc;
    }
}

public sealed class WaitMode : Mode
{
    long ticks;
    double workMs;
    bool watchingStdin;
    int fdsHeld = -1;
    string? fdsError;

    static bool StdinIsPipeOrSocket()
    {
        try
        {
            string? target = new FileInfo("/proc/self/fd/0").LinkTarget;
            return target != null && (target.StartsWith("pipe:", StringComparison.Ordinal) || target.StartsWith("socket:", StringComparison.Ordinal));
        }
        catch (Exception e) when (e is IOException or UnauthorizedAccessException)
        {
            return false;
        }
    }

    public override void Setup(Options o)
    {
        watchingStdin = StdinIsPipeOrSocket();
        if (!watchingStdin)
            return;
        var reader = new Thread(() =>
        {
            using var stdin = Console.OpenStandardInput();
            var buf = new byte[4096];
            try
            {
                while (stdin.Read(buf, 0, buf.Length) > 0)
                {
                }
            }
            catch (IOException)
            {
            }
            Program.RequestStop("stdin");
        }) { Name = "stdin-watch", IsBackground = true };
        reader.Start();
    }

    public override void Run(Options o, CancellationToken stop)
    {
        long sink = 0;
        var clock = Stopwatch.StartNew();
        List<Microsoft.Win32.SafeHandles.SafeFileHandle>? held = null;
        double releaseAt = -1;
        while (!stop.WaitHandle.WaitOne(10))
        {
            if (o.ExhaustFds >= 0 && held == null && clock.Elapsed.TotalSeconds >= 1.5)
            {
                held = Exhaust();
                releaseAt = clock.Elapsed.TotalSeconds + o.ExhaustFds;
            }
            if (held != null && releaseAt >= 0 && clock.Elapsed.TotalSeconds < releaseAt)
                TopUp(held); /* as a leaking app does: a descriptor someone closed is taken again */
            if (held != null && releaseAt >= 0 && clock.Elapsed.TotalSeconds >= releaseAt)
            {
                foreach (var h in held)
                    h.Dispose();
                Console.WriteLine($"released fds={held.Count}");
                releaseAt = -1;
            }
            long t0 = Stopwatch.GetTimestamp();
            sink ^= Idle.LittleWork(0.5);
            double ms = Stopwatch.GetElapsedTime(t0).TotalMilliseconds;
            lock (this)
            {
                ticks++;
                workMs += ms;
            }
        }
        GC.KeepAlive(sink);
    }

    List<Microsoft.Win32.SafeHandles.SafeFileHandle> Exhaust()
    {
        var held = new List<Microsoft.Win32.SafeHandles.SafeFileHandle>();
        TopUp(held);
        Console.WriteLine($"exhausted fds={held.Count}");
        return held;
    }

    /// <summary>Opens /dev/null until the process has no descriptor left.</summary>
    void TopUp(List<Microsoft.Win32.SafeHandles.SafeFileHandle> held)
    {
        string? error = null;
        while (error == null && held.Count < 1_000_000)
        {
            try
            {
                held.Add(File.OpenHandle("/dev/null"));
            }
            catch (IOException e)
            {
                error = e.Message;
            }
        }
        lock (this)
        {
            fdsHeld = held.Count;
            fdsError = error;
        }
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["ticks"] = ticks;
            t["work_ms"] = workMs;
            if (fdsHeld >= 0)
            {
                t["fds_held"] = fdsHeld;
                t["fds_error"] = fdsError;
            }
        }
        t["stdin_watched"] = watchingStdin;
    }
}
