// unload: plugins loaded and unloaded over and over, as apps with plugins, scripting or hot reload
// do. Each round, on thread "plugins", until --seconds:
//   - loads this very assembly into a new collectible AssemblyLoadContext and calls
//     TestApp.Unload.Plugin.Work in that copy: it allocates 4,000 instances of the nested class
//     TestApp.Unload.Plugin.Payload, burns ~4 ms of thread CPU in Plugin.Spin, and throws and
//     catches 3 TestApp.Unload.PluginException;
//   - defines a class in an AssemblyBuilderAccess.RunAndCollect assembly (Dyn.Box<N> with the
//     nested class Item) and allocates an array of 20,000 Items;
//   - drops both and collects until both are gone.
// So the types and code clrscope names keep going away (and their addresses come back as other
// types'): the profiler must neither touch what the runtime freed nor crash.
// Truth: rounds, unloaded (rounds whose context and dynamic assembly were both collected),
// payload_bytes (what the Payload allocations took, by GC.GetAllocatedBytesForCurrentThread),
// thrown (PluginExceptions), spin_cpu_ms (thread CPU inside Plugin.Spin), plugins_cpu_ms.
using System.Reflection;
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using System.Runtime.Loader;
using System.Text.Json.Nodes;

namespace TestApp.Unload;

public sealed class PluginException(string message) : Exception(message);

/// <summary>Runs inside the collectible copy of this assembly.</summary>
public static class Plugin
{
    public sealed class Payload
    {
        public long A, B, C, D;
    }

    static double sink;
    const double SpinMs = 4.0;

    /// <summary>Returns {payload bytes, thrown, spin CPU in microseconds}.</summary>
    public static long[] Work(int objects, int throws)
    {
        var keep = new Payload[objects];
        long b0 = GC.GetAllocatedBytesForCurrentThread();
        for (int i = 0; i < objects; i++)
            keep[i] = new Payload { A = i };
        long bytes = GC.GetAllocatedBytesForCurrentThread() - b0;
        ThreadCpu.NowMs(); // compiled here, not inside Spin's frame (where the JIT would count)
        double spun = Spin(SpinMs);
        long thrown = 0;
        for (int i = 0; i < throws; i++)
        {
            try
            {
                Throw(i);
            }
            catch (PluginException)
            {
                thrown++;
            }
        }
        GC.KeepAlive(keep);
        return [bytes, thrown, (long)(spun * 1000)];
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void Throw(int i) => throw new PluginException("clrscope test: plugin failure " + i);

    /// <summary>Burns cpuMs of thread CPU; returns what it measured from its own first
    /// instruction on (the JIT compiling it, each round anew, is not counted).</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double Spin(double cpuMs)
    {
        double start = ThreadCpu.NowMs();
        double x = sink, now = start;
        while (now - start < cpuMs)
        {
            for (int i = 0; i < 2000; i++)
                x = Math.Sqrt(x + i);
            now = ThreadCpu.NowMs();
        }
        sink = x;
        return now - start;
    }
}

public sealed class UnloadMode : Mode
{
    const int Objects = 4000;
    const int Throws = 3;
    long rounds, unloaded, payloadBytes, thrown, spinUs;
    double pluginsCpuMs;

    public override void Run(Options o, CancellationToken stop)
    {
        var th = Program.StartThread("plugins", () =>
        {
            double c0 = ThreadCpu.NowMs();
            while (!stop.IsCancellationRequested)
            {
                var (ctx, dyn) = Round();
                bool gone = false;
                for (int i = 0; i < 40 && !gone; i++)
                {
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                    gone = !ctx.IsAlive && !dyn.IsAlive;
                }
                Interlocked.Increment(ref rounds);
                if (gone)
                    Interlocked.Increment(ref unloaded);
                lock (this)
                    pluginsCpuMs = ThreadCpu.NowMs() - c0;
            }
        });
        th.Join();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    (WeakReference, WeakReference) Round()
    {
        long n = Interlocked.Read(ref rounds);
        var ctx = new AssemblyLoadContext("plugin-" + n, isCollectible: true);
        var asm = ctx.LoadFromAssemblyPath(typeof(Plugin).Assembly.Location);
        var work = asm.GetType("TestApp.Unload.Plugin")!.GetMethod("Work")!;
        var r = (long[])work.Invoke(null, [Objects, Throws])!;
        Interlocked.Add(ref payloadBytes, r[0]);
        Interlocked.Add(ref thrown, r[1]);
        Interlocked.Add(ref spinUs, r[2]);
        ctx.Unload();

        var ab = AssemblyBuilder.DefineDynamicAssembly(new AssemblyName("Dyn" + n),
                                                       AssemblyBuilderAccess.RunAndCollect);
        var mb = ab.DefineDynamicModule("Dyn" + n);
        var box = mb.DefineType("Dyn.Box" + n, TypeAttributes.Public);
        var item = box.DefineNestedType("Item", TypeAttributes.NestedPublic);
        item.DefineField("a", typeof(long), FieldAttributes.Public);
        item.DefineDefaultConstructor(MethodAttributes.Public);
        Type itemType = item.CreateType();
        box.CreateType();
        GC.KeepAlive(Array.CreateInstance(itemType, 20000));
        return (new WeakReference(ctx), new WeakReference(ab));
    }

    public override void AddTruth(JsonObject t)
    {
        t["rounds"] = Interlocked.Read(ref rounds);
        t["unloaded"] = Interlocked.Read(ref unloaded);
        t["payload_bytes"] = Interlocked.Read(ref payloadBytes);
        t["thrown"] = Interlocked.Read(ref thrown);
        t["spin_cpu_ms"] = Interlocked.Read(ref spinUs) / 1000.0;
        lock (this)
            t["plugins_cpu_ms"] = pluginsCpuMs;
    }
}
