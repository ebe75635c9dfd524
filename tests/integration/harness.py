"""
harness.py - runs the real test app (tests/apps/TestApp) under libclrscope.so and talks to it.

    with ProfiledApp("cpu-split", ["--seconds", "8"]) as app:
        app.wait_ready()
        status = app.json("/api/v1/status")
        ...
        truth = app.wait_truth()      # the app's own ground truth (JSON it writes at the end)

Environment: CLRSCOPE_BUILD (default <repo>/build) holds libclrscope.so, the launcher `clrscope`
and apps/<net10|net9|net8>/ (tests/apps/build.sh); CLRSCOPE_TEST_RUNTIME picks the app runtime
(net10 by default). For a sanitizer build (tools/test.sh), CLRSCOPE_TEST_APP_PRELOAD is put in
front of LD_PRELOAD and CLRSCOPE_TEST_APP_ASAN_OPTIONS replaces ASAN_OPTIONS, in app processes
only: the uninstrumented `dotnet` must load libasan.so first and needs options that let CoreCLR
keep its signal handlers.
"""
import glob
import gzip
import importlib
import json
import os
import re
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import threading
import time
import unittest
import urllib.error
import urllib.request

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
BUILD = os.path.abspath(os.environ.get("CLRSCOPE_BUILD", os.path.join(REPO, "build")))
LAUNCHER = os.path.join(BUILD, "clrscope")
LIB = os.path.join(BUILD, "libclrscope.so")
CLSID = "{C1A5C09E-5C0E-4C1B-9A7E-0D5E7C1A5C0E}"
URL_RE = re.compile(r"clrscope: dashboard (http://[^ ]+/)(\?token=\S+)? \(pid (\d+)\)")


# UBSan's reports from libclrscope.so inside an app. GCC's UBSan runtime sits beside ASan's as a
# plugin with its own copy of the common flags, so UBSAN_OPTIONS' log_path is not honoured there
# and the reports go to the app's stderr: the harness copies them to CLRSCOPE_SANITIZER_LOGS,
# where tools/test.sh fails the run on any file.
UBSAN_RE = re.compile(r"runtime error: |UndefinedBehaviorSanitizer")
_report_lock = threading.Lock()


def sanitizer_report(cmd, line):
    logs = os.environ.get("CLRSCOPE_SANITIZER_LOGS")
    sys.stderr.write(f"sanitizer report from {cmd[-1] if cmd else '?'}: {line}")
    if not logs:
        return
    with _report_lock:
        with open(os.path.join(logs, f"ubsan-app.{os.getpid()}"), "a") as f:
            f.write(f"{' '.join(cmd or [])}: {line}")


def app_env(extra=None):
    """The environment for an app process: ours, plus the sanitizer preload if any, plus extra."""
    env = dict(os.environ)
    pre = os.environ.get("CLRSCOPE_TEST_APP_PRELOAD")
    if pre:
        env["LD_PRELOAD"] = pre + (" " + env["LD_PRELOAD"] if env.get("LD_PRELOAD") else "")
    if os.environ.get("CLRSCOPE_TEST_APP_ASAN_OPTIONS"):
        env["ASAN_OPTIONS"] = os.environ["CLRSCOPE_TEST_APP_ASAN_OPTIONS"]
    env.update(extra or {})
    return env


def app_command(runtime=None):
    """The command line that starts TestApp on the chosen runtime."""
    runtime = runtime or os.environ.get("CLRSCOPE_TEST_RUNTIME", "net10")
    base = os.path.join(BUILD, "apps", runtime)
    exe = os.path.join(base, "TestApp")
    dll = os.path.join(base, "TestApp.dll")
    if runtime != "net10" and os.path.exists(exe):
        return [exe]  # self-contained publish: the runtime travels with the app
    if os.path.exists(dll):
        return ["dotnet", dll]
    raise FileNotFoundError(f"test app for {runtime} not built: run tests/apps/build.sh {BUILD}/apps")


def runtimeconfig(version, roll=""):
    """An app's runtimeconfig.json asking for Microsoft.NETCore.App `version` (`roll`: more
    runtimeOptions, e.g. ' "rollForward": "Major",')."""
    return ('{"runtimeOptions": {"tfm": "net%s",%s "framework": {"name": '
            '"Microsoft.NETCore.App", "version": "%s"}}}' % (version[:3], roll, version))


