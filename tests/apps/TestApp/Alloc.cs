// alloc-mix: a known mix of allocations on one thread ("alloc-worker"), each type from its own
// method, with exact per-type counts and bytes measured by GC.GetAllocatedBytesForCurrentThread.
//
// One round allocates 10 byte[1000], 200 SmallWidget, 50 BigWidget and 100 strings of 50 chars.
// On x64 that is 10 KB, 6.4 KB, 7.2 KB and 12.8 KB: ranked by bytes String > Byte[] > BigWidget >
// SmallWidget, by count SmallWidget > String > BigWidget > Byte[].
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Alloc;

public sealed class SmallWidget
{
    public long A;
    public long B;
}

public sealed class BigWidget
{
    public long F0, F1, F2, F3, F4, F5, F6, F7, F8, F9, F10, F11, F12, F13, F14, F15;
}

public static class AllocMix
{
    // Objects go into this small ring so the JIT cannot elide them, and die a few stores later.
    static readonly object?[] Sink = new object?[64];
    static int next;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void AllocBytes(int n)
    {
        for (int i = 0; i < n; i++)
            Sink[next++ & 63] = new byte[1000];
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void AllocSmall(int n)
    {
        for (int i = 0; i < n; i++)
            Sink[next++ & 63] = new SmallWidget { A = i };
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void AllocBig(int n)
    {
        for (int i = 0; i < n; i++)
            Sink[next++ & 63] = new BigWidget { F0 = i };
    }

    /// <summary>52,584 bytes each (still on the small object heap): sampled with a probability
    /// of about 0.40 on .NET 10, so each sample stands for about 2.49 of them.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void AllocLarge(int n)
    {
        for (int i = 0; i < n; i++)
            Sink[next++ & 63] = new long[6570];
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void AllocStrings(int n)
    {
        for (int i = 0; i < n; i++)
            Sink[next++ & 63] = new string('x', 50);
    }
}

public sealed class AllocMixMode : Mode
{
    sealed class Kind(string type, string method, int perRound, Action<int> alloc, int every = 1)
    {
        public readonly int Every = every; // allocated in one round of this many
        public readonly string Type = type;
        public readonly string Method = method;
        public readonly int PerRound = perRound;
        public readonly Action<int> Alloc = alloc;
        public long Count;
        public long Bytes;
    }

    Kind[] kinds =
    [
        new("System.Byte[]", "TestApp.Alloc.AllocMix.AllocBytes", 10, AllocMix.AllocBytes),
        new("TestApp.Alloc.SmallWidget", "TestApp.Alloc.AllocMix.AllocSmall", 200, AllocMix.AllocSmall),
        new("TestApp.Alloc.BigWidget", "TestApp.Alloc.AllocMix.AllocBig", 50, AllocMix.AllocBig),
        new("System.String", "TestApp.Alloc.AllocMix.AllocStrings", 100, AllocMix.AllocStrings),
    ];

    long rounds;
    long threadBytes;
    long totalAtStart = -1;
    double mbPerSecond;

    public override void Run(Options o, CancellationToken stop)
    {
        mbPerSecond = o.MbPerSecond;
        if (o.LargeEvery > 0)
            kinds = [.. kinds, new("System.Int64[]", "TestApp.Alloc.AllocMix.AllocLarge", 1,
                                   AllocMix.AllocLarge, o.LargeEvery)];
        var th = Program.StartThread("alloc-worker", () => Work(stop));
        th.Join();
    }

    /// <summary>
    /// Allocates rounds of the mix, throttled to about --mb-per-s (default 100; 0 = flat out) by
    /// sleeping at 10 ms boundaries. Nothing else on this thread allocates between the reads of the
    /// per-thread counter, so each batch's delta is exactly its objects' bytes.
    /// </summary>
    void Work(CancellationToken stop)
    {
        // Allocate what the loop needs up front: the Sink (static constructor) and the Stopwatch
        // must not count as batch bytes.
        RuntimeHelpers.RunClassConstructor(typeof(AllocMix).TypeHandle);
        var clock = Stopwatch.StartNew();
        long thread0 = GC.GetAllocatedBytesForCurrentThread();
        Volatile.Write(ref totalAtStart, GC.GetTotalAllocatedBytes(true));
        double bytesPerMs = mbPerSecond * 1e6 / 1000;
        while (!stop.IsCancellationRequested)
        {
            foreach (var k in kinds)
            {
                if (k.Every > 1 && rounds % k.Every != 0)
                    continue;
                long before = GC.GetAllocatedBytesForCurrentThread();
                k.Alloc(k.PerRound);
                long after = GC.GetAllocatedBytesForCurrentThread();
                lock (this)
                {
                    k.Count += k.PerRound;
                    k.Bytes += after - before;
                }
            }
            long now = GC.GetAllocatedBytesForCurrentThread();
            lock (this)
            {
                rounds++;
                threadBytes = now - thread0;
            }
            if (bytesPerMs > 0)
            {
                double aheadMs = (now - thread0) / bytesPerMs - clock.Elapsed.TotalMilliseconds;
                if (aheadMs >= 10)
                    Thread.Sleep((int)aheadMs);
            }
        }
    }

    public override void AddTruth(JsonObject t)
    {
        var types = new JsonObject();
        lock (this)
        {
            foreach (var k in kinds)
            {
                types[k.Type] = new JsonObject
                {
                    ["count"] = k.Count,
                    ["bytes"] = k.Bytes,
                    ["object_size"] = k.Count > 0 ? (double)k.Bytes / k.Count : 0,
                    ["per_round"] = k.PerRound,
                    ["method"] = k.Method,
                };
            }
            t["rounds"] = rounds;
            t["thread_allocated_bytes"] = threadBytes;
        }
        t["types"] = types;
        long start = Volatile.Read(ref totalAtStart);
        t["total_allocated_bytes_delta"] = start < 0 ? 0 : GC.GetTotalAllocatedBytes(true) - start;
        t["alloc_thread"] = "alloc-worker";
        t["mb_per_s_target"] = mbPerSecond;
    }
}
