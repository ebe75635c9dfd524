"""
Hostile input never crashes or hangs the app; security headers and request
checks; signals at any moment; many threads; a process that exits at once.
"""
import concurrent.futures
import json
import os
import random
import signal
import socket
import subprocess
import time
import unittest
import urllib.parse

from harness import ProfiledApp, app_command, app_env, LAUNCHER

ENDPOINTS = ["/api/v1/status", "/api/v1/flamegraph", "/api/v1/top", "/api/v1/gc",
             "/api/v1/allocations", "/api/v1/live", "/api/v1/exceptions", "/api/v1/locks",
             "/api/v1/gcdump", "/api/v1/gcdump/1", "/api/v1/gcdump/x/file",
             "/api/v1/gcdump/diff", "/debug/pprof/", "/debug/pprof/allocs",
             "/debug/pprof/heap", "/debug/pprof/exceptions", "/debug/pprof/lock", "/metrics",
             "/api/v1/threads", "/debug/pprof/threads", "/debug/pprof/goroutine"]
PARAMS = ["seconds", "type", "max_nodes", "filter", "limit", "wait", "a", "b", "token", "search",
          "debug"]
VALUES = ["", "-1", "0", "1e309", "nan", "inf", "abc", "99999999999999999999", "%00", "%ff%fe",
          "1;DROP", "../../etc/passwd", "x" * 3000, "\u00e9\u4e2d", "<script>", "-0", "0x10",
          "1.5", "60", "cpu", "wall"]


