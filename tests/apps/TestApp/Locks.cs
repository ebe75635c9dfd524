// contention: --threads threads (default 4, "contender-N") contend on one Monitor (`lock`) object,
// or with --lock-kind lock (.NET 9 and later) on one System.Threading.Lock, whose contention events
// are raised by managed code (NativeRuntimeEventSource) on the waiting thread.
// The holder sleeps --hold-ms (default 5) inside the lock, then pauses 1 ms outside it.
//
// Each acquisition first tries Monitor.TryEnter (no wait: counted uncontended); if the lock is
// held, the Stopwatch-timed Monitor.Enter that follows is counted as contended and its duration
// added to lock_wait_ms. The runtime's own contention events may count a few acquisitions
// differently (a lock released between the TryEnter and the Enter is counted contended here
// with ~0 wait), so compare counts approximately and wait time within a tolerance.
//
// --many-locks N: before that, thread "lock-holder" and the mode's thread contend on N distinct
// objects, each exactly once (ManyLocks.ContendEarly), print "many-locks: early" and wait for a
// line on stdin, then contend on 300 more, each exactly once (ManyLocks.ContendLate), and print
// "many-locks: done". Truth: many_locks_early, many_locks_late (contentions the holder saw the
// mode's thread blocked in, one per object).
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Locks;

public static class Contention
{
    public static readonly object Gate = new();

    /// <summary>Acquires Gate, holds it for holdMs (sleeping), releases it. Returns the wait in ms, or -1 when uncontended.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double AcquireAndHold(int holdMs)
    {
        double waited = -1;
        if (!Monitor.TryEnter(Gate))
        {
            long t0 = Stopwatch.GetTimestamp();
            Monitor.Enter(Gate);
            waited = Stopwatch.GetElapsedTime(t0).TotalMilliseconds;
        }
        try
        {
            Thread.Sleep(holdMs);
        }
        finally
        {
            Monitor.Exit(Gate);
        }
        return waited;
    }

#if NET9_0_OR_GREATER
    public static readonly Lock GateLock = new();

    /// <summary>The same with a System.Threading.Lock.</summary>
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static double AcquireAndHoldLock(int holdMs)
    {
        double waited = -1;
        if (!GateLock.TryEnter())
        {
            long t0 = Stopwatch.GetTimestamp();
            GateLock.Enter();
            waited = Stopwatch.GetElapsedTime(t0).TotalMilliseconds;
        }
        try
        {
            Thread.Sleep(holdMs);
        }
        finally
        {
            GateLock.Exit();
        }
        return waited;
    }
#endif
}

public static class ManyLocks
{
    static readonly List<object> Kept = new();

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ContendEarly(object o)
    {
        Monitor.Enter(o);
        Monitor.Exit(o);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void ContendLate(object o)
    {
        Monitor.Enter(o);
        Monitor.Exit(o);
    }

    /// <summary>Each of n new objects held by another thread until this thread is blocked
    /// entering it (its ThreadState says WaitSleepJoin after it said it is entering; at least
    /// 3 ms, at most 1 s): one contention per object, however busy the machine. Returns how
    /// many it saw blocked.</summary>
    public static int Run(int n, bool late)
    {
        var objs = new object[n];
        for (int i = 0; i < n; i++)
            objs[i] = new object();
        lock (Kept)
            Kept.AddRange(objs); // alive: each keeps its own lock (sync block) to the end
        using var held = new SemaphoreSlim(0);
        using var done = new SemaphoreSlim(0);
        var contender = Thread.CurrentThread;
        int entering = -1, blocked = 0;
        var holder = Program.StartThread("lock-holder", () =>
        {
            for (int i = 0; i < n; i++)
            {
                lock (objs[i])
                {
                    held.Release();
                    var clock = Stopwatch.StartNew();
                    bool seen = false;
                    while (clock.ElapsedMilliseconds < 1000)
                    {
                        seen = Volatile.Read(ref entering) == i &&
                               (contender.ThreadState & System.Threading.ThreadState.WaitSleepJoin) != 0;
                        if (seen && clock.ElapsedMilliseconds >= 3)
                            break;
                        Thread.Sleep(1);
                    }
                    if (seen)
                        blocked++;
                }
                done.Wait();
            }
        });
        for (int i = 0; i < n; i++)
        {
            held.Wait();
            Volatile.Write(ref entering, i);
            if (late)
                ContendLate(objs[i]);
            else
                ContendEarly(objs[i]);
            done.Release();
        }
        holder.Join();
        return blocked;
    }
}

public sealed class ContentionMode : Mode
{
    int manyEarly = -1, manyLate = -1;

    int threads;
    int holdMs;
    bool useLock;
    double waitMs;
    long contended;
    long acquisitions;

    public override void Run(Options o, CancellationToken stop)
    {
        threads = o.Threads > 0 ? o.Threads : 4;
        holdMs = o.HoldMs;
        useLock = o.LockKind == "lock";
#if !NET9_0_OR_GREATER
        if (useLock)
            throw new ArgumentException("--lock-kind lock needs .NET 9 or later");
#endif
        if (o.ManyLocks > 0)
        {
            int early = ManyLocks.Run(o.ManyLocks, late: false);
            Console.WriteLine("many-locks: early");
            Console.Out.Flush();
            if (Console.ReadLine() == null || stop.IsCancellationRequested)
                return;
            int late = ManyLocks.Run(300, late: true);
            lock (this)
            {
                manyEarly = early;
                manyLate = late;
            }
            Console.WriteLine("many-locks: done");
            Console.Out.Flush();
        }
        var workers = new Thread[threads];
        for (int i = 0; i < threads; i++)
        {
            workers[i] = Program.StartThread($"contender-{i}", () =>
            {
                while (!stop.IsCancellationRequested)
                {
#if NET9_0_OR_GREATER
                    double w = useLock ? Contention.AcquireAndHoldLock(holdMs) : Contention.AcquireAndHold(holdMs);
#else
                    double w = Contention.AcquireAndHold(holdMs);
#endif
                    lock (this)
                    {
                        acquisitions++;
                        if (w >= 0)
                        {
                            contended++;
                            waitMs += w;
                        }
                    }
                    Thread.Sleep(1);
                }
            });
        }
        foreach (var w in workers)
            w.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        lock (this)
        {
            t["lock_wait_ms"] = waitMs;
            t["contended_acquisitions"] = contended;
            t["acquisitions"] = acquisitions;
        }
        lock (this)
        {
            if (manyEarly >= 0)
            {
                t["many_locks_early"] = manyEarly;
                t["many_locks_late"] = manyLate;
            }
        }
        t["threads"] = threads;
        t["hold_ms"] = holdMs;
        t["lock_type"] = useLock ? "System.Threading.Lock" : "System.Object";
        t["frames"] = new JsonObject
        {
            ["acquire"] = useLock ? "TestApp.Locks.Contention.AcquireAndHoldLock"
                                  : "TestApp.Locks.Contention.AcquireAndHold",
            ["early"] = "TestApp.Locks.ManyLocks.ContendEarly",
            ["late"] = "TestApp.Locks.ManyLocks.ContendLate",
        };
    }
}
