"""
Frames named where the plain walk would lose or misname them: dynamic methods (LCG) under their
callers, a call-path trie and a name table that keep making room for new methods, OSR code's
caller, the app's frames under an exception's dispatch in libraries without frame pointers, the
JIT's time under the method it compiles. These check names and shares of a frame's own caller,
not the CPU split against a clock, so they run beside other tests (weight "core" in
tests/CMakeLists.txt).
"""
import os
import subprocess
import time
import unittest

from harness import (BUILD, ProfiledApp, available_runtimes, find_nodes, find_paths,
                     tree_totals_by_name)
from pprofdec import read_pprof

def at_time(lines, key, t):
    """The app's counter `key` at wall time t, interpolated between its truth lines."""
    for a, b in zip(lines, lines[1:]):
        if a["unix_s"] <= t <= b["unix_s"]:
            f = (t - a["unix_s"]) / (b["unix_s"] - a["unix_s"]) if b["unix_s"] > a["unix_s"] else 0
            return a[key] + f * (b[key] - a[key])
    raise AssertionError(f"no truth lines around {t}: "
                         f"{[x['unix_s'] for x in lines[:2]]}..{[x['unix_s'] for x in lines[-2:]]}")


def cpu_ms_below(flame, caller):
    """CPU (ms) of a flame graph's samples under `caller`, by the name of the frame right below
    it."""
    out = {}
    for path, v, node in find_nodes(flame["root"], caller):
        for c in node.get("children", []):
            out[c["name"]] = out.get(c["name"], 0) + c["value"] / 1e6
    return out


