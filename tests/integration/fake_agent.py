"""
fake_agent.py - a local receiver that plays the Datadog agent's (or the intake's) part for the
exporter tests, on TCP 127.0.0.1 and/or a unix socket.

    agent = FakeAgent(mode="ok", unix_path="/tmp/x/agent.sock").start()
    ... point DD_TRACE_AGENT_URL at agent.url or agent.unix_url ...
    reqs = agent.wait_requests(2, timeout=30)
    problems = check_request(reqs[0], pid=1234, service="svc")   # [] when the request is right
    agent.stop()

Modes (agent.set_mode(m) switches at any time, e.g. to show that uploads resume):
    ok       200 and an empty JSON body
    down     nothing listens: the TCP port stays bound (so connecting is refused and no one else
             takes it before the agent comes back); the unix socket file is removed
    hang     accepts and reads the request, never answers (until the mode changes or stop)
    slow     200, SLOW_S (5) seconds after the request was read (a loaded agent; less than the
             exporter's 10 s timeout)
    500      "500 Internal Server Error"
    429      "429 Too Many Requests" with "Retry-After: 4"
    garbage  a few bytes that are not HTTP, then close
    reset    reads the request whole, then resets the connection (SO_LINGER 0) without a word
    endless  200 with a Content-Length of 100 GB, then bytes until the client goes (120 s at most)
    cut      200 with a Content-Length of 1000, its first 9 bytes, then close

Every request (also those answered with 500, garbage or left hanging) is recorded with its
request line, headers, multipart parts, event.json and the profile bytes.

Command line, for trying the exporter by hand:
    python3 fake_agent.py [--port 8126] [--unix PATH] [--mode ok] [--dump DIR]
"""
import argparse
import gzip
import json
import os
import re
import socket
import socketserver
import struct
import threading
import time

AGENT_PATH = "/profiling/v1/input"
RFC3339_NS = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{9}Z$")
UUID4 = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
MODES = ("ok", "down", "hang", "slow", "500", "429", "garbage", "reset", "endless", "cut")
SLOW_S = 5


class Request:
    """One request as received; `problems` holds what could not be parsed at all."""

    def __init__(self, transport, mode):
        self.transport = transport  # "tcp" or "unix"
        self.mode = mode            # the agent's mode when it arrived
        self.time = time.time()
        self.method = self.path = self.version = None
        self.request_line = ""
        self.header_list = []       # [(name, value)] in order
        self.headers = {}           # lower-case name -> value (last wins)
        self.body = b""
        self.parts = []             # [{"name", "filename", "content_type", "headers", "data"}]
        self.event = None           # event.json, parsed
        self.pprof = None           # the profile.pprof part's bytes
        self.problems = []

    def part(self, name):
        for p in self.parts:
            if p["name"] == name:
                return p
        return None

    def tags(self):
        """tags_profiler as a list of (key, value)."""
        raw = (self.event or {}).get("tags_profiler", "")
        out = []
        for t in raw.split(","):
            k, _, v = t.partition(":")
            out.append((k, v))
        return out

    def tag(self, key):
        vals = [v for k, v in self.tags() if k == key]
        return vals[0] if len(vals) == 1 else (vals or None)


def _parse_disposition(value):
    out = {}
    for piece in value.split(";")[1:]:
        k, _, v = piece.strip().partition("=")
        out[k.strip().lower()] = v.strip().strip('"')
    return out


def parse_multipart(req):
    ctype = req.headers.get("content-type", "")
    m = re.match(r"multipart/form-data;\s*boundary=(\"?)([^\";]+)\1", ctype)
    if not m:
        req.problems.append(f"Content-Type is not multipart/form-data with a boundary: {ctype!r}")
        return
    delim = b"--" + m.group(2).encode()
    body = req.body
    if not body.startswith(delim):
        req.problems.append("body does not start with the boundary")
        return
    end = body.find(b"\r\n" + delim + b"--")
    if end < 0:
        req.problems.append("no closing boundary")
        return
    for chunk in body[len(delim):end].split(b"\r\n" + delim):
        if not chunk.startswith(b"\r\n"):
            req.problems.append("a part does not start with CRLF")
            continue
        head, sep, data = chunk[2:].partition(b"\r\n\r\n")
        if not sep:
            req.problems.append("a part has no header/body separator")
            continue
        headers = {}
        for line in head.decode("latin-1").split("\r\n"):
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        disp = _parse_disposition(headers.get("content-disposition", ""))
        if not headers.get("content-disposition", "").startswith("form-data"):
            req.problems.append(f"part without form-data disposition: {headers}")
        req.parts.append({"name": disp.get("name"), "filename": disp.get("filename"),
                          "content_type": headers.get("content-type"), "headers": headers,
                          "data": data})
    ev = req.part("event")
    if ev:
        try:
            req.event = json.loads(ev["data"])
        except ValueError as e:
            req.problems.append(f"event.json is not JSON: {e}")
    prof = req.part("profile.pprof")
    if prof:
        req.pprof = prof["data"]


