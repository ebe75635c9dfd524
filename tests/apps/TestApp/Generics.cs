// cpu-generic: one generic method run for two instantiations of its class that cost 3:1.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp;

/// <summary>
/// Cruncher&lt;int&gt;.Nested.Spin&lt;int&gt; runs code compiled for int (value types get their
/// own); Cruncher&lt;string&gt;.Nested.Spin&lt;string&gt; runs the code every reference-type
/// instantiation shares. Both are leaves that burn CPU.
/// </summary>
public sealed class Cruncher<T>
{
    public static class Nested
    {
        [MethodImpl(MethodImplOptions.NoInlining)]
        public static long Spin<TKey>(TKey key, int iterations)
        {
            ulong x = 0x9E3779B97F4A7C15UL ^ (ulong)(key?.GetHashCode() ?? 0) ^ (ulong)iterations;
            for (int i = 0; i < iterations; i++)
            {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            return (long)x;
        }
    }
}

public sealed class CpuGenericMode : Mode
{
    const double Ratio = 3.0;
    const double TargetCallMs = 2.0;

    double intCpuMs, stringCpuMs;
    long intCalls, stringCalls;
    static long sink;

    public override void Run(Options o, CancellationToken stop)
    {
        Program.StartThread("generic-worker", () => Work(stop)).Join();
    }

    /// <summary>
    /// Calls whichever instantiation is behind the 3:1 target in thread CPU time, each call 1 to
    /// 3 ms drawn at random (seeded), as cpu-split does, so that the calls do not fall in step
    /// with the kernel tick at which CPU timers fire.
    /// </summary>
    void Work(CancellationToken stop)
    {
        int iterations = 100_000;
        var rng = new Random(4321);
        while (!stop.IsCancellationRequested)
        {
            bool ints = intCpuMs < Ratio * stringCpuMs;
            double factor = 0.5 + rng.NextDouble();
            int n = Math.Max(1_000, (int)(iterations * factor));
            double cpu0 = ThreadCpu.NowMs();
            sink ^= ints ? Cruncher<int>.Nested.Spin(n, n) : Cruncher<string>.Nested.Spin("key", n);
            double cpu = ThreadCpu.NowMs() - cpu0;
            lock (this)
            {
                if (ints)
                {
                    intCpuMs += cpu;
                    intCalls++;
                }
                else
                {
                    stringCpuMs += cpu;
                    stringCalls++;
                }
            }
            double scale = Math.Clamp(TargetCallMs * factor / Math.Max(cpu, 0.01), 0.5, 2.0);
            iterations = (int)Math.Clamp(iterations * scale, 1_000, 100_000_000);
        }
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["int_cpu_ms"] = intCpuMs;
            t["string_cpu_ms"] = stringCpuMs;
            t["int_calls"] = intCalls;
            t["string_calls"] = stringCalls;
        }
        t["ratio_target"] = Ratio;
        t["worker_thread"] = "generic-worker";
        t["frames"] = new JsonObject
        {
            ["int"] = "TestApp.Cruncher<System.Int32>.Nested.Spin<System.Int32>",
            ["string"] = "TestApp.Cruncher<T>.Nested.Spin<TKey>",
        };
    }
}
