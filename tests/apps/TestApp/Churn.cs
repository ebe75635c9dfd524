// thread-churn: CPU burned on threads that live a few milliseconds each, beside one long-lived
// thread. --threads N (default 2) spawner loops each start a thread, let it burn --hold-ms
// (default 5) of its own CPU in TestApp.Churn.Work.ShortBurn, join it and start the next; one
// thread "steady" burns continuously in TestApp.Churn.Work.SteadyBurn. Truth: the CPU each of
// the two methods took (the threads' own CPU clocks), and how many short threads ran.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Churn;

public static class Work
{
    static long sink;

    /// <summary>Spins until the calling thread has used `ms` of CPU; returns the CPU it used.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double ShortBurn(double ms) => Burn(ms);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double SteadyBurn(double ms) => Burn(ms);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static double Burn(double ms)
    {
        double cpu0 = ThreadCpu.NowMs();
        double used;
        do
        {
            sink ^= CpuWork.SpinLeaf(5_000);
            used = ThreadCpu.NowMs() - cpu0;
        } while (used < ms);
        return used;
    }
}

public sealed class ThreadChurnMode : Mode
{
    double shortCpuMs, steadyCpuMs, holdMs;
    long shortThreads;
    int spawners;

    public override void Run(Options o, CancellationToken stop)
    {
        spawners = o.Threads > 0 ? o.Threads : 2;
        holdMs = o.HoldMs > 0 ? o.HoldMs : 5;
        var threads = new List<Thread>
        {
            Program.StartThread("steady", () =>
            {
                while (!stop.IsCancellationRequested)
                {
                    double used = Work.SteadyBurn(5);
                    lock (this)
                        steadyCpuMs += used;
                }
            }),
        };
        for (int i = 0; i < spawners; i++)
        {
            threads.Add(Program.StartThread($"spawner-{i}", () =>
            {
                while (!stop.IsCancellationRequested)
                {
                    var t = new Thread(() =>
                    {
                        double used = Work.ShortBurn(holdMs);
                        lock (this)
                        {
                            shortCpuMs += used;
                            shortThreads++;
                        }
                    }) { Name = "short-lived" };
                    t.Start();
                    t.Join();
                }
            }));
        }
        foreach (var t in threads)
            t.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["short_cpu_ms"] = shortCpuMs;
            t["steady_cpu_ms"] = steadyCpuMs;
            t["short_threads"] = shortThreads;
        }
        t["spawners"] = spawners;
        t["hold_ms"] = holdMs;
        t["frames"] = new JsonObject
        {
            ["short"] = "TestApp.Churn.Work.ShortBurn",
            ["steady"] = "TestApp.Churn.Work.SteadyBurn",
        };
    }
}
