// threads: --threads N (default 500) blocked threads for scale tests, started before `ready`.
// Even-numbered threads ("blocker-0", "blocker-2", ...) wait on one ManualResetEvent in
// TestApp.Threads.Blocker.WaitOnEvent; odd ones sleep until the stop interrupts them in
// TestApp.Threads.Blocker.SleepLoop. With --spinners K, K threads ("spinner-0", ...) burn CPU in
// TestApp.Threads.Blocker.Spin; with --lock-waiters K, one thread ("lock-holder") holds a lock in
// TestApp.Threads.Blocker.HoldLock while K threads ("lock-waiter-0", ...) wait for it in
// TestApp.Threads.Blocker.WaitForLock: a thread dump's known answer. With --deadlocks K, K pairs
// of background threads ("deadlock-I-a", "deadlock-I-b") each take one lock of their pair in
// TestApp.Threads.Blocker.Deadlock and then wait for the other's: deadlocked for good (the process
// exits around them). With --stale-wait, "stale-b"'s wait for a lock "stale-a" holds is
// interrupted, then stale-a waits for a lock stale-b took since: no deadlock. On stop the event is
// set, the locks released and every other thread joined. With --os-named K, K background threads
// without a managed name name themselves to the OS (pthread_setname_np) with the first 15 bytes of
// "ПотокРабочий", which cut its eighth letter in two (as the kernel's 15-byte comm cuts long names),
// and wait in TestApp.Threads.Blocker.WaitNamedByOs.
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text.Json.Nodes;

namespace TestApp.Threads;

public static class Blocker
{
    public static readonly ManualResetEvent Release = new(false);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void WaitOnEvent() => Release.WaitOne();

    [DllImport("libc", EntryPoint = "pthread_self")]
    static extern nuint PthreadSelf();

    [DllImport("libc", EntryPoint = "pthread_setname_np")]
    static extern int PthreadSetName(nuint thread, byte[] name);