class _Handler(socketserver.BaseRequestHandler):
    def handle(self):
        agent, transport = self.server.agent, self.server.transport
        sock = self.request
        sock.settimeout(30)
        f = sock.makefile("rb")
        req = Request(transport, agent.mode)
        try:
            if not self._read(f, req):
                return
        except (OSError, ValueError) as e:
            req.problems.append(f"reading the request failed: {e}")
        parse_multipart(req)
        agent._record(req)
        mode = req.mode
        try:
            if mode == "hang":
                agent._unhang.wait(600)
            elif mode == "garbage":
                sock.sendall(b"\x00\x17 this is not HTTP at all \xff\xfe\r\n\r\n")
            elif mode == "reset":
                # an RST, not a FIN: socketserver would shut the socket down (FIN) before
                # closing it, so it is closed here, the makefile first (it holds the fd open)
                f.close()
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                sock.close()
            elif mode == "cut":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 1000\r\nConnection: close\r\n\r\n{\"ok\": 1,")
            elif mode == "endless":
                sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: 100000000000\r\n\r\n")
                chunk, end = b" " * 65536, time.monotonic() + 120
                while time.monotonic() < end:
                    sock.sendall(chunk)  # until the client closes (OSError)
            elif mode == "slow":
                time.sleep(SLOW_S)
                self._reply(sock, "200 OK", b"{}")
            elif mode == "500":
                self._reply(sock, "500 Internal Server Error", b'{"error":"fake agent: 500"}')
            elif mode == "429":
                self._reply(sock, "429 Too Many Requests", b'{"error":"fake agent: 429"}',
                            "Retry-After: 4\r\n")
            else:
                self._reply(sock, "200 OK", b"{}")
        except OSError:
            pass

    @staticmethod
    def _reply(sock, status, body, extra=""):
        sock.sendall((f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
                      f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
                     + body)

    @staticmethod
    def _read(f, req):
        line = f.readline(65536)
        if not line:
            return False
        req.request_line = line.decode("latin-1").rstrip("\r\n")
        parts = req.request_line.split(" ")
        if len(parts) == 3:
            req.method, req.path, req.version = parts
        else:
            req.problems.append(f"bad request line {req.request_line!r}")
        while True:
            h = f.readline(65536)
            if h in (b"\r\n", b"\n", b""):
                break
            k, _, v = h.decode("latin-1").partition(":")
            req.header_list.append((k.strip(), v.strip()))
            req.headers[k.strip().lower()] = v.strip()
        if "content-length" in req.headers:
            n = int(req.headers["content-length"])
            req.body = f.read(n)
            if len(req.body) != n:
                req.problems.append(f"body shorter than Content-Length ({len(req.body)} < {n})")
        elif req.headers.get("transfer-encoding", "").lower() == "chunked":
            body = bytearray()
            while True:
                size = int(f.readline(100).split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    f.readline(100)
                    break
                body += f.read(size)
                f.readline(100)
            req.body = bytes(body)
        return True


class _TCP(socketserver.ThreadingMixIn, socketserver.TCPServer):
    daemon_threads = True
    allow_reuse_address = True


class _Unix(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


class FakeAgent:
    def __init__(self, mode="ok", tcp=True, unix_path=None, port=0):
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} not in {MODES}")
        self.mode = mode
        self.tcp = tcp
        self.unix_path = unix_path
        self.port = port
        self.requests = []
        self._lock = threading.Condition()
        self._servers = []
        self._unhang = threading.Event()
        self._tcp_bound = self._bind_tcp() if tcp else None

    # ---- addresses ----
    @property
    def url(self):
        return f"http://127.0.0.1:{self.port}"

    @property
    def unix_url(self):
        return f"unix://{self.unix_path}"

    # ---- life cycle ----
    def start(self):
        if self.mode != "down":
            self._listen()
        return self

    def _bind_tcp(self):
        """Binds without listening: the port stays ours, and connecting to it is refused."""
        srv = _TCP(("127.0.0.1", self.port), _Handler, bind_and_activate=False)
        try:
            srv.server_bind()
        except OSError:
            srv.server_close()
            raise
        self.port = srv.server_address[1]
        return srv

    def _listen(self):
        if self._servers:
            return
        if self.tcp:
            srv, self._tcp_bound = self._tcp_bound or self._bind_tcp(), None
            srv.server_activate()
            self._serve(srv, "tcp")
        if self.unix_path:
            if os.path.exists(self.unix_path):
                os.unlink(self.unix_path)
            self._serve(_Unix(self.unix_path, _Handler), "unix")

    def _serve(self, srv, transport):
        srv.agent, srv.transport = self, transport
        threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.1},
                         daemon=True).start()
        self._servers.append(srv)

    def _close(self, rebind=True):
        for srv in self._servers:
            srv.shutdown()
            srv.server_close()
        self._servers = []
        if self.unix_path and os.path.exists(self.unix_path):
            os.unlink(self.unix_path)
        if self._tcp_bound:
            self._tcp_bound.server_close()
            self._tcp_bound = None
        if self.tcp and rebind:
            self._tcp_bound = self._bind_tcp()

    def set_mode(self, mode):
        if mode not in MODES:
            raise ValueError(f"mode {mode!r} not in {MODES}")
        old, self.mode = self.mode, mode
        if old == "hang":
            self._unhang.set()       # let the hung handlers go (they close without a reply)
            self._unhang = threading.Event()
        if mode == "down":
            self._close()
        elif old == "down":
            self._listen()

    def stop(self):
        self._unhang.set()
        self._close(rebind=False)

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc):
        self.stop()

    # ---- requests ----
    def _record(self, req):
        with self._lock:
            self.requests.append(req)
            self._lock.notify_all()

    def wait_requests(self, n, timeout=30, pred=None):
        """Waits until `n` recorded requests satisfy pred (all by default); returns them."""
        deadline = time.time() + timeout
        with self._lock:
            while True:
                got = [r for r in self.requests if pred is None or pred(r)]
                if len(got) >= n:
                    return got
                left = deadline - time.time()
                if left <= 0:
                    raise AssertionError(f"fake agent: {len(got)} of {n} requests after {timeout}s"
                                         f" ({len(self.requests)} in all)")
                self._lock.wait(left)


