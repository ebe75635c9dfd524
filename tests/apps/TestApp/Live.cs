// leak: one type that leaks, one that is cached and replaced, and garbage that dies young.
//
// - TestApp.Live.LeakyItem: one every ~10 ms on thread "leaker", added to a static List and never
//   removed (200 bytes each on x64). The List's backing array (TestApp.Live.LeakyItem[]) grows too.
// - TestApp.Live.CachedItem: a static array of exactly 500, rebuilt entirely every 2 s on thread
//   "cache" (the old 500 become garbage).
// - TestApp.Live.TempItem: short-lived garbage on thread "garbage" (~20 MB/s), so GCs happen.
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
