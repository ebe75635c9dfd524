// leak: one type that leaks, one that is cached and replaced, and garbage that dies young.
//
// - TestApp.Live.LeakyItem: one every ~10 ms on thread "leaker", added to a static List and never
//   removed (200 bytes each on x64). The List's backing array (TestApp.Live.LeakyItem[]) grows too.
// - TestApp.Live.CachedItem: a static array of exactly 500, rebuilt entirely every 2 s on thread
//   "cache" (the old 500 become garbage).
// - TestApp.Live.TempItem: short-lived garbage on thread "garbage" (~20 MB/s), so GCs happen.
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Live;

/// <summary>200 bytes on x64: 16 bytes of header and method table, 23 longs.</summary>
public sealed class LeakyItem
{
    public long Id;
    public long F1, F2, F3, F4, F5, F6, F7, F8, F9, F10, F11;
    public long F12, F13, F14, F15, F16, F17, F18, F19, F20, F21, F22;
}

public sealed class CachedItem
{
    public long Key;
    public long Version;
    public long Value;
}

public sealed class TempItem
{
    public long A, B, C, D;
    public TempItem? Next;
}

public static class Leaker
{
    public static readonly List<LeakyItem> Items = new();
    static long itemSize;

    public static long ItemSize => Volatile.Read(ref itemSize);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void AddLeakyItem()
    {
        long b0 = GC.GetAllocatedBytesForCurrentThread();
        var item = new LeakyItem();
        long size = GC.GetAllocatedBytesForCurrentThread() - b0;
        Volatile.Write(ref itemSize, size);
        lock (Items)
        {
            item.Id = Items.Count;
            Items.Add(item);
        }
    }

    public static int Count
    {
        get
        {
            lock (Items)
                return Items.Count;
        }
    }
}

public static class CacheBuilder
{
    public const int Size = 500;
    public static CachedItem[] Cache = [];
    static long rebuilds;
    static long itemSize;

    public static long Rebuilds => Volatile.Read(ref rebuilds);
    public static long ItemSize => Volatile.Read(ref itemSize);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Rebuild()
    {
        var fresh = new CachedItem[Size];
        long version = rebuilds + 1;
        long bytes = 0;
        for (int i = 0; i < Size; i++)
        {
            long b0 = GC.GetAllocatedBytesForCurrentThread();
            fresh[i] = new CachedItem { Key = i, Version = version };
            bytes += GC.GetAllocatedBytesForCurrentThread() - b0;
        }
        Volatile.Write(ref itemSize, bytes / Size);
        Volatile.Write(ref Cache, fresh);
        Interlocked.Increment(ref rebuilds);
    }
}

public static class GarbageMaker
{
    static long made;
    public static long Made => Volatile.Read(ref made);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long MakeGarbage(int n)
    {
        TempItem? head = null;
        long acc = 0;
        for (int i = 0; i < n; i++)
        {
            head = new TempItem { A = i, Next = (i & 15) == 0 ? null : head };
            acc += head.A;
        }
        Interlocked.Add(ref made, n);
        return acc;
    }
}

public sealed class LeakMode : Mode
{
    const int LeakPerTick = 4;

    public override void Run(Options o, CancellationToken stop)
    {
        var leaker = Program.StartThread("leaker", () =>
        {
            // 4 items per ~10 ms (~80 KB/s): enough sampled leaked objects (one per ~100 KiB
            // allocated) for the leak heuristic within half a minute.
            while (!stop.IsCancellationRequested)
            {
                for (int i = 0; i < LeakPerTick; i++)
                    Leaker.AddLeakyItem();
                Thread.Sleep(10);
            }
        });
        var cache = Program.StartThread("cache", () =>
        {
            while (!stop.IsCancellationRequested)
            {
                CacheBuilder.Rebuild();
                stop.WaitHandle.WaitOne(2000);
            }
        });
        var garbage = Program.StartThread("garbage", () =>
        {
            // 3,500 TempItems (56 bytes each on x64) every ~10 ms: about 20 MB/s.
            long sink = 0;
            while (!stop.IsCancellationRequested)
            {
                sink += GarbageMaker.MakeGarbage(3500);
                Thread.Sleep(10);
            }
            GC.KeepAlive(sink);
        });
        leaker.Join();
        cache.Join();
        garbage.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        int leaky = Leaker.Count;
        long leakySize = Leaker.ItemSize;
        long cachedSize = CacheBuilder.ItemSize;
        long rebuilds = CacheBuilder.Rebuilds;
        t["run_seconds"] = Program.ElapsedSeconds;
        t["alive"] = new JsonObject
        {
            ["TestApp.Live.LeakyItem"] = leaky,
            ["TestApp.Live.CachedItem"] = rebuilds > 0 ? CacheBuilder.Size : 0,
            ["TestApp.Live.TempItem"] = 0,
        };
        t["allocated"] = new JsonObject
        {
            ["TestApp.Live.LeakyItem"] = leaky,
            ["TestApp.Live.CachedItem"] = rebuilds * CacheBuilder.Size,
            ["TestApp.Live.TempItem"] = GarbageMaker.Made,
        };
        t["sizes"] = new JsonObject
        {
            ["TestApp.Live.LeakyItem"] = leakySize,
            ["TestApp.Live.CachedItem"] = cachedSize,
        };
        t["leaky_bytes"] = leaky * leakySize;
        t["cache_rebuilds"] = rebuilds;
        t["leak_interval_ms"] = 10;
        t["leak_per_tick"] = LeakPerTick;
        t["cache_rebuild_interval_s"] = 2;
        t["leak_suspect"] = "TestApp.Live.LeakyItem";
        t["frames"] = new JsonObject
        {
            ["leak"] = "TestApp.Live.Leaker.AddLeakyItem",
            ["cache"] = "TestApp.Live.CacheBuilder.Rebuild",
            ["garbage"] = "TestApp.Live.GarbageMaker.MakeGarbage",
        };
    }
}

