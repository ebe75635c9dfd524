"""
The dashboard in a real browser (headless Chromium via playwright-core): a real profiled .NET app
serves it; tests/browser/dashboard.test.mjs checks the pid, the flame graph, tooltip, search, zoom,
every tab, and that there are no console errors or CSP violations; token.test.mjs the same page
with CLRSCOPE_TOKEN set (the token as a header, never a cookie). Screenshots land in
<build>/screenshots. The README's picture, docs/img/dashboard.png, is the CPU tab's light-mode
shot of that run: CLRSCOPE_UPDATE_DOCS_IMG=1 copies it there; otherwise the test checks that the
committed picture is a PNG of a sane size.
"""
import os
import shutil
import struct
import signal
import subprocess
import tempfile
import time
import unittest

from harness import BUILD, LAUNCHER, REPO, ProfiledApp

BROWSER_DIR = os.path.join(REPO, "tests", "browser")
DOCS_IMG = os.path.join(REPO, "docs", "img", "dashboard.png")
CPU_SHOT = "02-cpu.png"  # dashboard.test.mjs's CPU tab, light mode


def png_size(path):
    """(width, height) of a PNG file, from its IHDR chunk; None when it is no PNG."""
    with open(path, "rb") as f:
        head = f.read(24)
    if len(head) < 24 or head[:8] != b"\x89PNG\r\n\x1a\n" or head[12:16] != b"IHDR":
        return None
    return struct.unpack(">II", head[16:24])


@unittest.skipUnless(shutil.which("node") and os.path.exists("/usr/bin/chromium"),
                     "node or chromium missing (tools/deps.sh installs them)")