class DynamicCode(unittest.TestCase):
    """CPU in dynamic methods (dynamic-code: DynamicMethod, the kind compiled Regex and
    expression trees run as). They have no metadata, so GetFunctionFromIP2 does not answer for
    their code, which would show as "[native code]". The runtime's
    DynamicMethodJITCompilationFinished tells where each one's code is, and DynamicMethodUnloaded
    when it is collected (the short-lived Churn_<n> methods: their memory is reused by the next
    ones, which must not inherit an old name)."""

    @classmethod
    def setUpClass(cls):
        app = ProfiledApp("dynamic-code", ["--seconds", "8"], env={"CLRSCOPE_PROFILES": "cpu"})
        app.start()
        try:
            app.wait_ready()
            time.sleep(7.5)
            cls.cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=300")
            cls.dyn = app.json("/api/v1/status")["self"]["signal_sampler"]["dynamic_methods"]
            cls.final = app.wait_truth(timeout=60)
        finally:
            app.stop()
        cls.frames = cls.final["frames"]

    def under(self, caller):
        return cpu_ms_below(self.cpu, caller)

    def test_runtime_told_compilations_and_collections(self):
        self.assertGreaterEqual(self.dyn["compiled"], 2, self.dyn)
        self.assertGreater(self.dyn["collected"], 0, self.dyn)  # the Churn_ methods, by the GCs
        self.assertEqual(self.dyn["dropped"], 0, self.dyn)

    def test_long_lived_method_named_with_its_cpu(self):
        below = self.under(self.frames["burn_caller"])
        got = below.get(self.frames["burn"], 0)
        ratio = got / self.final["burn_cpu_ms"]
        # before: all of it under "[native code]"
        self.assertGreater(ratio, 0.8, (below, self.final))
        self.assertLess(ratio, 1.1, (below, self.final))

    def test_short_lived_methods_named_and_never_misnamed(self):
        prefix = self.frames["churn_prefix"]
        churn = self.under(self.frames["churn_caller"])
        named = sum(v for k, v in churn.items() if k.startswith(prefix))
        self.assertGreater(named / self.final["churn_cpu_ms"], 0.75, (churn, self.final))
        # code memory reused by a new method must not keep an old method's name
        burn = self.under(self.frames["burn_caller"])
        self.assertFalse([k for k in burn if k.startswith(prefix)], burn)
        self.assertNotIn(self.frames["burn"], churn)
        # each Churn_<n> lived ~20 ms: most of them were sampled under their own name
        self.assertGreater(len([k for k in churn if k.startswith(prefix)]),
                           self.final["churn_made"] // 3, (len(churn), self.final["churn_made"]))


@unittest.skipIf(os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"),
                 "the store's compactions run under the sanitizers in unit.test_store and "
                 "fuzz_flame; this 40 s app adds the JIT's churn, for 40 s of the CI's budget")
class TrieCompaction(unittest.TestCase):
    """A process that keeps making new call paths (dynamic-code: ~50 new methods a second) in a
    small call-path trie (CLRSCOPE_MAX_STACK_NODES=1500, ~500 paths within the 10 s of history)
    and with little room for names (CLRSCOPE_MAX_NAME_BYTES=64 KiB, the least, ~1,800 of the
    methods' names). Were both only to grow, once the trie was full every new path would be cut
    where it ended (the new methods' CPU going to their caller), and once the names were, every
    new method would be "[overflow]", for the process's life. The paths no second within the
    history uses are dropped when the trie is 7/8 full, and the names no longer used when they
    are: after the compactions the newest methods are named again, with their share of the CPU,
    and no node or name is ever refused."""

    @classmethod
    def setUpClass(cls):
        app = ProfiledApp("dynamic-code", ["--seconds", "150", "--call-ms", "1",
                                           "--truth-every-second"], env={
            "CLRSCOPE_PROFILES": "cpu", "CLRSCOPE_SAMPLING_HZ": "200",
            "CLRSCOPE_MAX_STACK_NODES": "1500", "CLRSCOPE_HISTORY_S": "10",
            "CLRSCOPE_MAX_NAME_BYTES": "65536"})
        app.start()
        cls.polls = []
        try:
            app.wait_ready()
            deadline = time.monotonic() + 135
            while time.monotonic() < deadline:
                st = app.json("/api/v1/status")
                cls.polls.append(st)
                if st["store"]["compactions"] >= 1 and st["store"].get("name_compactions", 0) >= 1:
                    break
                time.sleep(1)
            time.sleep(8)  # a window wholly after the first compaction of each
            cls.cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=7")
            cls.status = app.json("/api/v1/status")
            app.next_truth(timeout=3)  # (a line after the window's end)
            cls.lines = [x for x in app.truth_lines() if "churn_cpu_ms" in x]
            app.stop()
            cls.final = app.wait_truth(timeout=60)
        finally:
            app.stop()
        cls.frames = cls.final["frames"]

    def under(self, caller):
        return cpu_ms_below(self.cpu, caller)

    def test_the_trie_was_compacted_and_never_refused_a_node(self):
        store, dropped = self.status["store"], self.status["dropped"]
        self.assertGreaterEqual(store["compactions"], 1, [p["store"] for p in self.polls[-3:]])
        self.assertGreater(store["compacted_nodes"], 0, store)
        self.assertLessEqual(store["stack_nodes"], store["stack_node_cap"], store)
        self.assertEqual(store["stack_node_cap"], 1500, store)
        self.assertEqual(dropped["stack_nodes"], 0, (store, dropped))
        # it did fill: the trie grew to 7/8 of its cap before the first compaction
        self.assertGreaterEqual(store["stack_nodes_peak"], 1312, store)

    def test_the_names_were_compacted_and_never_refused(self):
        store, dropped = self.status["store"], self.status["dropped"]
        last = [p["store"] for p in self.polls[-3:]]
        self.assertGreaterEqual(store["name_compactions"], 1, last)
        self.assertEqual(store["name_cap"], 65536, store)
        # the names of the methods no second within the history ran were freed (at ~50 a second
        # ~1,500 names fill 56 KiB, ~500 of them within the 10 s of history)
        self.assertGreater(store["freed_names"], 500, store)
        self.assertLessEqual(store["name_bytes"], store["name_cap"], store)
        self.assertEqual(dropped["names"], 0, (store, dropped))
        # it did fill: the names grew to 7/8 of their cap before the first compaction
        self.assertGreaterEqual(store["name_bytes_peak"], 65536 * 7 // 8, store)

    def test_new_methods_after_the_compaction_are_named_with_their_cpu(self):
        prefix = self.frames["churn_prefix"]
        churn = self.under(self.frames["churn_caller"])
        burn = self.under(self.frames["burn_caller"]).get(self.frames["burn"], 0)
        named = sum(v for k, v in churn.items() if k.startswith(prefix))
        total = sum(churn.values())
        self.assertNotIn("[overflow]", churn, churn)
        # a cut path leaves the new method's CPU on its caller (or "[truncated]" below it)
        self.assertGreater(total, 0, self.cpu["root"].get("children"))
        self.assertGreater(named / total, 0.75, churn)
        # the window's split between the long-lived method and the new ones is the app's over
        # the same seconds (its truth lines, one a second, read at the window's ends)
        t0, t1 = self.cpu["t_from"], self.cpu["t_to"]
        churn_ms = at_time(self.lines, "churn_cpu_ms", t1) - at_time(self.lines, "churn_cpu_ms", t0)
        burn_ms = at_time(self.lines, "burn_cpu_ms", t1) - at_time(self.lines, "burn_cpu_ms", t0)
        truth = churn_ms / (churn_ms + burn_ms)
        got = named / (named + burn)
        self.assertLess(abs(got - truth), 0.12, (got, truth, named, burn, churn_ms, burn_ms))


class OsrFrames(unittest.TestCase):
    """A method entered once that loops for the whole run (osr-loop) runs as OSR code on its
    Tier0 frame. The OSR frame's record chains straight to the method's caller's caller, so the
    bare signal walk passes over the caller: every sample of the loop would lose
    TestApp.Osr.Work.Caller (and ~10 % of cpu-split's in its first seconds). The sampler tells
    the handler which code is OSR, and the handler finds the Tier0 record between."""

    def test_caller_kept_under_osr_code(self):
        runtimes = available_runtimes()
        if os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"):
            runtimes = runtimes[:1]  # under the sanitizers: the same C paths on every runtime
        for rt in runtimes:
            with self.subTest(runtime=rt):
                # (no overhead budget: on a loaded machine the governor may run the allocation
                # events a few percent of each second, and the payload's few samples a second
                # are then none in the 3 s looked at)
                app = ProfiledApp("osr-loop", ["--seconds", "5"], runtime=rt,
                                  env={"CLRSCOPE_PROFILES": "cpu,alloc",
                                       "CLRSCOPE_SAMPLING_HZ": "1000",
                                       "CLRSCOPE_OVERHEAD_BUDGET": "0"})
                app.start()
                try:
                    app.wait_ready()
                    time.sleep(4.5)
                    # the last 3 s: the samples the sampler drained before it first met the
                    # OSR code (one tick) lack the caller still
                    late = app.json("/api/v1/flamegraph?type=cpu&seconds=3")
                    late_alloc = app.json("/api/v1/flamegraph?type=alloc-bytes&seconds=3")
                    cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=300")
                    sig = app.json("/api/v1/status")["self"]["signal_sampler"]
                    final = app.wait_truth(timeout=60)
                finally:
                    app.stop()
                # the loop did run as OSR code (not so under DOTNET_TieredCompilation=0)
                self.assertGreater(sig["osr_returns"], 0, sig)
                loop, caller = final["frames"]["loop"], final["frames"]["caller"]
                total = under = mix = mix_under = 0
                for path, v, node in find_nodes(late["root"], loop):
                    total += v
                    under += v if len(path) > 1 and path[-2] == caller else 0
                    for c in node.get("children", []):
                        if c["name"] == final["frames"]["mix"]:
                            mix += c["value"]
                            mix_under += c["value"] if path[-2:-1] == [caller] else 0
                self.assertGreater(total, 0, tree_totals_by_name(late["root"]))
                self.assertGreater(under / total, 0.97, (under, total, rt))
                # the samples in the frameless callee (rbp is the OSR frame's) too, as many as
                # the app's own clock says the loop spends there (5-50 % by CPU: 5.8 % on CI's)
                # (1000 Hz: ~2,000 samples of the loop, ~100 of them in Mix at 5 %)
                share = final["mix_share"]
                self.assertGreater(share, 0.01, final)
                n, got = total / 1e6, mix / 1e6
                want = share * n
                self.assertGreater(got, 0.7 * want - 3 * want ** 0.5, (mix, total, share, rt))
                self.assertLess(got, 1.4 * want + 3 * want ** 0.5 + 1, (mix, total, share, rt))
                self.assertGreater(mix_under / mix, 0.97, (mix_under, mix, rt))
                # ~4,500 samples: the loop's CPU is the worker's (the tail after the query aside)
                total = sum(v for _, v in find_paths(cpu["root"], loop))
                ratio = total / 1e6 / final["worker_cpu_ms"]
                self.assertGreater(ratio, 0.75, final)
                self.assertLess(ratio, 1.1, final)
                # allocation stacks through OSR code keep its caller too: in a callee of the loop,
                # and made by the mixed loop itself (without the OSR table, only 1-4 % of the
                # latter have MixedCaller)
                f = final["frames"]
                for leaf, want in ((f["payload"], [caller, loop]), (f["mixed"], [f["mixed_caller"]])):
                    total = under = 0
                    for path, v, node in find_nodes(late_alloc["root"], leaf):
                        total += v
                        under += v if path[-1 - len(want):-1] == want else 0
                    self.assertGreater(total, 0, (leaf, tree_totals_by_name(late_alloc["root"])))
                    self.assertGreater(under / total, 0.95, (leaf, under, total, rt))


class ExceptionDispatch(unittest.TestCase):
    """A thread that throws and catches as fast as it can (exception-storm) spends most of its CPU
    in the runtime's exception dispatch: on .NET 8 in libgcc_s's and libstdc++'s unwinder (C++
    exceptions), built without frame pointers, where the frame-pointer chain breaks and a third
    of the samples ended there, without the app's frames. Their frames are unwound by their CFI
    (.eh_frame), so the samples reach the method that threw (TestApp.Errors.ExceptionStormMode.
    Throw) and the thread's start; /api/v1/status counts the walks that did not."""

    THROW = "TestApp.Errors.ExceptionStormMode.Throw"

    def test_samples_reach_the_throwing_method(self):
        runtimes = available_runtimes()
        if os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"):
            # under the sanitizers: .NET 8's dispatch (C++ exceptions through the runtime's
            # frames) and the newest's (managed, as .NET 9's)
            runtimes = [r for r in runtimes if r != "net9"]
        for rt in runtimes:
            with self.subTest(runtime=rt):
                app = ProfiledApp("exception-storm", ["--storm", "100000000", "--seconds", "12"],
                                  runtime=rt, env={"CLRSCOPE_PROFILES": "cpu",
                                                   "CLRSCOPE_SAMPLING_HZ": "400"})
                app.start()
                try:
                    app.wait_ready()
                    time.sleep(3)  # past the startup's new code and new threads
                    before = app.json("/api/v1/status")["self"]["signal_sampler"]["walks"]
                    time.sleep(5)
                    after = app.json("/api/v1/status")["self"]["signal_sampler"]["walks"]
                    prof = read_pprof(app.pprof("/debug/pprof/profile?seconds=5&wait=0"))
                finally:
                    app.stop()
                total = reached = 0
                cut = {}
                for frames, vals, labels in prof.samples:
                    if not str(labels.get("thread name", "")).startswith("storm-"):
                        continue
                    total += vals[-1]
                    if self.THROW in frames:
                        reached += vals[-1]
                    else:
                        key = " < ".join(frames[:6])
                        cut[key] = cut.get(key, 0) + vals[-1]
                worst = sorted(cut.items(), key=lambda kv: -kv[1])[:5]
                self.assertGreater(total, 0, "no sample of the storm thread")
                self.assertGreaterEqual(reached / total, 0.9, (reached / total, worst))
                d = {k: after[k] - before[k] for k in ("samples", "unrooted", "unrooted_native")}
                self.assertGreater(d["samples"], 500, d)
                self.assertLessEqual(d["unrooted"] / d["samples"], 0.02, (d, after))
                self.assertEqual(after["native_unwind"], "cfi", after)
                self.assertGreater(after["cfi_libraries"], 0, after)
                if rt == "net8":  # C++ exceptions: the unwinder's frames were unwound by CFI
                    self.assertGreater(after["cfi_leaf"] - before["cfi_leaf"], d["samples"] // 4, d)


class JitCompilation(unittest.TestCase):
    """A thread that has the runtime compile one new generic instantiation after another
    (jit-storm: JitStormMode.Work<ValueTuple<...>> by PrepareMethod, never run) spends nearly all
    its CPU in the runtime and its JIT, which have no symbols: "[native libclrjit.so]" and
    "[native libcoreclr.so]" told nothing of what was compiled. Samples taken while the JIT
    compiles carry "[JIT] compiling <method>" above the JIT's frames, under the code that asked
    for it (the app's clock says how much of its CPU that is), and no sample in the JIT's code
    lacks it."""

    LABEL = "[JIT] compiling "

    def test_jit_time_is_labelled_with_the_compiled_method(self):
        runtimes = available_runtimes()
        if os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"):
            runtimes = runtimes[:1]  # under the sanitizers: the same C paths on every runtime
        for rt in runtimes:
            with self.subTest(runtime=rt):
                app = ProfiledApp("jit-storm", ["--seconds", "8"], runtime=rt,
                                  env={"CLRSCOPE_PROFILES": "cpu"})
                app.start()
                try:
                    app.wait_ready()
                    time.sleep(2)
                    prof = read_pprof(app.pprof("/debug/pprof/profile?seconds=4"))
                    walks = app.json("/api/v1/status")["self"]["signal_sampler"]["walks"]
                    folded = app.json("/api/v1/flamegraph?type=cpu&seconds=4&native=fold")
                    top = app.json("/api/v1/top?type=cpu&seconds=4&native=fold&limit=10000")
                    grouped = app.json("/api/v1/flamegraph?type=cpu&seconds=4&native=group")
                    gtop = app.json("/api/v1/top?type=cpu&seconds=4&native=group&limit=10000")
                    bad = app.json("/api/v1/top?type=cpu&native=inline", expect=400)
                    truth = app.wait_truth(timeout=60)
                finally:
                    app.stop()
                compile_, work = truth["frames"]["compile"], truth["frames"]["work"]
                total = labelled = bare = 0
                misplaced, unlabelled = [], {}
                for frames, vals, labels in prof.samples:
                    if labels.get("thread name") != "jitter":
                        continue
                    v = vals[-1]
                    total += v
                    at = [i for i, f in enumerate(frames) if f.startswith(self.LABEL)]
                    if not at:
                        if "[native libclrjit.so]" in frames:
                            bare += v
                            key = " < ".join(frames[:6])
                            unlabelled[key] = unlabelled.get(key, 0) + v
                        continue
                    label = frames[at[0]]
                    # one label, the compiled method's, right above the JIT's frames and under
                    # the method that asked for the code
                    if (len(at) != 1 or not label.startswith(self.LABEL + work + "<System.ValueTuple<")
                            or frames[at[0] - 1] != "[native libclrjit.so]"
                            or compile_ not in frames[at[0]:]):
                        misplaced.append(frames)
                        continue
                    labelled += v
                self.assertGreater(total, 0, "no sample of the jitter thread")
                self.assertFalse(misplaced, misplaced[:3])
                share = truth["compile_cpu_ms"] / truth["thread_cpu_ms"]
                self.assertGreater(truth["compiled"], 100, truth)
                self.assertGreater(share, 0.8, truth)  # the thread compiles, nearly all of it
                # the label covers the JIT, not the runtime's type loading before it starts
                self.assertGreaterEqual(labelled / total, 0.75 * share, (labelled / total, truth))
                self.assertLessEqual(labelled / total, share + 0.03, (labelled / total, truth))
                worst = sorted(unlabelled.items(), key=lambda kv: -kv[1])[:3]
                self.assertLessEqual(bare / total, 0.02, worst)
                self.assertGreater(walks["jit"], 0, walks)
                # native=fold: the JIT's frames fold into the labels, which then hold that time
                # as their own; no native frame is left under a managed one
                self.assertEqual((folded["native"], top["native"]), ("fold", "fold"))
                self.assertIn("native", bad["error"])
                stack = [(folded["root"], False)]
                while stack:
                    node, anchored = stack.pop()
                    native = node["name"].startswith("[native ")
                    self.assertFalse(native and anchored, node["name"])
                    for c in node["children"]:
                        stack.append((c, anchored or (not native and node is not folded["root"])))
                jit_self = sum(f["self"] for f in top["functions"]
                               if f["name"].startswith(self.LABEL + work))
                self.assertGreaterEqual(jit_self / top["total"], 0.6 * share,
                                        (jit_self / top["total"], top["functions"][:5]))
                # native=group: the runtime's, the JIT's, the stubs' and the system libraries'
                # frames under their groups' names, none twice in a row; the JIT's time there
                self.assertEqual((grouped["native"], gtop["native"]), ("group", "group"))
                stack = [(grouped["root"], "")]
                while stack:
                    node, above = stack.pop()
                    name = node["name"]
                    self.assertFalse(name.startswith(("[native libcoreclr.so", "[native code]",
                                                      "[native libclrjit.so", "[native libc.so")),
                                     name)
                    self.assertFalse(name.startswith("[native ") and name == above, name)
                    for c in node["children"]:
                        stack.append((c, name))
                jit = sum(f["self"] for f in gtop["functions"] if f["name"] == "[native JIT]")
                if not os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"):
                    # (under the sanitizers the JIT's mallocs run in the preloaded libasan's
                    # allocator, a library of its own that takes a tenth of the CPU here)
                    self.assertGreaterEqual(jit / gtop["total"], 0.4 * share,
                                            (jit / gtop["total"], gtop["functions"][:5]))
                self.assertGreater(jit, 0, gtop["functions"][:5])


class NativeSymbols(unittest.TestCase):
    """A thread that spends its CPU in a native library it calls (native-burn: libcsburn.so's
    csburn_run, half in an exported function, half in a static one). Its frames are named
    "[native libcsburn.so!function]" from the library's symbol table, or from its debug file
    (CLRSCOPE_SYMBOL_PATH) when the library was stripped, matched by build id; a debug file of
    another build is refused, and then only the exported function is named (.dynsym): the static
    one keeps the library's name, never the nearest export's."""

    def run_burn(self, lib_dir, symbol_path=None, **extra):
        env = {"CLRSCOPE_PROFILES": "cpu", "LD_LIBRARY_PATH": os.path.join(BUILD, "natsym", lib_dir)}
        env.update(extra)
        if symbol_path:
            env["CLRSCOPE_SYMBOL_PATH"] = os.path.join(BUILD, "natsym", symbol_path)
        app = ProfiledApp("native-burn", ["--seconds", "6"], env=env)
        app.start()
        try:
            app.wait_ready()
            time.sleep(1)
            prof = read_pprof(app.pprof("/debug/pprof/profile?seconds=3"))
            sig = app.json("/api/v1/status")["self"]["signal_sampler"]
            natsym = sig["native_symbols"]
            truth = app.wait_truth(timeout=60)
        finally:
            app.stop()
        f = truth["frames"]
        leaf, total, in_lib, cut = {}, 0, 0, []
        for frames, vals, labels in prof.samples:
            if labels.get("thread name") != "native-burner":
                continue
            total += vals[-1]
            if frames and frames[0].startswith(f["module"][:-1]):
                in_lib += vals[-1]
                if f["caller"] not in frames:  # the app's frames above the library's
                    cut.append((frames, vals[-1]))
                leaf[frames[0]] = leaf.get(frames[0], 0) + vals[-1]
        self.assertGreater(total, 0, "no sample of the burner thread")
        # a walk stops at a return address into code newer than its memory map snapshot (the
        # burner's method at tier-up) until the snapshot is taken again, within 0.1 s
        # (docs/profiles/cpu-wall.md, "Frames that are not on the chain yet"): at most that much
        # of the thread's CPU (2 % of the window's ~1.2 s was exceeded under ASan: 28 ms)
        self.assertLessEqual(sum(v for _, v in cut), 0.1e9,
                             (cut[:3], in_lib, sig.get("new_code"), sig.get("maps_refreshes")))
        self.assertGreater(truth["calls"], 0, truth)
        return {k: v / total for k, v in leaf.items()}, natsym, f

    @unittest.skipIf(os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"),
                     "the same ELF reading as the debug file's case, which runs under the sanitizers")
    def test_named_from_the_library_symbol_table(self):
        share, natsym, f = self.run_burn("full")
        # the same work in each: half of the thread's CPU each (the calls' own cost aside)
        self.assertTrue(0.3 <= share.get(f["exported"], 0) <= 0.7, share)
        self.assertTrue(0.3 <= share.get(f["local"], 0) <= 0.7, share)
        self.assertGreaterEqual(natsym["with_symtab"], 1, natsym)

    def test_named_from_a_debug_file_with_the_same_build_id(self):
        share, natsym, f = self.run_burn("stripped", symbol_path="debug")
        self.assertTrue(0.3 <= share.get(f["exported"], 0) <= 0.7, share)
        self.assertTrue(0.3 <= share.get(f["local"], 0) <= 0.7, share)
        # (the system's libraries may have theirs too: glibc's from libc6-dbg, by build id)
        self.assertGreaterEqual(natsym["debug_files"], 1, natsym)
        self.assertEqual(natsym["refused"], 0, natsym)

    @unittest.skipIf(os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"),
                     "the same ELF reading as the debug file's case, which runs under the sanitizers")
    def test_a_debug_file_of_another_build_is_refused(self):
        share, natsym, f = self.run_burn("stripped", symbol_path="other")
        self.assertEqual(natsym["refused"], 1, natsym)
        self.assertNotIn(f["local"], share, share)  # the static function: no symbol, no guess
        self.assertTrue(0.3 <= share.get(f["exported"], 0) <= 0.7, share)
        self.assertTrue(0.3 <= share.get(f["module"], 0) <= 0.7, share)

    @unittest.skipIf(os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"),
                     "the same ELF reading as the debug file's case, which runs under the sanitizers")
    def test_functions_by_their_start_without_symbols(self):
        """CLRSCOPE_NATIVE_FRAMES=function: a function no symbol names is told apart by its start
        (from .eh_frame_hdr), the address its debug file gives it, for offline tools."""
        share, natsym, f = self.run_burn("stripped", CLRSCOPE_NATIVE_FRAMES="function")
        nm = subprocess.run(["nm", os.path.join(BUILD, "natsym", "debug", "libcsburn.so.dbg")],
                            capture_output=True, text=True, check=True).stdout
        local = [int(line.split()[0], 16) for line in nm.splitlines()
                 if line.endswith(" csburn_local")]
        self.assertEqual(len(local), 1, nm)
        by_start = "[native libcsburn.so+0x%x]" % local[0]
        self.assertTrue(0.3 <= share.get(by_start, 0) <= 0.7, (by_start, share))
        self.assertTrue(0.3 <= share.get(f["exported"], 0) <= 0.7, share)


if __name__ == "__main__":
    unittest.main()


class InlinedCode(unittest.TestCase):
    """Code the JIT inlined has no frame of its own (`inlined`): the CPU of Step, called from
    Heavy and Light (3:1 by construction), which the JIT inlines into DriveHeavy and DriveLight;
    the CPU of Mix, a loop inlined into DriveMix; and the wait for a lock taken in a Parallel.For
    lambda, which guarded devirtualization inlines into the runtime's worker loop. clrscope names
    them from the runtime's JITInlining notes, the JIT's IL-to-native map and the caller's IL."""

    @classmethod
    def setUpClass(cls):
        app = ProfiledApp("inlined", ["--seconds", "16"],
                          env={"CLRSCOPE_PROFILES": "cpu,lock", "CLRSCOPE_SAMPLING_HZ": "200",
                               "CLRSCOPE_OVERHEAD_BUDGET": "0"})
        app.start()
        try:
            app.wait_ready()
            time.sleep(6)  # the Drive methods and the worker loop reach their optimized code
            t0 = time.time()
            time.sleep(8)
            seconds = int(time.time() - t0)
            cls.cpu = app.json(f"/api/v1/flamegraph?type=cpu&seconds={seconds}")
            cls.lock = app.json(f"/api/v1/flamegraph?type=lock-time&seconds={seconds}")
            cls.locks = app.json(f"/api/v1/locks?seconds={seconds}")
            cls.inl = app.json("/api/v1/status")["self"]["signal_sampler"]["inlining"]
            cls.final = app.wait_truth(timeout=60)
        finally:
            app.stop()
        cls.frames = cls.final["frames"]

    def test_calls_out_of_inlined_code_under_the_inlinee(self):
        f = self.frames
        heavy_all = sum(cpu_ms_below(self.cpu, f["drive_heavy"]).values())
        light_all = sum(cpu_ms_below(self.cpu, f["drive_light"]).values())
        heavy = cpu_ms_below(self.cpu, f["heavy"]).get(f["step"], 0)
        light = cpu_ms_below(self.cpu, f["light"]).get(f["step"], 0)
        self.assertGreater(light_all, 200, (light_all, self.inl))  # ms in the window
        self.assertGreaterEqual(heavy, 0.9 * heavy_all, (heavy, heavy_all, self.inl))
        self.assertGreaterEqual(light, 0.9 * light_all, (light, light_all, self.inl))
        self.assertAlmostEqual(heavy / light, self.final["ratio"], delta=0.75)
        self.assertGreater(self.inl["pairs"], 0, self.inl)
        self.assertGreater(self.inl["frames"], 0, self.inl)

    def test_cpu_of_an_inlined_loop_under_the_inlinee(self):
        f = self.frames
        nodes = find_nodes(self.cpu["root"], f["drive_mix"])
        total = sum(v for _, v, _ in nodes)
        mix = sum(c["value"] for _, _, n in nodes for c in n.get("children", [])
                  if c["name"] == f["mix"])
        self.assertGreater(total, 200e6, self.inl)  # ns in the window
        self.assertGreaterEqual(mix, 0.9 * total, (mix, total))

    def test_lock_wait_under_the_lambda_the_worker_inlined(self):
        wait = self.lock["root"]["value"]
        self.assertGreater(wait, 0, self.lock)
        lam = sum(v for p, v in find_paths(self.lock["root"], self.frames["lambda"]))
        self.assertGreaterEqual(lam, 0.9 * wait, sorted(tree_totals_by_name(
            self.lock["root"]).items(), key=lambda kv: -kv[1])[:12])
        # the lambda sits right under the runtime's worker loop, as the frames it ran in
        paths = [p for p, _ in find_paths(self.lock["root"], self.frames["lambda"])]
        self.assertTrue(any("Parallel.ForWorker" in p[-2] for p in paths), paths[:3])
        # the owner is the runtime's (ContentionStart's LockOwnerThreadID): 0 when the lock was
        # released just as the wait began, which a loaded machine makes more frequent (89 % of
        # the wait had an owner in one CI run, 98.7-99.7 % on a quiet machine); every owner it gave
        # is named
        known = unknown = 0
        for lk in self.locks.get("locks", []):
            for o in lk.get("owners", []):
                if o.get("tid"):
                    known += o.get("wait_ns", 0)
                    self.assertNotEqual(o.get("thread"), "[unknown]", lk)
                else:
                    unknown += o.get("wait_ns", 0)
        self.assertGreaterEqual(known, 0.8 * (known + unknown), self.locks)


class StubFrames(unittest.TestCase):
    """The runtime's generated stubs, named by kind (`stubs`): an interface call at a site that
    sees one type goes through the runtime's dispatch stub, at one that sees four through its
    resolve stub (with DOTNET_TieredPGO=0 the JIT does not guess the type). Unnamed, they would
    read `[native code]`, and beside the loop, under its caller: a stub makes no frame. They read
    `[native stub VSD_DispatchStub]` and `[native stub VSD_ResolveStub]`, under the loops that call
    them (the caller's return address from the top of the stack)."""

    @classmethod
    def setUpClass(cls):
        with ProfiledApp("stubs", ["--seconds", "9"],
                         env={"CLRSCOPE_PROFILES": "cpu", "DOTNET_TieredPGO": "0"}) as app:
            app.wait_ready()
            time.sleep(7)
            cls.cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=5")
            cls.grouped = app.json("/api/v1/flamegraph?type=cpu&seconds=5&native=group")
            cls.stubs = app.json("/api/v1/status")["self"]["signal_sampler"]["stubs"]
            cls.truth = app.wait_truth()
        cls.frames = cls.truth["frames"]

    def test_stubs_named_under_their_callers(self):
        f = self.frames
        for caller, stub in (("mono", "dispatch"), ("mega", "resolve")):
            below = cpu_ms_below(self.cpu, f[caller])
            total = sum(below.values())
            self.assertGreater(total, 500, (caller, below))  # ms of the 5 s window
            # the loop does nothing but the call: most of its time is in the stub
            self.assertGreater(below.get(f[stub], 0), 0.3 * total, (caller, below, self.stubs))
            self.assertLess(below.get("[native code]", 0), 0.05 * total, (caller, below))
        totals = tree_totals_by_name(self.cpu["root"])
        for stub in ("dispatch", "resolve"):  # not beside the caller
            self.assertLess(totals.get(f[stub], 0) - sum(
                cpu_ms_below(self.cpu, f[c]).get(f[stub], 0) * 1e6 for c in ("mono", "mega")),
                0.05 * totals[f[stub]], (stub, totals))
        self.assertGreaterEqual(self.stubs["named"], 2, self.stubs)

    def test_grouped_with_the_runtimes_generated_code(self):
        f = self.frames
        for caller in ("mono", "mega"):
            below = cpu_ms_below(self.grouped, f[caller])
            self.assertGreater(below.get("[native stubs]", 0), 0.3 * sum(below.values()),
                               (caller, below))
            self.assertFalse([n for n in below if n.startswith("[native stub ")], below)