def check_request(req, pid=None, service=None, env=None, version=None, user_tags=(),
                  path=AGENT_PATH, api_key=None, origin="clrscope"):
    """What is wrong with `req` as a profile upload (an empty list when nothing is)."""
    p = list(req.problems)
    if req.request_line != f"POST {path} HTTP/1.1":
        p.append(f"request line {req.request_line!r}, want 'POST {path} HTTP/1.1'")
    h = req.headers
    if h.get("dd-evp-origin") != origin:
        p.append(f"DD-EVP-ORIGIN {h.get('dd-evp-origin')!r}, want {origin!r}")
    if not re.match(r"^\d+\.\d+\.\d+", h.get("dd-evp-origin-version", "")):
        p.append(f"DD-EVP-ORIGIN-VERSION {h.get('dd-evp-origin-version')!r}")
    if h.get("connection", "").lower() != "close":
        p.append(f"Connection {h.get('connection')!r}, want close")
    if not h.get("user-agent", "").startswith("clrscope/"):
        p.append(f"User-Agent {h.get('user-agent')!r}")
    if "expect" in h:
        p.append("Expect header present (100-continue costs a round trip)")
    if not h.get("host"):
        p.append("no Host header")
    if api_key is None and "dd-api-key" in h:
        p.append("DD-API-KEY sent to the agent")
    if api_key is not None and h.get("dd-api-key") != api_key:
        p.append(f"DD-API-KEY {h.get('dd-api-key')!r}, want the configured key")
    names = [(x["name"], x["filename"]) for x in req.parts]
    if sorted(names) != [("event", "event.json"), ("profile.pprof", "profile.pprof")]:
        p.append(f"multipart parts {names}, want event/event.json and profile.pprof")
    ev_part = req.part("event")
    if ev_part and ev_part["content_type"] != "application/json":
        p.append(f"event part Content-Type {ev_part['content_type']!r}")
    p += check_event(req, pid, service, env, version, user_tags)
    if req.pprof is not None:
        if req.pprof[:2] != b"\x1f\x8b":
            p.append("profile.pprof is not gzip'd")
        else:
            try:
                if len(gzip.decompress(req.pprof)) == 0:
                    p.append("profile.pprof is empty")
            except (OSError, EOFError) as e:
                p.append(f"profile.pprof does not gunzip: {e}")
    return p