    public static readonly string OsName = "ПотокРабочий";
    public static int OsNamed;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void WaitNamedByOs()
    {
        var name = new byte[16]; // 15 bytes and the NUL: the most a thread's OS name holds
        Array.Copy(System.Text.Encoding.UTF8.GetBytes(OsName), name, 15);
        if (PthreadSetName(PthreadSelf(), name) == 0)
            Interlocked.Increment(ref OsNamed);
        Release.WaitOne();
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void SleepLoop(CancellationToken stop)
    {
        // Sleeps until the stop interrupts it: a sleeper that woke now and then would be running
        // (or waiting for a core) at the moment of some dumps.
        while (!stop.IsCancellationRequested)
        {
            try { Thread.Sleep(Timeout.Infinite); }
            catch (ThreadInterruptedException) { }
        }
    }

    public static long Spun;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Spin(CancellationToken stop)
    {
        long n = 0;
        while (!stop.IsCancellationRequested)
            n += CpuWork.SpinLeaf(10_000) & 1;
        Interlocked.Add(ref Spun, n);
    }

    public static readonly object Gate = new();
    public static readonly ManualResetEventSlim Held = new(false);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void HoldLock(CancellationToken stop)
    {
        lock (Gate)
        {
            Held.Set();
            while (!stop.IsCancellationRequested)
                Thread.Sleep(50);
        }
    }

    public static long Acquired;

    // --stale-wait: stale-b's wait for L1 is interrupted (the runtime sends no ContentionStop
    // then), it takes L2 and sleeps holding it; stale-a, which holds L1, then waits for L2.
    // A real wait of a for b, and a wait of b for a that ended: no deadlock.
    public static readonly object StaleL1 = new(), StaleL2 = new();
    public static readonly ManualResetEventSlim StaleAHolds = new(), StaleBHolds = new();

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void StaleA(CancellationToken stop)
    {
        lock (StaleL1)
        {
            StaleAHolds.Set();
            StaleBHolds.Wait();
            lock (StaleL2)
                Interlocked.Increment(ref Acquired);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void StaleB(CancellationToken stop)
    {
        StaleAHolds.Wait();
        try
        {
            lock (StaleL1)
                Interlocked.Increment(ref Acquired);
        }
        catch (ThreadInterruptedException)
        {
        }
        lock (StaleL2)
        {
            StaleBHolds.Set();
            while (!stop.IsCancellationRequested)
                Thread.Sleep(200);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Deadlock(object mine, object theirs, Barrier both)
    {
        lock (mine)
        {
            both.SignalAndWait();
            lock (theirs)
                Interlocked.Increment(ref Acquired); // never reached
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void WaitForLock()
    {
        lock (Gate)
            Interlocked.Increment(ref Acquired);
    }
}

public sealed class ThreadsMode : Mode
{
    Thread[] threads = [];
    int osThreadsAtReady;
    volatile int osThreadsAtStop;
    long started;

    int spinners, lockWaiters, deadlocks, osNamed;
    readonly List<Thread> sleepers = new();

    public override void Setup(Options o)
    {
        int n = o.Threads > 0 ? o.Threads : 500;
        spinners = o.Spinners;
        lockWaiters = o.LockWaiters;
        var token = StopToken;
        var list = new List<Thread>();
        for (int i = 0; i < n; i++)
        {
            Action body = i % 2 == 0 ? Blocker.WaitOnEvent : () => Blocker.SleepLoop(token);
            var th = new Thread(() =>
            {
                Interlocked.Increment(ref started);
                body();
            }) { Name = $"blocker-{i}" };
            list.Add(th);
            if (i % 2 == 1)
                sleepers.Add(th);
        }
        for (int i = 0; i < spinners; i++)
            list.Add(new Thread(() => { Interlocked.Increment(ref started); Blocker.Spin(token); })
                { Name = $"spinner-{i}" });
        if (lockWaiters > 0)
        {
            var holder = new Thread(() => { Interlocked.Increment(ref started); Blocker.HoldLock(token); })
                { Name = "lock-holder" };
            holder.Start();
            Blocker.Held.Wait();
            threads = [holder];
            for (int i = 0; i < lockWaiters; i++)
                list.Add(new Thread(() => { Interlocked.Increment(ref started); Blocker.WaitForLock(); })
                    { Name = $"lock-waiter-{i}" });
        }
        foreach (var th in list)
            th.Start();
        threads = [.. threads, .. list];
        if (o.StaleWait)
        {
            var a = new Thread(() => { Interlocked.Increment(ref started); Blocker.StaleA(token); })
                { Name = "stale-a" };
            var b = new Thread(() => { Interlocked.Increment(ref started); Blocker.StaleB(token); })
                { Name = "stale-b" };
            a.Start();
            b.Start();
            Blocker.StaleAHolds.Wait();
            Thread.Sleep(300); // b waits for L1 by now
            b.Interrupt();
            Blocker.StaleBHolds.Wait();
            threads = [.. threads, a, b];
        }
        deadlocks = o.Deadlocks;
        for (int i = 0; i < deadlocks; i++)
        {
            object la = new(), lb = new();
            var both = new Barrier(2);
            new Thread(() => Blocker.Deadlock(la, lb, both)) { Name = $"deadlock-{i}-a", IsBackground = true }.Start();
            new Thread(() => Blocker.Deadlock(lb, la, both)) { Name = $"deadlock-{i}-b", IsBackground = true }.Start();
        }
        osNamed = o.OsNamed;
        for (int i = 0; i < osNamed; i++)
            new Thread(Blocker.WaitNamedByOs) { IsBackground = true }.Start();
        while (Interlocked.Read(ref started) < threads.Length || Volatile.Read(ref Blocker.OsNamed) < osNamed)
            Thread.Sleep(5);
        osThreadsAtReady = OsThreads();
        Console.WriteLine($"started threads={n}");
    }

    // Setup runs before Run receives the stop token, so the sleepers poll this source instead.
    readonly CancellationTokenSource stopSource = new();
    CancellationToken StopToken => stopSource.Token;

    static int OsThreads()
    {
        using var p = Process.GetCurrentProcess();
        return p.Threads.Count;
    }

    public override void Run(Options o, CancellationToken stop)
    {
        stop.WaitHandle.WaitOne();
        osThreadsAtStop = OsThreads();
        stopSource.Cancel();
        Blocker.Release.Set();
        foreach (var th in sleepers)
            th.Interrupt(); // pending until the thread sleeps, if it does not yet
        foreach (var th in threads)
            th.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        bool stale = threads.Any(th => th.Name == "stale-b");
        int n = threads.Length - spinners - lockWaiters - (lockWaiters > 0 ? 1 : 0) - (stale ? 2 : 0);
        t["threads_requested"] = n;
        t["spinners"] = spinners;
        t["lock_waiters"] = lockWaiters;
        t["deadlocks"] = deadlocks;
        t["os_named"] = Volatile.Read(ref Blocker.OsNamed);
        t["stale_wait"] = stale;
        t["lock_acquired"] = Interlocked.Read(ref Blocker.Acquired);
        t["threads_started"] = Interlocked.Read(ref started);
        t["event_waiters"] = (n + 1) / 2;
        t["sleepers"] = n / 2;
        t["os_threads_at_ready"] = osThreadsAtReady;
        t["os_threads_at_stop"] = osThreadsAtStop;
        t["frames"] = new JsonObject
        {
            ["wait"] = "TestApp.Threads.Blocker.WaitOnEvent",
            ["sleep"] = "TestApp.Threads.Blocker.SleepLoop",
            ["spin"] = "TestApp.Threads.Blocker.Spin",
            ["hold"] = "TestApp.Threads.Blocker.HoldLock",
            ["wait_lock"] = "TestApp.Threads.Blocker.WaitForLock",
            ["deadlock"] = "TestApp.Threads.Blocker.Deadlock",
            ["os_named"] = "TestApp.Threads.Blocker.WaitNamedByOs",
        };
    }
}
