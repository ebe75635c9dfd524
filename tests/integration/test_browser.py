"""
The dashboard in a real browser (headless Chromium via playwright-core): a real profiled .NET app
serves it; tests/browser/dashboard.test.mjs checks the pid, the flame graph, tooltip, search, zoom,
every tab, and that there are no console errors or CSP violations. Screenshots land in
<build>/screenshots.
"""
import os
import shutil
import subprocess
import time
import unittest

from harness import BUILD, REPO, ProfiledApp

BROWSER_DIR = os.path.join(REPO, "tests", "browser")


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
        with ProfiledApp("demo", ["--seconds", "0", "--mb-per-s", "20"]) as app:
            app.wait_ready()
            time.sleep(4)  # some samples to draw
            env = dict(os.environ, BASE_URL=app.url + "/", EXPECT_PID=str(app.pid),
                       SCREENSHOT_DIR=shots, TEST_GCDUMP="1")
            r = subprocess.run(["node", "--test", "dashboard.test.mjs"], cwd=BROWSER_DIR, env=env,
                               capture_output=True, text=True, timeout=500)
            self.assertEqual(r.returncode, 0, r.stdout[-4000:] + r.stderr[-2000:])
            self.assertIsNone(app.proc.poll(), "the app must survive the browser session")
        self.assertTrue(any(f.endswith(".png") for f in os.listdir(shots)))

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


if __name__ == "__main__":
    unittest.main()
