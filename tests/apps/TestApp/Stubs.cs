// stubs: CPU in the runtime's interface dispatch stubs, for their frame names.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Stubs;

public interface IShape
{
    int Sides();
}

public sealed class Triangle : IShape { [MethodImpl(MethodImplOptions.NoInlining)] public int Sides() => 3; }
public sealed class Square : IShape { [MethodImpl(MethodImplOptions.NoInlining)] public int Sides() => 4; }
public sealed class Pentagon : IShape { [MethodImpl(MethodImplOptions.NoInlining)] public int Sides() => 5; }
public sealed class Hexagon : IShape { [MethodImpl(MethodImplOptions.NoInlining)] public int Sides() => 6; }

/// <summary>
/// Two threads call an interface method in a loop: "stub-mono" always on one type (the runtime's
/// dispatch stub, which checks the type and jumps), "stub-mega" on four types in turn (its
/// resolve stub, a lookup in the runtime's dispatch cache). Run with DOTNET_TieredPGO=0, so that
/// the JIT does not guess the type and call the method directly. Truth: the loop methods' names
/// and the stubs' frame names.
/// </summary>
public sealed class StubsMode : Mode
{
    long monoCalls, megaCalls;

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int Monomorphic(IShape[] shapes, int n)
    {
        int sum = 0;
        IShape s = shapes[0];
        for (int i = 0; i < n; i++)
            sum += s.Sides();
        return sum;
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int Megamorphic(IShape[] shapes, int n)
    {
        int sum = 0;
        for (int i = 0; i < n; i++)
            sum += shapes[i & 3].Sides();
        return sum;
    }

    public override void Run(Options o, CancellationToken stop)
    {
        var mono = new IShape[] { new Square() };
        var mega = new IShape[] { new Triangle(), new Square(), new Pentagon(), new Hexagon() };
        var t1 = Program.StartThread("stub-mono", () =>
        {
            int sink = 0;
            while (!stop.IsCancellationRequested)
            {
                sink ^= Monomorphic(mono, 1_000_000);
                Interlocked.Increment(ref monoCalls);
            }
            GC.KeepAlive(sink);
        });
        var t2 = Program.StartThread("stub-mega", () =>
        {
            int sink = 0;
            while (!stop.IsCancellationRequested)
            {
                sink ^= Megamorphic(mega, 1_000_000);
                Interlocked.Increment(ref megaCalls);
            }
            GC.KeepAlive(sink);
        });
        t1.Join();
        t2.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        t["mono_loops"] = Interlocked.Read(ref monoCalls);
        t["mega_loops"] = Interlocked.Read(ref megaCalls);
        t["frames"] = new JsonObject
        {
            ["mono"] = "TestApp.Stubs.StubsMode.Monomorphic",
            ["mega"] = "TestApp.Stubs.StubsMode.Megamorphic",
            ["dispatch"] = "[native stub VSD_DispatchStub]",
            ["resolve"] = "[native stub VSD_ResolveStub]",
        };
    }
}
