#!/usr/bin/env python3
"""make_seeds.py - writes the seed inputs of the fuzz targets into corpus/<target>/ (committed).

Seeds are well-formed inputs in each target's input format, with payloads laid out as the .NET
runtime writes them, so the fuzzers start from deep paths instead of refusals. Re-run after
changing an input format: python3 tests/fuzz/make_seeds.py
"""
import os
import re
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
ROUTES = os.path.join(HERE, "..", "..", "api", "api_routes.c")


def u16z(s):
    return s.encode("utf-16-le") + b"\0\0"


def rec(sel, version, payload):
    """fuzz_events record: selector, version, u16 length, payload."""
    return bytes([sel, version]) + struct.pack("<H", len(payload)) + payload


def events():
    gc_start = struct.pack("<IIII", 5, 2, 1, 0) + struct.pack("<HQ", 7, 0)  # GCStart_V2
    gc_end = struct.pack("<IIH", 5, 2, 7)
    heap_stats = b"".join(struct.pack("<QQ", 1000 * (g + 1), 10 * g) for g in range(4)) + bytes(46)
    per_heap = bytes(70) + struct.pack("<I", 0) + bytes(8) + struct.pack("<I", 2) + \
        b"".join(struct.pack("<10Q", 4096 * g, 0, 0, 1024 * g, 0, 0, 0, 0, 0, 0) for g in range(2))
    suspend = struct.pack("<IIH", 1, 5, 7)
    exc = u16z("System.InvalidOperationException") + u16z("Sequence contains no elements \u00e9\U0001F600") + \
        struct.pack("<QIHH", 0x1234, 0x80131509, 0x10, 7)
    lock_start = struct.pack("<BH", 0, 7) + struct.pack("<QQQ", 0xabc0, 0xdef0, 1234)
    lock_stop = struct.pack("<BHd", 0, 7, 1.5e6)
    alloc_sampled = struct.pack("<IHQ", 0, 7, 0x7000) + u16z("System.Collections.Generic.List`1[System.Int32]") + \
        struct.pack("<QQQ", 0x100000, 4096, 100)
    alloc_tick = struct.pack("<IIHQQ", 102400, 0, 7, 102400, 0x7001) + u16z("Entry[System.String,System.Object][]") + \
        struct.pack("<IQQ", 0, 0x200000, 120)
    seeds = {
        "gc": rec(0, 2, gc_start) + rec(8, 1, gc_end) + rec(24, 2, heap_stats) + rec(64, 3, per_heap) +
              rec(48, 1, suspend) + rec(16, 1, b"") + rec(6, 0, b"") + rec(7, 0, b""),
        "exceptions": rec(3, 1, exc) * 3,
        "locks": rec(12, 2, lock_start) + rec(4, 1, lock_stop) + rec(4, 0, b""),
        "alloc": rec(10, 0, alloc_sampled) + rec(2, 4, alloc_tick) + rec(2, 2, alloc_tick[:40]),
    }
    return seeds


def heapdump():
    # structured mode: odd first byte; then node count, batch, addresses, per node type/kids...
    out = {}
    for name, n in (("small", 6), ("wide", 40)):
        b = bytearray([1, n, 3])
        b += bytes((i * 7) % 256 for i in range(n))                     # addresses
        for i in range(n):
            b += bytes([i % 8, 2, (i + 1) % n, (i * 3) % (n + 3)])        # type, 2 kids
        b += bytes([4, 0, 2, 0, 1, 5, 1, 2, 3, 0, 7, 2])                 # roots
        b += bytes([1, 1, 2])                                            # dependent handle
        b += bytes([1, 3, 0, 4]) + "s_c".encode("utf-16-le")[:8]         # a static
        out[name] = bytes(b)
    node = struct.pack("<IIH", 0, 1, 7) + struct.pack("<QQQQ", 0x1000, 24, 0x7000, 0)
    out["raw"] = bytes([0, 3]) + struct.pack("<H", len(node)) + node
    return out


def query():
    # [flags: 1 HEAD, 2 numeric {id}, 4 trailing slash][row of api_routes, or >= 2 * rows: the
    # path itself][{id}/{name} or path][query]; rows are found by their pattern
    rows = re.findall(r'^\s*\{[^"]*"([^"]+)"', open(ROUTES).read(), re.M)
    reqs = [(0, "/api/v1/flamegraph", "", "type=cpu&seconds=30&max_nodes=20&filter=System.String"),
            (4, "/api/v1/top", "", "type=wall&limit=5"),
            (2, "/api/v1/gcdump/{id}/paths", "\x01", "type=System.String"),
            (0, "/api/v1/gcdump/diff", "", "a=1&b=2"), (0, "/debug/pprof/profile", "", "seconds=5"),
            (1, "/debug/pprof/allocs", "", "seconds=3"), (0, "/api/v1/status", "", "token=x"),
            (0, "/metrics", "", ""), (0, "/api/v1/exceptions", "", "type=System.Exception&limit=3"),
            (0, "/api/v1/gcdump/{name}", "3/nope", ""), (0, "/debug/pprof/{name}", "nope", ""),
            (0, "/debug/pprof", "", "token=x"), (1, "/debug/pprof/threads", "", "debug=1"),
            (0, None, "api/v1/gcdump//7/", "limit=2&sort=bytes")]
    out = {}
    for i, (flags, pattern, part, q) in enumerate(reqs):
        pick = rows.index(pattern) if pattern else 255
        out[f"r{i}"] = bytes([flags, pick]) + part.encode() + b"\0" + q.encode() + b"\0"
    return out


