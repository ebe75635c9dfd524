// WebApp: a small Kestrel service for the ASP.NET Core overhead benchmark.
//
//   GET /json   serializes 40 orders (System.Text.Json): the typical API endpoint
//   GET /alloc  builds and discards ~64 KB of strings, lists and arrays: allocation-heavy
//   GET /cpu    hashes a buffer 200 times: CPU-bound
//   GET /prices parses 200 prices, half of them bad, with exceptions (Prices.OnSale: a LINQ
//               lambda calling decimal.Parse, a FormatException caught per bad price): where a
//               profiler must walk through the runtime's exception dispatch to the app's code
//   GET /parallel-lock  16 Parallel.For iterations that each take one lock (Inventory.Reserve: the
//               lock is taken in the lambda, which the JIT may inline into the framework's loop)
//   GET /health "ok" (readiness)
//   GET /stats  the process's own counters: requests served, CPU seconds, GC counts, GC pause
//
// Run: dotnet WebApp.dll --urls http://127.0.0.1:PORT   (logging is at Warning: no per-request
// console output to distort the measurement).
using System.Diagnostics;
using System.Security.Cryptography;
using System.Text;

var builder = WebApplication.CreateSlimBuilder(args);
builder.Logging.SetMinimumLevel(LogLevel.Warning);
var app = builder.Build();

long served = 0;
var orders = Enumerable.Range(0, 40).Select(Order.Make).ToArray();
var buffer = new byte[4096];
new Random(7).NextBytes(buffer);

app.MapGet("/json", () =>
{
    Interlocked.Increment(ref served);
    return Results.Json(orders, AppJson.Default.OrderArray);
});

app.MapGet("/alloc", () =>
{
    Interlocked.Increment(ref served);
    return Results.Text(Work.Allocate().ToString());
});

app.MapGet("/cpu", () =>
{
    Interlocked.Increment(ref served);
    return Results.Text(Work.Hash(buffer, 200));
});

app.MapGet("/prices", () =>
{
    Interlocked.Increment(ref served);
    return Results.Text(Prices.OnSale(200).ToString());
});

app.MapGet("/parallel-lock", () =>
{
    Interlocked.Increment(ref served);
    return Results.Text(Inventory.Reserve(buffer).ToString());
});

app.MapGet("/health", () => "ok");

app.MapGet("/stats", () =>
{
    var p = Process.GetCurrentProcess();
    return Results.Text(
        $"{{\"served\":{Interlocked.Read(ref served)},\"cpu_s\":{p.TotalProcessorTime.TotalSeconds:F4}," +
        $"\"gen0\":{GC.CollectionCount(0)},\"gen2\":{GC.CollectionCount(2)}," +
        $"\"allocated\":{GC.GetTotalAllocatedBytes()}," +
        $"\"gc_pause_ms\":{GC.GetTotalPauseDuration().TotalMilliseconds:F3}}}", "application/json");
});

app.Run();

public sealed record Order(int Id, string Customer, string Sku, int Quantity, decimal Price,
                           DateTime Placed, string[] Tags)
{
    public static Order Make(int i) => new(i, "customer-" + i, "SKU-" + (i * 7919 % 10000),
        i % 5 + 1, 9.99m + i, new DateTime(2026, 1, 1).AddMinutes(i * 37),
        new[] { "web", i % 2 == 0 ? "priority" : "standard" });
}

[System.Text.Json.Serialization.JsonSerializable(typeof(Order[]))]
public sealed partial class AppJson : System.Text.Json.Serialization.JsonSerializerContext;

public static class Prices
{
    static readonly string[] Tags = Enumerable.Range(0, 200)
        .Select(i => i % 2 == 0 ? (9.5m + i).ToString(System.Globalization.CultureInfo.InvariantCulture)
                                : "call us")
        .ToArray();

    // Every price that does not parse throws a FormatException, caught here
    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    public static int OnSale(int n) =>
        Tags.Take(n).Select(t =>
        {
            try
            {
                return decimal.Parse(t, System.Globalization.CultureInfo.InvariantCulture) < 100m ? 1 : 0;
            }
            catch (FormatException)
            {
                return 0;
            }
        }).Sum();
}

public static class Inventory
{
    static readonly object Gate = new();
    static long reserved;

    [System.Runtime.CompilerServices.MethodImpl(System.Runtime.CompilerServices.MethodImplOptions.NoInlining)]
    public static long Reserve(byte[] data)
    {
        Parallel.For(0, 16, i =>
        {
            lock (Gate)
            {
                Work.Hash(data, 20);
                reserved++;
            }
        });
        return Interlocked.Read(ref reserved);
    }
}

public static class Work
{
    public static int Allocate()
    {
        int total = 0;
        var list = new List<string>();
        for (int i = 0; i < 200; i++)
        {
            var s = string.Concat("item-", i.ToString(), "-", new string('x', 40));
            list.Add(s);
            total += s.Length;
        }
        var sb = new StringBuilder();
        foreach (var s in list)
            sb.Append(s).Append(',');
        var arr = new int[2048];
        total += arr.Length + sb.Length;
        return total;
    }

    public static string Hash(byte[] data, int rounds)
    {
        Span<byte> h = stackalloc byte[32];
        SHA256.HashData(data, h);
        for (int i = 1; i < rounds; i++)
            SHA256.HashData(h, h);
        return Convert.ToHexString(h);
    }
}
