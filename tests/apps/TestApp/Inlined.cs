// inlined: CPU spent in methods the JIT inlines, and a lock taken in a Parallel.For lambda.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Inlined;

/// <summary>
/// One thread calls DriveHeavy, DriveLight and DriveMix in turn. Each spends its time in one
/// method the JIT inlines into it (AggressiveInlining): Heavy and Light call Step (not inlined)
/// three times and once as often, so the CPU of Step splits 3:1 between them by construction;
/// Mix loops without calling anything. Their frames do not exist on the stack: only the JIT's
/// inlining tells where the Drive methods' CPU went. A second thread runs Parallel.For loops
/// (four workers) whose lambda (InlinedMode.Contend.{lambda}) takes one lock and spins inside
/// it: the runtime's Parallel.For worker calls the lambda through a delegate, which the JIT's
/// guarded devirtualization inlines into the worker's loop once it has seen the target often
/// enough, and then the lock's waits happen in code that has no frame of its own.
/// </summary>
public sealed class InlinedMode : Mode
{
    static readonly object Gate = new();
    static long sink, drives, held;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static ulong Step(ulong x)
    {
        for (int i = 0; i < 64; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        return x;
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    static ulong Heavy(ulong x, int n)
    {
        for (int i = 0; i < 3 * n; i++)
            x = Step(x);
        return x;
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    static ulong Light(ulong x, int n)
    {
        for (int i = 0; i < n; i++)
            x = Step(x);
        return x;
    }

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    static ulong Mix(ulong x, int n)
    {
        for (int i = 0; i < 64 * n; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        return x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long DriveHeavy(int n) => (long)Heavy(0x9E3779B97F4A7C15UL ^ (ulong)n, n);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long DriveLight(int n) => (long)Light(0x9E3779B97F4A7C15UL ^ (ulong)n, n);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long DriveMix(int n) => (long)Mix(0x9E3779B97F4A7C15UL ^ (ulong)n, n);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Spin(int iterations)
    {
        ulong x = 88172645463325252UL;
        for (int i = 0; i < iterations; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        sink ^= (long)x;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Contend(CancellationToken stop)
    {
        var options = new ParallelOptions { MaxDegreeOfParallelism = 4 };
        while (!stop.IsCancellationRequested)
            Parallel.For(0, 8, options, i =>
            {
                lock (Gate)
                {
                    Spin(20_000);
                    held++;
                }
            });
    }

    public override void Run(Options o, CancellationToken stop)
    {
        var cpu = Program.StartThread("inlined-cpu", () =>
        {
            while (!stop.IsCancellationRequested)
            {
                sink ^= DriveHeavy(2_000) ^ DriveLight(2_000) ^ DriveMix(2_000);
                Interlocked.Increment(ref drives);
            }
        });
        var locks = Program.StartThread("inlined-locks", () => Contend(stop));
        cpu.Join();
        locks.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        t["drives"] = Interlocked.Read(ref drives);
        t["held"] = Interlocked.Read(ref held);
        t["ratio"] = 3.0;
        t["frames"] = new JsonObject
        {
            ["drive_heavy"] = "TestApp.Inlined.InlinedMode.DriveHeavy",
            ["drive_light"] = "TestApp.Inlined.InlinedMode.DriveLight",
            ["drive_mix"] = "TestApp.Inlined.InlinedMode.DriveMix",
            ["mix"] = "TestApp.Inlined.InlinedMode.Mix",
            ["heavy"] = "TestApp.Inlined.InlinedMode.Heavy",
            ["light"] = "TestApp.Inlined.InlinedMode.Light",
            ["step"] = "TestApp.Inlined.InlinedMode.Step",
            ["lambda"] = "TestApp.Inlined.InlinedMode.Contend.{lambda}",
        };
    }
}
