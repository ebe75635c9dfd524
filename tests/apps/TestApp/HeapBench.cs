// heap-bench: a heap of a chosen size for bench/gcdump_bench.sh (heap snapshots).
//
// $CLRSCOPE_BENCH_OBJECTS objects (default 1,000,000) reachable from a static, built before
// `ready`: half (rounded up) are BenchNode objects linked as a balanced binary tree, a quarter byte[16] and the
// rest short strings, each hung off one node. Truth: `bench_objects` (exactly the objects built).
using System.Text.Json.Nodes;

namespace TestApp.Heap;

public sealed class BenchNode
{
    public BenchNode? Left;
    public BenchNode? Right;
    public object? Payload;
    public long Value;
}

public static class BenchRoots
{
    public static BenchNode? Tree;
}

public sealed class HeapBenchMode : Mode
{
    int objects;

    public override void Setup(Options o)
    {
        objects = 1_000_000;
        string? env = Environment.GetEnvironmentVariable("CLRSCOPE_BENCH_OBJECTS");
        if (!string.IsNullOrEmpty(env) && (!int.TryParse(env, out objects) || objects < 4))
            throw new ArgumentException($"CLRSCOPE_BENCH_OBJECTS: '{env}' is not a count >= 4");
        int nodes = (objects + 1) / 2, arrays = objects / 4, strings = objects - nodes - arrays;
        var all = new BenchNode[nodes];
        for (int i = 0; i < nodes; i++)
            all[i] = new BenchNode { Value = i };
        for (int i = 0; i < nodes; i++)
        {
            int l = 2 * i + 1, r = 2 * i + 2;
            if (l < nodes) all[i].Left = all[l];
            if (r < nodes) all[i].Right = all[r];
            if (i < arrays) all[i].Payload = new byte[16];
            else if (i < arrays + strings) all[i].Payload = "s" + i.ToString(System.Globalization.CultureInfo.InvariantCulture);
        }
        BenchRoots.Tree = all[0];
        all = null;
        GC.Collect();
        Console.WriteLine($"built bench_objects={objects}");
    }

    public override void Run(Options o, CancellationToken stop)
    {
        stop.WaitHandle.WaitOne();
        GC.KeepAlive(BenchRoots.Tree);
    }

    public override void AddTruth(JsonObject t)
    {
        t["bench_objects"] = objects;
        t["bench_nodes"] = (objects + 1) / 2;
    }
}