def run_launcher_on(test, launcher, config, timeout=30):
    """`clrscope run` (`launcher`: its command, e.g. with qemu in front) on an "app" that is `env`
    under an apphost's name beside a runtimeconfig.json holding `config`, without the runtime's
    profiling variables: (the app's output, which lists the variables it was given, the
    launcher's stderr). Fails `test` unless it exits 0."""
    tmp = tempfile.mkdtemp(prefix="clrscope-rtcfg-")
    test.addCleanup(shutil.rmtree, tmp, True)
    app = os.path.join(tmp, "app")
    shutil.copy(shutil.which("env"), app)
    os.chmod(app, stat.S_IRWXU)
    with open(app + ".runtimeconfig.json", "w") as f:
        f.write(config)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CORECLR_", "DOTNET_ROLL"))}
    r = subprocess.run(list(launcher) + ["run", "--", app], capture_output=True, text=True,
                       timeout=timeout, env=env)
    test.assertEqual(r.returncode, 0, r.stderr)
    return r.stdout, r.stderr


def available_runtimes():
    out = []
    for rt in ("net8", "net9", "net10"):
        try:
            app_command(rt)
            out.append(rt)
        except FileNotFoundError:
            pass
    return out


def discovery_dir(env=None):
    """The directory a profiled process of this user writes its discovery file to
    (docs/running.md): $XDG_RUNTIME_DIR/clrscope when XDG_RUNTIME_DIR is the user's own 0700
    directory, else /tmp/clrscope-EUID."""
    rt = (env if env is not None else os.environ).get("XDG_RUNTIME_DIR") or ""
    try:
        st = os.stat(rt) if rt.startswith("/") and len(rt.encode()) <= 300 else None
    except OSError:
        st = None
    if st and os.path.isdir(rt) and st.st_uid == os.geteuid() and not st.st_mode & 0o077:
        return os.path.join(rt, "clrscope")
    return f"/tmp/clrscope-{os.geteuid()}"


