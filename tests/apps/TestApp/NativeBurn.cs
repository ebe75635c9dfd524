// native-burn: CPU in a native library the app calls, for native frame names.
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text.Json.Nodes;

namespace TestApp.NativeBurn;

/// <summary>
/// One thread "native-burner" calls libcsburn.so's csburn_run (tests/apps/natlib: the same work
/// in an exported function, csburn_exported, and a static one, csburn_local) from
/// NativeBurnMode.Burn, over and over. The library is found by the loader's search
/// (LD_LIBRARY_PATH). Truth: the thread's CPU clock around the calls.
/// </summary>
public sealed class NativeBurnMode : Mode
{
    [DllImport("libcsburn.so")]
    static extern ulong csburn_run(int n);

    double nativeCpuMs;
    long calls;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static ulong Burn(int n) => csburn_run(n);

    public override void Setup(Options o) => Burn(1); // loads the library before `ready`

    public override void Run(Options o, CancellationToken stop)
    {
        var t = Program.StartThread("native-burner", () =>
        {
            ulong sink = 0;
            while (!stop.IsCancellationRequested)
            {
                double c0 = ThreadCpu.NowMs();
                sink ^= Burn(2_000_000);
                double c = ThreadCpu.NowMs() - c0;
                lock (this)
                {
                    nativeCpuMs += c;
                    calls++;
                }
            }
            GC.KeepAlive(sink);
        });
        t.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["native_cpu_ms"] = nativeCpuMs;
            t["calls"] = calls;
        }
        t["frames"] = new JsonObject
        {
            ["caller"] = "TestApp.NativeBurn.NativeBurnMode.Burn",
            ["exported"] = "[native libcsburn.so!csburn_exported]",
            ["local"] = "[native libcsburn.so!csburn_local]",
            ["module"] = "[native libcsburn.so]",
        };
    }
}