def check_event(req, pid, service, env, version, user_tags):
    ev = req.event
    if not isinstance(ev, dict):
        return ["no event.json"]
    p = []
    if ev.get("attachments") != ["profile.pprof"]:
        p.append(f"attachments {ev.get('attachments')!r}")
    for k in ("start", "end"):
        if not RFC3339_NS.match(str(ev.get(k))):
            p.append(f"{k} {ev.get(k)!r} is not RFC 3339 UTC with nanoseconds")
    if str(ev.get("start")) >= str(ev.get("end")):
        p.append(f"start {ev.get('start')} not before end {ev.get('end')}")
    if ev.get("family") != "dotnet":
        p.append(f"family {ev.get('family')!r}")
    if ev.get("version") != "4":
        p.append(f"version {ev.get('version')!r}, want \"4\"")
    if not isinstance(ev.get("info"), dict) or not isinstance(ev.get("internal"), dict):
        p.append("info/internal missing")
    if not isinstance(ev.get("tags_profiler"), str):
        return p + ["tags_profiler missing"]
    tags = req.tags()
    keys = [k for k, v in tags]
    if any(not k or not v for k, v in tags):
        p.append(f"malformed tags in {ev['tags_profiler']!r}")
    for k in ("language", "profiler_version", "process_id", "host", "service", "env", "version",
              "runtime-id", "profile_seq", "runtime_platform", "process_architecture"):
        if keys.count(k) != 1:
            p.append(f"tag {k} appears {keys.count(k)} times")
    want = {"language": "dotnet", "process_id": str(pid) if pid else None, "service": service,
            "env": env, "version": version}
    for k, v in want.items():
        if v is not None and req.tag(k) != v:
            p.append(f"tag {k}={req.tag(k)!r}, want {v!r}")
    if not UUID4.match(str(req.tag("runtime-id"))):
        p.append(f"runtime-id {req.tag('runtime-id')!r} is not a UUID v4")
    for k, v in user_tags:
        if (k, v) not in tags:
            p.append(f"user tag {k}:{v} missing")
    return p


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--port", type=int, default=8126)
    ap.add_argument("--unix", help="also listen on this unix socket")
    ap.add_argument("--mode", default="ok", choices=MODES)
    ap.add_argument("--dump", help="write each profile.pprof and event.json here")
    a = ap.parse_args()
    agent = FakeAgent(a.mode, tcp=a.port > 0, unix_path=a.unix, port=a.port).start()
    print(f"fake agent ({a.mode}) on {agent.url if a.port else ''} {a.unix or ''}", flush=True)
    seen = 0
    try:
        while True:
            reqs = agent.wait_requests(seen + 1, timeout=3600)
            for r in reqs[seen:]:
                print(f"{time.strftime('%H:%M:%S')} {r.transport} {r.request_line} "
                      f"{len(r.body)} bytes, service={r.tag('service')} "
                      f"problems={check_request(r, path=r.path) or 'none'}", flush=True)
                if a.dump and r.pprof is not None:
                    os.makedirs(a.dump, exist_ok=True)
                    base = os.path.join(a.dump, f"{seen:04d}")
                    with open(base + ".pprof", "wb") as f:
                        f.write(r.pprof)
                    with open(base + ".event.json", "w") as f:
                        json.dump(r.event, f, indent=1)
                seen += 1
    except KeyboardInterrupt:
        agent.stop()


if __name__ == "__main__":
    main()
