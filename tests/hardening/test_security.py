"""
The dashboard against a second local user and against a client that misbehaves, each attack
reproduced on a real app under the profiler (docs/security.md, "Threat model"):

- another user's requests are refused (401) and change nothing, while the process's own user
  needs no token; with a token, other users get in with it; a connection whose user cannot be
  told is refused with one log line, unless CLRSCOPE_ALLOW_USERS=any;
- the token never travels in a cookie (a cookie would reach every server on 127.0.0.1);
- connections that never finish their request do not starve the owner;
- a waiting profile waits 120 s at most;
- civetweb answers no CORS preflight itself: clrscope's checks and headers answer OPTIONS;
- a non-loopback bind wants a strong token, and wrong tokens lead to a back-off (429).

The other user is `cs-sec-peer`, made here when the tests run as root (else they skip).
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import unittest

from harness import ProfiledApp, app_env

PEER = "cs-sec-peer"
TOKEN = "sec-test-token-0123456789abcdef"  # 31 characters

# Run as the other user: requests given as JSON [[method, url, headers], ...]; prints
# [[status, headers, body (up to 2000 bytes), seconds], ...].
PEER_REQUESTS = r"""
import json, sys, time, urllib.error, urllib.request
urllib.request.install_opener(urllib.request.build_opener(urllib.request.ProxyHandler({})))
out = []
for method, url, headers in json.loads(sys.argv[1]):
    t0 = time.monotonic()
    req = urllib.request.Request(url, method=method, headers=headers,
                                 data=b"" if method in ("POST", "PUT") else None)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            res = [r.status, dict(r.headers), r.read(2000).decode("latin-1")]
    except urllib.error.HTTPError as e:
        res = [e.code, dict(e.headers), e.read(2000).decode("latin-1")]
    out.append(res + [time.monotonic() - t0])
print(json.dumps(out))
"""

# Run as the other user: keeps N connections that send half a request and never finish it,
# opening a new one for each the server closes, for S seconds; prints "ready" once all are open.
PEER_SLOWLORIS = r"""
import socket, sys, time
host, port, n, secs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
def one():
    s = socket.create_connection((host, port), timeout=5)
    s.sendall(b"GET /api/v1/status HTTP/1.1\r\nHost: " + host.encode() + b"\r\nX-Slow: ")
    s.setblocking(False)
    return s
conns = [one() for _ in range(n)]
print("ready", flush=True)
end = time.monotonic() + secs
while time.monotonic() < end:
    for i, s in enumerate(conns):
        try:
            gone = s.recv(1) == b""
        except BlockingIOError:
            gone = False
        except OSError:
            gone = True
        if gone:
            s.close()
            try:
                conns[i] = one()
            except OSError:
                pass
    time.sleep(0.05)
"""

# An LD_PRELOAD library that hides who owns a socket: no NETLINK_SOCK_DIAG, no /proc/net/tcp.
HIDE_OWNERS_C = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/socket.h>
static int hidden(const char *p)
{
    return p && (!strncmp(p, "/proc/net/tcp", 13) || !strncmp(p, "/proc/self/net/tcp", 18));
}
int socket(int domain, int type, int protocol)
{
    static int (*real)(int, int, int);
    if (!real)
        real = (int (*)(int, int, int))dlsym(RTLD_NEXT, "socket");
    if (domain == AF_NETLINK && protocol == 4) {
        errno = EACCES;
        return -1;
    }
    return real(domain, type, protocol);
}
#define OPEN_LIKE(name)                                                  \
    int name(const char *p, int flags, ...)                              \
    {                                                                    \
        static int (*real)(const char *, int, ...);                      \
        va_list ap;                                                      \
        va_start(ap, flags);                                             \
        int mode = va_arg(ap, int);                                      \
        va_end(ap);                                                      \
        if (!real)                                                       \
            real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, #name); \
        if (hidden(p)) {                                                 \
            errno = EACCES;                                              \
            return -1;                                                   \
        }                                                                \
        return real(p, flags, mode);                                     \
    }
OPEN_LIKE(open)
OPEN_LIKE(open64)
"""


