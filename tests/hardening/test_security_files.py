"""
What clrscope writes and serves from disk, attacked by a second local user (`cs-sec-dump`, made
with useradd when missing; without root the tests that need her are skipped):

- a dump directory she owns, where she swaps a finished .gcdump for a link to a file only the
  app's user can read: the directory is refused before the snapshot, and `/file` never serves
  anything but the file written (its directory, inode and size are checked: a link, a file
  replaced or changed, a directory that others can write to now, all get 410);
- a shared sticky directory (like /tmp) where she leaves old files of exited processes: the
  app removes none of them, nor another user's file in its own directory;
- heap snapshots as a denial of service: a loop of `POST ?force=1` starts one snapshot per
  CLRSCOPE_DUMP_MIN_INTERVAL_S (429 with Retry-After for the rest), `force` does not skip the
  memory guard (a memory cgroup with little room left), and a burst of new snapshots does not
  evict the one the user is reading;
- the Datadog export: its files 0600 in a 0700 directory, a directory open to others or hers
  refused, and the intake-URL test setting (which gets the API key) ignored off loopback.
"""
import concurrent.futures
import json
import os
import pwd
import secrets
import shutil
import signal
import subprocess
import tempfile
import time
import unittest

from harness import ProfiledApp

ATTACKER = "cs-sec-dump"
GCDUMP_MAGIC = b"!FastSerialization.1"


def attacker_ids():
    """(uid, gid) of the attacker's account, made if need be; None when it cannot be."""
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        return None
    for _ in range(10):
        try:
            pw = pwd.getpwnam(ATTACKER)
            return pw.pw_uid, pw.pw_gid
        except KeyError:
            pass
        # (useradd fails while another one holds /etc/passwd's lock: tried again)
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", ATTACKER], capture_output=True, timeout=30)
        time.sleep(0.2)
    return None


def as_attacker(*cmd):
    """Runs `cmd` as the attacker; its CompletedProcess."""
    return subprocess.run(["setpriv", f"--reuid={ATTACKER}", f"--regid={ATTACKER}",
                           "--clear-groups", "--"] + list(cmd),
                          capture_output=True, text=True, timeout=30)


def plant_link(target, name):
    """The attacker puts a symbolic link to `target` at `name`, replacing what is there."""
    return as_attacker("ln", "-sfn", target, name)


def post(app, query=""):
    st, headers, body = app.request("/api/v1/gcdump" + query, method="POST", data=b"")
    return st, headers, json.loads(body)


def wait_listed(app, sid, timeout=120):
    """The snapshot's entry in the list once it is done or failed. The list is not a read of
    the snapshot (its details are), so waiting here leaves it unread."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        for s in app.json("/api/v1/gcdump")["snapshots"]:
            if s["id"] == sid and s["status"] != "running":
                return s
        time.sleep(0.05)
    raise AssertionError(f"snapshot {sid} still running after {timeout}s")


def take(app, query=""):
    st, _, body = post(app, query)
    if st != 202:
        raise AssertionError(f"POST /api/v1/gcdump{query}: {st} {body}")
    return wait_listed(app, body["id"])


def dump_name(app, sid):
    return f"clrscope-{app.pid}-{sid}.gcdump"


class Attacked(unittest.TestCase):
    """A directory tree the attacker can reach, and a secret only the app's user can read."""

    @classmethod
    def setUpClass(cls):
        cls.ids = attacker_ids()
        cls.base = tempfile.mkdtemp(prefix="clrscope-secfiles-")
        os.chmod(cls.base, 0o755)  # she can walk in, not write
        cls.private = tempfile.mkdtemp(prefix="clrscope-secret-")  # 0700, the app's user's
        cls.secret = os.path.join(cls.private, "secret.txt")
        cls.secret_text = "victim secret " + secrets.token_hex(16)
        with open(cls.secret, "w") as f:
            f.write(cls.secret_text)
        os.chmod(cls.secret, 0o600)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.base, ignore_errors=True)
        shutil.rmtree(cls.private, ignore_errors=True)

    def need_attacker(self):
        if not self.ids:
            self.skipTest(f"needs root to make the second user {ATTACKER} (useradd, setpriv)")
        return self.ids

    def dir(self, name, mode, owner=None):
        d = os.path.join(self.base, name)
        os.mkdir(d)
        os.chmod(d, mode)
        if owner:
            os.chown(d, *owner)
        return d

    def assert_not_leaked(self, app, sid):
        st, _, body = app.request(f"/api/v1/gcdump/{sid}/file")
        self.assertNotIn(self.secret_text.encode(), body, "the victim's file was served")
        self.assertNotEqual(st, 200, body[:200])
        return st, json.loads(body)["error"]


