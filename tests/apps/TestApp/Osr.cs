// osr-loop: one method entered once that loops for the whole run, called from a method of its
// own. The runtime starts it as Tier0 code and, a moment into the loop, moves it to OSR code
// (on-stack replacement), which runs on the Tier0 frame for the rest of the run: the frame of the
// caller, TestApp.Osr.Work.Caller, must stay in every stack of TestApp.Osr.Work.Loop, also when
// the sample lands in TestApp.Osr.Work.Mix, a small method without a frame of its own that the
// loop calls for half its work. Thread "osr-worker". Truth: the loop's passes and the thread's
// CPU.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Osr;

public static class Work
{
    static long sink;
    static long passes;

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
            for (int i = 0; i < 200_000; i++)
            {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
            }
            for (int i = 0; i < 40_000; i++)
                x = Mix(x);
            Interlocked.Increment(ref passes);
        }
        return (long)x;
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
        Program.StartThread("osr-worker", () =>
        {
            double cpu0 = ThreadCpu.NowMs();
            Work.Caller(stop);
            lock (this)
                cpuMs = ThreadCpu.NowMs() - cpu0;
        }).Join();
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
            t["worker_cpu_ms"] = cpuMs;
        t["passes"] = Work.Passes;
        t["worker_thread"] = "osr-worker";
        t["frames"] = new JsonObject
        {
            ["caller"] = "TestApp.Osr.Work.Caller",
            ["loop"] = "TestApp.Osr.Work.Loop",
            ["mix"] = "TestApp.Osr.Work.Mix",
        };
    }
}
