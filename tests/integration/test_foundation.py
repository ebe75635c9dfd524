"""
Foundation: the profiler loads into a real .NET app, leaves its behaviour alone, and serves the
dashboard and /api/v1/status as docs/api.md says.
"""
import glob
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import unittest
import urllib.request

from harness import (BUILD, CLSID, LAUNCHER, LIB, URL_RE, ProfiledApp, app_command, app_env,
                     available_runtimes, cpu_split, discovery_dir)


def run_plain(args, env=None, profile=False, launcher=True, timeout=120):
    """Runs TestApp to completion; returns (exit code, stdout, stderr)."""
    e = app_env(env)
    cmd = app_command() + list(args)
    if profile and launcher:
        cmd = [LAUNCHER, "run", "--"] + cmd
    elif profile:
        e.update({"CORECLR_ENABLE_PROFILING": "1", "CORECLR_PROFILER": CLSID,
                  "CORECLR_PROFILER_PATH": LIB})
    r = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=timeout)
    return r.returncode, r.stdout, r.stderr


def raw_head(url, path):
    """Sends HEAD over a plain socket and reads to the end: (head, whatever followed it)."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=15) as s:
        s.sendall(f"HEAD {path} HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n"
                  .encode())
        data = b""
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return head, body


class Behaviour(unittest.TestCase):
    def test_output_and_exit_status_unchanged(self):
        base = run_plain(["hello", "--exit", "7"], env={"CLRSCOPE_PORT": "0"})
        prof = run_plain(["hello", "--exit", "7"], env={"CLRSCOPE_PORT": "0"}, profile=True)
        self.assertEqual(base[0], 7)
        self.assertEqual(prof[0], 7, prof[2])
        self.assertEqual(prof[1], base[1])
        self.assertIn("clrscope: dashboard http://127.0.0.1:", prof[2])
        self.assertNotIn("Native AOT", prof[2])

    def test_native_aot_app_is_named(self):
        """A Native AOT executable has no CoreCLR: no profiler can load, and `clrscope run` must
        say so rather than start it unprofiled without a word. Such an executable exports
        DotNetRuntimeDebugHeader (an apphost or a single-file app does not: checked on .NET 10
        publishes); two stand-in ELF files, one exporting that name and one another name."""
        tmp = tempfile.mkdtemp(prefix="clrscope-aot-")
        self.addCleanup(shutil.rmtree, tmp, True)

        def elf(name, symbol):
            import struct
            strtab = b"\0" + symbol + b"\0"
            shoff = 64 + ((len(strtab) + 7) & ~7)
            head = struct.pack("<4sBBBB8xHHIQQQIHHHHHH", b"\x7fELF", 2, 1, 1, 0, 2, 62, 1, 0, 0,
                               shoff, 0, 64, 56, 0, 64, 3, 0)
            null = bytes(64)
            dynsym = struct.pack("<IIQQQQIIQQ", 0, 11, 0, 0, 0, 0, 2, 0, 8, 24)
            dynstr = struct.pack("<IIQQQQIIQQ", 0, 3, 0, 0, 64, len(strtab), 0, 0, 1, 0)
            path = os.path.join(tmp, name)
            with open(path, "wb") as f:
                f.write(head + strtab.ljust(shoff - 64, b"\0") + null + dynsym + dynstr)
            os.chmod(path, 0o755)
            return path

        for name, symbol, aot in (("aotapp", b"DotNetRuntimeDebugHeader", True),
                                  ("singlefile", b"DotNetRuntimeInfo", False)):
            # in tmp: execvp hands a file the kernel refuses to /bin/sh, which reads these
            # stand-ins' bytes as a script with a '>' redirection and creates a file in the cwd
            r = subprocess.run([LAUNCHER, "run", "--", elf(name, symbol)], capture_output=True,
                               text=True, timeout=30, cwd=tmp)
            if aot:
                self.assertIn(f"{name} is a Native AOT app", r.stderr)
                self.assertIn("runs unprofiled", r.stderr)
            else:
                self.assertNotIn("Native AOT", r.stderr)

    def test_without_launcher(self):
        code, out, err = run_plain(["version"], env={"CLRSCOPE_PORT": "0"}, profile=True,
                                   launcher=False)
        self.assertEqual(code, 0, err)
        self.assertRegex(err, r"clrscope: dashboard http://127\.0\.0\.1:\d+/ \(pid \d+\)")

    def test_launcher_errors(self):
        r = subprocess.run([LAUNCHER, "run"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 2)
        self.assertIn("needs a command", r.stderr)
        r = subprocess.run([LAUNCHER, "run", "--port", "99999", "--", "true"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 2)
        r = subprocess.run([LAUNCHER, "run", "--", "/nonexistent/cmd"], capture_output=True,
                           text=True)
        self.assertEqual(r.returncode, 127)
        r = subprocess.run([LAUNCHER, "--help"], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0)
        self.assertIn("clrscope run", r.stdout)
        # a 64-bit runtime reads CORECLR_PROFILER_PATH_64 before CORECLR_PROFILER_PATH, an arm64
        # one CORECLR_PROFILER_PATH_ARM64 first: one left over must not keep clrscope out
        r = subprocess.run([LAUNCHER, "run", "--", "env"], capture_output=True, text=True,
                           env=dict(os.environ, CORECLR_PROFILER_PATH_64="/opt/other/profiler.so",
                                    CORECLR_PROFILER_PATH_ARM64="/opt/other/arm64/profiler.so"))
        env = dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
        self.assertEqual(env.get("CORECLR_PROFILER_PATH_64"), env.get("CORECLR_PROFILER_PATH"))
        self.assertEqual(env.get("CORECLR_PROFILER_PATH_ARM64"), env.get("CORECLR_PROFILER_PATH"))
        self.assertTrue(env["CORECLR_PROFILER_PATH"].endswith("libclrscope.so"), env)

    def test_bad_environment_is_logged_not_fatal(self):
        code, out, err = run_plain(["hello"], profile=True, env={
            "CLRSCOPE_PORT": "not-a-port", "CLRSCOPE_SAMPLING_HZ": "-5",
            "CLRSCOPE_LOG_LEVEL": "loud", "CLRSCOPE_PROFILES": "cpu,bogus",
            "CLRSCOPE_HISTORY_S": "1e99"})
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "hello from TestApp\n")
        for var in ("CLRSCOPE_PORT", "CLRSCOPE_SAMPLING_HZ", "CLRSCOPE_LOG_LEVEL",
                    "CLRSCOPE_PROFILES", "CLRSCOPE_HISTORY_S"):
            self.assertIn(var, err)

    def test_unusable_token_keeps_dashboard_off(self):
        """A token that cannot be used must not leave the dashboard open (dropping it with a
        warning would let every request in)."""
        for bad in ("x" * 256, "two words", 'quo"te', "a+b"):
            code, out, err = run_plain(["hello"], profile=True,
                                       env={"CLRSCOPE_TOKEN": bad, "CLRSCOPE_PORT": "0"})
            self.assertEqual((code, out), (0, "hello from TestApp\n"), err)
            self.assertIn("CLRSCOPE_TOKEN must be", err)
            self.assertNotIn("clrscope: dashboard", err)
        token = "a" * 200  # long ones work, as the header and the query
        with ProfiledApp("wait", ["--seconds", "20"], env={"CLRSCOPE_TOKEN": token}) as app:
            app.wait_ready()
            app.token = None
            self.assertEqual(app.request("/api/v1/status")[0], 401)
            self.assertEqual(app.request(f"/api/v1/status?token={token}")[0], 200)
            self.assertEqual(app.request("/api/v1/status",
                                         headers={"Authorization": "Bearer " + token})[0], 200)
            st, headers, _ = app.request(f"/?token={token}")
            self.assertEqual(st, 200)
            self.assertNotIn("Set-Cookie", headers)  # cookies reach every port of the host

    def test_non_loopback_bind_needs_token(self):
        code, out, err = run_plain(["hello"], profile=True,
                                   env={"CLRSCOPE_BIND": "0.0.0.0", "CLRSCOPE_PORT": "0"})
        self.assertEqual(code, 0)
        self.assertEqual(out, "hello from TestApp\n")
        self.assertIn("CLRSCOPE_TOKEN is unset", err)
        self.assertNotIn("clrscope: dashboard", err)


class Dashboard(unittest.TestCase):
    def test_status_discovery_and_ls(self):
        with ProfiledApp("wait", ["--seconds", "60"]) as app:
            app.wait_ready()
            pid_line = [l for l in app.stdout_lines if l.startswith("ready")][0]
            app_pid = int(pid_line.split("pid=")[1])
            self.assertEqual(app.pid, app_pid)
            st = app.json("/api/v1/status")
            self.assertEqual(st["pid"], app_pid)
            code, version, _ = run_plain(["version"])
            self.assertEqual(st["runtime"]["version"], version.strip())
            self.assertGreater(st["uptime_s"], 0)
            self.assertIn("cpu", st["profiles"])
            self.assertEqual(st["process"]["name"], "TestApp")
            # discovery file
            path = os.path.join(discovery_dir(), f"{app_pid}.json")
            with open(path) as f:
                disc = json.load(f)
            self.assertEqual(disc["pid"], app_pid)
            self.assertEqual(disc["pid_ns"], os.readlink("/proc/self/ns/pid"))
            self.assertEqual(disc["url"].rstrip("/"), app.url)
            self.assertEqual(os.stat(path).st_mode & 0o777, 0o600)
            # ls
            r = subprocess.run([LAUNCHER, "ls"], capture_output=True, text=True)
            self.assertIn(str(app_pid), r.stdout)
            self.assertIn(app.url, r.stdout)
            # the page and its assets
            status, headers, body = app.request("/")
            self.assertEqual(status, 200)
            self.assertIn(b"<html", body.lower())
            self.assertIn("default-src 'self'", headers.get("Content-Security-Policy", ""))
            status, headers, body = app.request("/", headers={"Accept-Encoding": "gzip"})
            self.assertEqual(headers.get("Content-Encoding"), "gzip")
            etag = headers.get("ETag")
            # the browser keeps the page and revalidates it by ETag; API answers are never kept
            self.assertEqual(headers.get("Cache-Control"), "no-cache")
            status, headers, _ = app.request("/", headers={"If-None-Match": etag})
            self.assertEqual(status, 304)
            self.assertEqual(headers.get("Cache-Control"), "no-cache")
            status, headers, _ = app.request("/api/v1/status")
            self.assertEqual(headers.get("Cache-Control"), "no-store")
            status, headers, body = app.request("/app.js")
            self.assertEqual(status, 200)
            self.assertIn("javascript", headers["Content-Type"])
            # errors are JSON
            status, headers, body = app.request("/api/v1/nope")
            self.assertEqual(status, 404)
            self.assertIn("error", json.loads(body))
            status, _, body = app.request("/api/v1/status", method="POST", data=b"")
            self.assertEqual(status, 405)
            # HEAD: GET's headers, its Content-Length included, and no body; a profile that
            # GET would collect for 30 s answers at once
            for path in ("/api/v1/status", "/app.js", "/debug/pprof/profile?seconds=30"):
                t0 = time.monotonic()
                head, body = raw_head(app.url, path)
                self.assertLess(time.monotonic() - t0, 10, path)
                self.assertTrue(head.startswith(b"HTTP/1.1 200"), (path, head[:40]))
                length = re.search(rb"(?im)^content-length:\s*(\d+)", head)
                self.assertTrue(length and int(length.group(1)) > 0, (path, head))
                self.assertEqual(body, b"", path)
            status, _, body = app.request("/api/v1/status", headers={"Host": "evil.example:80"})
            self.assertEqual(status, 403)
            self.assertEqual(app.stop(), 0)
        self.assertFalse(os.path.exists(path), "discovery file must be removed at exit")

    def test_ls_tidies_away_files_of_killed_processes(self):
        d = discovery_dir()
        os.makedirs(d, mode=0o700, exist_ok=True)
        ns = os.readlink("/proc/self/ns/pid")
        files = {}
        for what, file_ns in (("ours", ns), ("another namespace's", "pid:[1]"), ("old", None)):
            gone = subprocess.Popen(["true"])
            gone.wait()  # its pid is free now
            path = os.path.join(d, f"{gone.pid}.json")
            body = {"pid": gone.pid, "port": 1, "url": "http://127.0.0.1:1/"}
            if file_ns:
                body["pid_ns"] = file_ns
            with open(path, "w") as f:
                json.dump(body, f)
            files[what] = (gone.pid, path)
        try:
            r = subprocess.run([LAUNCHER, "ls"], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0)
            for pid, _ in files.values():
                self.assertNotIn(f"{pid} ", r.stdout)
            self.assertFalse(os.path.exists(files["ours"][1]), "a killed process's file is removed")
            # the pid may be alive in the namespace that wrote it; an old file says nothing of it
            self.assertTrue(os.path.exists(files["another namespace's"][1]))
            self.assertTrue(os.path.exists(files["old"][1]))
        finally:
            for _, path in files.values():
                if os.path.exists(path):
                    os.unlink(path)

    def test_abandoned_profile_gives_its_wait_back(self):
        """/debug/pprof/profile?seconds=N waits out N seconds, two such waits at a time (a third
        gets 429). A client that leaves during its window (go tool pprof stopped with ^C) gives
        its place back within a tick, as in Go; kept for the rest of the window, two abandoned
        waits would refuse every profile for up to N seconds."""
        with ProfiledApp("wait", ["--seconds", "60"], env={"CLRSCOPE_HISTORY_S": "300"}) as app:
            app.wait_ready()
            host, port = app.url.split("//", 1)[1].rsplit(":", 1)
            auth = f"Authorization: Bearer {app.token}\r\n" if app.token else ""
            gone = []
            try:
                for _ in range(2):
                    s = socket.create_connection((host, int(port)), timeout=10)
                    gone.append(s)
                    s.sendall(f"GET /debug/pprof/profile?seconds=50 HTTP/1.1\r\n"
                              f"Host: {host}:{port}\r\n{auth}\r\n".encode())
                app.wait_json("/api/v1/status", lambda st: st["pprof_waits"]["waiting"] == 2,
                              timeout=10)
                status, _, body = app.request("/debug/pprof/profile?seconds=1")
                self.assertEqual(status, 429, body[:200])
                self.assertIn("error", json.loads(body))
            finally:
                for s in gone:
                    s.close()
            t0 = time.monotonic()
            st = app.wait_json("/api/v1/status", lambda st: st["pprof_waits"]["waiting"] == 0,
                               timeout=10)
            self.assertLess(time.monotonic() - t0, 5)
            self.assertEqual(st["pprof_waits"]["abandoned"], 2)
            # a client that stays gets its profile at the end of its window
            t0 = time.monotonic()
            status, headers, body = app.request("/debug/pprof/profile?seconds=2")
            self.assertEqual(status, 200, body[:200])
            self.assertGreaterEqual(time.monotonic() - t0, 1.9)
            self.assertEqual(body[:2], b"\x1f\x8b")  # gzip, as Go's
            self.assertEqual(app.json("/api/v1/status")["pprof_waits"]["abandoned"], 2)

    def test_port_taken_falls_back_to_next(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        taken = s.getsockname()[1]
        try:
            with ProfiledApp("wait", ["--seconds", "60"], port=str(taken)) as app:
                app.wait_ready()
                port = int(app.url.rsplit(":", 1)[1])
                self.assertNotEqual(port, taken)
                self.assertTrue(taken < port <= taken + 15)
                self.assertEqual(app.json("/api/v1/status")["pid"], app.pid)
        finally:
            s.close()

    def test_other_loopback_address_is_the_one_shown(self):
        # bound to 127.0.0.2, the URL printed and written for `clrscope ls` must be that one:
        # 127.0.0.1 does not answer there
        with ProfiledApp("wait", ["--seconds", "30"], env={"CLRSCOPE_BIND": "127.0.0.2"}) as app:
            app.wait_ready()
            self.assertTrue(app.url.startswith("http://127.0.0.2:"), app.url)
            self.assertEqual(app.json("/api/v1/status")["pid"], app.pid)
            r = subprocess.run([LAUNCHER, "ls"], capture_output=True, text=True)
            self.assertIn(app.url, r.stdout)

    def test_ipv6_binds(self):
        """Debian's civetweb has no IPv6: CLRSCOPE_BIND=::1 (a loopback address, accepted without
        a token) would fail every port ('Failed to setup server ports'), so it is served on
        127.0.0.1, with a line saying so. Any other IPv6 address is refused with the reason."""
        with ProfiledApp("wait", ["--seconds", "30"], env={"CLRSCOPE_BIND": "::1"}) as app:
            app.wait_ready()
            self.assertTrue(app.url.startswith("http://127.0.0.1:"), app.url)
            self.assertEqual(app.json("/api/v1/status")["pid"], app.pid)
            self.assertTrue(any("no IPv6" in l for l in app.stderr_lines), app.stderr_lines)
        code, out, err = run_plain(["hello"], profile=True,
                                   env={"CLRSCOPE_BIND": "::", "CLRSCOPE_TOKEN": "auto"})
        self.assertEqual(code, 0, err)
        self.assertIn("CLRSCOPE_BIND=:: is an IPv6 address", err)
        self.assertNotIn("dashboard http", err)

    def test_token_auth(self):
        with ProfiledApp("wait", ["--seconds", "60"], env={"CLRSCOPE_TOKEN": "auto"}) as app:
            app.wait_ready()
            self.assertTrue(app.token and len(app.token) >= 32)
            status, _, body = app.request("/api/v1/status", headers={"Authorization": "Bearer x"})
            self.assertEqual(status, 401)
            self.assertIn("error", json.loads(body))
            self.assertEqual(app.json("/api/v1/status")["pid"], app.pid)
            # the page and its files are no secret; the token stays out of cookies
            status, headers, _ = app.request("/?token=" + app.token,
                                             headers={"Authorization": "Bearer wrong"})
            self.assertEqual(status, 200)
            self.assertNotIn("Set-Cookie", headers)
            status, _, _ = app.request("/api/v1/status",
                                       headers={"Authorization": "Bearer wrong",
                                                "Cookie": "clrscope_token=" + app.token})
            self.assertEqual(status, 401)
            status, _, _ = app.request("/api/v1/status?token=" + app.token,
                                       headers={"Authorization": "Bearer wrong"})
            self.assertEqual(status, 200)


PROJECT = """<Project Sdk="Microsoft.NET.Sdk">
  <PropertyGroup>
    <OutputType>Exe</OutputType>
    <TargetFramework>net10.0</TargetFramework>
    <ImplicitUsings>enable</ImplicitUsings>
  </PropertyGroup>
