// hostile: an app that does what real apps do to a profiler in their process. A thread burns CPU
// in TestApp.Hostile.Work.Burn for the whole run (so there are samples to take), and:
//   --take-signal N   after 2 s, sets signal N's disposition to ignored (libc's signal(), as a
//                     native library that ignores SIGPROF would), taking it from whoever had it;
//   --spawn N         starts N child processes, one after another, each `/bin/sh -c` printing
//                     `child <i>` and the descriptors it inherited (`ls /proc/self/fd`), then
//                     exiting 7; checks every child's output and exit code;
//   --crash-after-ms N  throws an unhandled exception on a new thread N ms after `ready` (the
//                     runtime prints it and aborts the process).
// Truth: burn_cpu_ms, signal_taken (the disposition before was not the default), spawned,
// spawn_failures (wrong output or exit code), child_fds_max (descriptors a child inherited, at
// most, beside 0, 1, 2 and the one `ls` opens), child_fds_example.
using System.Diagnostics;
using System.Runtime.CompilerServices;
using System.Runtime.InteropServices;
using System.Text.Json.Nodes;

namespace TestApp.Hostile;

public static class Work
{
    [MethodImpl(MethodImplOptions.NoInlining)]
    public static long Burn(CancellationToken stop)
    {
        long acc = 0;
        while (!stop.IsCancellationRequested)
            acc ^= CpuWork.SpinLeaf(20_000);
        return acc;
    }

    [DllImport("libc", EntryPoint = "signal")]
    internal static extern nint Signal(int signum, nint handler);

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void Crash() => throw new InvalidOperationException("clrscope hostile crash");
}

public sealed class HostileMode : Mode
{
    double burnMs;
    bool signalTaken;
    int spawned, spawnFailures, childFdsMax;
    string childFdsExample = "";

    public override void Run(Options o, CancellationToken stop)
    {
        var burner = Program.StartThread("burner", () =>
        {
            double c0 = ThreadCpu.NowMs();
            Work.Burn(stop);
            burnMs = ThreadCpu.NowMs() - c0;
        });
        if (o.CrashAfterMs >= 0)
        {
            Thread.Sleep(o.CrashAfterMs);
            Program.StartThread("crasher", Work.Crash);
        }
        if (o.TakeSignal > 0 && !stop.WaitHandle.WaitOne(2000))
        {
            const nint SIG_IGN = 1;
            nint before = Work.Signal(o.TakeSignal, SIG_IGN);
            signalTaken = before != 0; // 0: SIG_DFL
            Console.WriteLine($"took signal {o.TakeSignal}");
        }
        for (int i = 0; i < o.Spawn && !stop.IsCancellationRequested; i++)
        {
            var psi = new ProcessStartInfo("/bin/sh")
            {
                RedirectStandardOutput = true,
                UseShellExecute = false,
            };
            psi.ArgumentList.Add("-c");
            psi.ArgumentList.Add("echo child $1; ls /proc/self/fd; exit 7");
            psi.ArgumentList.Add("sh");
            psi.ArgumentList.Add(i.ToString());
            using var p = Process.Start(psi)!;
            string output = p.StandardOutput.ReadToEnd();
            p.WaitForExit();
            var lines = output.Split('\n', StringSplitOptions.RemoveEmptyEntries);
            if (p.ExitCode != 7 || lines.Length == 0 || lines[0] != $"child {i}")
                spawnFailures++;
            // ls lists 0, 1, 2 and the directory it reads; anything else was inherited
            var extra = lines.Skip(1).Where(l => l is not ("0" or "1" or "2" or "3")).ToArray();
            if (extra.Length > childFdsMax)
            {
                childFdsMax = extra.Length;
                childFdsExample = string.Join(",", extra);
            }
            spawned++;
        }
        if (o.Spawn > 0)
            Console.WriteLine($"spawned {spawned}");
        burner.Join();
    }

    public override void AddTruth(JsonObject t)
    {
        t["burn_cpu_ms"] = burnMs;
        t["signal_taken"] = signalTaken;
        t["spawned"] = spawned;
        t["spawn_failures"] = spawnFailures;
        t["child_fds_max"] = childFdsMax;
        t["child_fds_example"] = childFdsExample;
    }
}