class DumpDirectory(Attacked):
    def test_her_directory_is_refused(self):
        """CLRSCOPE_DUMP_DIR in a directory the attacker owns: she could swap any file there.
        The snapshot fails before its GC with the rule broken, nothing is written, and the link
        she plants at the file's name is not served."""
        uid, gid = self.need_attacker()
        hers = self.dir("hers", 0o755, (uid, gid))
        env = {"CLRSCOPE_DUMP_DIR": hers, "CLRSCOPE_DUMP_MIN_INTERVAL_S": "0"}
        with ProfiledApp("heap", ["--seconds", "0"], env=env) as app:
            app.wait_ready(timeout=120)
            snap = take(app)
            r = plant_link(self.secret, os.path.join(hers, dump_name(app, snap["id"])))
            self.assertEqual(r.returncode, 0, r.stderr)
            st, error = self.assert_not_leaked(app, snap["id"])
            self.assertEqual(st, 404, error)
            self.assertEqual(snap["status"], "failed")
            d = app.json(f"/api/v1/gcdump/{snap['id']}")
            self.assertIn(f"cannot write snapshots to {hers}", d["error"])
            self.assertIn(f"belongs to another user (uid {uid})", d["error"])
            self.assertEqual(os.listdir(hers), [dump_name(app, snap["id"])], "only her link")
            failed = [l for l in app.stderr_lines if "heap snapshot 1 failed" in l]
            self.assertEqual(len(failed), 1, app.stderr_lines[-10:])
            # open to others without the sticky bit: the same
            os.chown(hers, 0, 0)
            os.chmod(hers, 0o777)
            d = take(app)
            self.assertEqual(d["status"], "failed")
            self.assertIn("other users can write to it and it is not sticky",
                          app.json(f"/api/v1/gcdump/{d['id']}")["error"])
            # a link to a good directory: refused too
            os.chmod(hers, 0o755)
        link = os.path.join(self.base, "dumps-link")
        os.symlink(hers, link)
        with ProfiledApp("heap", ["--seconds", "0"], env={"CLRSCOPE_DUMP_DIR": link}) as app:
            app.wait_ready(timeout=120)
            d = take(app)
            self.assertEqual(d["status"], "failed")
            self.assertIn("symbolic link", app.json(f"/api/v1/gcdump/{d['id']}")["error"])

    def test_file_swapped_after_it_was_written(self):
        """A directory fit when the file is written: whatever then replaces or changes the file,
        or makes the directory unfit, /file answers 410 and serves nothing (one log line per
        snapshot); the untouched one is served whole."""
        uid, gid = self.need_attacker()
        ours = self.dir("ours", 0o755)
        env = {"CLRSCOPE_DUMP_DIR": ours, "CLRSCOPE_DUMP_MIN_INTERVAL_S": "0",
               "CLRSCOPE_DUMP_KEEP": "10"}
        with ProfiledApp("heap", ["--seconds", "0"], env=env) as app:
            app.wait_ready(timeout=120)
            snaps = [take(app) for _ in range(5)]
            self.assertEqual([s["status"] for s in snaps], ["done"] * 5)
            path = [os.path.join(ours, dump_name(app, s["id"])) for s in snaps]
            for p in path:
                self.assertEqual(os.stat(p).st_mode & 0o777, 0o600)
            # 1: a link at its name (put there by the app's own user: no one else can write here)
            os.unlink(path[0])
            os.symlink(self.secret, path[0])
            st, error = self.assert_not_leaked(app, snaps[0]["id"])
            self.assertEqual(st, 410, error)
            self.assertIn("symbolic link", error)
            # 2: the same file, changed in place (same inode, another size)
            with open(path[1], "ab") as f:
                f.write(self.secret_text.encode())
            st, error = self.assert_not_leaked(app, snaps[1]["id"])
            self.assertEqual(st, 410, error)
            self.assertIn("replaced or changed", error)
            # 3: another file renamed over it, of the same size
            size = os.path.getsize(path[2])
            other = os.path.join(ours, "other")
            with open(other, "wb") as f:
                f.write(self.secret_text.encode().ljust(size, b"."))
            os.rename(other, path[2])
            st, error = self.assert_not_leaked(app, snaps[2]["id"])
            self.assertEqual(st, 410, error)
            self.assertIn("replaced or changed", error)
            # 4: the directory opened to everyone, and she swaps the file for a link
            os.chmod(ours, 0o777)
            r = plant_link(self.secret, path[3])
            self.assertEqual(r.returncode, 0, r.stderr)
            st, error = self.assert_not_leaked(app, snaps[3]["id"])
            self.assertEqual(st, 410, error)
            self.assertIn("other users can write to it", error)
            # 5: untouched, in a directory that became hers: not served either
            os.chmod(ours, 0o755)
            os.chown(ours, uid, gid)
            st, error = self.assert_not_leaked(app, snaps[4]["id"])
            self.assertEqual(st, 410, error)
            self.assertIn(f"belongs to another user (uid {uid})", error)
            os.chown(ours, 0, 0)
            st, headers, body = app.request(f"/api/v1/gcdump/{snaps[4]['id']}/file")
            self.assertEqual(st, 200)
            self.assertIn(GCDUMP_MAGIC, body[:64])
            self.assertEqual(len(body), snaps[4]["file_bytes"])
            # asked again: one log line per snapshot, not one per request
            self.assertEqual(self.assert_not_leaked(app, snaps[0]["id"])[0], 410)
            logged = [l for l in app.stderr_lines if "its file is not served" in l]
            self.assertEqual(len(logged), 5, logged)
            # deleting a snapshot whose name holds something else leaves that alone
            st, _, _ = app.request(f"/api/v1/gcdump/{snaps[0]['id']}", method="DELETE")
            self.assertEqual(st, 200)
            self.assertTrue(os.path.islink(path[0]))
            os.unlink(path[4])  # and one whose file is gone: 404, as before
            st, _, body = app.request(f"/api/v1/gcdump/{snaps[4]['id']}/file")
            self.assertEqual(st, 404, body)
            with open(self.secret) as f:
                self.assertEqual(f.read(), self.secret_text)

    def test_shared_sticky_directory(self):
        """A directory shared the way /tmp is (root's, 01777): snapshots go there, she cannot
        swap the app's file, and the app removes no file but its own, however old the files of
        exited processes she left there are (the app runs as root, which could remove them)."""
        uid, gid = self.need_attacker()
        shared = self.dir("shared", 0o1777)
        dead = 4194000
        while os.path.exists(f"/proc/{dead}"):
            dead -= 1
        old = time.time() - 7200
        planted = []
        for i in range(4):
            name = os.path.join(shared, f"clrscope-{dead}-{i + 1}.gcdump")
            r = as_attacker("sh", "-c", 'echo x > "$0" && touch -d @"$1" "$0"', name,
                            str(int(old + i)))
            self.assertEqual(r.returncode, 0, r.stderr)
            planted.append(name)
        # and two of an exited process of the app's own user: in a shared directory, not this
        # process's to remove either
        for i in (5, 6):
            name = os.path.join(shared, f"clrscope-{dead}-{i}.gcdump")
            with open(name, "w") as f:
                f.write("x")
            os.utime(name, (old - i, old - i))
            planted.append(name)
        env = {"CLRSCOPE_DUMP_DIR": shared, "CLRSCOPE_DUMP_MIN_INTERVAL_S": "0",
               "CLRSCOPE_DUMP_KEEP": "1"}
        with ProfiledApp("heap", ["--seconds", "0"], env=env) as app:
            app.wait_ready(timeout=120)
            a = take(app)
            b = take(app)
            self.assertEqual((a["status"], b["status"]), ("done", "done"))
            mine = os.path.join(shared, dump_name(app, b["id"]))
            r = plant_link(self.secret, mine)
            self.assertNotEqual(r.returncode, 0, "the sticky bit keeps her from replacing it")
            st, _, body = app.request(f"/api/v1/gcdump/{b['id']}/file")
            self.assertEqual(st, 200)
            self.assertEqual(len(body), b["file_bytes"])
            self.assertNotIn(self.secret_text.encode(), body)
            left = sorted(os.listdir(shared))
        expected = sorted([os.path.basename(p) for p in planted] + [os.path.basename(mine)])
        self.assertEqual(left, expected, "only the app's own older snapshot went")

    def test_private_directory_tidies_only_this_users_files(self):
        """In a directory no one else can write to, the files of exited processes beyond
        CLRSCOPE_DUMP_KEEP go (test_gcdump), but only files of the app's user."""
        uid, gid = self.need_attacker()
        private = self.dir("private", 0o700)
        dead = 4193000
        while os.path.exists(f"/proc/{dead}"):
            dead -= 1
        old = time.time() - 7200
        names = [f"clrscope-{dead}-{i}.gcdump" for i in range(1, 5)]
        for i, name in enumerate(names):
            with open(os.path.join(private, name), "w") as f:
                f.write("x")
            os.utime(os.path.join(private, name), (old + i, old + i))
        os.chown(os.path.join(private, names[0]), uid, gid)  # the oldest: hers
        env = {"CLRSCOPE_DUMP_DIR": private, "CLRSCOPE_DUMP_KEEP": "1"}
        with ProfiledApp("heap", ["--seconds", "0"], env=env) as app:
            app.wait_ready(timeout=120)
            self.assertEqual(take(app)["status"], "done")
            left = set(os.listdir(private)) - {dump_name(app, 1)}
        self.assertEqual(left, {names[0], names[3]}, "hers stays; of the app user's, the newest")