</Project>
"""
PROGRAM = """Console.WriteLine($"ready pid={Environment.ProcessId}");
Console.In.ReadToEnd();
"""


class DotnetRun(unittest.TestCase):
    """`clrscope run -- dotnet run`: every .NET process of the tree loads the profiler (the SDK's
    command-line host, its build processes, the app). The SDK's own stay passive, so the one
    dashboard printed is the app's, on the port asked for."""

    def run_sdk(self, args, env=None, cwd=None, until_ready=False):
        e = app_env({"CLRSCOPE_PORT": "0", "DOTNET_CLI_TELEMETRY_OPTOUT": "1", "DOTNET_NOLOGO": "1",
                     "MSBUILDDISABLENODEREUSE": "1", "UseSharedCompilation": "false"})
        e.update(env or {})
        p = subprocess.Popen([LAUNCHER, "run", "--", "dotnet"] + args, env=e, cwd=cwd,
                             stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             text=True)
        err = []
        threading.Thread(target=lambda: err.extend(p.stderr), daemon=True).start()
        out = []
        if until_ready:
            deadline = time.time() + 300
            for line in p.stdout:
                out.append(line)
                if line.startswith("ready") or time.time() > deadline:
                    break
        return p, out, err

    def test_dashboard_is_the_apps(self):
        tmp = tempfile.mkdtemp(prefix="clrscope-dotnet-run-")
        try:
            with open(os.path.join(tmp, "app.csproj"), "w") as f:
                f.write(PROJECT)
            with open(os.path.join(tmp, "Program.cs"), "w") as f:
                f.write(PROGRAM)
            p, out, err = self.run_sdk(["run", "-c", "Release"], cwd=tmp, until_ready=True)
            try:
                self.assertTrue(out and out[-1].startswith("ready"), (out, err))
                app_pid = int(out[-1].split("pid=")[1])
                deadline = time.time() + 30
                while not any(URL_RE.search(l) for l in err) and time.time() < deadline:
                    time.sleep(0.05)
                with urllib.request.urlopen(
                        [URL_RE.search(l) for l in err if URL_RE.search(l)][0].group(1)
                        + "api/v1/status", timeout=10) as r:
                    st = json.load(r)
                self.assertEqual(st["pid"], app_pid)
            finally:
                p.stdin.close()
                p.wait(timeout=60)
            time.sleep(0.2)
            urls = [URL_RE.search(l) for l in err if URL_RE.search(l)]
            self.assertEqual([int(m.group(3)) for m in urls], [app_pid], "".join(err))
            self.assertTrue(any("not profiling" in l and "`dotnet run`" in l for l in err),
                            "".join(err))
            self.assertEqual(p.returncode, 0, "".join(err))
        finally:
            shutil.rmtree(tmp, ignore_errors=True)

    def test_sdk_profiled_when_asked(self):
        for env, dashboards in (({}, 0), ({"CLRSCOPE_PROFILE_SDK": "1"}, 1)):
            with self.subTest(env=env):
                p, _, err = self.run_sdk(["--info"], env=env)
                p.stdin.close()
                p.stdout.read()
                p.wait(timeout=120)
                time.sleep(0.2)
                self.assertEqual(p.returncode, 0, "".join(err))
                self.assertEqual(len([l for l in err if URL_RE.search(l)]), dashboards,
                                 "".join(err))


