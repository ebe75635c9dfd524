"""
Discovery files with a second local user on the machine, `cs-sec-ls`, the attacker: `clrscope ls`
run as root lists a process only from a file written by the user that process runs as, and prints
every field with its control bytes escaped and its length bounded; `clrscope threads` follows no
URL another user wrote. A profiler whose discovery directory (/tmp/clrscope-UID) the attacker made
first, or planted a link at, refuses it with one log line and runs on unlisted, and a file the
attacker planted there for the pid the app was going to have is not listed. The attacker also
plants into /tmp/clrscope, a directory any user can make, which nothing may read.

Each test runs in a private mount namespace whose /tmp is a fresh tmpfs (the app, the attacker's
files and `clrscope ls` all see it), so that tests running beside it keep the machine's /tmp. Needs
root (useradd, setpriv, unshare, nsenter); skipped otherwise.
"""
import os
import pwd
import socket
import subprocess
import time
import unittest

from harness import BUILD, LAUNCHER, ProfiledApp

ATTACKER = "cs-sec-ls"

# Run by root in a new mount namespace: /tmp becomes an empty tmpfs. The build directory (and the
# apps it links to) stays reachable when it lies under /tmp: each path given is bound back from the
# /tmp of before, open as descriptor 9.
NAMESPACE = r'''
exec 9</tmp
mount -t tmpfs -o mode=1777 clrscope-sec /tmp || exit 1
for p in "$@"; do
    mkdir -p "/tmp/$p" && mount --no-canonicalize --bind "/proc/self/fd/9/$p" "/tmp/$p" || exit 1
done
exec 9<&-
echo ready
exec sleep 600
'''

# Run as the attacker: stdin becomes file $1 in the attacker's own discovery directory and in
# /tmp/clrscope (made 1777 by the attacker when no one has made it: a name any user can take).
PLANT = r'''
own=/tmp/clrscope-$(id -u)
mkdir -p -m 700 "$own" || exit 1
mkdir -m 1777 /tmp/clrscope 2>/dev/null
cat > "$own/$1" || exit 1
cp "$own/$1" "/tmp/clrscope/$1" 2>/dev/null
exit 0
'''

# Run as the attacker before the app starts, in the shell the app is exec'd from: $1 is the pid
# the app is going to have. $2 = squat: the victim's discovery directory (and /tmp/clrscope) made
# 1777 by the attacker; $2 = link: both names are links to a directory of the attacker's. Either
# way a forged file for that pid is put there.
TAKE_FIRST = r'''
victim=/tmp/clrscope-$3
forged='{"pid":%s,"port":1,"url":"http://127.0.0.1:1/","token":"stolen","cmdline":"FORGED"}'
if [ "$2" = squat ]; then
    mkdir -m 1777 "$victim" /tmp/clrscope || exit 1
    for d in "$victim" /tmp/clrscope; do printf "$forged" "$1" > "$d/$1.json" || exit 1; done
else
    mkdir -m 777 /tmp/spot && ln -s /tmp/spot "$victim" && ln -s /tmp/spot /tmp/clrscope || exit 1
    printf "$forged" "$1" > "/tmp/spot/$1.json" || exit 1
fi
'''


def attacker_ids():
    """(uid, gid) of the attacker, made when missing; None when it cannot be had."""
    for _ in range(5):
        try:
            pw = pwd.getpwnam(ATTACKER)
            return pw.pw_uid, pw.pw_gid
        except KeyError:
            pass
        r = subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                            "/usr/sbin/nologin", ATTACKER], capture_output=True, text=True)
        if r.returncode not in (0, 9):  # 9: made meanwhile by a run beside this one
            time.sleep(0.5)  # /etc/passwd locked by another useradd
    return None


def kept_paths():
    """The paths under /tmp (relative to it) the apps need in the namespace: the build's."""
    out = []
    for p in (BUILD, os.path.join(BUILD, "apps")):
        real = os.path.realpath(p)
        if real.startswith("/tmp/"):
            out.append(real[len("/tmp/"):])
    return out