class Browser(unittest.TestCase):
    def test_flame_model_unit(self):
        r = subprocess.run(["node", "--test", "flame_model.test.mjs"], cwd=BROWSER_DIR,
                           capture_output=True, text=True, timeout=300)
        self.assertEqual(r.returncode, 0, r.stdout[-3000:] + r.stderr[-2000:])

    def test_dashboard_against_real_app(self):
        shots = os.path.join(BUILD, "screenshots")
        os.makedirs(shots, exist_ok=True)
        # the page takes two heap snapshots in a row: no CLRSCOPE_DUMP_MIN_INTERVAL_S for it
        with ProfiledApp("demo", ["--seconds", "0", "--mb-per-s", "20"],
                         env={"CLRSCOPE_DUMP_MIN_INTERVAL_S": "0"}) as app:
            app.wait_ready()
            time.sleep(4)  # some samples to draw
            env = dict(os.environ, BASE_URL=app.url + "/", EXPECT_PID=str(app.pid),
                       SCREENSHOT_DIR=shots, TEST_GCDUMP="1")
            r = subprocess.run(["node", "--test", "dashboard.test.mjs"], cwd=BROWSER_DIR, env=env,
                               capture_output=True, text=True, timeout=500)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
            self.assertIsNone(app.proc.poll(), "the app must survive the browser session")
        self.assertTrue(any(f.endswith(".png") for f in os.listdir(shots)))
        if os.environ.get("CLRSCOPE_UPDATE_DOCS_IMG") == "1":
            os.makedirs(os.path.dirname(DOCS_IMG), exist_ok=True)
            shutil.copyfile(os.path.join(shots, CPU_SHOT), DOCS_IMG)
        self.check_docs_picture()

    def check_docs_picture(self):
        """docs/img/dashboard.png: a PNG of a browser window's width and a page's height, and of
        a size a picture of the dashboard has (not an empty page, not a runaway capture)."""
        self.assertTrue(os.path.exists(DOCS_IMG), f"{DOCS_IMG} is missing: run this test with "
                        "CLRSCOPE_UPDATE_DOCS_IMG=1")
        size = png_size(DOCS_IMG)
        self.assertIsNotNone(size, f"{DOCS_IMG} is not a PNG")
        width, height = size
        self.assertTrue(800 <= width <= 4000 and 400 <= height <= 20000, size)
        self.assertTrue(20_000 <= os.path.getsize(DOCS_IMG) <= 8_000_000,
                        os.path.getsize(DOCS_IMG))

    def test_compare_tab_against_real_app(self):
        """The Compare tab (tests/browser/diff.test.mjs) on an app whose hot path changed at a
        mark: the two phases' methods are the biggest changes, drawn red and blue."""
        import json
        shots = os.path.join(BUILD, "screenshots")
        with ProfiledApp("phases", ["--seconds", "0", "--switch-s", "4"],
                         env={"CLRSCOPE_PROFILES": "cpu"}) as app:
            app.wait_ready()
            deadline = time.monotonic() + 30
            while not any(l.startswith("switched at") for l in app.stdout_lines):
                self.assertLess(time.monotonic(), deadline, "the app never switched")
                time.sleep(0.2)
            t = float(next(l for l in app.stdout_lines if l.startswith("switched at")).split()[-1])
            st, _, body = app.request("/api/v1/marks", method="POST",
                                      data=json.dumps({"label": "phase two", "t": t}).encode())
            self.assertEqual(st, 201, body)
            time.sleep(4)  # as long after the mark as before it
            env = dict(os.environ, BASE_URL=app.url + "/", SCREENSHOT_DIR=shots,
                       MARK_LABEL="phase two",
                       EXPECT_TOP="TestApp.Phases.PhasesMode.PhaseOne,"
                                  "TestApp.Phases.PhasesMode.PhaseTwo")
            r = subprocess.run(["node", "--test", "diff.test.mjs"], cwd=BROWSER_DIR, env=env,
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])

    def test_dashboard_with_a_token(self):
        """CLRSCOPE_TOKEN set: the page opened with ?token= sends it as a header on every request,
        never as a cookie (tests/browser/token.test.mjs), and its scripts work under the CSP."""
        with ProfiledApp("cpu-split", ["--seconds", "0"], env={"CLRSCOPE_TOKEN": "auto"}) as app:
            app.wait_ready()
            self.assertTrue(app.token)
            time.sleep(2)  # some samples to draw
            env = dict(os.environ, BASE_URL=f"{app.url}/?token={app.token}",
                       EXPECT_PID=str(app.pid))
            r = subprocess.run(["node", "--test", "token.test.mjs"], cwd=BROWSER_DIR, env=env,
                               capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
            self.assertIn("# pass 1", r.stdout)

    def test_dashboard_when_the_process_exits(self):
        with ProfiledApp("cpu-split", ["--seconds", "0"]) as app:
            app.wait_ready()
            time.sleep(2)
            env = dict(os.environ, BASE_URL=app.url + "/", KILL_PID=str(app.pid))
            r = subprocess.run(["node", "--test", "disconnect.test.mjs"], cwd=BROWSER_DIR,
                               env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
            self.assertIn("# pass 1", r.stdout)

    def test_dashboard_with_profiles_off(self):
        with ProfiledApp("cpu-only", ["--seconds", "0"],
                         env={"CLRSCOPE_PROFILES": "cpu,wall"}) as app:
            app.wait_ready()
            env = dict(os.environ, BASE_URL=app.url + "/")
            r = subprocess.run(["node", "--test", "profiles_off.test.mjs"], cwd=BROWSER_DIR,
                               env=env, capture_output=True, text=True, timeout=300)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
            self.assertIn("# pass 2", r.stdout)


    def test_dashboard_of_an_exited_process(self):
        """`clrscope serve` over the history a process killed with SIGKILL left
        (tests/browser/postmortem.test.mjs)."""
        hdir = tempfile.mkdtemp(prefix="clrscope-pm-history-")
        try:
            with ProfiledApp("phases", ["--seconds", "60", "--switch-s", "4"],
                             env={"CLRSCOPE_HISTORY_DIR": hdir, "CLRSCOPE_HISTORY_SEGMENT_S": "2",
                                  "CLRSCOPE_PROFILES": "cpu,gc"}) as app:
                app.wait_ready()
                app.wait_stdout("switched at", timeout=30)
                time.sleep(6)  # segments of both phases on disk
                pdir = os.path.join(hdir, app.json("/api/v1/status")["history"]["process_dir"])
                app.proc.send_signal(signal.SIGKILL)
                app.proc.wait()
                pid = app.pid
            with ProfiledApp(pdir, command=[LAUNCHER, "serve"], profile=False) as srv:
                srv.wait_url(30)
                env = dict(os.environ, BASE_URL=srv.url + "/", SERVED_PID=str(pid),
                           EXPECT="PhaseOne,PhaseTwo")
                r = subprocess.run(["node", "--test", "postmortem.test.mjs"], cwd=BROWSER_DIR,
                                   env=env, capture_output=True, text=True, timeout=300)
                self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
                self.assertIn("# pass 5", r.stdout)
        finally:
            shutil.rmtree(hdir, ignore_errors=True)

if __name__ == "__main__":
    unittest.main()
