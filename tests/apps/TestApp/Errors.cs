// exceptions: throws and catches exactly known numbers of three exception types, each from its own
// method, on thread "thrower". The throws are spread evenly over the first 70% of --seconds
// (5 s when --seconds is 0), then the thread idles until the end; `thrown` is printed when all
// are done.
// --many-types N: before that, N exception types thrown once each (ManyTypes.ThrowEarly),
// "many-types: early" and a wait for a line on stdin, then 300 more types once each
// (ManyTypes.ThrowLate), and "many-types: done".
// Each type is an instantiation of ManyEx<,>, a ClassID of its own. Truth: many_types_early,
// many_types_late (throws caught, one per type).
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Errors;

public sealed class RareException(string message) : Exception(message);

// Made without a message: its Message is the runtime's "Exception of type '…' was thrown."
public sealed class UnnamedException : Exception;

// Thrown once and thrown again twice, as an await does (ExceptionDispatchInfo.Throw) and as
// `throw;` does: three first-chance exceptions of one object.
public sealed class RethrownException(string message) : Exception(message);

public sealed class ManyEx<T1, T2>(string message) : Exception(message);

public static class ManyTypes
{
    public const string Message = "clrscope test: one of many types";
    public const int Late = 300;

    static readonly Type[] Args =
    [
        typeof(int), typeof(uint), typeof(long), typeof(ulong), typeof(short), typeof(ushort),
        typeof(byte), typeof(sbyte), typeof(char), typeof(bool), typeof(float), typeof(double),
        typeof(decimal), typeof(string), typeof(object), typeof(DateTime), typeof(TimeSpan),
        typeof(Guid), typeof(Uri), typeof(Version), typeof(System.Text.StringBuilder),
        typeof(Stream), typeof(Exception), typeof(Thread), typeof(Task), typeof(Random),
        typeof(Stopwatch), typeof(CancellationToken), typeof(DateTimeOffset), typeof(Half),
    ];

    public static int MaxTypes => Args.Length * Args.Length;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowEarly(Exception e) => throw e;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowLate(Exception e) => throw e;

    /// <summary>Throws and catches one exception of each of the types first..first+n-1.</summary>
    public static int Run(int first, int n, bool late)
    {
        int caught = 0;
        for (int i = first; i < first + n; i++)
        {
            var t = typeof(ManyEx<,>).MakeGenericType(Args[i / Args.Length], Args[i % Args.Length]);
            var e = (Exception)Activator.CreateInstance(t, Message)!;
            try
            {
                if (late)
                    ThrowLate(e);
                else
                    ThrowEarly(e);
            }
            catch (Exception c) when (c.Message == Message)
            {
                caught++;
            }
        }
        return caught;
    }
}