class Discovery(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if os.geteuid() != 0:
            raise unittest.SkipTest("needs root: a second user, setpriv and a mount namespace")
        ids = attacker_ids()
        if not ids:
            raise unittest.SkipTest(f"cannot make the user {ATTACKER}")
        cls.uid, cls.gid = ids
        cls.me = os.geteuid()

    def setUp(self):
        self.holder = subprocess.Popen(["unshare", "-m", "sh", "-c", NAMESPACE, "sh"] + kept_paths(),
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        if self.holder.stdout.readline().strip() != "ready":
            self.holder.kill()
            self.holder.wait()
            self.skipTest(f"cannot make a mount namespace here: {self.holder.stderr.read()[:200]}")
        self.addCleanup(self.holder.wait)
        self.addCleanup(self.holder.kill)

    # ---- helpers ----
    def in_ns(self, cmd):
        return ["nsenter", "-t", str(self.holder.pid), "-m", "--"] + cmd

    def as_attacker(self, cmd):
        return ["setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups"] + cmd

    def plant(self, name, content):
        r = subprocess.run(self.in_ns(self.as_attacker(["sh", "-c", PLANT, "sh", name])),
                           input=content, capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)

    def ls(self):
        r = subprocess.run(self.in_ns([LAUNCHER, "ls"]), capture_output=True, timeout=30)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r.stdout, r.stderr.decode(errors="replace")

    def tmp(self, *parts):
        """A path of the namespace's /tmp, as root sees it from outside."""
        return os.path.join(f"/proc/{self.holder.pid}/root/tmp", *parts)

    def app(self, wrapper=()):
        """The wait app in the namespace (run by `wrapper`, which execs the rest, if given)."""
        env = {"XDG_RUNTIME_DIR": "", "CLRSCOPE_TRUTH": ""}  # /tmp, and no truth file to write
        return ProfiledApp("wait", ["--seconds", "60"], env=env, wrap=self.in_ns(list(wrapper)))

    # ---- the tests ----
    def test_forged_files_for_others_processes_are_not_trusted(self):
        sleeper = subprocess.Popen(["sleep", "60"])  # root's, not profiled
        trap = socket.socket()  # where the forged URLs point: nothing may connect
        trap.bind(("127.0.0.1", 0))
        trap.listen(4)
        trap.setblocking(False)
        forged = f"http://127.0.0.1:{trap.getsockname()[1]}/"
        try:
            with self.app() as app:
                app.wait_ready()
                for pid, cmd in ((app.pid, "FORGED-APP"), (sleeper.pid, "FORGED-ROOT")):
                    self.plant(f"{pid}.json", (
                        f'{{"pid":{pid},"port":1,"url":"{forged}","token":"stolen-token",'
                        f'"cmdline":"{cmd}","pid_ns":"{os.readlink("/proc/self/ns/pid")}"}}'
                    ).encode())
                out, err = self.ls()
                text = out.decode(errors="replace")
                self.assertNotIn("FORGED", text)
                self.assertNotIn("stolen", text)
                by_pid = {l.split()[0]: l for l in text.splitlines()[1:]}
                self.assertNotIn(str(sleeper.pid), by_pid, text)
                self.assertIn(str(app.pid), by_pid, text)  # the real one, from root's own file
                self.assertIn(app.url + "/", by_pid[str(app.pid)])
                self.assertIn("2 discovery files not listed", err)
                # threads follows no URL the attacker wrote, for a process of root's
                r = subprocess.run(self.in_ns([LAUNCHER, "threads", str(sleeper.pid)]),
                                   capture_output=True, text=True, timeout=30)
                self.assertEqual(r.returncode, 1, r.stdout[:300])
                self.assertIn(f"no profiled process {sleeper.pid} found", r.stderr)
                r = subprocess.run(self.in_ns([LAUNCHER, "threads", str(app.pid)]),
                                   capture_output=True, text=True, timeout=60)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn(f"pid {app.pid}", r.stdout)
                with self.assertRaises(BlockingIOError, msg="a forged URL was followed"):
                    trap.accept()
        finally:
            trap.close()
            sleeper.kill()
            sleeper.wait()

    def test_fields_are_shown_escaped_and_cut(self):
        """The attacker describes a process of their own: listed, but no byte of the file
        reaches root's terminal as a control byte (C1's CSI, 0x9b, included), and it is cut."""
        mine = subprocess.Popen(self.as_attacker(["sleep", "60"]))
        try:
            with self.app() as app:
                app.wait_ready()
                self.plant(f"{mine.pid}.json", (
                    f'{{"pid":{mine.pid},"port":1,"url":"http://127.0.0.1:1/\x1b[31m","token":null,'
                    f'"cmdline":"evil \x1b]0;owned\x07\x1b[2J\x9b1m{"A" * 2000}"}}'
                ).encode("latin-1"))
                out, _ = self.ls()
                for raw in (b"\x1b", b"\x07", b"\x9b"):
                    self.assertNotIn(raw, out)
                text = out.decode("ascii")  # nothing but ASCII
                by_pid = {l.split()[0]: l for l in text.splitlines()[1:]}
                self.assertIn(str(app.pid), by_pid, text)
                line = by_pid.get(str(mine.pid), "")
                self.assertIn(r"http://127.0.0.1:1/\x1b[31m", line)
                self.assertIn(r"evil \x1b]0;owned\x07\x1b[2J\x9b1mAAA", line)
                self.assertTrue(line.endswith("A..."), line[-40:])
                self.assertLess(len(line), 500)
        finally:
            mine.kill()
            mine.wait()

    def taken_first(self, how):
        """The app started after the attacker took its discovery directory's name (`how`:
        squat or link) and planted a file there for the app's pid: (app, ls out, ls err)."""
        # the shell that execs the app (its pid is the app's) first runs TAKE_FIRST as the
        # attacker with that pid
        attacker = " ".join(self.as_attacker([]))
        wrapper = ["sh", "-c", attacker + ' sh -c "$0" sh "$$" "$1" "$2" || exit 99; shift 2; '
                   'exec "$@"', TAKE_FIRST, how, str(self.me)]
        app = self.app(wrapper)
        app.start()
        self.addCleanup(app.stop)
        app.wait_ready()
        self.assertEqual(app.json("/api/v1/status")["pid"], app.pid)  # the app runs on
        out, err = self.ls()
        return app, out.decode(errors="replace"), err

    def refused_once(self, app, why):
        lines = [l for l in app.stderr_lines if "discovery" in l]
        self.assertEqual(len(lines), 1, app.stderr_lines)
        self.assertIn(f"cannot use /tmp/clrscope-{self.me} for the discovery file", lines[0])
        self.assertIn(why, lines[0])

    def test_directory_another_user_made_first_is_refused(self):
        app, out, err = self.taken_first("squat")
        self.refused_once(app, f"it belongs to another user (uid {self.uid})")
        self.assertNotIn(f"\n{app.pid} ", "\n" + out)
        self.assertNotIn("FORGED", out)
        self.assertIn(f"/tmp/clrscope-{self.me} is not read", err)
        # nothing of the app's was written into the attacker's directories
        for d in (f"clrscope-{self.me}", "clrscope"):
            self.assertEqual(os.listdir(self.tmp(d)), [f"{app.pid}.json"], d)
            self.assertEqual(os.stat(self.tmp(d, f"{app.pid}.json")).st_uid, self.uid)

    def test_link_at_the_directory_name_is_refused(self):
        app, out, err = self.taken_first("link")
        self.refused_once(app, "it is a symbolic link")
        self.assertNotIn(f"\n{app.pid} ", "\n" + out)
        self.assertNotIn("FORGED", out)
        self.assertEqual(os.listdir(self.tmp("spot")), [f"{app.pid}.json"])
        self.assertEqual(os.stat(self.tmp("spot", f"{app.pid}.json")).st_uid, self.uid)


if __name__ == "__main__":
    unittest.main()