/// <summary>2 KiB arrays kept alive through the whole bgc-live run.</summary>
public struct Block
{
    public long A, B, C, D;
}

/// <summary>A node of the object graph that gives bgc-live's background GCs marking to do.</summary>
public sealed class Node
{
    public Node? Next;
    public long Value;
}

// bgc-live: tracked objects in generation 2 through background GCs that have ephemeral GCs
// inside them. 8,000 TestApp.Live.Block[] of 2 KiB (16 MB: ~160 sampled) are kept in a static
// list, beside a chain of 1.5 M TestApp.Live.Node (so that each background GC marks for a while),
// moved to generation 2 by two blocking full GCs; then the app prints "bgc: settled" and waits
// for a line on stdin. Then thread "bgc-garbage" allocates garbage as fast as it can while the
// app runs --rare (default 3) background GCs (GC.Collect(2, Forced, blocking: false)) one after
// the other, so that ephemeral GCs run inside each; it prints "bgc: done" and runs until stdin
// ends (or the duration).
// Truth: gen2_gcs (full GCs after "settled"), background_gcs, nested_gcs (GCs counted while a
// background GC ran), kept_blocks.
public sealed class BgcLiveMode : Mode
{
    public static readonly List<Block[]> Kept = new();
    public static Node? Chain;
    int gen2, background, nested;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void KeepBlocks()
    {
        for (int i = 0; i < 8000; i++)
            Kept.Add(new Block[64]);
        Node? head = null;
        for (int i = 0; i < 1_500_000; i++)
            head = new Node { Next = head, Value = i };
        Chain = head;
    }

    public override void Run(Options o, CancellationToken stop)
    {
        KeepBlocks();
        GC.Collect(2, GCCollectionMode.Forced, blocking: true, compacting: true);
        GC.Collect(2, GCCollectionMode.Forced, blocking: true, compacting: true);
        int c0 = GC.CollectionCount(2);
        Console.WriteLine("bgc: settled");
        Console.Out.Flush();
        string? line = Console.ReadLine();
        if (line == null || stop.IsCancellationRequested)
            return;
        using var phase = new CancellationTokenSource();
        var garbage = Program.StartThread("bgc-garbage", () =>
        {
            long sink = 0;
            while (!phase.IsCancellationRequested)
                sink += GarbageMaker.MakeGarbage(2000);
            GC.KeepAlive(sink);
        });
        Thread.Sleep(100);
        int runs = o.Rare > 0 ? o.Rare : 3;
        for (int k = 0; k < runs && !stop.IsCancellationRequested; k++)
        {
            long bgIndex = GC.GetGCMemoryInfo(GCKind.Background).Index;
            int before0 = GC.CollectionCount(0);
            GC.Collect(2, GCCollectionMode.Forced, blocking: false);
            // a background GC's information is published when it ends
            var sw = Stopwatch.StartNew();
            while (GC.GetGCMemoryInfo(GCKind.Background).Index == bgIndex &&
                   sw.ElapsedMilliseconds < 10000)
                Thread.Sleep(1);
            lock (this)
            {
                if (GC.GetGCMemoryInfo(GCKind.Background).Index != bgIndex)
                    background++;
                // GCs counted while it ran (gen0's count includes the full GC itself)
                nested += Math.Max(0, GC.CollectionCount(0) - before0 - 1);
            }
        }
        phase.Cancel();
        garbage.Join();
        lock (this)
            gen2 = GC.CollectionCount(2) - c0;
        Console.WriteLine("bgc: done");
        Console.Out.Flush();
        while (!stop.IsCancellationRequested && Console.ReadLine() != null)
        {
        }
        Program.RequestStop("stdin");
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["gen2_gcs"] = gen2;
            t["background_gcs"] = background;
            t["nested_gcs"] = nested;
        }
        t["kept_blocks"] = Kept.Count;
        t["type"] = "TestApp.Live.Block[]";
    }
}
