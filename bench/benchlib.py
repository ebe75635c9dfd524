"""Shared helpers of the Python benchmarks in bench/: start a .NET app with or without
clrscope (through the launcher), find its dashboard, read /proc, summarise rounds, and emit
each figure in machine-readable form for bench/render.py."""
import json
import os
import re
import signal
import statistics
import subprocess
import tempfile
import time
import urllib.request


def emit(section, name, value, unit="", **extra):
    """Appends one figure to the file $BENCH_FIGURES names, as one JSON line: {"section",
    "name", "value", "unit"} plus extra fields (lo/hi for an interquartile range, n for the
    rounds behind it, ...). bench/run.sh collects the lines and bench/render.py turns them into
    results.md. Without the variable (a script run by hand) nothing is written."""
    path = os.environ.get("BENCH_FIGURES")
    if not path or value is None:
        return
    rec = {"section": section, "name": name, "value": value, "unit": unit}
    rec.update({k: v for k, v in extra.items() if v is not None})
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def get(url, timeout=10):
    with urllib.request.urlopen(url, timeout=timeout) as r:
        return r.read()


def get_json(url, timeout=10):
    return json.loads(get(url, timeout))


def wait_http(url, tries=300):
    """Waits until url answers (a server starting: up to tries x 0.2 s); True when it did."""
    for _ in range(tries):
        try:
            get(url, timeout=2)
            return True
        except OSError:
            time.sleep(0.2)
    return False


def status_field(pid, key):
    """The first number of /proc/PID/status's `key:` line, or None."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return None


def rss_bytes(pid):
    kb = status_field(pid, "VmRSS")
    return kb * 1024 if kb is not None else 0


def cpu_seconds(pid):
    """utime + stime of a live process, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class App:
    """A process started with (profile=True) or without clrscope; stdout lines are kept."""

    def __init__(self, build, cmd, profile=True, env=None):
        self.env = dict(os.environ, DOTNET_CLI_TELEMETRY_OPTOUT="1", DOTNET_NOLOGO="1")
        self.env.update(env or {})
        if profile:
            self.env.update(CLRSCOPE_PORT="0")
            self.env.setdefault("CLRSCOPE_LOG_LEVEL", "warn")
            cmd = [os.path.join(build, "clrscope"), "run", "--"] + list(cmd)
        self.cmd = cmd
        self.profile = profile
        self.err = tempfile.TemporaryFile()
        self.t0 = time.monotonic()
        self.proc = subprocess.Popen(cmd, env=self.env, stdout=subprocess.PIPE,
                                     stderr=self.err, text=True)
        self.url = None

    def wait_line(self, prefix, timeout=60):
        deadline = time.monotonic() + timeout
        for line in self.proc.stdout:
            if line.startswith(prefix):
                return line
            if time.monotonic() > deadline:
                break
        raise RuntimeError(f"no '{prefix}' line from {self.cmd}")

    def dashboard(self, timeout=30):
        deadline = time.monotonic() + timeout
        while self.profile and not self.url and time.monotonic() < deadline:
            self.err.seek(0)
            m = re.search(rb"dashboard (http://[\d.:]+/)", self.err.read())
            if m:
                self.url = m.group(1).decode()
            else:
                time.sleep(0.05)
        return self.url

    def status(self):
        return get_json(self.dashboard() + "api/v1/status")

    def stop(self, timeout=30):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            out, _ = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            out, _ = self.proc.communicate()
        return out


def truth(stdout_text):
    lines = [line for line in (stdout_text or "").splitlines() if line.startswith("truth: ")]
    return json.loads(lines[-1][7:]) if lines else None


def median_iqr(xs):
    xs = sorted(xs)
    if len(xs) < 2:
        return xs[0], xs[0], xs[0]
    q = statistics.quantiles(xs, n=4, method="inclusive")
    return q[1], q[0], q[2]


def testapp(build, runtime="net10"):
    if runtime == "net10":
        return ["dotnet", os.path.join(build, "apps", "net10", "TestApp.dll")]
    return [os.path.join(build, "apps", runtime, "TestApp")]
