// wall-mix: threads whose wall time splits in known proportions between running, sleeping,
// waiting for a lock and blocking in a socket read, for the wall profile's walks by signal.
using System.Diagnostics;
using System.Net;
using System.Net.Sockets;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text.Json.Nodes;

namespace TestApp.WallMix;

/// <summary>
/// Threads (every one runs for the whole run; truth: the time each spent in each part, by its
/// own Stopwatch):
///   - "wall-duty": spins in DutySpin, then sleeps in DutyRest, over and over (30 and 70 ms on
///     average, each drawn anew from 15-45 and 35-105 ms; with --duty-period-ms N a fixed cycle
///     on the monotonic clock instead: 30 % of N spinning from the cycle's start, asleep to its
///     end, for a sampler that must not see the same phase every time);
///   - "wall-holder" holds a lock 90 ms of every 100 (sleeping inside it), and "wall-contender"
///     takes it in Contender.Take over and over, holding it for a moment in Contender.Use;
///   - "wall-reader" blocks in a loopback socket's Receive (Reader.Read) that "wall-writer"
///     feeds a byte every 50 ms;
///   - "wall-spinner" spins in Spinner.Spin all the time.
/// With --pinvoke-poll, "wall-poller" also calls libc's poll(NULL, 0, 20 ms) directly
/// (Poller.Poll) in a loop and counts the calls that returned EINTR (truth poll_eintr): a system
/// call native code outside the runtime made, which the wall sampler must not interrupt (the
/// thread blocks SIGPROF, the CPU sampler's signal, whose samples in the kernel's part of the
/// call would interrupt it as well).
/// </summary>
public sealed class WallMixMode : Mode
{
    [DllImport("libc", EntryPoint = "poll", SetLastError = true)]
    static extern int poll(IntPtr fds, ulong nfds, int timeout);

    readonly object gate = new();
    readonly object stats = new();
    double spinMs, restMs, takeMs, useMs, readMs, pollMs;
    long polls, pollEintr, reads;
    volatile bool pinvoke;
    int dutyPeriodMs;

    public override void Run(Options o, CancellationToken stop)
    {
        pinvoke = o.PinvokePoll;
        dutyPeriodMs = o.DutyPeriodMs;
        using var listener = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        listener.Bind(new IPEndPoint(IPAddress.Loopback, 0));
        listener.Listen(1);
        using var writerSock = new Socket(AddressFamily.InterNetwork, SocketType.Stream, ProtocolType.Tcp);
        writerSock.Connect(listener.LocalEndPoint!);
        using var readerSock = listener.Accept();
        var threads = new List<Thread>
        {
            Program.StartThread("wall-duty", () => Duty(stop)),
            Program.StartThread("wall-holder", () => Holder(stop)),
            Program.StartThread("wall-contender", () => Contender(stop)),
            Program.StartThread("wall-reader", () => Reader(readerSock, stop)),
            Program.StartThread("wall-writer", () => Writer(writerSock, stop)),
            Program.StartThread("wall-spinner", () => Spinner(stop)),
        };
        if (pinvoke)
            threads.Add(Program.StartThread("wall-poller", () => Poller(stop)));
        stop.WaitHandle.WaitOne();
        writerSock.Shutdown(SocketShutdown.Both); // the reader's Receive returns
        foreach (var t in threads)
            t.Join();
    }

