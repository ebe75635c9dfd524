// demo: a little of everything at once, for `tools/demo.sh` and for looking at the dashboard by
// hand: the cpu-split workload, a throttled allocation mix, a leak next to a refreshed cache, lock
// contention, and an exception every few milliseconds. Runs until stopped (--seconds 0 default).
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp;

public sealed class DemoMode : Mode
{
    readonly Mode[] parts = { new CpuSplitMode(), new Alloc.AllocMixMode(), new Live.LeakMode(), new Locks.ContentionMode() };
    long thrown;

    public override void Setup(Options o)
    {
        foreach (var p in parts)
            p.Setup(o);
    }

    public override void Run(Options o, CancellationToken stop)
    {
        var threads = new List<Thread>();
        foreach (var p in parts)
            threads.Add(Program.StartThread("demo-" + p.GetType().Name, () => p.Run(o, stop)));
        threads.Add(Program.StartThread("demo-errors", () => Throw(stop)));
        foreach (var t in threads)
            t.Join();
    }

    void Throw(CancellationToken stop)
    {
        while (!stop.IsCancellationRequested)
        {
            try
            {
                Validate(Environment.TickCount64);
            }
            catch (InvalidOperationException)
            {
                Interlocked.Increment(ref thrown);
            }
            Thread.Sleep(5);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Validate(long tick)
    {
        if (tick >= 0)
            throw new InvalidOperationException("order " + (tick % 100) + " is not valid");
    }

    public override void AddTruth(JsonObject t)
    {
        t["demo_exceptions"] = Interlocked.Read(ref thrown);
    }
}