def pprof():
    pool = [b"samples", b"count", b"cpu", b"nanoseconds", b"App.Main", b"App.Run",
            b"thread id", b"\xc3\xa9\"\\"]
    head = b"\0".join(pool) + b"\0" + bytes([1, 50, 6]) + struct.pack("<Q", 10000000) + \
        struct.pack("<QI", 1700000000 * 10**9, 10**9)
    sample = bytes([3, 4, 5, 255]) + struct.pack("<qq", 1, 10000000) + \
        bytes([2, 6, 1, 7]) + struct.pack("<q", 0) + bytes([6, 2, 3]) + struct.pack("<q", 42) + bytes([1, 7])
    return {"two": head + sample * 3}


def flame():
    pool = [b"Main", b"Run", b"Compute", b"\"quoted\"", b"back\\slash", b"\x01ctl",
            b"\xff\xfe", b"\xc3\xa9t\xc3\xa9", b"A", b"B", b"C", b"D"]
    head = b"\0".join(pool) + b"\0" + struct.pack("<qQ", -5, 0x3ff8000000000000) + bytes([200, 10, 1])
    body = b""
    for i in range(20):
        body += bytes([4, 0, 1, i % 12, 3]) + struct.pack("<III", i, 1000 * i, 1) + bytes([i * 13 % 256, i])
    return {"tree": head + body}


def text():
    def s(v):
        return v.encode() + b"\0"
    env = struct.pack("<Q", (1 << 34) | (1 << 19) | (1 << 20) | (1 << 2))
    vals = s("/tmp/d") + s("70000") + s("cpu,wall,bogus") + s("env:prod,service:web,k:v") 
    tail = bytes([1]) + s("System.Collections.Generic.Dictionary`2+Entry[System.String,System.Int32][]") + \
        s("<Main>b__0_0") + s(".ctor") + s("MoveNext") + s("get_Item") + s("x")
    return {"env": env + vals + tail,
            "cgroup": struct.pack("<Q", 0) + bytes([0]) +
            s("0::/system.slice/docker-0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef.scope")}


def uv(x):
    """unsigned LEB128"""
    out = b""
    while True:
        b = x & 0x7f
        x >>= 7
        out += bytes([b | (0x80 if x else 0)])
        if not x:
            return out


def hseg():
    """fuzz_hseg: a segment's payload (prof_hseg.h): a cpu and an alloc kind, a mark, the GC's
    records; and the same with collections left out and two runtime counters' points (version
    2)."""
    v1 = hseg_payload([b"", b"all", b"Main", b"Work", b"a", b"System.String"])
    v2 = hseg_payload([b"", b"all", b"Main", b"Work", b"a", b"System.String", b"alloc-rate",
                       b"B", b"working-set", b"MB"])
    v2 += uv(17)  # collections the list left out
    v2 += uv(2)
    # alloc-rate, a rate with an integer value (zigzag), 1 s after t_from; working-set 10 ms
    # later, a double's bits
    v2 += uv(6) + uv(7) + uv(3) + uv(2 * 1000) + uv(1000) + uv(2 * 1048576)
    v2 += uv(8) + uv(9) + uv(0) + uv(2 * 10) + uv(1000) + \
        uv(struct.unpack("<Q", struct.pack("<d", 61.5))[0])
    return {"payload": v1, "payload_counters": v2}


def hseg_payload(strs):
    p = uv(1796041722) + uv(1796041782) + uv(4242) + uv(len(strs))
    for t in strs:
        p += uv(len(t)) + t
    p += uv(2)
    # cpu: all > Main > Work, two rows on two threads
    p += uv(0) + uv(3) + uv(0) + uv(2) + uv(1) + uv(3)
    p += uv(2) + uv(2) + uv(7) + uv(0) + uv(5) + uv(50000000) + uv(0)
    p += uv(2) + uv(8) + uv(0) + uv(1) + uv(10000000) + uv(0)
    # alloc: Main, labelled
    p += uv(2) + uv(2) + uv(0) + uv(2)
    p += uv(2) + uv(1) + uv(7) + uv(4) + uv(100) + uv(6400) + uv(1)
    p += uv(1) + uv(5) + uv(1796041722 * 1000 + 500) + uv(9) + b"deploy 42"
    # a GC second and a collection
    p += uv(1) + uv(1796041723000) + uv(1000000) + uv(900000) + uv(250000) + uv(200000) + \
        uv(50000) + uv(12000) + b"".join(uv(x) for x in (1, 2, 3, 4, 5, 7, 1, 0))
    p += uv(1) + b"".join(uv(x) for x in (42, 2, 1, 1, 1, 1796041722500, 12500, 3250, 1000, 600,
                                          300))
    return p


def main():
    for target, seeds in (("fuzz_events", events()), ("fuzz_heapdump", heapdump()), ("fuzz_query", query()),
                          ("fuzz_pprof", pprof()), ("fuzz_flame", flame()), ("fuzz_text", text()),
                          ("fuzz_hseg", hseg())):
        d = os.path.join(HERE, "corpus", target)
        os.makedirs(d, exist_ok=True)
        for name, data in seeds.items():
            with open(os.path.join(d, name), "wb") as f:
                f.write(data)


if __name__ == "__main__":
    main()