def raw_http(port, payload, timeout=5):
    """Sends raw bytes, returns the reply bytes (or b'' on a closed connection)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    try:
        s.sendall(payload)
        chunks = []
        while True:
            try:
                d = s.recv(65536)
            except socket.timeout:
                break
            if not d:
                break
            chunks.append(d)
        return b"".join(chunks)
    finally:
        s.close()


class HostileInput(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.app = ProfiledApp("demo", ["--seconds", "0", "--mb-per-s", "10"])
        cls.app.start()
        cls.app.wait_ready()
        cls.port = int(cls.app.url.rsplit(":", 1)[1])

    @classmethod
    def tearDownClass(cls):
        code = cls.app.stop()
        # SIGTERM is handled by the app: it writes its truth and exits with its own status
        assert code == 0, (code, cls.app.stderr_lines[-20:])

    def alive(self):
        self.assertIsNone(self.app.proc.poll(), "the app died")
        self.assertEqual(self.app.json("/api/v1/status")["pid"], self.app.pid)

    def test_garbage_parameters(self):
        rnd = random.Random(1234)
        for i in range(400):
            ep = rnd.choice(ENDPOINTS)
            q = "&".join(f"{rnd.choice(PARAMS)}={urllib.parse.quote(rnd.choice(VALUES))}"
                         for _ in range(rnd.randint(0, 4)))
            status, headers, body = self.app.request(ep + ("?" + q if q else ""), timeout=30)
            self.assertLess(status, 600)
            if status >= 400:
                ct = headers.get("Content-Type", "")
                self.assertIn("json", ct, (ep, q, status))
                self.assertIn("error", json.loads(body), (ep, q))
            if ep.startswith("/api/") and status == 200:
                json.loads(body)
        self.alive()

    def test_bytes_that_are_not_utf8(self):
        # percent-decoded bytes outside UTF-8 (a Latin-1 client, a cut character): a 4xx whose
        # JSON is valid UTF-8 (json.loads decodes the bytes strictly), never the bytes echoed
        for path, want in [("/api/v1/flamegraph?filter=%FF", 400),
                           ("/api/v1/flamegraph?filter=%D0%9F%D0", 400),
                           ("/api/v1/top?type=%FF%FE", 400),
                           ("/debug/pprof/%FF%FEx", 404)]:
            status, headers, body = self.app.request(path)
            self.assertEqual(status, want, (path, body[:200]))
            self.assertIn("json", headers.get("Content-Type", ""), path)
            self.assertIn("error", json.loads(body.decode("utf-8")), path)
        status, _, body = self.app.request("/api/v1/flamegraph?filter=%D0%9F")  # whole: fine
        self.assertEqual(status, 200, body[:200])
        self.assertEqual(json.loads(body.decode("utf-8"))["filter"], "\u041f")
        self.alive()

    def test_repeated_parameters_and_long_urls(self):
        status, _, _ = self.app.request("/api/v1/flamegraph?type=cpu&type=wall&seconds=5&seconds=9")
        self.assertIn(status, (200, 400))
        status, _, _ = self.app.request("/api/v1/status?" + "a=b&" * 3000)
        self.assertIn(status, (200, 400, 413, 414, 431))
        self.alive()

    def test_malformed_requests(self):
        payloads = [b"GET / HTTP/1.1\r\n\r\n", b"\x00\x01\x02garbage\r\n\r\n",
                    b"GET /" + b"a" * 20000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                    b"GET /api/v1/status HTTP/1.1\r\n" + b"X-A: b\r\n" * 2000 + b"\r\n",
                    b"POST /api/v1/gcdump HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999\r\n\r\nxx",
                    b"GET /%2e%2e/%2e%2e/etc/passwd HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                    b"GET /../../etc/passwd HTTP/1.0\r\n\r\n",
                    b"BREW /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
                    b"GET /api/v1/status HTTP/9.9\r\nHost: 127.0.0.1\r\n\r\n"]
        for p in payloads:
            reply = raw_http(self.port, p)
            self.assertNotIn(b"root:x:0:0", reply)
        # civetweb's own refusals speak the API's form too: {"error": ...} as JSON
        host = f"Host: 127.0.0.1:{self.port}\r\n".encode()
        for p in (b"BREW /api/v1/status HTTP/1.1\r\n" + host + b"Connection: close\r\n\r\n",
                  b"GET /api/v1/top?" + b"a" * 20000 + b" HTTP/1.1\r\n" + host + b"\r\n"):
            reply = raw_http(self.port, p)
            head, _, body = reply.partition(b"\r\n\r\n")
            self.assertRegex(head, rb"^HTTP/1\.[01] 4\d\d ", reply[:200])
            self.assertIn(b"Content-Type: application/json", head, reply[:300])
            self.assertIn("error", json.loads(body), body)
        # a slow client that never finishes its request does not block others
        s = socket.create_connection(("127.0.0.1", self.port))
        s.sendall(b"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n")
        try:
            self.alive()
        finally:
            s.close()

    def test_no_files_from_disk(self):
        for path in ["/etc/passwd", "/../../../../etc/passwd", "/static/../CMakeLists.txt",
                     "/index.html/..", "/proc/self/environ", "//etc/passwd"]:
            status, _, body = self.app.request(path)
            self.assertNotIn(b"root:x:0:0", body, path)
            self.assertNotIn(b"cmake_minimum_required", body, path)
            self.assertNotIn(b"PATH=", body, path)

    def test_security_headers(self):
        status, headers, _ = self.app.request("/api/v1/status")
        self.assertEqual(headers.get("Cache-Control"), "no-store")
        self.assertEqual(headers.get("X-Content-Type-Options"), "nosniff")
        self.assertIn("default-src 'self'", headers.get("Content-Security-Policy", ""))
        self.assertEqual(headers.get("X-Frame-Options"), "DENY")

    def test_dns_rebinding_and_cross_origin(self):
        status, _, _ = self.app.request("/api/v1/status", headers={"Host": "attacker.example"})
        self.assertEqual(status, 403)
        status, _, _ = self.app.request("/api/v1/gcdump", method="POST", data=b"",
                                        headers={"Origin": "http://attacker.example"})
        self.assertEqual(status, 403)
        status, _, _ = self.app.request("/api/v1/status", headers={"Host": "localhost:%d" % self.port})
        self.assertEqual(status, 200)

    def test_concurrent_load(self):
        deadline = time.time() + 15
        errors = []

        def worker(i):
            n = 0
            while time.time() < deadline:
                ep = ENDPOINTS[(i + n) % len(ENDPOINTS)]
                if "gcdump" in ep or "pprof" in ep:
                    ep = "/api/v1/flamegraph?type=cpu&seconds=30"
                try:
                    status, _, _ = self.app.request(ep, timeout=30)
                    if status >= 500 and status not in (501, 503):
                        errors.append((ep, status))
                except Exception as e:  # noqa: BLE001 - any transport error is a finding
                    errors.append((ep, repr(e)))
                n += 1
            return n

        with concurrent.futures.ThreadPoolExecutor(16) as ex:
            total = sum(ex.map(worker, range(16)))
        self.assertGreater(total, 50)
        self.assertEqual(errors, [])
        self.alive()


class ProcessLifecycle(unittest.TestCase):
    def test_signals_at_any_moment(self):
        for sig, delay in [(signal.SIGTERM, 0.05), (signal.SIGINT, 0.3), (signal.SIGTERM, 1.5),
                           (signal.SIGINT, 3.0)]:
            app = ProfiledApp("demo", ["--seconds", "0"])
            app.start()
            time.sleep(delay)
            code = app.stop(sig=sig, timeout=60)
            # the app's own handlers make it exit 0 after writing its truth; a signal that lands
            # before the runtime installed them ends it by the default action (-sig)
            self.assertIn(code, (0, -sig, 128 + sig), (sig, delay, app.stderr_lines[-10:]))
            self.assertFalse(any("Segmentation" in l or "core dumped" in l for l in app.stderr_lines))

    def test_short_lived_process(self):
        for _ in range(5):
            t0 = time.time()
            r = subprocess.run([LAUNCHER, "run", "--"] + app_command() + ["hello", "--exit", "3"],
                               env=app_env({"CLRSCOPE_PORT": "0"}), capture_output=True,
                               text=True, timeout=60)
            self.assertEqual(r.returncode, 3, r.stderr)
            self.assertEqual(r.stdout, "hello from TestApp\n")

    def test_thousand_threads(self):
        with ProfiledApp("threads", ["--threads", "1000", "--seconds", "15"]) as app:
            app.wait_ready(timeout=120)
            time.sleep(3)
            st = app.json("/api/v1/status")
            self.assertGreaterEqual(st["managed_threads"], 1000)
            wall = app.json("/api/v1/flamegraph?type=wall&seconds=10&max_nodes=2000")
            self.assertGreater(wall["total"], 0)
            truth = app.wait_truth(timeout=120)
            self.assertEqual(truth["threads_started"], 1000)


if __name__ == "__main__":
    unittest.main()