def peer_python():
    """A python3 the other user may run (the tests' own may sit in root's home)."""
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(p, os.X_OK):
            return p
    return sys.executable


def ensure_peer(test):
    """Makes the other user when needed; skips the test when it cannot be had."""
    if subprocess.run(["getent", "passwd", PEER], capture_output=True).returncode == 0:
        return
    if os.geteuid() != 0 or not shutil.which("useradd"):
        test.skipTest(f"no user {PEER} and not root to make one")
    for _ in range(10):  # /etc/passwd may be locked by a useradd of tests running beside
        subprocess.run(["useradd", "--system", "--no-create-home", "--shell",
                        "/usr/sbin/nologin", PEER], capture_output=True)
        if subprocess.run(["getent", "passwd", PEER], capture_output=True).returncode == 0:
            return
        time.sleep(0.5)
    test.skipTest(f"cannot make user {PEER}")


def peer_command(code, *args):
    if not shutil.which("setpriv"):
        raise unittest.SkipTest("setpriv missing")
    return ["setpriv", f"--reuid={PEER}", f"--regid={PEER}", "--clear-groups", peer_python(),
            "-c", code] + [str(a) for a in args]


def as_peer(requests, timeout=120):
    """Sends the requests as the other user: [(status, headers, body, seconds)]."""
    r = subprocess.run(peer_command(PEER_REQUESTS, json.dumps(requests)), capture_output=True,
                       text=True, timeout=timeout, cwd="/")
    if r.returncode != 0:
        raise AssertionError(f"the other user's client failed: {r.stderr[-1500:]}")
    return [tuple(x) for x in json.loads(r.stdout)]


def raw(port, payload, timeout=10):
    """The reply to raw request bytes, to the end (the server closes every connection)."""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        s.sendall(payload)
        data = b""
        while True:
            try:
                chunk = s.recv(65536)
            except socket.timeout:
                break
            if not chunk:
                break
            data += chunk
    return data


def port_of(app):
    return int(app.url.rsplit(":", 1)[1])


def dashboard_line(app):
    return any("clrscope: dashboard http" in l for l in app.stderr_lines)


class OtherUser(unittest.TestCase):
    """Default settings: the process's own user (and root) is served without a token; another
    local user reads nothing and changes nothing."""

    @classmethod
    def setUpClass(cls):
        cls.app = ProfiledApp("demo", ["--seconds", "0", "--mb-per-s", "10"])
        cls.app.start()
        cls.app.wait_ready()

    @classmethod
    def tearDownClass(cls):
        cls.app.stop()

    def setUp(self):
        ensure_peer(self)

    def test_other_user_is_refused_and_the_owner_needs_no_token(self):
        app = self.app
        self.assertIsNone(app.token)
        app.wait_json("/api/v1/exceptions", lambda r: "is not valid" in json.dumps(r))
        u = app.url
        replies = as_peer([
            ["GET", u + "/api/v1/exceptions", {}],
            ["GET", u + "/api/v1/status", {}],
            ["POST", u + "/api/v1/gcdump", {}],
            ["DELETE", u + "/api/v1/gcdump/1", {}],
            ["GET", u + "/api/v1/gcdump/1/file", {}],
            ["GET", u + "/debug/pprof/profile?seconds=30", {}],
            ["GET", u + "/debug/pprof/", {}],
            ["GET", u + "/metrics", {}],
            ["GET", u + "/app.js", {}],
        ])
        for (status, headers, body, secs), what in zip(replies[:-1], [
                "exceptions", "status", "gcdump POST", "gcdump DELETE", "gcdump file",
                "profile", "pprof index", "metrics"]):
            self.assertEqual(status, 401, (what, body))
            self.assertIn("CLRSCOPE_TOKEN", json.loads(body)["error"], what)
            self.assertNotIn("is not valid", body, what)
            self.assertIn("default-src 'self'", headers.get("Content-Security-Policy", ""))
            self.assertLess(secs, 5, what)  # the profile's wait never started
        # the dashboard's own files are no secret: the other user may load them
        self.assertEqual(replies[-1][0], 200)
        # nothing was started or changed, and the owner's plain requests work without a token
        self.assertEqual(app.json("/api/v1/gcdump")["snapshots"], [])
        st = app.json("/api/v1/status")
        self.assertEqual(st["pprof_waits"]["waiting"], 0)
        self.assertEqual(st["dashboard"]["allow_users"], "same")
        self.assertGreaterEqual(st["dashboard"]["refused_other_users"], 8)
        self.assertIn("is not valid", json.dumps(app.json("/api/v1/exceptions")))
        logged = [l for l in app.stderr_lines if "was refused" in l]
        self.assertEqual(len(logged), 1, logged)


