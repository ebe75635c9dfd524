// dynamic-code: CPU burned in dynamic methods (DynamicMethod: the kind compiled Regex and
// expression trees run as), which have no metadata. Thread "dyn-worker" alternates between one
// long-lived method "DynBurn", called from TestApp.Dynamic.Work.CallsDynBurn, and short-lived ones
// "Churn_<n>", each made, called for a few milliseconds from TestApp.Dynamic.Work.CallsChurn and
// dropped; a GC every 16 of them collects them, so the runtime reuses their code's memory for the
// next ones. Truth: the thread's CPU inside each kind, and how many methods were made.
using System.Reflection.Emit;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Dynamic;

public static class Work
{
    public static long Sink;

    // long Burn(long n): n rounds of xorshift, all inside the dynamic method
    public static Func<long, long> Make(string name)
    {
        var dm = new DynamicMethod(name, typeof(long), new[] { typeof(long) }, typeof(Work).Module,
                                   skipVisibility: true);
        var il = dm.GetILGenerator();
        var x = il.DeclareLocal(typeof(ulong));
        var i = il.DeclareLocal(typeof(long));
        il.Emit(OpCodes.Ldc_I8, unchecked((long)0x9E3779B97F4A7C15UL));
        il.Emit(OpCodes.Stloc, x);
        il.Emit(OpCodes.Ldc_I8, 0L);
        il.Emit(OpCodes.Stloc, i);
        var top = il.DefineLabel();
        var cond = il.DefineLabel();
        il.Emit(OpCodes.Br, cond);
        il.MarkLabel(top);
        foreach (var (shift, op) in new[] { (13, OpCodes.Shl), (7, OpCodes.Shr_Un), (17, OpCodes.Shl) })
        {
            il.Emit(OpCodes.Ldloc, x);
            il.Emit(OpCodes.Ldloc, x);
            il.Emit(OpCodes.Ldc_I4, shift);
            il.Emit(op);
            il.Emit(OpCodes.Xor);
            il.Emit(OpCodes.Stloc, x);
        }
        il.Emit(OpCodes.Ldloc, i);
        il.Emit(OpCodes.Ldc_I8, 1L);
        il.Emit(OpCodes.Add);
        il.Emit(OpCodes.Stloc, i);
        il.MarkLabel(cond);
        il.Emit(OpCodes.Ldloc, i);
        il.Emit(OpCodes.Ldarg_0);
        il.Emit(OpCodes.Blt, top);
        il.Emit(OpCodes.Ldloc, x);
        il.Emit(OpCodes.Ret);
        return dm.CreateDelegate<Func<long, long>>();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long CallsDynBurn(Func<long, long> f, long n) => f(n) ^ 1;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long CallsChurn(Func<long, long> f, long n) => f(n) ^ 1;
}

public sealed class DynamicCodeMode : Mode
{
    double burnCpuMs, churnCpuMs;
    long churnMade;

    public override void Run(Options o, CancellationToken stop)
    {
        Program.StartThread("dyn-worker", () =>
        {
            var burn = Work.Make("DynBurn");
            long n = 200_000;
            while (!stop.IsCancellationRequested)
            {
                // ~20 ms in the long-lived method, then ~20 ms in a new short-lived one (ten
                // calls each of --call-ms, 2 by default)
                double c0 = ThreadCpu.NowMs();
                for (int k = 0; k < 10; k++)
                    Work.Sink ^= Work.CallsDynBurn(burn, n);
                double c1 = ThreadCpu.NowMs();
                var churn = Work.Make($"Churn_{churnMade}");
                double c2 = ThreadCpu.NowMs();
                for (int k = 0; k < 10; k++)
                    Work.Sink ^= Work.CallsChurn(churn, n);
                double c3 = ThreadCpu.NowMs();
                churn = null;
                lock (this)
                {
                    burnCpuMs += c1 - c0;
                    churnCpuMs += c3 - c2;
                    churnMade++;
                }
                if (churnMade % 16 == 0)
                {
                    GC.Collect();
                    GC.WaitForPendingFinalizers();
                }
                double per = (c1 - c0) / 10;
                n = Math.Clamp((long)(n * o.CallMs / Math.Max(per, 0.05)), 1_000, 50_000_000);
            }
        }).Join();
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["burn_cpu_ms"] = burnCpuMs;
            t["churn_cpu_ms"] = churnCpuMs;
            t["churn_made"] = churnMade;
        }
        t["frames"] = new JsonObject
        {
            ["burn_caller"] = "TestApp.Dynamic.Work.CallsDynBurn",
            ["churn_caller"] = "TestApp.Dynamic.Work.CallsChurn",
            ["burn"] = "[dynamic] DynBurn",
            ["churn_prefix"] = "[dynamic] Churn_",
        };
    }
}
