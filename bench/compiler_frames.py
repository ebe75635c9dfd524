"""Where a large program's CPU goes, by the kind of frame it ends in, under clrscope: the SDK's C#
compiler (csc.dll, run directly, CLRSCOPE_PROFILE_SDK=1) compiling generated sources (records,
LINQ and lambdas, patterns, async, generics), every profile on, default settings. A program
nobody here wrote, JIT-heavy and generics-heavy: the case where a profiler's native half shows.

Prints the share of CPU (self time: the sample's leaf frame) by kind — managed code, the JIT's
work labelled with the method compiled (a `[JIT] compiling` frame anywhere in the sample),
`[native libcoreclr.so]`, `[native code]` (generated code no stub pattern named), the runtime's
stubs named by kind (`[native stub …]`), `[native libclrjit.so]` outside a label, native frames named by a symbol table (`[native lib!function]`), other native frames,
`Garbage Collector` — and the runtime's suspended time and how the wall ticks walked
(CLRSCOPE_WALL_WALK from the environment: signal, the default, or suspend).

Usage: python3 bench/compiler_frames.py BUILD [FILES]   (FILES of generated source, default 20)
STUB_KINDS=1 lists the stubs' share by kind; CALLERS=1 what the unnamed frames sit under.
The profile is read in whole seconds as the compiler runs (its last second is lost at its exit).
"""
import glob
import os
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
from benchlib import App, emit, get, get_json  # noqa: E402
import gzip  # noqa: E402

from pprofdec import Profile  # noqa: E402

CLASS = """
public record Item{n}(int Id, string Name, double Price);
public static class Ops{n}
{{
    public static List<Item{n}> Filter(IEnumerable<Item{n}> xs, int k) =>
        xs.Where(x => x.Id % k == 0).OrderBy(x => x.Name).ThenBy(x => x.Price)
          .Select(x => x with {{ Price = x.Price * 1.1 }}).ToList();
    public static string Describe(object o) => o switch
    {{
        int i when i > {n} => "big",
        string s => s.Length.ToString(),
        Item{n} {{ Price: > 10 }} it => it.Name,
        (int a, int b) => (a + b).ToString(),
        _ => "?",
    }};
    public static async Task<int> SumAsync(IEnumerable<int> xs)
    {{
        int s = 0;
        foreach (var x in xs) {{ await Task.Yield(); s += x * {n}; }}
        return s;
    }}
    public static Dictionary<TKey, List<T>> Group<T, TKey>(IEnumerable<T> xs, Func<T, TKey> key)
        where TKey : notnull => xs.GroupBy(key).ToDictionary(g => g.Key, g => g.ToList());
    public static IEnumerable<(int, string)> Pairs(int m)
    {{
        for (int i = 0; i < m; i++)
            if (i % 3 == {m3}) yield return (i, $"{{i}}-{n}");
    }}
    public static T Max<T>(ReadOnlySpan<T> xs) where T : IComparable<T>
    {{
        T best = xs[0];
        foreach (var x in xs) if (x.CompareTo(best) > 0) best = x;
        return best;
    }}
    public static int Query(List<Item{n}> a, List<Item{n}> b) =>
        (from x in a join y in b on x.Id equals y.Id where x.Price > y.Price
         group x by x.Name into g select g.Count()).Sum();
}}
"""


def generate(dirname, files, classes=20):
    for f in range(files):
        with open(os.path.join(dirname, f"Gen{f}.cs"), "w") as out:
            out.write("using System;\nusing System.Collections.Generic;\nusing System.Linq;\n"
                      "using System.Threading.Tasks;\n")
            out.write(f"namespace Gen{f};\n")
            for c in range(classes):
                n = f * classes + c
                out.write(CLASS.format(n=n, m3=n % 3))


def kind(frames):
    if any(f.startswith("[JIT] compiling") for f in frames):
        return "jit (labelled)"
    leaf = frames[0] if frames else "[unknown]"
    if leaf == "Garbage Collector" or "Garbage Collector" in frames[-1:]:
        return "gc"
    if leaf in ("[native libcoreclr.so]", "[native code]", "[native libclrjit.so]"):
        return leaf
    if leaf.startswith("[native stub "):
        return leaf if os.environ.get("STUB_KINDS") else "stubs, named by kind"
    if leaf.startswith("[native ") and "!" in leaf:
        return "native, named"
    if leaf.startswith("[native ") or leaf.startswith("["):
        return "other native"
    return "managed"