def memory_cgroup():
    """A new memory cgroup for this test (v1, or v2 with the memory controller): (path, its
    limit file's name, its usage file's name); None when none can be made here."""
    name = f"{ATTACKER}-{os.getpid()}"
    kinds = [("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes")]
    try:
        with open("/sys/fs/cgroup/cgroup.subtree_control") as f:
            if "memory" in f.read().split():
                kinds.append(("/sys/fs/cgroup", "memory.max", "memory.current"))
    except OSError:
        pass
    for root, limit, usage in kinds:
        path = os.path.join(root, name)
        try:
            os.mkdir(path)
        except OSError:
            continue
        if os.path.exists(os.path.join(path, limit)):
            return path, limit, usage
        os.rmdir(path)
    return None


class SnapshotLimits(unittest.TestCase):
    def test_a_flood_starts_one_snapshot(self):
        """A loop of POST ?force=1 for 3 s (unlimited, it starts dozens of snapshots): with the
        default CLRSCOPE_DUMP_MIN_INTERVAL_S (30) one starts, every other request gets 429 with
        Retry-After and a JSON error saying when."""
        with ProfiledApp("heap", ["--seconds", "0"]) as app:
            app.wait_ready(timeout=120)
            t0 = time.monotonic()
            codes, refusals = [], []
            while time.monotonic() - t0 < 3:
                st, headers, body = post(app, "?force=1")
                codes.append(st)
                if st == 429:
                    refusals.append((headers, body))
            self.assertEqual(codes.count(202), 1, codes[:20])
            self.assertEqual(codes[0], 202)
            self.assertLessEqual(set(codes[1:]), {409, 429}, codes[:20])  # 409: it still runs
            self.assertGreater(len(refusals), 5)
            for headers, body in refusals:
                self.assertEqual(body["reason"], "rate_limited")
                after = int(headers["Retry-After"])
                self.assertEqual(body["retry_after_s"], after)
                self.assertTrue(1 <= after <= 30, after)
                self.assertIn("CLRSCOPE_DUMP_MIN_INTERVAL_S", body["error"])
                self.assertIn(f"in {after} s", body["error"])
            listing = app.json("/api/v1/gcdump")
            self.assertEqual(len(listing["snapshots"]), 1)
            self.assertEqual(listing["min_interval_s"], 30)

    def test_the_next_one_after_the_interval(self):
        with ProfiledApp("heap", ["--seconds", "0"],
                         env={"CLRSCOPE_DUMP_MIN_INTERVAL_S": "2"}) as app:
            app.wait_ready(timeout=120)
            self.assertEqual(take(app)["status"], "done")
            st, headers, body = post(app)
            self.assertEqual(st, 429, body)
            after = int(headers["Retry-After"])
            self.assertTrue(1 <= after <= 2, after)
            time.sleep(after)
            self.assertEqual(take(app)["status"], "done")

    def test_force_does_not_skip_the_memory_guard(self):
        """A memory cgroup with 48 MB left, less than a snapshot needs: refused with force=1 too
        (which still skips CLRSCOPE_DUMP_MAX_HEAP_MB once the memory is there)."""
        if os.geteuid() != 0:
            self.skipTest("needs root to make a memory cgroup")
        cg = memory_cgroup()
        if not cg:
            self.skipTest("no memory cgroup can be made here (cgroup v1 memory, or v2 with the "
                          "memory controller)")
        path, limit_file, usage_file = cg
        self.addCleanup(lambda: os.path.isdir(path) and subprocess.run(["rmdir", path]))
        wrap = ["sh", "-c", 'echo $$ > "$0/cgroup.procs" && exec "$@"', path]
        env = {"CLRSCOPE_DUMP_MAX_HEAP_MB": "1", "CLRSCOPE_DUMP_MIN_INTERVAL_S": "0"}
        with ProfiledApp("heap", ["--seconds", "0"], env=env, wrap=wrap) as app:
            app.wait_ready(timeout=120)
            with open(os.path.join(path, usage_file)) as f:
                usage = int(f.read())
            with open(os.path.join(path, limit_file), "w") as f:
                f.write(str(usage + (48 << 20)))
            for query in ("?force=1", ""):
                st, _, body = post(app, query)
                self.assertEqual(st, 413, (query, body))
                self.assertIn(body["reason"], ("low_memory", "heap_too_large"), body)
                if query:
                    self.assertEqual(body["reason"], "low_memory", body)
                    self.assertLess(body["available_bytes"], body["needed_bytes"])
                    self.assertIn("with ?force=1 either", body["error"])
            self.assertEqual(app.json("/api/v1/gcdump")["snapshots"], [])
            with open(os.path.join(path, limit_file), "w") as f:
                f.write("-1" if limit_file.endswith("in_bytes") else "max")
            d = take(app, "?force=1")
            self.assertEqual(d["status"], "done", d)
            self.assertTrue(d["forced"])
            self.assertIsNone(app.proc.poll(), "the app lives on")

    def test_a_burst_does_not_evict_the_snapshot_being_read(self):
        """CLRSCOPE_DUMP_KEEP=2: snapshot 1 is read (its details and file), then three more are
        taken and nobody reads them: 1 stays, the unread ones go, oldest first."""
        env = {"CLRSCOPE_DUMP_KEEP": "2", "CLRSCOPE_DUMP_MIN_INTERVAL_S": "0"}
        with ProfiledApp("heap", ["--seconds", "0"], env=env) as app:
            app.wait_ready(timeout=120)
            first = take(app)
            self.assertEqual(app.json(f"/api/v1/gcdump/{first['id']}?limit=5")["status"], "done")
            st, _, body = app.request(f"/api/v1/gcdump/{first['id']}/file")
            self.assertEqual(st, 200)
            later = [take(app)["id"] for _ in range(3)]
            kept = [s["id"] for s in app.json("/api/v1/gcdump")["snapshots"]]
            self.assertEqual(kept, [later[-1], first["id"]])
            st, _, again = app.request(f"/api/v1/gcdump/{first['id']}/file")
            self.assertEqual((st, again), (200, body))
            # once every older one was read as recently, the one read longest ago goes
            app.json(f"/api/v1/gcdump/{later[-1]}?limit=1")
            newest = take(app)["id"]
            kept = [s["id"] for s in app.json("/api/v1/gcdump")["snapshots"]]
            self.assertEqual(kept, [newest, later[-1]])