class TokenAndBackOff(unittest.TestCase):
    """A non-loopback bind with a token: anyone with the token gets in; wrong tokens lead to a
    back-off (429 with Retry-After, the right token included), never for the owner."""

    @classmethod
    def setUpClass(cls):
        cls.app = ProfiledApp("wait", ["--seconds", "120"],
                              env={"CLRSCOPE_BIND": "0.0.0.0", "CLRSCOPE_TOKEN": TOKEN})
        cls.app.start()
        cls.app.wait_ready()
        cls.app.url = "http://127.0.0.1:" + cls.app.url.rsplit(":", 1)[1]

    @classmethod
    def tearDownClass(cls):
        cls.app.stop()

    def setUp(self):
        ensure_peer(self)

    def test_other_user_with_the_token_and_wrong_guesses(self):
        u = self.app.url + "/api/v1/status"
        good = {"Authorization": "Bearer " + TOKEN}
        got = as_peer([["GET", u, good], ["GET", u, {}]])
        self.assertEqual([g[0] for g in got], [200, 401])
        guesses = [["GET", u, {"Authorization": f"Bearer guess{i}"}] for i in range(12)]
        got = as_peer(guesses + [["GET", u, good], ["GET", u + "?token=" + TOKEN, {}]])
        statuses = [g[0] for g in got]
        self.assertEqual(statuses[:10], [401] * 10, statuses)
        self.assertEqual(statuses[10:], [429] * 4, statuses)  # the right token too
        retry = int(got[-1][1].get("Retry-After", "0"))
        self.assertTrue(30 <= retry <= 60, got[-1][1])
        self.assertIn("error", json.loads(got[-1][2]))
        self.assertTrue(all(g[3] < 2 for g in got), "no worker sleeps on a refusal")
        # the owner is not held back by another's guesses, nor by its own
        self.app.token = None
        for i in range(12):
            self.assertEqual(self.app.request(u[len(self.app.url):],
                                              headers={"Authorization": f"Bearer no{i}"})[0], 401)
        self.app.token = TOKEN
        st = self.app.json("/api/v1/status")
        self.assertGreaterEqual(st["dashboard"]["token_failures"], 22)  # 10 guesses, 12 of the owner
        self.assertGreaterEqual(st["dashboard"]["throttled"], 4)
        self.assertEqual(len([l for l in self.app.stderr_lines if "wrong tokens" in l]), 1)


class Binding(unittest.TestCase):
    def run_hello(self, env):
        app = ProfiledApp("hello", env=env)
        app.start()
        app.wait_exit(120)
        return app

    def test_weak_token_keeps_a_non_loopback_bind_off(self):
        app = self.run_hello({"CLRSCOPE_BIND": "0.0.0.0", "CLRSCOPE_TOKEN": "x"})
        err = "\n".join(app.stderr_lines)
        self.assertIn("fewer than the 16", err)
        self.assertFalse(dashboard_line(app), err)
        self.assertIn("hello from TestApp", app.stdout_lines)
        for token in ("y" * 16, "auto"):
            with ProfiledApp("wait", ["--seconds", "30"],
                             env={"CLRSCOPE_BIND": "0.0.0.0", "CLRSCOPE_TOKEN": token}) as app:
                app.wait_ready()
                if token != "auto":
                    app.token = token
                port = port_of(app)
                app.url = f"http://127.0.0.1:{port}"
                self.assertEqual(app.json("/api/v1/status")["pid"], app.pid)


