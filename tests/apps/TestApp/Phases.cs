// phases: the hot path changes halfway, for the differential flame graph.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Phases;

/// <summary>
/// One thread "phases" burns CPU in Steady (a quarter of the time) and in PhaseOne (the rest)
/// until --switch-s seconds (default 8) have passed, then in Steady and PhaseTwo. It prints
/// "switched at UNIX" when it changes and reports each method's CPU per phase in its truth.
/// </summary>
public sealed class PhasesMode : Mode
{
    double switchS = 8;
    double switchedAt;
    readonly double[,] cpuMs = new double[2, 2]; // [phase, steady=0/hot=1]
    // the thread's CPU by the unix second each call ended in: a window's truth
    readonly SortedDictionary<long, double> cpuBySecond = new();

    // Each burns in its own body, the same loop written out in each (optimized at once, no
    // tier-0 copy), so the CPU is each method's self time. (A shared helper the JIT inlines would
    // be named as a frame of its own: the inlined code's time is the helper's.)
    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    public static long Steady(int n)
    {
        ulong x = 0x9E3779B97F4A7C15UL ^ (ulong)n;
        for (int i = 0; i < n; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        return (long)x ^ 1;
    }

    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    public static long PhaseOne(int n)
    {
        ulong x = 0x9E3779B97F4A7C15UL ^ (ulong)n;
        for (int i = 0; i < n; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        return (long)x ^ 2;
    }

    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    public static long PhaseTwo(int n)
    {
        ulong x = 0x9E3779B97F4A7C15UL ^ (ulong)n;
        for (int i = 0; i < n; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        return (long)x ^ 3;
    }

    public override void Setup(Options o)
    {
        if (o.SwitchS > 0)
            switchS = o.SwitchS;
    }

    public override void Run(Options o, CancellationToken stop)
    {
        var t = Program.StartThread("phases", () => Work(stop));
        t.Join();
    }

    void Work(CancellationToken stop)
    {
        var clock = System.Diagnostics.Stopwatch.StartNew();
        long sink = 0;
        int phase = 0, step = 0;
        const int N = 200_000;
        while (!stop.IsCancellationRequested)
        {
            if (phase == 0 && clock.Elapsed.TotalSeconds >= switchS)
            {
                phase = 1;
                lock (this)
                    switchedAt = DateTimeOffset.UtcNow.ToUnixTimeMilliseconds() / 1000.0;
                Console.WriteLine($"switched at {switchedAt:F3}");
            }
            bool steady = step++ % 4 == 0;
            double c0 = ThreadCpu.NowMs();
            sink ^= steady ? Steady(N) : phase == 0 ? PhaseOne(N) : PhaseTwo(N);
            double c = ThreadCpu.NowMs() - c0;
            long sec = DateTimeOffset.UtcNow.ToUnixTimeSeconds();
            lock (this)
            {
                cpuMs[phase, steady ? 0 : 1] += c;
                cpuBySecond[sec] = cpuBySecond.GetValueOrDefault(sec) + c;
            }
        }
        GC.KeepAlive(sink);
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["switched_at"] = switchedAt;
            t["phase1_steady_cpu_ms"] = cpuMs[0, 0];
            t["phase1_hot_cpu_ms"] = cpuMs[0, 1];
            t["phase2_steady_cpu_ms"] = cpuMs[1, 0];
            t["phase2_hot_cpu_ms"] = cpuMs[1, 1];
            var bySecond = new JsonObject();
            foreach (var (sec, ms) in cpuBySecond)
                bySecond[sec.ToString()] = ms;
            t["cpu_ms_by_second"] = bySecond;
        }
        t["frames"] = new JsonObject
        {
            ["steady"] = "TestApp.Phases.PhasesMode.Steady",
            ["one"] = "TestApp.Phases.PhasesMode.PhaseOne",
            ["two"] = "TestApp.Phases.PhasesMode.PhaseTwo",
        };
    }
}
