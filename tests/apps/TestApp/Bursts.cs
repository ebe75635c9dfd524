// bursts: short and long bursts of CPU on more runnable threads than cores, the shape of a thread
// pool running async continuations, with each burst's CPU measured by the thread's own clock.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Bursts;

/// <summary>
/// Threads "burst-0".."burst-N-1" (--threads, default 4) pass 2 tokens round a ring. Each waits
/// for its token, burns ~0.7 ms of its CPU in ShortBurst (the continuation that runs right after
/// a hand-off), passes the token on, sleeps 1 ms and burns ~4 ms in LongBurst (the one after a
/// timer). With more runnable threads than cores the kernel switches threads on its scheduler
/// tick, so a short burst often starts right after one and ends before the next: a sampler that
/// only looks at ticks misses it.
/// </summary>
public sealed class BurstsMode : Mode
{
    const double ShortMs = 0.7, LongMs = 4.0;
    double shortCpuMs, longCpuMs;
    long shortBursts, longBursts;
    SemaphoreSlim[] ring = [];

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double ShortBurst() => Burn(ShortMs);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double LongBurst() => Burn(LongMs);

    /// <summary>Burns `ms` of the thread's CPU; returns what it measured.</summary>
    static double Burn(double ms)
    {
        double t0 = ThreadCpu.NowMs(), now = t0;
        long x = 1;
        while (now - t0 < ms)
        {
            x ^= CpuWork.SpinLeaf(20_000); // ~20 us between reads of the clock
            now = ThreadCpu.NowMs();
        }
        GC.KeepAlive(x);
        return now - t0;
    }

    public override void Run(Options o, CancellationToken stop)
    {
        int n = o.Threads > 0 ? o.Threads : 4;
        ring = new SemaphoreSlim[n];
        for (int i = 0; i < n; i++)
            ring[i] = new SemaphoreSlim(0);
        var threads = new Thread[n];
        for (int i = 0; i < n; i++)
        {
            int me = i;
            threads[i] = Program.StartThread($"burst-{i}", () => Work(me, n, stop));
        }
        ring[0].Release();
        ring[n / 2].Release();
        stop.WaitHandle.WaitOne();
        foreach (var s in ring)
            s.Release(2);
        foreach (var t in threads)
            t.Join();
    }

    void Work(int me, int n, CancellationToken stop)
    {
        while (!stop.IsCancellationRequested)
        {
            ring[me].Wait();
            if (stop.IsCancellationRequested)
                break;
            double a = ShortBurst();
            ring[(me + 1) % n].Release();
            Thread.Sleep(1);
            double b = LongBurst();
            lock (this)
            {
                shortCpuMs += a;
                longCpuMs += b;
                shortBursts++;
                longBursts++;
            }
        }
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["short_cpu_ms"] = shortCpuMs;
            t["long_cpu_ms"] = longCpuMs;
            t["short_bursts"] = shortBursts;
            t["long_bursts"] = longBursts;
        }
    }
}
