// osr-loop: one method entered once that loops for the whole run, called from a method of its
// own. The runtime starts it as Tier0 code and, a moment into the loop, moves it to OSR code
// (on-stack replacement), which runs on the Tier0 frame for the rest of the run: the frame of the
// caller, TestApp.Osr.Work.Caller, must stay in every stack of TestApp.Osr.Work.Loop, also when
// the sample lands in TestApp.Osr.Work.Mix, a small method without a frame of its own that the
// loop calls for half its work. Each pass also allocates in TestApp.Osr.Work.Payload, a callee.
// Thread "osr-mixed" runs TestApp.Osr.Work.Mixed, entered once through a delegate from
// TestApp.Osr.Work.MixedCaller: generic code, a generic virtual method and ordinary allocations
// (collections, arrays, boxing) in OSR code, whose allocation stacks must keep MixedCaller.
// Thread "osr-worker". Truth: the loop's passes, the share of its time in Mix (its own clock)
// and the worker thread's CPU.
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Osr;

public sealed class OsrPayload
{
}

public sealed class Summer<T>
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public long Sum(T[] items)
    {
        long s = 0;
        for (int r = 0; r < 40; r++)
            for (int i = 0; i < items.Length; i++)
                s += items[i]!.GetHashCode() ^ r;
        return s;
    }
}

public abstract class Visitor
{
    public abstract long Visit<T>(T value);
}

public sealed class CountingVisitor : Visitor
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public override long Visit<T>(T value) => value!.GetHashCode() & 7;
}

public static class Work
{
    public static OsrPayload[]? Kept;
    static long sink;
    static long passes;
    static long mixTicks, loopTicks;

    // The share of the loop's time spent in Mix's passes, by the app's own clock: how much of
    // the loop's samples a profiler should find in Mix (it depends on the CPU: 5-50 %).
    public static double MixShare
    {
        get
        {
            long m = Interlocked.Read(ref mixTicks), l = Interlocked.Read(ref loopTicks);
            return l > 0 ? (double)m / l : 0;
        }
    }

    public static long Passes => Interlocked.Read(ref passes);

    // The work after the call keeps the JIT from turning it into a tail call.
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Caller(CancellationToken stop)
    {
        sink ^= Loop(stop);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Loop(CancellationToken stop)
    {
        ulong x = 0x9E3779B97F4A7C15UL;
        while (!stop.IsCancellationRequested)
        {
            long t0 = Stopwatch.GetTimestamp();
            for (int i = 0; i < 200_000; i++)
            {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            long t1 = Stopwatch.GetTimestamp();
            for (int i = 0; i < 40_000; i++)
                x = Mix(x);
            long t2 = Stopwatch.GetTimestamp();
            Kept = Payload();
            Interlocked.Add(ref mixTicks, t2 - t1);
            Interlocked.Add(ref loopTicks, Stopwatch.GetTimestamp() - t0);
            Interlocked.Increment(ref passes);
        }
        return (long)x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static OsrPayload[] Payload() => new OsrPayload[1024];

    // Entered once through a delegate, like a worker's main loop: generic code over value and
    // reference types, a generic virtual method, and the allocations ordinary loops make
    // (collections, arrays of several shapes, boxing, a cache with a lambda).
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void MixedCaller(CancellationToken stop)
    {
        Action<CancellationToken> run = Mixed;
        run(stop);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Mixed(CancellationToken stop)
    {
        var ints = new Summer<int>();
        var strs = new Summer<string>();
        int[] iv = Enumerable.Range(0, 64).ToArray();
        string[] sv = Enumerable.Range(0, 64).Select(i => "s" + i).ToArray();
        Visitor v = new CountingVisitor();
        var cache = new Dictionary<(int, long), string>();
        long n = 0;
        while (!stop.IsCancellationRequested)
        {
            sink += ints.Sum(iv) + strs.Sum(sv) + v.Visit(n) + v.Visit("x");
            for (int k = 0; k < 4; k++)
            {
                var lists = new List<int>[4];
                var grid = new int[4, 4];
                var jag = new int[4][];
                jag[0] = new int[8];
                var map = new Dictionary<long, List<string>>();
                object boxed = k;
                var key = (k, n % 500);
                if (!cache.TryGetValue(key, out var s))
                    cache[key] = s = key.Item2.ToString();
                sink += lists.Length + grid.Length + jag.Length + map.Count + boxed.GetHashCode() + s.Length;
            }
            n++;
        }
    }

    // No loop, no call: the JIT gives it no frame pointer, so a sample in it has the loop's
    // frame in rbp.
    [MethodImpl(MethodImplOptions.NoInlining)]
    static ulong Mix(ulong x) => (x ^ (x << 13) ^ (x >> 7) ^ (x << 17)) * 0x9E3779B97F4A7C15UL + 1;
}

public sealed class OsrLoopMode : Mode
{
    double cpuMs;

    public override void Run(Options o, CancellationToken stop)
    {
        var mixed = Program.StartThread("osr-mixed", () => Work.MixedCaller(stop));
        Program.StartThread("osr-worker", () =>
        {
            double cpu0 = ThreadCpu.NowMs();
            Work.Caller(stop);
            lock (this)
                cpuMs = ThreadCpu.NowMs() - cpu0;
        }).Join();
        mixed.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
            t["worker_cpu_ms"] = cpuMs;
        t["passes"] = Work.Passes;
        t["mix_share"] = Work.MixShare;
        t["worker_thread"] = "osr-worker";
        t["frames"] = new JsonObject
        {
            ["caller"] = "TestApp.Osr.Work.Caller",
            ["loop"] = "TestApp.Osr.Work.Loop",
            ["mix"] = "TestApp.Osr.Work.Mix",
            ["payload"] = "TestApp.Osr.Work.Payload",
            ["mixed_caller"] = "TestApp.Osr.Work.MixedCaller",
            ["mixed"] = "TestApp.Osr.Work.Mixed",
        };
    }
}
