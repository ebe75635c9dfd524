"""
The known weaknesses of Debian's civetweb 1.15 (docs/security.md) are out of reach:

- CVE-2025-9648 (endless loop on a NUL in a URL-encoded form) and civetweb issue #1404 (stack
  overflow in multipart parsing) live in mg_handle_form_request, CVE-2020-27304 in form uploads:
  clrscope imports no form, upload or file-sending function, and bodies sent to every endpoint (forms with
  NULs, deep multipart) are never parsed: each request is answered and the server stays responsive.
- CVE-2025-55763 (overflow in the "directory needs a trailing slash" redirect) needs a document
  root: there is none (no such option in the library), and directory-like paths get a 404, never
  a redirect.
- CVE-2026-29035 (websocket permessage-deflate): no websocket function is imported and an upgrade
  request is not switched.
- When the process has no file descriptor left, civetweb's accept fails silently and its master
  thread spins on the queued connection (a whole core, and the browser waits for nothing):
  clrscope's guard (web/web_fdguard.c) answers such connections 503 itself.
"""
import concurrent.futures
import glob
import json
import resource
import subprocess
import time
import unittest

from harness import LIB, ProfiledApp
from test_hostile import raw_http

FORBIDDEN = ("mg_handle_form_request", "mg_upload", "mg_send_file", "mg_send_mime_file",
             "websocket", "mg_set_auth_handler", "mg_modify_passwords_file")


def imported_civetweb_symbols():
    r = subprocess.run(["nm", "-D", "--undefined-only", LIB], capture_output=True, text=True,
                       check=True)
    return sorted(line.split()[-1] for line in r.stdout.splitlines()
                  if line.split() and line.split()[-1].startswith("mg_"))