STUB_CLSID = "{5B0D7A11-2E4C-4F0B-8C3D-1A2B3C4D5E6F}"


class BesideAnotherProfiler(unittest.TestCase):
    """Another vendor's profiler (an APM tracer) holds CORECLR_PROFILER; here a stand-in,
    tests/apps/stubprof, that counts the methods the JIT compiles. `clrscope run` leaves it in place
    and adds clrscope to the runtime's notification profilers: both work, on every runtime."""

    def test_both_profile(self):
        runtimes = available_runtimes()
        if os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"):
            runtimes = runtimes[-1:]  # under the sanitizers: the same C paths on every runtime
        for rt in runtimes:
            with self.subTest(runtime=rt):
                tmp = tempfile.mkdtemp(prefix="clrscope-beside-")
                out = os.path.join(tmp, "stub.out")
                env = {"CORECLR_ENABLE_PROFILING": "1", "CORECLR_PROFILER": STUB_CLSID,
                       "CORECLR_PROFILER_PATH": os.path.join(BUILD, "libstubprof.so"),
                       "STUBPROF_OUT": out, "CLRSCOPE_PROFILES": "cpu"}
                app = ProfiledApp("cpu-split", ["--seconds", "6"], env=env, runtime=rt)
                app.start()
                try:
                    app.wait_ready()
                    time.sleep(4.5)
                    cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=60")
                    final = app.wait_truth(timeout=60)
                finally:
                    app.stop()
                self.assertTrue(any("loads beside it, as a notification profiler" in l
                                    for l in app.stderr_lines), app.stderr_lines)
                with open(out) as f:
                    jitted = int(f.read().split()[1])
                self.assertGreater(jitted, 20, "the other profiler got its callbacks")
                share, truth = cpu_split(cpu, final)
                # ~400 samples in the callers: 2 % of error (one standard deviation)
                self.assertAlmostEqual(share, truth, delta=0.08)
                shutil.rmtree(tmp, ignore_errors=True)

    def test_launcher_adds_to_the_list(self):
        """The variables `clrscope run` hands on, read back with env(1)."""
        def run_env(env, nested=False):
            e = dict(os.environ, CORECLR_ENABLE_PROFILING="1", CORECLR_PROFILER=STUB_CLSID, **env)
            for k in ("CORECLR_NOTIFICATION_PROFILERS", "CORECLR_NOTIFICATION_PROFILERS_64"):
                if k not in env:
                    e.pop(k, None)
            cmd = [LAUNCHER, "run", "--"] + ([LAUNCHER, "run", "--"] if nested else []) + ["env"]
            r = subprocess.run(cmd, env=e, capture_output=True, text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            return dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)
        mine = f"{os.path.realpath(LIB)}={CLSID};"
        got = run_env({})
        self.assertEqual(got["CORECLR_PROFILER"], STUB_CLSID)  # left in place
        self.assertEqual(got["CORECLR_NOTIFICATION_PROFILERS"], mine)
        self.assertEqual(got["CORECLR_ENABLE_NOTIFICATION_PROFILERS"], "1")
        # an existing list without its last ';' gets one, then clrscope
        got = run_env({"CORECLR_NOTIFICATION_PROFILERS": "/x/a.so={1-2}"})
        self.assertEqual(got["CORECLR_NOTIFICATION_PROFILERS"], "/x/a.so={1-2};" + mine)
        # the runtime reads the _64 list first: clrscope goes there
        got = run_env({"CORECLR_NOTIFICATION_PROFILERS_64": "/x/b.so={3-4};"})
        self.assertEqual(got["CORECLR_NOTIFICATION_PROFILERS_64"], "/x/b.so={3-4};" + mine)
        self.assertNotIn("CORECLR_NOTIFICATION_PROFILERS", got)
        # `clrscope run` inside `clrscope run`: listed once
        got = run_env({}, nested=True)
        self.assertEqual(got["CORECLR_NOTIFICATION_PROFILERS"], mine)

    def test_named_twice_loads_once(self):
        """Named as THE profiler and in the notification list too: one clrscope, one dashboard."""
        code, out, err = run_plain(["hello"], env={
            "CORECLR_ENABLE_PROFILING": "1", "CORECLR_PROFILER": CLSID, "CORECLR_PROFILER_PATH": LIB,
            "CORECLR_ENABLE_NOTIFICATION_PROFILERS": "1",
            "CORECLR_NOTIFICATION_PROFILERS": f"{LIB}={CLSID};", "CLRSCOPE_PORT": "0"})
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "hello from TestApp\n")
        self.assertEqual(len([l for l in err.splitlines() if URL_RE.search(l)]), 1, err)


