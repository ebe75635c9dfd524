// gc-heavy: an allocation- and GC-bound workload on two threads ("gc-worker-0", "gc-worker-1").
//
// Each worker allocates short-lived garbage (dies in gen0), replaces random slots of a 50,000-slot
// ring of small object graphs (they live long enough to be promoted to gen1/gen2 and then die
// there), and now and then replaces a slot of a small ring of 100 KB arrays on the large object
// heap. Together these produce gen0, gen1 and gen2 collections within a few seconds.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp;

public sealed class GcNode
{
    public GcNode? Next;
    public byte[]? Payload;
    public long Value;
}

public static class GcWork
{
    const int RingSize = 50_000;
    const int LargeRingSize = 16;
    const int LargeSize = 100_000;

    static long iterations;
    public static long Iterations => Volatile.Read(ref iterations);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long AllocateShortLived(Random rng)
    {
        long acc = 0;
        GcNode? head = null;
        for (int i = 0; i < 8; i++)
            head = new GcNode { Next = head, Value = i, Payload = new byte[16 + rng.Next(240)] };
        for (var n = head; n != null; n = n.Next)
            acc += n.Payload!.Length;
        string s = string.Concat("item-", acc.ToString(System.Globalization.CultureInfo.InvariantCulture));
        return acc + s.Length;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void AllocateMediumLived(Random rng, GcNode?[] ring)
    {
        var node = new GcNode { Value = rng.Next(), Payload = new byte[64] };
        node.Next = new GcNode { Value = 1, Payload = new byte[32] };
        ring[rng.Next(ring.Length)] = node;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void AllocateLarge(Random rng, byte[]?[] ring)
    {
        ring[rng.Next(ring.Length)] = new byte[LargeSize];
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Worker(int seed, CancellationToken stop)
    {
        var rng = new Random(seed);
        var ring = new GcNode?[RingSize];
        var large = new byte[]?[LargeRingSize];
        long acc = 0;
        long n = 0;
        while (!stop.IsCancellationRequested)
        {
            acc += AllocateShortLived(rng);
            AllocateMediumLived(rng, ring);
            if (++n % 2000 == 0)
                AllocateLarge(rng, large);
            if (n % 1024 == 0)
                Interlocked.Add(ref iterations, 1024);
        }
        return acc;
    }
}

public sealed class GcHeavyMode : Mode
{
    const int Workers = 2;

    public override void Run(Options o, CancellationToken stop)
    {
        var threads = new Thread[Workers];
        for (int i = 0; i < Workers; i++)
        {
            int seed = 1234 + i;
            threads[i] = Program.StartThread($"gc-worker-{i}", () => GcWork.Worker(seed, stop));
        }
        foreach (var th in threads)
            th.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        t["worker_threads"] = Workers;
        t["iterations"] = GcWork.Iterations;
    }
}