def thread_cpu_s(pid, name):
    """CPU seconds of the process's threads named `name`."""
    ticks = 0
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            with open(task + "/comm") as f:
                if f.read().strip() != name:
                    continue
            with open(task + "/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
            ticks += int(fields[11]) + int(fields[12])
        except OSError:
            pass
    return ticks / 100.0


class OutOfDescriptors(unittest.TestCase):
    def test_answered_without_a_spin(self):
        with ProfiledApp("wait", ["--seconds", "60", "--exhaust-fds", "5"]) as app:
            app.wait_ready()
            port = int(app.url.rsplit(":", 1)[1])
            soft, hard = resource.prlimit(app.pid, resource.RLIMIT_NOFILE)
            limit = 512 if hard == resource.RLIM_INFINITY else min(512, hard)
            resource.prlimit(app.pid, resource.RLIMIT_NOFILE, (limit, hard))
            app.wait_stdout("exhausted fds=", 30)  # the app holds every descriptor from now on
            time.sleep(0.5)  # and has taken back any that others closed meanwhile
            web0 = thread_cpu_s(app.pid, "clrscope-web")
            replies = []
            for _ in range(3):
                t0 = time.monotonic()
                try:
                    reply = raw_http(port, b"GET /api/v1/status HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                           b"Connection: close\r\n\r\n", timeout=5)
                except ConnectionResetError:
                    reply = b"reset"
                replies.append((time.monotonic() - t0, reply))
                time.sleep(0.3)
            spun_s = thread_cpu_s(app.pid, "clrscope-web") - web0
            app.wait_stdout("released fds=", 30)
            deadline = time.monotonic() + 5
            while True:  # the dashboard serves again, and the spare is held again
                dash = app.json("/api/v1/status").get("dashboard", {})
                if (dash.get("spare_fd_held") and not dash.get("out_of_fds")) or \
                        time.monotonic() > deadline:
                    break
                time.sleep(0.1)
            app.stop()
            truth = app.wait_truth(timeout=60)
        # Each request is answered at once: 503 by the guard, through its spare descriptor; 200
        # when civetweb's accept took the place the spare freed first; or a reset when the app
        # had taken that place back (no spare: the queue is dropped). Before the guard: no answer
        # at all and the accept loop spinning (0.9 of a core measured).
        by_guard = 0
        for took_s, reply in replies:
            self.assertLess(took_s, 2.0, reply[:200])  # the guard looks every 50 ms
            if reply.startswith(b"HTTP/1.1 503 "):
                err = json.loads(reply.split(b"\r\n\r\n", 1)[1])["error"]
                self.assertIn("run out of file descriptors", err)
                self.assertIn(f"RLIMIT_NOFILE {limit}", err)
            else:
                self.assertTrue(reply in (b"reset", b"") or reply.startswith(b"HTTP/1.1 200 "),
                                reply[:200])
            by_guard += not reply.startswith(b"HTTP/1.1 200 ")
        self.assertLess(spun_s, 0.5, "civetweb's accept loop spun")  # of 2.4 s
        self.assertTrue(dash["fd_guard"], dash)
        self.assertTrue(dash["spare_fd_held"], dash)
        self.assertFalse(dash["out_of_fds"], dash)
        # every answer but civetweb's own 200s came from the guard, and it counted them
        self.assertEqual(dash["refused_out_of_fds"] + dash["queue_resets_out_of_fds"], by_guard,
                         (dash, replies))
        # the app's own count: it ran out (its last open failed) holding most of the limit
        self.assertGreater(truth["fds_held"], limit // 2, truth)
        self.assertTrue(truth["fds_error"], truth)
        self.assertIn(truth["stopped_by"], ("SIGTERM", "stdin"), truth)
        self.assertTrue(any("run out of file descriptors" in l for l in app.stderr_lines))
        self.assertTrue(any("available again" in l for l in app.stderr_lines))


class Civetweb(unittest.TestCase):
    def test_library_imports_no_affected_function(self):
        syms = imported_civetweb_symbols()
        self.assertIn("mg_set_request_handler", syms)
        self.assertEqual([s for s in syms if any(f in s for f in FORBIDDEN)], [], syms)
        with open(LIB, "rb") as f:
            self.assertNotIn(b"document_root", f.read(), "a document root is configured")

    def test_affected_paths_are_answered_and_harmless(self):
        with ProfiledApp("demo", ["--seconds", "0"]) as app:
            app.wait_ready(timeout=120)
            port = int(app.url.rsplit(":", 1)[1])
            host = f"Host: 127.0.0.1:{port}\r\n".encode()
            form = b"a=1&b=%00&c=\x00\x00&d=" + b"%00" * 2000
            deep = b"".join(b"--B\r\nContent-Type: multipart/mixed; boundary=B\r\n\r\n"
                            for _ in range(3000)) + b"--B--\r\n"
            bodies = [(b"application/x-www-form-urlencoded", form),
                      (b"multipart/form-data; boundary=B", deep)]
            for path in (b"/", b"/api/v1/status", b"/api/v1/gcdump/1", b"/debug/pprof/heap",
                         b"/metrics", b"/nonexistent"):
                for method in (b"POST", b"PUT", b"DELETE"):
                    for ctype, body in bodies:
                        req = (method + b" " + path + b" HTTP/1.1\r\n" + host +
                               b"Content-Type: " + ctype + b"\r\nContent-Length: " +
                               str(len(body)).encode() + b"\r\nConnection: close\r\n\r\n" + body)
                        reply = raw_http(port, req, timeout=15)
                        status = reply.split(b" ", 2)[1] if reply.startswith(b"HTTP/1.") else b""
                        self.assertTrue(status.startswith(b"4") or status.startswith(b"5") or
                                        status == b"202", (method, path, reply[:200]))
            # directory-like paths: 404, never the trailing-slash redirect
            for path in (b"/static", b"/api", b"/api/v1", b"/debug", b"/tmp", b"/etc"):
                reply = raw_http(port, b"GET " + path + b" HTTP/1.1\r\n" + host +
                                 b"Connection: close\r\n\r\n")
                self.assertNotIn(b" 301 ", reply.split(b"\r\n", 1)[0], path)
                self.assertNotIn(b"Location:", reply, path)
            # a websocket upgrade is not switched
            reply = raw_http(port, b"GET / HTTP/1.1\r\n" + host +
                             b"Upgrade: websocket\r\nConnection: Upgrade\r\n"
                             b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                             b"Sec-WebSocket-Version: 13\r\n"
                             b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n")
            self.assertNotIn(b" 101 ", reply.split(b"\r\n", 1)[0])
            # every worker is still free: as many parallel requests as workers all get answers
            with concurrent.futures.ThreadPoolExecutor(6) as ex:
                codes = list(ex.map(lambda _: app.request("/api/v1/status", timeout=30)[0],
                                    range(12)))
            self.assertEqual(codes, [200] * 12)
            self.assertEqual(app.stop(), 0)


if __name__ == "__main__":
    unittest.main()