class HardenedEnvironment(unittest.TestCase):
    """Container images often set DOTNET_EnableDiagnostics=0 (no diagnostic port, no debugger),
    which also keeps the runtime from loading any profiler: `clrscope run` narrows it to the port
    and the debugger, so the app is profiled and the port stays closed."""

    @staticmethod
    def diagnostic_sockets(pid):
        # the runtime names its socket by pid and the process's start time (field 22 of
        # /proc/PID/stat); a socket of an earlier process with the same pid (killed, so it left
        # its socket behind; pids wrap at 32768 here) is not this process's
        tmp = os.environ.get("TMPDIR") or "/tmp"
        with open(f"/proc/{pid}/stat") as f:
            start = f.read().rsplit(")", 1)[1].split()[19]
        return glob.glob(os.path.join(tmp, f"dotnet-diagnostic-{pid}-{start}-*"))

    def test_enable_diagnostics_off(self):
        # the runtime's rule, which the launcher works around: the variables alone load nothing
        code, out, err = run_plain(["hello"], profile=True, launcher=False, env={
            "DOTNET_EnableDiagnostics": "0", "CLRSCOPE_PORT": "0"})
        self.assertEqual((code, out), (0, "hello from TestApp\n"), err)
        self.assertNotIn("clrscope: dashboard", err)
        for rt in available_runtimes():
            variants = [{"DOTNET_EnableDiagnostics": "0"}]
            if rt == "net10":  # (the last: the port open, which shows the check can see it)
                variants += [{"COMPlus_EnableDiagnostics": "0"},
                             {"DOTNET_EnableDiagnostics_Profiler": "0"}]
            for off in variants:
                with self.subTest(runtime=rt, env=off):
                    app = ProfiledApp("cpu-split", ["--seconds", "5"], runtime=rt,
                                      env=dict(off, CLRSCOPE_PROFILES="cpu"))
                    app.start()
                    try:
                        app.wait_ready()
                        socks = self.diagnostic_sockets(app.pid)
                        time.sleep(4)
                        cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=60")
                        final = app.wait_truth(timeout=60)
                    finally:
                        app.stop()
                    said = [l for l in app.stderr_lines if "keeps the runtime from loading" in l]
                    self.assertEqual(len(said), 1, app.stderr_lines)
                    self.assertIn(next(iter(off)) + "=0", said[0])
                    # the diagnostic port stays as the user had it: closed under
                    # EnableDiagnostics=0, open under only _Profiler=0
                    general_off = any(k.endswith("_EnableDiagnostics") for k in off)
                    self.assertEqual(bool(socks), not general_off, socks)
                    share, truth = cpu_split(cpu, final)
                    # over 4 s (~350 samples of the callers) rather than 2.5 s: a 2.5 s run once
                    # read 0.638 against 0.750 from ~250 samples under the sanitizers
                    self.assertAlmostEqual(share, truth, delta=0.1)


if __name__ == "__main__":
    unittest.main()
