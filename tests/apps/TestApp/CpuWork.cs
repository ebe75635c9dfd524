// cpu-split and cpu-only: known CPU split between two callers of one leaf, and a pure CPU loop.
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp;

/// <summary>
/// The frames the CPU tests look for: TestApp.CpuWork.HeavyCaller and TestApp.CpuWork.LightCaller
/// both call TestApp.CpuWork.SpinLeaf; TestApp.CpuWork.SleepingLoop sleeps on thread "sleeper".
/// </summary>
public static class CpuWork
{
    static long sink;
    static long sleeps;

    public static long Sleeps => Volatile.Read(ref sleeps);

    /// <summary>Burns CPU without allocating or calling anything.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long SpinLeaf(int iterations)
    {
        ulong x = 0x9E3779B97F4A7C15UL ^ (ulong)iterations;
        for (int i = 0; i < iterations; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        return (long)x;
    }

    // The work after the call keeps the JIT from turning it into a tail call, which would drop the
    // caller's frame from the stack.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void HeavyCaller(int iterations)
    {
        sink ^= SpinLeaf(iterations);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void LightCaller(int iterations)
    {
        sink ^= SpinLeaf(iterations);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void SleepingLoop(CancellationToken stop)
    {
        while (!stop.IsCancellationRequested)
        {
            Thread.Sleep(100);
            Interlocked.Increment(ref sleeps);
        }
    }
}

public sealed class CpuSplitMode : Mode
{
    const double TargetCallMs = 2.0;
    const double Ratio = 3.0;

    double heavyMs, lightMs, heavyCpuMs, lightCpuMs, workerCpuMs;
    long heavyCalls, lightCalls;

    public override void Run(Options o, CancellationToken stop)
    {
        var sleeper = Program.StartThread("sleeper", () => CpuWork.SleepingLoop(stop));
        var worker = Program.StartThread("cpu-worker", () => Work(stop));
        worker.Join();
        sleeper.Join();
    }

    /// <summary>
    /// Calls whichever caller is behind the 3:1 target, so the measured split stays within one call
    /// (1 to 3 ms) of exactly 3:1. The iteration count adapts so each call lasts about TargetCallMs on
    /// average, and each call's length is drawn at random (0.5x to 1.5x): with equal calls the
    /// pattern (heavy, heavy, heavy, light) repeats every 8 ms, a multiple of the kernel tick
    /// (4 ms at CONFIG_HZ=250) at which per-thread CPU timers fire, so the samples could land on
    /// the same places of the pattern for seconds at a time, and the measured split would then
    /// depend on the phase, not only on the time each caller took.
    /// </summary>
    void Work(CancellationToken stop)
    {
        int iterations = 100_000;
        var rng = new Random(12345);
        double cpuStart = ThreadCpu.NowMs();
        while (!stop.IsCancellationRequested)
        {
            bool heavy = heavyMs < Ratio * lightMs;
            double factor = 0.5 + rng.NextDouble();
            int n = Math.Max(1_000, (int)(iterations * factor));
            double cpu0 = ThreadCpu.NowMs();
            long t0 = Stopwatch.GetTimestamp();
            if (heavy)
                CpuWork.HeavyCaller(n);
            else
                CpuWork.LightCaller(n);
            double ms = Stopwatch.GetElapsedTime(t0).TotalMilliseconds;
            double cpu = ThreadCpu.NowMs() - cpu0;
            lock (this)
            {
                if (heavy)
                {
                    heavyMs += ms;
                    heavyCpuMs += cpu;
                    heavyCalls++;
                }
                else
                {
                    lightMs += ms;
                    lightCpuMs += cpu;
                    lightCalls++;
                }
                workerCpuMs = ThreadCpu.NowMs() - cpuStart;
            }
            double scale = Math.Clamp(TargetCallMs * factor / Math.Max(ms, 0.01), 0.5, 2.0);
            iterations = (int)Math.Clamp(iterations * scale, 1_000, 100_000_000);
        }
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["heavy_ms"] = heavyMs;
            t["light_ms"] = lightMs;
            t["heavy_cpu_ms"] = heavyCpuMs;
            t["light_cpu_ms"] = lightCpuMs;
            t["heavy_calls"] = heavyCalls;
            t["light_calls"] = lightCalls;
            t["worker_cpu_ms"] = workerCpuMs;
        }
        t["ratio_target"] = Ratio;
        t["worker_thread"] = "cpu-worker";
        t["sleeper_thread"] = "sleeper";
        t["sleeper_sleeps"] = CpuWork.Sleeps;
        t["frames"] = new JsonObject
        {
            ["heavy"] = "TestApp.CpuWork.HeavyCaller",
            ["light"] = "TestApp.CpuWork.LightCaller",
            ["leaf"] = "TestApp.CpuWork.SpinLeaf",
            ["sleeper"] = "TestApp.CpuWork.SleepingLoop",
        };
    }
}

/// <summary>cpu-only: CPU loops that allocate nothing, on --threads threads (default 1).</summary>
public sealed class CpuOnlyMode : Mode
{
    long totalIterations;
    double workerCpuMs;
    int threads;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Spin(CancellationToken stop, out long iterations)
    {
        long acc = 0;
        iterations = 0;
        while (!stop.IsCancellationRequested)
        {
            acc ^= CpuWork.SpinLeaf(200_000);
            iterations += 200_000;
        }
        return acc;
    }

    /// <summary>--burst-ms B --pause-ms P: B ms of the thread's CPU in Spin, then P ms asleep.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Bursts(CancellationToken stop, double burstMs, int pauseMs, out long iterations)
    {
        long acc = 0;
        iterations = 0;
        while (!stop.IsCancellationRequested)
        {
            double t0 = ThreadCpu.NowMs();
            while (ThreadCpu.NowMs() - t0 < burstMs && !stop.IsCancellationRequested)
            {
                acc ^= CpuWork.SpinLeaf(20_000);
                iterations += 20_000;
            }
            stop.WaitHandle.WaitOne(pauseMs);
        }
        return acc;
    }

    public override void Run(Options o, CancellationToken stop)
    {
        threads = o.Threads > 0 ? o.Threads : 1;
        var workers = new Thread[threads];
        for (int i = 0; i < threads; i++)
        {
            workers[i] = Program.StartThread($"cpu-worker-{i}", () =>
            {
                double cpu0 = ThreadCpu.NowMs();
                long n;
                if (o.PauseMs > 0)
                    Bursts(stop, o.BurstMs > 0 ? o.BurstMs : 100, o.PauseMs, out n);
                else
                    Spin(stop, out n);
                double cpu = ThreadCpu.NowMs() - cpu0;
                lock (this)
                {
                    totalIterations += n;
                    workerCpuMs += cpu;
                }
            });
        }
        foreach (var w in workers)
            w.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        t["worker_threads"] = threads;
        lock (this)
        {
            t["iterations"] = totalIterations;
            t["worker_cpu_ms"] = workerCpuMs;
        }
        t["frames"] = new JsonObject { ["loop"] = "TestApp.CpuOnlyMode.Spin", ["leaf"] = "TestApp.CpuWork.SpinLeaf" };
    }
}
