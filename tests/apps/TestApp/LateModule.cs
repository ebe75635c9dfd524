// late-module: a framework assembly first used after clrscope's runtime counters were stopped.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.LateModule;

/// <summary>
/// For --switch-s seconds (default 12) one thread collects generation 0 about 200 times a second
/// (over CLRSCOPE_RUNTIME_COUNTERS_MAX_GC_RATE's default of 50, so clrscope stops the runtime
/// counters' session after 10 s); it then prints "late module at UNIX" and from there four
/// Parallel.For workers (System.Threading.Tasks.Parallel.dll, loaded only now) take one lock in
/// turn, each holding it in LateModuleMode.Hold: the lock waits' stacks run through the late
/// module's methods, which must be named like any other.
/// </summary>
public sealed class LateModuleMode : Mode
{
    double switchS = 12;
    static readonly object Gate = new();
    static long held;

    public override void Setup(Options o)
    {
        if (o.SwitchS > 0)
            switchS = o.SwitchS;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Hold()
    {
        lock (Gate)
        {
            Thread.Sleep(2);
            held++;
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Contend(CancellationToken stop)
    {
        while (!stop.IsCancellationRequested)
            Parallel.For(0, 8, new ParallelOptions { MaxDegreeOfParallelism = 4 }, _ => Hold());
    }

    public override void Run(Options o, CancellationToken stop)
    {
        var clock = System.Diagnostics.Stopwatch.StartNew();
        while (!stop.IsCancellationRequested && clock.Elapsed.TotalSeconds < switchS)
        {
            GC.Collect(0);
            Thread.Sleep(5);
        }
        Console.WriteLine($"late module at {DateTimeOffset.UtcNow.ToUnixTimeMilliseconds() / 1000.0:F3}");
        Contend(stop);
    }

    public override void AddTruth(JsonObject t)
    {
        t["held"] = Interlocked.Read(ref held);
        t["frames"] = new JsonObject { ["hold"] = "TestApp.LateModule.LateModuleMode.Hold" };
    }
}
