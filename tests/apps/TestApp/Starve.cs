// pool-starve: thread-pool starvation by sync-over-async, the classic ASP.NET Core stall. Run
// queues --threads N work items (default 200) to the thread pool, each blocking in
// TestApp.Starve.Blocker.SyncOverAsync on a task that completes only at --free-after seconds (or
// at the stop): every pool thread the runtime injects takes one item and blocks, the rest wait in
// the queue. Truth (with --truth-every-second, every second): `pool_threads`
// (ThreadPool.ThreadCount), `pending` (ThreadPool.PendingWorkItemCount), `completed` (items that
// ran to their end), `released` (the task completed), `queued`.
using System.Runtime.CompilerServices;
using System.Text.Json.Nodes;

namespace TestApp.Starve;

public static class Blocker
{
    public static readonly TaskCompletionSource Gate = new(TaskCreationOptions.RunContinuationsAsynchronously);
    public static long Completed;

    [MethodImpl(MethodImplOptions.NoInlining)]
    public static void SyncOverAsync()
    {
        Gate.Task.Wait(); // what `.Result` on an unfinished task does to a pool thread
        Interlocked.Increment(ref Completed);
    }
}

public sealed class PoolStarveMode : Mode
{
    int queued;
    volatile bool released;

    public override void Run(Options o, CancellationToken stop)
    {
        queued = o.Threads > 0 ? o.Threads : 200;
        for (int i = 0; i < queued; i++)
            ThreadPool.UnsafeQueueUserWorkItem(_ => Blocker.SyncOverAsync(), null);
        if (o.FreeAfter >= 0)
            stop.WaitHandle.WaitOne(TimeSpan.FromSeconds(o.FreeAfter));
        else
            stop.WaitHandle.WaitOne();
        released = true;
        Blocker.Gate.TrySetResult();
        // every item ends; then idle until the stop
        while (Interlocked.Read(ref Blocker.Completed) < queued && !stop.IsCancellationRequested)
            Thread.Sleep(20);
        stop.WaitHandle.WaitOne();
        for (int i = 0; i < 250 && Interlocked.Read(ref Blocker.Completed) < queued; i++)
            Thread.Sleep(20);
    }

    public override void AddTruth(JsonObject t)
    {
        t["queued"] = queued;
        t["pool_threads"] = ThreadPool.ThreadCount;
        t["pending"] = ThreadPool.PendingWorkItemCount;
        t["completed"] = Interlocked.Read(ref Blocker.Completed);
        t["released"] = released;
        t["frame"] = "TestApp.Starve.Blocker.SyncOverAsync";
    }
}