class NoCookie(unittest.TestCase):
    """The token never travels in a cookie (cookies are not scoped by port: one would reach every
    server on 127.0.0.1); the page and its files load without it, the API wants it."""

    def test_token_stays_out_of_cookies(self):
        with ProfiledApp("wait", ["--seconds", "60"], env={"CLRSCOPE_TOKEN": "auto"}) as app:
            app.wait_ready()
            token, app.token = app.token, None
            for path in ("/?token=" + token, "/", "/app.js", "/requests.js"):
                status, headers, body = app.request(path)
                self.assertEqual(status, 200, path)
                self.assertNotIn("Set-Cookie", headers, path)
                self.assertNotIn(token.encode(), body, path)
            cookie = {"Cookie": "clrscope_token=" + token}
            self.assertEqual(app.request("/api/v1/status", headers=cookie)[0], 401)
            self.assertEqual(app.request("/api/v1/status")[0], 401)
            self.assertEqual(app.request("/api/v1/status?token=" + token)[0], 200)
            self.assertEqual(app.request("/api/v1/status",
                                         headers={"Authorization": "Bearer " + token})[0], 200)


class UnknownOwner(unittest.TestCase):
    """/proc/net/tcp and NETLINK_SOCK_DIAG both refused: who opened a connection cannot be told,
    so the dashboard refuses it (401, one log line) unless CLRSCOPE_ALLOW_USERS=any or a token."""

    @classmethod
    def setUpClass(cls):
        cc = shutil.which("cc") or shutil.which("gcc")
        if not cc:
            raise unittest.SkipTest("no C compiler for the preload library")
        cls.tmp = tempfile.mkdtemp(prefix="clrscope-sec-")
        src = os.path.join(cls.tmp, "hide_owners.c")
        with open(src, "w") as f:
            f.write(HIDE_OWNERS_C)
        cls.shim = os.path.join(cls.tmp, "hide_owners.so")
        subprocess.run([cc, "-shared", "-fPIC", "-O1", "-o", cls.shim, src, "-ldl"], check=True)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def env(self, extra):
        pre = app_env().get("LD_PRELOAD")
        env = {"LD_PRELOAD": (pre + " " if pre else "") + self.shim}
        env.update(extra)
        return env

    def test_fails_closed_with_one_line(self):
        with ProfiledApp("wait", ["--seconds", "60"], env=self.env({})) as app:
            app.wait_ready()
            for _ in range(3):
                status, headers, body = app.request("/api/v1/status")
                self.assertEqual(status, 401, body)
                err = json.loads(body)["error"]
                self.assertIn("cannot tell which user", err)
                self.assertIn("CLRSCOPE_ALLOW_USERS=any", err)
            self.assertEqual(app.request("/")[0], 200)  # the page still loads, and says why
            time.sleep(0.3)
            logged = [l for l in app.stderr_lines if "cannot tell which user" in l]
            self.assertEqual(len(logged), 1, app.stderr_lines)
        with ProfiledApp("wait", ["--seconds", "60"],
                         env=self.env({"CLRSCOPE_ALLOW_USERS": "any"})) as app:
            app.wait_ready()
            st = app.json("/api/v1/status")
            self.assertEqual(st["dashboard"]["allow_users"], "any")
        with ProfiledApp("wait", ["--seconds", "60"],
                         env=self.env({"CLRSCOPE_TOKEN": "auto"})) as app:
            app.wait_ready()
            self.assertEqual(app.json("/api/v1/status")["pid"], app.pid)


