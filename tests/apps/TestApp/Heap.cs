// heap: a known heap reachable from statics, built before `ready` is printed.
//
// - exactly 100,000 TestApp.Heap.TreeNode in a balanced binary tree rooted at HeapRoots.Tree;
// - exactly 12,345 TestApp.Heap.Leaf, each holding its own byte[100], in the static
//   TestApp.Heap.Leaf[] HeapRoots.Leaves.
// With --free-after S, after S seconds the leaves at even indices are dropped (6,173 of them, so
// 6,172 remain), a full blocking GC runs, and `freed leaves=6172` plus a truth line are printed.
// - exactly 321 TestApp.Heap.Box<System.Int32>.Slot (a type nested in a generic type: its name
//   must read as C# writes it) in the static array HeapRoots.Slots.
// - exactly 77 closures (Func<int>), each over its own captured variable: 77 objects of the
//   compiler's display class, TestApp.Heap.HeapRoots.<>c__DisplayClassN_0 (N is the compiler's),
//   in the static array HeapRoots.Closures; HeapRoots itself is a static class (no instances).
// With --big-mb N, N MB more in 10 MB byte arrays, allocated after a full GC in a no-GC region
// (truth big_bytes).
// Object sizes are measured with GC.GetAllocatedBytesForCurrentThread while building.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Heap;

public sealed class TreeNode(int value)
{
    public TreeNode? Left;
    public TreeNode? Right;
    public int Value = value;
}

public sealed class Leaf(int id, byte[] data)
{
    public byte[] Data = data;
    public int Id = id;
}

public sealed class Box<T>
{
    public sealed class Slot
    {
        public T? Value;
    }
}

public static class HeapRoots
{
    public const int SlotCount = 321;
    public static Box<int>.Slot[] Slots = MakeSlots();

    public const int ClosureCount = 77;
    public static Func<int>[] Closures = MakeClosures();

    static Func<int>[] MakeClosures()
    {
        var a = new Func<int>[ClosureCount];
        for (int i = 0; i < a.Length; i++)
        {
            int v = i;
            a[i] = () => v + 1;
        }
        return a;
    }

    static Box<int>.Slot[] MakeSlots()
    {
        var s = new Box<int>.Slot[SlotCount];
        for (int i = 0; i < s.Length; i++)
            s[i] = new Box<int>.Slot { Value = i };
        return s;
    }

    public const int TreeNodes = 100_000;
    public const int LeafCount = 12_345;
    public const int PayloadLength = 100;

    public static TreeNode? Tree;
    public static List<byte[]>? Big;
    public static Leaf?[] Leaves = [];

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static TreeNode? BuildTree(int count, ref int next)
    {
        if (count == 0)
            return null;
        var node = new TreeNode(next++);
        int left = (count - 1) / 2;
        node.Left = BuildTree(left, ref next);
        node.Right = BuildTree(count - 1 - left, ref next);
        return node;
    }

    public static int CountTree(TreeNode? n) => n == null ? 0 : 1 + CountTree(n.Left) + CountTree(n.Right);
}

public sealed class HeapMode : Mode
{
    long nodeSize, leafSize, payloadSize, arraySize, bigBytes;
    volatile int leaves;
    volatile bool freed;

