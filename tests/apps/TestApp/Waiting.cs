// wait: a mostly idle process for generic integration tests. Every 10 ms it spins ~0.5 ms in
// TestApp.Waiting.Idle.LittleWork on the main thread. It stops when the duration elapses
// (--seconds 0 = never), on SIGTERM/SIGINT, or when stdin reaches end-of-file -- the latter only
// when stdin is a pipe or socket, so running it with stdin on /dev/null or a terminal does not
// end it at once.
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
        while (!stop.WaitHandle.WaitOne(10))
        {
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

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["ticks"] = ticks;
            t["work_ms"] = workMs;
        }
        t["stdin_watched"] = watchingStdin;
    }
}