    static void SpinFor(double ms)
    {
        var sw = Stopwatch.StartNew();
        while (sw.Elapsed.TotalMilliseconds < ms)
            Thread.SpinWait(50);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void DutySpin(int ms) => SpinFor(ms);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void DutyRest(int ms) => Thread.Sleep(ms);

    void Duty(CancellationToken stop)
    {
        // 30 and 70 ms on average, each drawn anew; or the fixed cycle of --duty-period-ms
        var rnd = new Random(12345);
        long cycle = Stopwatch.GetTimestamp(), period = dutyPeriodMs * Stopwatch.Frequency / 1000;
        while (!stop.IsCancellationRequested)
        {
            long t0 = Stopwatch.GetTimestamp();
            if (period > 0)
            {
                // locked to the cycle: spin to 30 % of it, sleep to its end
                DutySpin(Math.Max(0, (int)((cycle + period * 3 / 10 - t0) * 1000 / Stopwatch.Frequency)));
            }
            else
                DutySpin(rnd.Next(15, 46));
            long t1 = Stopwatch.GetTimestamp();
            if (period > 0)
            {
                cycle += period;
                DutyRest(Math.Max(0, (int)((cycle - t1) * 1000 / Stopwatch.Frequency)));
                if (Stopwatch.GetTimestamp() - cycle > period) // fell behind: start afresh
                    cycle = Stopwatch.GetTimestamp();
            }
            else
                DutyRest(rnd.Next(35, 106));
            long t2 = Stopwatch.GetTimestamp();
            lock (stats)
            {
                spinMs += Stopwatch.GetElapsedTime(t0, t1).TotalMilliseconds;
                restMs += Stopwatch.GetElapsedTime(t1, t2).TotalMilliseconds;
            }
        }
    }

    void Holder(CancellationToken stop)
    {
        while (!stop.IsCancellationRequested)
        {
            lock (gate)
                Thread.Sleep(90);
            Thread.Sleep(10);
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    void ContenderTake()
    {
        Monitor.Enter(gate);
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    void ContenderUse()
    {
        SpinFor(1);
        Monitor.Exit(gate);
        Thread.Yield();
    }

    void Contender(CancellationToken stop)
    {
        while (!stop.IsCancellationRequested)
        {
            long t0 = Stopwatch.GetTimestamp();
            ContenderTake();
            long t1 = Stopwatch.GetTimestamp();
            ContenderUse();
            long t2 = Stopwatch.GetTimestamp();
            lock (stats)
            {
                takeMs += Stopwatch.GetElapsedTime(t0, t1).TotalMilliseconds;
                useMs += Stopwatch.GetElapsedTime(t1, t2).TotalMilliseconds;
            }
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int ReaderRead(Socket s, byte[] buf) => s.Receive(buf);

    void Reader(Socket s, CancellationToken stop)
    {
        var buf = new byte[16];
        while (!stop.IsCancellationRequested)
        {
            long t0 = Stopwatch.GetTimestamp();
            int n;
            try
            {
                n = ReaderRead(s, buf);
            }
            catch (SocketException)
            {
                return;
            }
            long t1 = Stopwatch.GetTimestamp();
            if (n == 0)
                return;
            lock (stats)
            {
                readMs += Stopwatch.GetElapsedTime(t0, t1).TotalMilliseconds;
                reads++;
            }
        }
    }

    static void Writer(Socket s, CancellationToken stop)
    {
        var one = new byte[1];
        while (!stop.WaitHandle.WaitOne(50))
        {
            try
            {
                s.Send(one);
            }
            catch (SocketException)
            {
                return;
            }
        }
    }

    [MethodImpl(MethodImplOptions.NoInlining)]
    static void SpinnerSpin(CancellationToken stop)
    {
        while (!stop.IsCancellationRequested)
            Thread.SpinWait(1000);
    }

    static void Spinner(CancellationToken stop) => SpinnerSpin(stop);

    [MethodImpl(MethodImplOptions.NoInlining)]
    static int PollerPoll(out int errno)
    {
        int r = poll(IntPtr.Zero, 0, 20);
        errno = r < 0 ? Marshal.GetLastPInvokeError() : 0;
        return r;
    }

    [DllImport("libc", SetLastError = true)]
    static extern int pthread_sigmask(int how, ulong[] set, ulong[]? old);

    void Poller(CancellationToken stop)
    {
        // SIGPROF, which clrscope's CPU sampler takes first, blocked on this thread: a CPU
        // sample that falls in poll's way into the kernel would interrupt it too (the kernel
        // counts that time), and this thread is about the wall sampler's signal alone
        var set = new ulong[16];
        set[0] = 1UL << (27 - 1);
        pthread_sigmask(0 /* SIG_BLOCK */, set, null);
        while (!stop.IsCancellationRequested)
        {
            long t0 = Stopwatch.GetTimestamp();
            int r = PollerPoll(out int errno);
            long t1 = Stopwatch.GetTimestamp();
            lock (stats)
            {
                pollMs += Stopwatch.GetElapsedTime(t0, t1).TotalMilliseconds;
                polls++;
                if (r < 0 && errno == 4) // EINTR
                    pollEintr++;
            }
        }
    }

    public override void AddTruth(JsonObject t)
    {
        lock (stats)
        {
            t["spin_ms"] = spinMs;
            t["rest_ms"] = restMs;
            t["take_ms"] = takeMs;
            t["use_ms"] = useMs;
            t["read_ms"] = readMs;
            t["reads"] = reads;
            t["poll_ms"] = pollMs;
            t["polls"] = polls;
            t["poll_eintr"] = pollEintr;
        }
        t["frames"] = new JsonObject
        {
            ["spin"] = "TestApp.WallMix.WallMixMode.DutySpin",
            ["rest"] = "TestApp.WallMix.WallMixMode.DutyRest",
            ["take"] = "TestApp.WallMix.WallMixMode.ContenderTake",
            ["use"] = "TestApp.WallMix.WallMixMode.ContenderUse",
            ["read"] = "TestApp.WallMix.WallMixMode.ReaderRead",
            ["spinner"] = "TestApp.WallMix.WallMixMode.SpinnerSpin",
            ["poll"] = "TestApp.WallMix.WallMixMode.PollerPoll",
        };
    }
}