class ProfiledApp:
    """A TestApp process under the profiler; stdout/stderr captured line by line."""

    def __init__(self, mode, args=(), env=None, use_launcher=True, runtime=None, profile=True,
                 port="0", wrap=(), command=None):
        self.mode = mode
        self.args = list(args)
        self.extra_env = dict(env or {})
        self.use_launcher = use_launcher
        self.runtime = runtime
        self.profile = profile
        self.port = port
        self.wrap = list(wrap)  # a command that execs the rest (e.g. to mount something first)
        self.command = command  # instead of app_command(runtime), e.g. `dotnet exec` with options
        self.tmp = tempfile.mkdtemp(prefix="clrscope-test-")
        self.truth_path = os.path.join(self.tmp, "truth.json")
        self.stdout_lines, self.stderr_lines = [], []
        self.url = None
        self.token = None
        self.pid = None
        self.proc = None
        self._url_event = threading.Event()
        self._ready_event = threading.Event()

    # ---- process ----
    def start(self):
        env = app_env()
        env.update({"CLRSCOPE_TRUTH": self.truth_path, "DOTNET_CLI_TELEMETRY_OPTOUT": "1",
                    "DOTNET_NOLOGO": "1"})
        if self.port is not None:
            env["CLRSCOPE_PORT"] = str(self.port)
        env.update(self.extra_env)
        cmd = (self.command or app_command(self.runtime)) + [self.mode] + self.args
        if self.profile and self.use_launcher:
            cmd = [LAUNCHER, "run", "--"] + cmd
        elif self.profile:
            env.update({"CORECLR_ENABLE_PROFILING": "1", "CORECLR_PROFILER": CLSID,
                        "CORECLR_PROFILER_PATH": LIB})
        self.cmd = cmd = self.wrap + cmd
        self.proc = subprocess.Popen(cmd, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True, bufsize=1)
        threading.Thread(target=self._pump, args=(self.proc.stdout, self.stdout_lines, False),
                         daemon=True).start()
        threading.Thread(target=self._pump, args=(self.proc.stderr, self.stderr_lines, True),
                         daemon=True).start()
        return self

    def _pump(self, stream, sink, is_err):
        for line in stream:
            sink.append(line.rstrip("\n"))
            if is_err:
                if UBSAN_RE.search(line):
                    sanitizer_report(self.cmd, line)
                m = URL_RE.search(line)
                if m:
                    self.url = m.group(1).rstrip("/")
                    self.token = m.group(2)[len("?token="):] if m.group(2) else None
                    self.pid = int(m.group(3))
                    self._url_event.set()
            elif line.startswith("ready"):
                self._ready_event.set()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    def stop(self, sig=signal.SIGTERM, timeout=30):
        if self.proc and self.proc.poll() is None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode if self.proc else None

    def wait_exit(self, timeout=120):
        self.proc.wait(timeout=timeout)
        time.sleep(0.2)  # let the pumps drain
        return self.proc.returncode

    def threads_state(self):
        """Each thread of the app as the kernel sees it (name, state, where it waits, its system
        call): for a test that gives up on an app, what the app was doing."""
        out = []
        for task in sorted(glob.glob(f"/proc/{self.pid}/task/*")):
            try:
                with open(task + "/comm") as f:
                    comm = f.read().strip()
                with open(task + "/stat") as f:
                    state = f.read().rsplit(")", 1)[1].split()[0]
                with open(task + "/wchan") as f:
                    wchan = f.read().strip()
                with open(task + "/syscall") as f:
                    call = f.read().split()
            except OSError:
                continue
            out.append(f"  {os.path.basename(task)} {comm} {state} {wchan} "
                       f"syscall {' '.join(call[:3])}")
        if self.url:  # the managed stacks, when the dashboard still answers
            try:
                st, _, body = self.request("/debug/pprof/goroutine?debug=2", timeout=10)
                out.append(f"thread dump (HTTP {st}):\n" + body.decode("utf-8", "replace")[:6000])
            except OSError as e:
                out.append(f"no thread dump: {e}")
        return "\n".join(out)

    def wait_ready(self, timeout=60, need_url=True):
        if not self._ready_event.wait(timeout):
            raise AssertionError(f"app did not print 'ready' in {timeout}s; stderr: "
                                 + "\n".join(self.stderr_lines[-20:])
                                 + "\nits threads:\n" + self.threads_state())
        if need_url and not self._url_event.wait(timeout):
            raise AssertionError("no dashboard line on stderr; stderr: "
                                 + "\n".join(self.stderr_lines[-20:]))
        return self

    def wait_url(self, timeout=60):
        """The dashboard's line on stderr, for a process that prints no 'ready' (clrscope serve)."""
        if not self._url_event.wait(timeout):
            raise AssertionError("no dashboard line on stderr; stderr: "
                                 + "\n".join(self.stderr_lines[-20:]))
        return self

    def wait_stdout(self, prefix, timeout=60):
        """The first line of the app's stdout that starts with `prefix`, waiting up to `timeout`."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for line in list(self.stdout_lines):
                if line.startswith(prefix):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no '{prefix}' line from the app in {timeout}s: "
                             f"{self.stdout_lines[-5:]}")

    def wait_truth(self, timeout=120):
        """Waits for the app to exit on its own and returns its ground-truth JSON."""
        self.wait_exit(timeout)
        with open(self.truth_path) as f:
            return json.load(f)

    def truth_lines(self):
        """Every 'truth: {...}' line printed so far (apps with --truth-every-second)."""
        out = []
        for line in list(self.stdout_lines):
            if line.startswith("truth: "):
                out.append(json.loads(line[len("truth: "):]))
        return out

    def next_truth(self, timeout=5):
        """The first truth line printed after this call (or the last one, after `timeout`):
        with the one before a query, it brackets what the query saw."""
        seen = len(self.truth_lines())
        deadline = time.time() + timeout
        while len(self.truth_lines()) <= seen and time.time() < deadline:
            time.sleep(0.05)
        return self.truth_lines()[-1]

    # ---- HTTP ----
    def request(self, path, method="GET", data=None, headers=None, timeout=60):
        req = urllib.request.Request(self.url + path, method=method, data=data,
                                     headers=dict(headers or {}))
        if self.token and "Authorization" not in req.headers:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, dict(r.headers), r.read()
        except urllib.error.HTTPError as e:
            return e.code, dict(e.headers), e.read()

    def json(self, path, expect=200, **kw):
        status, headers, body = self.request(path, **kw)
        if status != expect:
            raise AssertionError(f"{path}: HTTP {status}, want {expect}: {body[:300]!r}")
        return json.loads(body)

    def wait_json(self, path, pred, timeout=60):
        """The reply to GET `path` once pred(reply) holds, asking every 0.2 s up to `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            got = self.json(path)
            if pred(got):
                return got
            if time.monotonic() > deadline:
                shown = got.get("profiler", got) if isinstance(got, dict) else got
                raise AssertionError(f"{path}: not there in {timeout}s: {str(shown)[:400]}")
            time.sleep(0.2)

    def pprof(self, path, out_path=None):
        status, headers, body = self.request(path, timeout=300)
        if status != 200:
            raise AssertionError(f"{path}: HTTP {status}: {body[:300]!r}")
        out_path = out_path or os.path.join(self.tmp, "profile.pb.gz")
        with open(out_path, "wb") as f:
            f.write(body)
        gzip.decompress(body)  # must be gzip
        return out_path


def go_pprof(args, profile_path):
    """Runs `go tool pprof ARGS PROFILE` and returns stdout (HOME/GOCACHE made writable)."""
    env = dict(os.environ)
    cache = os.path.join(tempfile.gettempdir(), "clrscope-gocache")
    env.setdefault("GOCACHE", cache)
    env.setdefault("HOME", tempfile.gettempdir())
    env["PPROF_TMPDIR"] = tempfile.gettempdir()
    r = subprocess.run(["go", "tool", "pprof"] + list(args) + [profile_path], env=env,
                       capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        raise AssertionError(f"go tool pprof {args} failed: {r.stderr}")
    return r.stdout


def tree_totals_by_name(root):
    """Inclusive value of every frame name in a flame tree, counting recursion once per path."""
    totals = {}
    stack = [(root, frozenset())]
    while stack:
        node, seen = stack.pop()
        name = node["name"]
        if name not in seen:
            totals[name] = totals.get(name, 0) + node["value"]
        child_seen = seen | {name}
        for c in node.get("children", []):
            stack.append((c, child_seen))
    return totals


def find_nodes(root, name):
    """(path, value, node) for every node called `name`, path its root-to-node names."""
    out = []
    stack = [(root, [])]
    while stack:
        node, path = stack.pop()
        p = path + [node["name"]]
        if node["name"] == name:
            out.append((p, node["value"], node))
        for c in node.get("children", []):
            stack.append((c, p))
    return out


def find_paths(root, name):
    """Every root-to-node path (list of names) that ends at a frame called `name`."""
    return [(p, v) for p, v, _ in find_nodes(root, name)]


CPU_SPLIT_CALLERS = ("TestApp.CpuWork.HeavyCaller", "TestApp.CpuWork.LightCaller")


def wait_split_samples(app, min_ns, within_s):
    """cpu-split's CPU flame graph of the last 60 s once its two callers hold min_ns of CPU
    between them (polled every 2 s), or the last one read when within_s has passed: on a busy
    machine the app gets less of a core, and the split is judged on as many samples as on a
    quiet one."""
    deadline = time.monotonic() + within_s
    while True:
        cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=60")
        totals = tree_totals_by_name(cpu["root"])
        if sum(totals.get(c, 0) for c in CPU_SPLIT_CALLERS) >= min_ns or \
                time.monotonic() > deadline:
            return cpu
        time.sleep(2)


def cpu_split(cpu, final):
    """cpu-split's heavy share of the two callers in a CPU flame graph, and the app's own
    (from its threads' CPU clocks); fails the test's assertion first when neither was seen."""
    totals = tree_totals_by_name(cpu["root"])
    heavy, light = (totals.get(c, 0) for c in CPU_SPLIT_CALLERS)
    assert heavy + light > 0, sorted(totals)[:20]
    truth = final["heavy_cpu_ms"] / (final["heavy_cpu_ms"] + final["light_cpu_ms"])
    return heavy / (heavy + light), truth


class _TimedResult(unittest.TextTestResult):
    """unittest's verbose result that keeps each test class's wall time, its setUpClass (the app
    run most classes share) included: CI's time budget is kept by these figures."""

    def stopTest(self, test):
        now = time.monotonic()
        cls = type(test).__module__ + "." + type(test).__qualname__
        self.timings[cls] = self.timings.get(cls, 0.0) + now - self.last
        self.last = now
        super().stopTest(test)


def run_modules(names):
    """Runs the named test modules; prints each test class's time, the slowest first, and
    'N passed, N failed, N skipped'; returns the exit status (1 when any failed)."""
    suite = unittest.TestSuite()
    for n in names:
        suite.addTests(unittest.defaultTestLoader.loadTestsFromModule(importlib.import_module(n)))
    timings = {}

    class Result(_TimedResult):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.timings = timings
            self.last = time.monotonic()

    res = unittest.TextTestRunner(verbosity=2, resultclass=Result).run(suite)
    for cls, secs in sorted(timings.items(), key=lambda kv: -kv[1]):
        print(f"{secs:7.1f} s  {cls}")
    failed = len(res.failures) + len(res.errors)
    skipped = len(res.skipped)
    print(f"{res.testsRun - failed - skipped} passed, {failed} failed, {skipped} skipped")
    return 1 if failed else 0