class ExportFiles(Attacked):
    def run_export(self, out_dir, extra=None, seconds="4"):
        """An app exporting a profile a second to `out_dir` only; (app, status export block)."""
        env = {"CLRSCOPE_EXPORT_DIR": out_dir, "DD_PROFILING_UPLOAD_PERIOD": "1"}
        env.update(extra or {})
        app = ProfiledApp("alloc-mix", ["--seconds", seconds], env=env)
        try:
            app.start()
            app.wait_ready(timeout=120)
            time.sleep(float(seconds) - 1)
            st = app.json("/api/v1/status")["export"]
            app.wait_exit(timeout=120)
        finally:
            app.stop()
        return app, st

    def test_export_files_are_private(self):
        uid_gid = self.ids
        made = os.path.join(self.base, "export-new", "pprof")
        open_dir = self.dir("export-open", 0o777)
        sticky = self.dir("export-sticky", 0o1777)
        jobs = {"made": made, "open": open_dir, "sticky": sticky}
        if uid_gid:
            jobs["hers"] = self.dir("export-hers", 0o755, uid_gid)
        with concurrent.futures.ThreadPoolExecutor(len(jobs)) as ex:
            futs = {k: ex.submit(self.run_export, d) for k, d in jobs.items()}
            res = {k: f.result() for k, f in futs.items()}
        # made by clrscope: 0700 (its missing parent too), files 0600
        app, st = res["made"]
        self.assertEqual(os.stat(made).st_mode & 0o7777, 0o700)
        self.assertEqual(os.stat(os.path.dirname(made)).st_mode & 0o7777, 0o700)
        files = os.listdir(made)
        self.assertGreaterEqual(len(files), 1, app.stderr_lines[-10:])
        for f in files:
            self.assertTrue(f.endswith(".pprof"), f)
            self.assertEqual(os.stat(os.path.join(made, f)).st_mode & 0o777, 0o600, f)
        self.assertEqual(st["file_errors"], 0)
        # shared like /tmp: used, files 0600
        files = os.listdir(sticky)
        self.assertGreaterEqual(len(files), 1)
        for f in files:
            self.assertEqual(os.stat(os.path.join(sticky, f)).st_mode & 0o777, 0o600, f)
        # open to others without the sticky bit, or hers: nothing written, one line saying why
        refused = [("open", "other users can write to it and it is not sticky")]
        if uid_gid:
            refused.append(("hers", f"belongs to another user (uid {uid_gid[0]})"))
        for k, why in refused:
            app, st = res[k]
            self.assertEqual(os.listdir(jobs[k]), [], k)
            lines = [l for l in app.stderr_lines if "not writing profiles to" in l]
            self.assertEqual(len(lines), 1, (k, app.stderr_lines[-10:]))
            self.assertIn(jobs[k], lines[0])
            self.assertIn(why, lines[0])
            self.assertEqual(st["files_written"], 0, k)
            self.assertGreaterEqual(st["file_errors"], 1, k)
            self.assertEqual(app.proc.returncode, 0, k)

    def test_intake_override_only_on_loopback(self):
        """CLRSCOPE_INTERNAL_INTAKE_URL, a test setting, gets the agentless request with its API
        key: naming anything but this machine's loopback, it is ignored with a warning. (The
        app is killed before its first upload, an hour away, so nothing leaves it; libcurl is
        loaded, so uploads are on and the endpoint is shown.)"""
        env = {"DD_PROFILING_ENABLED": "1", "DD_PROFILING_AGENTLESS": "1",
               "DD_API_KEY": "k3y-" + secrets.token_hex(8), "DD_PROFILING_UPLOAD_PERIOD": "3600",
               "CLRSCOPE_INTERNAL_INTAKE_URL": "http://0.0.0.0:9/api/v2/profile"}
        app = ProfiledApp("wait", ["--seconds", "30"], env=env)
        try:
            app.start()
            app.wait_ready(timeout=120)
            st = app.json("/api/v1/status")["export"]
        finally:
            app.stop(sig=signal.SIGKILL)
        self.assertTrue(st["enabled"] and st["agentless"], st)
        self.assertEqual(st["endpoint"], "https://intake.profile.datadoghq.com/api/v2/profile")
        lines = [l for l in app.stderr_lines if "CLRSCOPE_INTERNAL_INTAKE_URL" in l]
        self.assertEqual(len(lines), 1, app.stderr_lines[-10:])
        self.assertIn("ignored", lines[0])
        self.assertNotIn(env["DD_API_KEY"], "\n".join(app.stderr_lines))


if __name__ == "__main__":
    unittest.main()
