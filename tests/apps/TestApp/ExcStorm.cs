// exception-storm: throws and catches --storm exceptions (default 20000) as fast as it can on
// --threads threads (default 1, "storm-N"), one ArgumentException per 1000 and the rest
// InvalidOperationException, then ends without waiting for --seconds (which still cuts it short).
// --depth N (default 0) puts N frames, each with a finally block, between the catch and the throw.
// For bench/exceptions_overhead.sh: the truth reports how long the storm took, in wall time and
// in CPU time of the storm threads (the steadier figure on a busy machine).
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Errors;

public sealed class ExceptionStormMode : Mode
{
    long thrown;
    double seconds;
    double cpuMs;
    int threads;
    int depth;
    static int finallies;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Throw(long i)
    {
        if (i % 1000 == 999)
            throw new ArgumentException("clrscope storm: every thousandth");
        throw new InvalidOperationException("clrscope storm");
    }

    // d frames, each with a finally block, above Throw
    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Deep(long i, int d)
    {
        if (d == 0)
        {
            Throw(i);
            return;
        }
        try
        {
            Deep(i, d - 1);
        }
        finally
        {
            finallies++;
        }
    }

    public override void Run(Options o, CancellationToken stop)
    {
        threads = o.Threads > 0 ? o.Threads : 1;
        depth = o.Depth;
        long perThread = Math.Max(1, o.Storm / threads);
        var clock = Stopwatch.StartNew();
        var workers = new Thread[threads];
        for (int t = 0; t < threads; t++)
        {
            workers[t] = Program.StartThread($"storm-{t}", () =>
            {
                double cpu0 = ThreadCpu.NowMs();
                long n = 0;
                for (long i = 0; i < perThread && !stop.IsCancellationRequested; i++)
                {
                    try
                    {
                        Deep(i, depth);
                    }
                    catch (Exception)
                    {
                        n++;
                    }
                }
                Interlocked.Add(ref thrown, n);
                double cpu = ThreadCpu.NowMs() - cpu0;
                lock (workers)
                    cpuMs += cpu;
            });
        }
        foreach (var w in workers)
            w.Join();
        seconds = clock.Elapsed.TotalSeconds;
    }

    public override void AddTruth(JsonObject t)
    {
        long n = Interlocked.Read(ref thrown);
        t["storm_thrown"] = n;
        t["storm_seconds"] = seconds;
        t["storm_cpu_s"] = cpuMs / 1000;
        t["throws_per_s"] = seconds > 0 ? n / seconds : 0;
        t["threads"] = threads;
        t["depth"] = depth;
    }
}
