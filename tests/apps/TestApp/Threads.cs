// threads: --threads N (default 500) blocked threads for scale tests, started before `ready`.
// Even-numbered threads ("blocker-0", "blocker-2", ...) wait on one ManualResetEvent in
// TestApp.Threads.Blocker.WaitOnEvent; odd ones loop Thread.Sleep(200) in
// TestApp.Threads.Blocker.SleepLoop. On stop the event is set and every thread is joined.
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Threads;

public static class Blocker
{
    public static readonly ManualResetEvent Release = new(false);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void WaitOnEvent() => Release.WaitOne();

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void SleepLoop(CancellationToken stop)
    {
        while (!stop.IsCancellationRequested)
            Thread.Sleep(200);
    }
}

public sealed class ThreadsMode : Mode
{
    Thread[] threads = [];
    int osThreadsAtReady;
    volatile int osThreadsAtStop;
    long started;

    public override void Setup(Options o)
    {
        int n = o.Threads > 0 ? o.Threads : 500;
        threads = new Thread[n];
        var token = StopToken;
        for (int i = 0; i < n; i++)
        {
            Action body = i % 2 == 0 ? Blocker.WaitOnEvent : () => Blocker.SleepLoop(token);
            threads[i] = new Thread(() =>
            {
                Interlocked.Increment(ref started);
                body();
            }) { Name = $"blocker-{i}" };
            threads[i].Start();
        }
        while (Interlocked.Read(ref started) < n)
            Thread.Sleep(5);
        osThreadsAtReady = OsThreads();
        Console.WriteLine($"started threads={n}");
    }

    // Setup runs before Run receives the stop token, so the sleepers poll this source instead.
    readonly CancellationTokenSource stopSource = new();
    CancellationToken StopToken => stopSource.Token;

    static int OsThreads()
    {
        using var p = Process.GetCurrentProcess();
        return p.Threads.Count;
    }

    public override void Run(Options o, CancellationToken stop)
    {
        stop.WaitHandle.WaitOne();
        osThreadsAtStop = OsThreads();
        stopSource.Cancel();
        Blocker.Release.Set();
        foreach (var th in threads)
            th.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        int n = threads.Length;
        t["threads_requested"] = n;
        t["threads_started"] = Interlocked.Read(ref started);
        t["event_waiters"] = (n + 1) / 2;
        t["sleepers"] = n / 2;
        t["os_threads_at_ready"] = osThreadsAtReady;
        t["os_threads_at_stop"] = osThreadsAtStop;
        t["frames"] = new JsonObject
        {
            ["wait"] = "TestApp.Threads.Blocker.WaitOnEvent",
            ["sleep"] = "TestApp.Threads.Blocker.SleepLoop",
        };
    }
}
