"""
Every configuration variable clrscope reads (found in its sources: CLRSCOPE_* and DD_*) set to
garbage: numbers out of range or not numbers, NaN, overflow, huge strings, control characters,
bytes that are not UTF-8, format specifiers, paths. Each variable on its own on a short-lived app,
then all of them at once on a running one: the app's output and exit status never change, and
nothing crashes. (The fuzz target tests/fuzz/fuzz_text.c checks the parsed values' ranges.)
"""
import glob
import os
import re
import subprocess
import unittest

from harness import LAUNCHER, REPO, ProfiledApp, app_command, app_env

GARBAGE = ["", " ", "-1", "0", "99999999999999999999", "1e309", "nan", "-inf", "0x1F", "12abc",
           "abc", "\t\n", "x" * 5000, "\u00e9\u4e2d\u202e", "\udcff\udcfe", "../../../etc",
           "1,2,,3", "%s%n%x%p", "true false", "-0", "unix:///nonexistent/socket",
           "http://[::1", "auto"]
NOT_OURS = {"CLRSCOPE_TRUTH"}  # the test app's own variable


def variables():
    names = set()
    for path in (glob.glob(os.path.join(REPO, "profiler", "**", "*.c"), recursive=True) +
                 glob.glob(os.path.join(REPO, "web", "*.c")) +
                 glob.glob(os.path.join(REPO, "api", "*.c"))):
        with open(path, encoding="utf-8", errors="replace") as f:
            names.update(re.findall(r'"((?:CLRSCOPE|DD)_[A-Z0-9_]+)"', f.read()))
    return sorted(names - NOT_OURS)


def crashed(err):
    return any(s in err for s in ("Segmentation", "Aborted", "core dumped", "AddressSanitizer",
                                  "runtime error:", "stack smashing"))


class Config(unittest.TestCase):
    @unittest.skipIf(os.environ.get("CLRSCOPE_TEST_APP_PRELOAD"),
                     "one app start per variable, 70 s under the sanitizers: there the parsers "
                     "are fuzz_text.c's and the all-at-once runs' below")
    def test_each_variable_with_garbage(self):
        names = variables()
        self.assertGreater(len(names), 30, names)
        for i, name in enumerate(names):
            value = GARBAGE[i % len(GARBAGE)]
            env = app_env({name: value})
            env.setdefault("CLRSCOPE_PORT", "0")
            r = subprocess.run([LAUNCHER, "run", "--"] + app_command() + ["hello", "--exit", "5"],
                               env=env, capture_output=True, timeout=120)
            err = r.stderr.decode(errors="replace")
            self.assertEqual(r.returncode, 5, (name, value[:40], err[-500:]))
            self.assertEqual(r.stdout, b"hello from TestApp\n", (name, value[:40]))
            self.assertFalse(crashed(err), (name, err[-500:]))

    def test_all_garbage_at_once_on_a_running_app(self):
        for k in (3, 11):
            env = {n: GARBAGE[(j * k) % len(GARBAGE)] for j, n in enumerate(variables())}
            env.update({"CLRSCOPE_PORT": "0", "CLRSCOPE_INTERNAL_INTAKE_URL": "http://127.0.0.1:9/"})
            app = ProfiledApp("alloc-mix", ["--seconds", "4", "--exit", "4"], env=env)
            with app:
                app.wait_ready(timeout=120, need_url=False)
                if app.url:  # the dashboard may be off (a bad bind, CLRSCOPE_DASHBOARD)
                    st, _, _ = app.request("/api/v1/status", timeout=30)
                    self.assertIn(st, (200, 401, 403))
                code = app.wait_exit(timeout=120)
            err = "\n".join(app.stderr_lines)
            self.assertEqual(code, 4, err[-800:])
            self.assertTrue(any(l.startswith("truth: ") for l in app.stdout_lines))
            self.assertFalse(crashed(err), err[-800:])


if __name__ == "__main__":
    unittest.main()