    public override void Setup(Options o)
    {
        // Run the static constructor first: its allocations must not count as tree bytes.
        RuntimeHelpers.RunClassConstructor(typeof(HeapRoots).TypeHandle);
        long b0 = GC.GetAllocatedBytesForCurrentThread();
        int next = 0;
        HeapRoots.Tree = HeapRoots.BuildTree(HeapRoots.TreeNodes, ref next);
        long b1 = GC.GetAllocatedBytesForCurrentThread();
        nodeSize = (b1 - b0) / HeapRoots.TreeNodes;
        if (HeapRoots.CountTree(HeapRoots.Tree) != HeapRoots.TreeNodes || (b1 - b0) % HeapRoots.TreeNodes != 0)
            throw new InvalidOperationException($"tree build is not what the truth says: {b1 - b0} bytes");

        b0 = GC.GetAllocatedBytesForCurrentThread();
        var array = new Leaf?[HeapRoots.LeafCount];
        arraySize = GC.GetAllocatedBytesForCurrentThread() - b0;
        long leafBytes = 0, payloadBytes = 0;
        for (int i = 0; i < array.Length; i++)
        {
            long a = GC.GetAllocatedBytesForCurrentThread();
            var data = new byte[HeapRoots.PayloadLength];
            long b = GC.GetAllocatedBytesForCurrentThread();
            array[i] = new Leaf(i, data);
            long c = GC.GetAllocatedBytesForCurrentThread();
            payloadBytes += b - a;
            leafBytes += c - b;
        }
        HeapRoots.Leaves = array;
        leafSize = leafBytes / HeapRoots.LeafCount;
        payloadSize = payloadBytes / HeapRoots.LeafCount;
        leaves = HeapRoots.LeafCount;
        if (o.BigMb > 0)
        {
            // --big-mb N: N MB more in 10 MB arrays (large object heap), touched, allocated right
            // after a full GC inside a no-GC region: the GC's own heap figure (as of its last GC)
            // does not count them
            GC.Collect();
            long bytes = (long)o.BigMb << 20;
            bool region = GC.TryStartNoGCRegion(bytes + (16 << 20), bytes + (8 << 20), true);
            var big = new List<byte[]>();
            for (long done = 0; done < bytes; done += 10 << 20)
            {
                var a = new byte[10 << 20];
                for (int j = 0; j < a.Length; j += 4096)
                    a[j] = 1;
                big.Add(a);
            }
            HeapRoots.Big = big;
            if (region && System.Runtime.GCSettings.LatencyMode == System.Runtime.GCLatencyMode.NoGCRegion)
                GC.EndNoGCRegion();
            bigBytes = big.Count * (10L << 20);
        }
        Console.WriteLine($"built tree_nodes={HeapRoots.TreeNodes} leaves={leaves}");
    }

    public override void Run(Options o, CancellationToken stop)
    {
        if (o.FreeAfter >= 0 && !stop.WaitHandle.WaitOne(TimeSpan.FromSeconds(o.FreeAfter)))
        {
            var arr = HeapRoots.Leaves;
            int remaining = 0;
            for (int i = 0; i < arr.Length; i++)
            {
                if (i % 2 == 0)
                    arr[i] = null;
                else
                    remaining++;
            }
            leaves = remaining;
            freed = true;
            GC.Collect();
            GC.WaitForPendingFinalizers();
            GC.Collect();
            Console.WriteLine($"freed leaves={remaining}");
            Program.EmitTruth(false);
        }
        stop.WaitHandle.WaitOne();
        GC.KeepAlive(HeapRoots.Tree);
    }

    public override void AddTruth(JsonObject t)
    {
        int n = leaves;
        t["tree_nodes"] = HeapRoots.TreeNodes;
        t["tree_node_size"] = nodeSize;
        t["leaves"] = n;
        t["leaf_size"] = leafSize;
        t["leaf_payload_size"] = payloadSize;
        t["leaf_array_size"] = arraySize;
        t["freed"] = freed;
        t["big_bytes"] = bigBytes;
        t["types"] = new JsonObject
        {
            ["TestApp.Heap.TreeNode"] = new JsonObject { ["count"] = HeapRoots.TreeNodes, ["bytes"] = HeapRoots.TreeNodes * nodeSize },
            ["TestApp.Heap.Leaf"] = new JsonObject { ["count"] = n, ["bytes"] = n * leafSize },
            ["System.Byte[]"] = new JsonObject { ["count"] = n, ["bytes"] = n * payloadSize },
            ["TestApp.Heap.Leaf[]"] = new JsonObject { ["count"] = 1, ["bytes"] = arraySize },
            ["TestApp.Heap.Box<System.Int32>.Slot"] = new JsonObject { ["count"] = HeapRoots.SlotCount },
        };
        t["total_bytes"] = HeapRoots.TreeNodes * nodeSize + n * (leafSize + payloadSize) + arraySize;
    }
}