def csc_command(tmp, files):
    """The SDK's compiler run directly on FILES generated sources in tmp (written here)."""
    root = os.path.dirname(os.path.realpath(os.popen("command -v dotnet").read().strip()))
    csc = sorted(glob.glob(os.path.join(root, "sdk", "*", "Roslyn", "bincore", "csc.dll")))[-1]
    refs = sorted(glob.glob(os.path.join(root, "packs", "Microsoft.NETCore.App.Ref", "*", "ref",
                                         "net*", "*.dll")))
    generate(tmp, files)
    return ["dotnet", "exec", csc, "-nologo", "-noconfig", "-t:library", "-nullable-",
            "-out:" + os.path.join(tmp, "out.dll")] + ["-r:" + r for r in refs] + \
        sorted(glob.glob(os.path.join(tmp, "Gen*.cs")))


def profile_run(build, cmd, kinds=("profile",), env=None):
    """Runs cmd under clrscope (every profile on unless env says otherwise) and reads the pprof
    endpoints named in kinds (profile, wall) in whole seconds as it runs. Returns the App (exited),
    {kind: [(frames, values, labels)]}, the last /api/v1/status and the program's output."""
    app = App(build, cmd, env=dict({"CLRSCOPE_PROFILE_SDK": "1", "CLRSCOPE_LOG_LEVEL": "error"},
                                   **(env or {})))
    out = []  # the program's messages: read as they come, or it blocks on a full pipe
    threading.Thread(target=lambda: out.extend(app.proc.stdout), daemon=True).start()
    url = app.dashboard()
    if not url:
        sys.exit("no dashboard: " + " ".join(cmd[:4]))
    samples = {k: [] for k in kinds}
    last, status = int(time.time()), None
    while app.proc.poll() is None:
        time.sleep(2)
        now = int(time.time()) - 1
        try:
            status = get_json(url + "api/v1/status")
            if now > last:
                for k in kinds:
                    raw = get(url + f"debug/pprof/{k}?from={last}&to={now}&wait=0")
                    samples[k] += Profile(gzip.decompress(raw)).samples
                last = now
        except OSError:
            break
    app.stop()
    return app, samples, status, out


def main():
    build = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else "build")
    files = int(sys.argv[2]) if len(sys.argv) > 2 else 20
    with tempfile.TemporaryDirectory() as tmp:
        app, got, status, errors = profile_run(build, csc_command(tmp, files))
    samples = got["profile"]
    if app.proc.returncode:
        print(f"csc exited with {app.proc.returncode}: " + "".join(errors[:5]))
    by = {}
    total = 0
    for frames, vals, labels in samples:
        total += vals[-1]
        k = kind(frames)
        by[k] = by.get(k, 0) + vals[-1]
    if not total:
        sys.exit("no CPU sample read")
    print(f"csc on {files} files: {total / 1e9:.1f} s of CPU sampled, "
          f"runtime suspended {status['self']['suspended_s'] if status else '?'} s")
    if status:
        st = status["self"]
        print(f"wall walks: {st.get('wall_walk')}, {st.get('sampler_ticks')} ticks, "
              f"{st.get('wall_signal_ticks')} by signal alone, "
              f"{st.get('wall_cached_ticks')} from kept stacks alone; governor "
              f"{ {k: v.get('slowdown', v.get('on_fraction')) for k, v in ((status.get('budget') or {}).get('sources') or {}).items()} }; suspended for "
              f"{st.get('wall_suspensions')}; asks "
              f"{(st.get('signal_sampler') or {}).get('wall_asks')}")
    for k, v in sorted(by.items(), key=lambda kv: -kv[1]):
        print(f"  {v / total * 100:5.1f} %  {k}")
        emit("compiler frames", k, round(v / total * 100, 1), "% of CPU")
    # CALLERS=1: what the runtime's and stubs' self time sits under
    if os.environ.get("CALLERS"):
        for leaf in ("[native libcoreclr.so]", "[native code]", "other native"):
            under = {}
            for frames, vals, labels in samples:
                if kind(frames) != leaf:
                    continue
                path = [f for f in frames[:6]]
                k = " < ".join(path)
                under[k] = under.get(k, 0) + vals[-1]
            print(leaf)
            for k, v in sorted(under.items(), key=lambda kv: -kv[1])[:8]:
                print(f"    {v / total * 100:5.1f} %  {k}")
    unnamed = sum(by.get(k, 0) for k in ("[native libcoreclr.so]", "[native code]",
                                         "[native libclrjit.so]", "other native"))
    print(f"  unnamed native (self): {unnamed / total * 100:.1f} %")


if __name__ == "__main__":
    main()
