// many-stacks: CPU and allocations spread over many distinct call paths, the shape of a big
// application's profile. Threads "stacks-0".."stacks-N-1" (--threads, default 1) run through 8^D
// paths (--depth D, default 5: 32,768), each TestApp.Stacks.Paths.Root, then D calls of
// TestApp.Stacks.Paths.Step0..Step7 chosen by the path's octal digits, then
// TestApp.Stacks.Paths.Leaf, which burns ~2 µs and allocates a 64-byte array every 8th call.
// Truth: paths, leaf_calls.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Stacks;

public static class Paths
{
    public static long Sink;
    public static object? Kept;
    static long leafCalls;

    public static long LeafCalls => Interlocked.Read(ref leafCalls);

    [MethodImpl(MethodImplOptions.AggressiveInlining)]
    static long Next(int level, int code)
    {
        if (level == 0)
            return Leaf(code);
        switch ((code >> (3 * (level - 1))) & 7)
        {
            case 0: return Step0(level - 1, code);
            case 1: return Step1(level - 1, code);
            case 2: return Step2(level - 1, code);
            case 3: return Step3(level - 1, code);
            case 4: return Step4(level - 1, code);
            case 5: return Step5(level - 1, code);
            case 6: return Step6(level - 1, code);
            default: return Step7(level - 1, code);
        }
    }

    // The work after each call keeps the JIT from turning it into a tail call.
    [MethodImpl(MethodImplOptions.NoInlining)] public static long Root(int depth, int code) => Next(depth, code) + 1;
    [MethodImpl(MethodImplOptions.NoInlining)] static long Step0(int level, int code) => Next(level, code) ^ 3;
    [MethodImpl(MethodImplOptions.NoInlining)] static long Step1(int level, int code) => Next(level, code) ^ 5;
    [MethodImpl(MethodImplOptions.NoInlining)] static long Step2(int level, int code) => Next(level, code) ^ 7;
    [MethodImpl(MethodImplOptions.NoInlining)] static long Step3(int level, int code) => Next(level, code) ^ 11;
    [MethodImpl(MethodImplOptions.NoInlining)] static long Step4(int level, int code) => Next(level, code) ^ 13;
    [MethodImpl(MethodImplOptions.NoInlining)] static long Step5(int level, int code) => Next(level, code) ^ 17;
    [MethodImpl(MethodImplOptions.NoInlining)] static long Step6(int level, int code) => Next(level, code) ^ 19;
    [MethodImpl(MethodImplOptions.NoInlining)] static long Step7(int level, int code) => Next(level, code) ^ 23;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static long Leaf(int code)
    {
        ulong x = 0x9E3779B97F4A7C15UL ^ (ulong)code;
        for (int i = 0; i < 2000; i++)
        {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
        }
        if ((code & 7) == 0)
            Kept = new byte[64];
        Interlocked.Increment(ref leafCalls);
        return (long)x;
    }
}

public sealed class ManyStacksMode : Mode
{
    int depth;

    public override void Run(Options o, CancellationToken stop)
    {
        depth = o.Depth > 0 ? Math.Min(o.Depth, 9) : 5;
        int threads = o.Threads > 0 ? o.Threads : 1;
        int paths = 1 << (3 * depth);
        var workers = new Thread[threads];
        for (int t = 0; t < threads; t++)
        {
            int first = t * 7919;
            workers[t] = Program.StartThread($"stacks-{t}", () =>
            {
                long s = 0;
                for (int code = first; !stop.IsCancellationRequested; code = (code + 1) % paths)
                    s += Paths.Root(depth, code);
                Paths.Sink = s;
            });
        }
        foreach (var w in workers)
            w.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        t["paths"] = 1 << (3 * depth);
        t["leaf_calls"] = Paths.LeafCalls;
    }
}
