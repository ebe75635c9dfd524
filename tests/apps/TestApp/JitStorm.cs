// jit-storm: a thread that does little but have the JIT compile new code.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.JitStorm;

/// <summary>
/// One thread "jitter" has the runtime compile JitStormMode.Work&lt;T&gt; for ever new value types
/// T (ValueTuple quadruples over 12 primitive types: each a type of its own, whose instantiation
/// shares no code) with RuntimeHelpers.PrepareMethod, from JitStormMode.Compile, without running
/// it. Its truth: the instantiations compiled, the thread's CPU inside Compile (the runtime's type
/// loading and the JIT) and in all.
/// </summary>
public sealed class JitStormMode : Mode
{
    static readonly Type[] Parts =
    {
        typeof(int), typeof(long), typeof(short), typeof(byte), typeof(double), typeof(float),
        typeof(char), typeof(bool), typeof(sbyte), typeof(ushort), typeof(uint), typeof(ulong),
    };

    long compiled;
    double compileCpuMs, threadCpuMs;

    public override void Run(Options o, CancellationToken stop)
    {
        var t = Program.StartThread("jitter", () => Loop(stop));
        t.Join();
    }

    void Loop(CancellationToken stop)
    {
        var def = typeof(JitStormMode).GetMethod(nameof(Work))!.MethodHandle;
        double start = ThreadCpu.NowMs();
        int n = Parts.Length;
        for (long i = 0; !stop.IsCancellationRequested && i < (long)n * n * n * n; i++)
        {
            var t = typeof(ValueTuple<,,,>).MakeGenericType(
                Parts[i % n], Parts[i / n % n], Parts[i / n / n % n], Parts[i / n / n / n % n]);
            double c0 = ThreadCpu.NowMs();
            Compile(def, t.TypeHandle);
            double c = ThreadCpu.NowMs() - c0;
            lock (this)
            {
                compiled++;
                compileCpuMs += c;
                threadCpuMs = ThreadCpu.NowMs() - start;
            }
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Compile(RuntimeMethodHandle def, RuntimeTypeHandle t) =>
        RuntimeHelpers.PrepareMethod(def, new[] { t });

    // Compiled, never run: enough code (optimized at once, generic helpers inlined) that the JIT
    // has work to do for each T.
    [MethodImpl(MethodImplOptions.NoInlining | MethodImplOptions.AggressiveOptimization)]
    public static long Work<T>(T[] items, int seed) where T : struct
    {
        long h = seed;
        var cmp = EqualityComparer<T>.Default;
        for (int i = 0; i < items.Length; i++)
        {
            h = h * 31 + cmp.GetHashCode(items[i]);
            if (cmp.Equals(items[i], default))
                h ^= i;
            switch ((int)(h & 7))
            {
                case 0: h += items.Length; break;
                case 1: h -= i * 7; break;
                case 2: h ^= h >> 13; break;
                case 3: h *= 0x9E3779B1; break;
                case 4: h = ~h; break;
                case 5: h += cmp.GetHashCode(items[items.Length - 1 - i]); break;
                case 6: h ^= (long)i << 7; break;
                default: h -= h >> 3; break;
            }
        }
        var list = new List<T>(items);
        list.Reverse();
        var set = new HashSet<T>(list);
        foreach (var x in set)
            h += x.GetHashCode();
        var dict = new Dictionary<T, int>();
        foreach (var x in items)
            dict[x] = dict.TryGetValue(x, out int c) ? c + 1 : 1;
        foreach (var kv in dict)
            h ^= kv.Value * 17 + kv.Key.GetHashCode();
        Span<T> span = items;
        span.Reverse();
        foreach (var x in span)
            if (cmp.Equals(x, default))
                h++;
        return h + list.Count + set.Count;
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["compiled"] = compiled;
            t["compile_cpu_ms"] = compileCpuMs;
            t["thread_cpu_ms"] = threadCpuMs;
        }
        t["frames"] = new JsonObject
        {
            ["compile"] = "TestApp.JitStorm.JitStormMode.Compile",
            ["work"] = "TestApp.JitStorm.JitStormMode.Work",
        };
    }
}