public static class Thrower
{
    public const string StormMessage = "clrscope test: storm";
    public const string ArgumentMessage = "clrscope test: bad argument";
    public const string RareMessage = "clrscope test: rare failure";
    public const string RethrownMessage = "clrscope test: thrown again";
    public const int RethrowsEach = 2;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowStorm() => throw new InvalidOperationException(StormMessage);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowArgument() => throw new ArgumentException(ArgumentMessage);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowRare() => throw new RareException(RareMessage);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowUnnamed() => throw new UnnamedException();

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ThrowFirst() => throw new RethrownException(RethrownMessage);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void ThrowCaptured()
    {
        try
        {
            ThrowFirst();
        }
        catch (RethrownException e)
        {
            System.Runtime.ExceptionServices.ExceptionDispatchInfo.Capture(e).Throw();
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ThrowRethrown()
    {
        try
        {
            ThrowCaptured();
        }
        catch (RethrownException)
        {
            throw;
        }
    }
}

public sealed class ExceptionsMode : Mode
{
    sealed class Kind(string type, string method, string message, int target, Action thrower)
    {
        public readonly string Type = type;
        public readonly string Method = method;
        public readonly string Message = message;
        public readonly int Target = target;
        public readonly Action Throw = thrower;
        public long Thrown;
        public long Caught;
    }

    Kind[] kinds = [];
    volatile bool allThrown;
    int manyEarly = -1, manyLate = -1;
    // Every first-chance exception in the process, by type: shows nothing else was thrown.
    readonly Dictionary<string, long> firstChance = new();

    public override void Setup(Options o)
    {
        AppDomain.CurrentDomain.FirstChanceException += (_, e) =>
        {
            string name = e.Exception.GetType().FullName ?? "?";
            lock (firstChance)
                firstChance[name] = firstChance.GetValueOrDefault(name) + 1;
        };
        kinds =
        [
            new("System.InvalidOperationException", "TestApp.Errors.Thrower.ThrowStorm", Thrower.StormMessage, o.Storm, Thrower.ThrowStorm),
            new("System.ArgumentException", "TestApp.Errors.Thrower.ThrowArgument", Thrower.ArgumentMessage, o.Arguments, Thrower.ThrowArgument),
            new("TestApp.Errors.RareException", "TestApp.Errors.Thrower.ThrowRare", Thrower.RareMessage, o.Rare, Thrower.ThrowRare),
            new("TestApp.Errors.UnnamedException", "TestApp.Errors.Thrower.ThrowUnnamed", new UnnamedException().Message, o.Unnamed, Thrower.ThrowUnnamed),
            new("TestApp.Errors.RethrownException", "TestApp.Errors.Thrower.ThrowRethrown", Thrower.RethrownMessage, 50, Thrower.ThrowRethrown),
        ];
    }

    public override void Run(Options o, CancellationToken stop)
    {
        if (o.ManyTypes > 0)
        {
            if (o.ManyTypes + ManyTypes.Late > ManyTypes.MaxTypes)
                throw new ArgumentException($"--many-types: at most {ManyTypes.MaxTypes - ManyTypes.Late}");
            int early = ManyTypes.Run(0, o.ManyTypes, late: false);
            Console.WriteLine("many-types: early");
            Console.Out.Flush();
            if (Console.ReadLine() == null || stop.IsCancellationRequested)
                return;
            int late = ManyTypes.Run(o.ManyTypes, ManyTypes.Late, late: true);
            lock (firstChance)
            {
                manyEarly = early;
                manyLate = late;
            }
            Console.WriteLine("many-types: done");
            Console.Out.Flush();
        }
        double spreadMs = (o.Seconds > 0 ? o.Seconds * 0.7 : 5) * 1000;
        var th = Program.StartThread("thrower", () => Work(spreadMs, stop));
        th.Join();
    }

    void Work(double spreadMs, CancellationToken stop)
    {
        var clock = Stopwatch.StartNew();
        while (!stop.IsCancellationRequested && !allThrown)
        {
            double f = Math.Min(1.0, clock.Elapsed.TotalMilliseconds / spreadMs);
            bool done = true;
            foreach (var k in kinds)
            {
                long due = (long)Math.Floor(k.Target * f);
                while (k.Thrown < due && !stop.IsCancellationRequested)
                    ThrowAndCatch(k);
                done &= k.Thrown >= k.Target;
            }
            if (done)
            {
                allThrown = true;
                Console.WriteLine("thrown " + string.Join(" ", Array.ConvertAll(kinds, k => $"{k.Type}={k.Thrown}")));
                Program.EmitTruth(false);
                break;
            }
            Thread.Sleep(10);
        }
        stop.WaitHandle.WaitOne();
    }

    static void ThrowAndCatch(Kind k)
    {
        Interlocked.Increment(ref k.Thrown);
        try
        {
            k.Throw();
        }
        catch (InvalidOperationException e) when (e.Message == k.Message)
        {
            Interlocked.Increment(ref k.Caught);
        }
        catch (ArgumentException e) when (e.Message == k.Message)
        {
            Interlocked.Increment(ref k.Caught);
        }
        catch (RareException e) when (e.Message == k.Message)
        {
            Interlocked.Increment(ref k.Caught);
        }
        catch (UnnamedException e) when (e.Message == k.Message)
        {
            Interlocked.Increment(ref k.Caught);
        }
        catch (RethrownException e) when (e.Message == k.Message)
        {
            Interlocked.Increment(ref k.Caught);
        }
    }

    public override void AddTruth(JsonObject t)
    {
        var ex = new JsonObject();
        long total = 0;
        foreach (var k in kinds)
        {
            long thrown = Interlocked.Read(ref k.Thrown);
            // count: every throw the runtime reports, rethrows of the same object included
            long rethrown = k.Type == "TestApp.Errors.RethrownException" ? thrown * Thrower.RethrowsEach : 0;
            total += thrown + rethrown;
            ex[k.Type] = new JsonObject
            {
                ["count"] = thrown + rethrown,
                ["rethrown"] = rethrown,
                ["caught"] = Interlocked.Read(ref k.Caught),
                ["target"] = k.Target,
                ["message"] = k.Message,
                ["method"] = k.Method,
            };
        }
        t["exceptions"] = ex;
        var fc = new JsonObject();
        lock (firstChance)
        {
            foreach (var (name, n) in firstChance)
                fc[name] = n;
        }
        t["first_chance"] = fc;
        lock (firstChance)
        {
            if (manyEarly >= 0)
            {
                t["many_types_early"] = manyEarly;
                t["many_types_late"] = manyLate;
                t["many_types_frames"] = new JsonObject
                {
                    ["early"] = "TestApp.Errors.ManyTypes.ThrowEarly",
                    ["late"] = "TestApp.Errors.ManyTypes.ThrowLate",
                };
            }
        }
        t["total"] = total;
        t["all_thrown"] = allThrown;
        t["thrower_thread"] = "thrower";
    }
}