class Slowloris(unittest.TestCase):
    """Connections that never finish their request line, many more than the dashboard has
    workers: the owner's requests still answer within seconds."""

    def setUp(self):
        ensure_peer(self)

    def probe_while(self, app, attacker, url=None, headers=None):
        line = attacker.stdout.readline()
        self.assertEqual(line.strip(), "ready", attacker.stderr.read() if not line else line)
        time.sleep(1.0)
        worst, codes = 0.0, []
        end = time.monotonic() + 10
        while time.monotonic() < end:
            t0 = time.monotonic()
            try:
                codes.append(app.request("/api/v1/status", headers=headers, timeout=15)[0])
            except OSError as e:
                codes.append(str(e))
            worst = max(worst, time.monotonic() - t0)
            time.sleep(0.5)
        return worst, codes

    def test_idle_connections_of_another_user(self):
        with ProfiledApp("wait", ["--seconds", "90"]) as app:
            app.wait_ready()
            attacker = subprocess.Popen(peer_command(PEER_SLOWLORIS, "127.0.0.1", port_of(app),
                                                     80, 25), stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd="/")
            try:
                worst, codes = self.probe_while(app, attacker)
            finally:
                attacker.kill()
                attacker.wait()
            self.assertEqual(set(codes), {200}, codes)
            self.assertLess(worst, 4.0, codes)
            self.assertGreater(app.json("/api/v1/status")["dashboard"]["dropped_over_cap"], 0)

    def test_idle_connections_from_another_address(self):
        """A non-loopback bind: idle connections from another address, the owner on loopback."""
        try:
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect(("192.0.2.1", 9))  # no packet is sent: it picks the outgoing address
                addr = s.getsockname()[0]
        except OSError:
            addr = None
        if not addr or addr.startswith("127."):
            self.skipTest("no non-loopback IPv4 address on this host")
        with ProfiledApp("wait", ["--seconds", "90"],
                         env={"CLRSCOPE_BIND": "0.0.0.0", "CLRSCOPE_TOKEN": TOKEN}) as app:
            app.wait_ready()
            app.token = TOKEN
            port = port_of(app)
            app.url = f"http://127.0.0.1:{port}"
            attacker = subprocess.Popen([sys.executable, "-c", PEER_SLOWLORIS, addr, str(port),
                                         "80", "25"], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True)
            try:
                worst, codes = self.probe_while(app, attacker)
            finally:
                attacker.kill()
                attacker.wait()
            self.assertEqual(set(codes), {200}, codes)
            self.assertLess(worst, 4.0, codes)


class Requests(unittest.TestCase):
    """A waiting profile's cap, and OPTIONS answered by clrscope's own checks."""

    @classmethod
    def setUpClass(cls):
        cls.app = ProfiledApp("wait", ["--seconds", "120"])
        cls.app.start()
        cls.app.wait_ready()
        cls.port = port_of(cls.app)

    @classmethod
    def tearDownClass(cls):
        cls.app.stop()

    def test_waiting_profile_is_capped(self):
        app = self.app
        for q in ("seconds=900", "seconds=121", "seconds=900&wait=1"):
            t0 = time.monotonic()
            status, _, body = app.request("/debug/pprof/profile?" + q, timeout=30)
            self.assertEqual(status, 400, (q, body[:200]))
            self.assertIn("120", json.loads(body)["error"])
            self.assertLess(time.monotonic() - t0, 5, q)
        self.assertEqual(app.request("/debug/pprof/wall?seconds=900")[0], 400)
        # the past window is no wait: as long as the history
        status, _, body = app.request("/debug/pprof/profile?seconds=900&wait=0")
        self.assertEqual(status, 200, body[:200])
        self.assertEqual(app.request("/debug/pprof/profile?seconds=900", method="HEAD")[0], 200)
        self.assertEqual(app.json("/api/v1/status")["pprof_waits"]["waiting"], 0)

    def test_cors_preflight_gets_clrscope_answers(self):
        for host, want in ((b"evil.example", b"403"), (b"127.0.0.1:%d" % self.port, b"405")):
            for path in (b"/api/v1/status", b"/api/v1/gcdump/1", b"/", b"/debug/pprof/profile"):
                reply = raw(self.port, b"OPTIONS " + path + b" HTTP/1.1\r\nHost: " + host +
                            b"\r\nOrigin: http://evil.example\r\nAccess-Control-Request-Method: "
                            b"DELETE\r\nAccess-Control-Request-Headers: x-any\r\n"
                            b"Connection: close\r\n\r\n")
                head, _, body = reply.partition(b"\r\n\r\n")
                self.assertEqual(head.split(b" ", 2)[1], want, (host, path, head))
                lower = head.lower()
                self.assertNotIn(b"access-control-allow", lower, (host, path))
                for h in (b"content-security-policy:", b"x-content-type-options: nosniff",
                          b"x-frame-options: deny"):
                    self.assertIn(h, lower, (host, path))
                self.assertIn("error", json.loads(body))


if __name__ == "__main__":
    unittest.main()
