"""
histdec - an independent reader of clrscope's history segments (docs/history.md gives the
format): header, CRC-32, zlib, then unsigned LEB128 numbers and byte strings. For tests: what a
segment holds, read without clrscope's own code.
"""
import struct
import zlib

KINDS = ["cpu", "wall", "alloc", "exceptions", "lock", "alloc_type"]


class Reader:
    def __init__(self, b):
        self.b, self.i = b, 0

    def u(self):
        x, shift = 0, 0
        while True:
            c = self.b[self.i]
            self.i += 1
            x |= (c & 0x7F) << shift
            shift += 7
            if not c & 0x80:
                return x

    def s(self):
        n = self.u()
        v = self.b[self.i:self.i + n].decode("utf-8", "replace")
        self.i += n
        return v


def read_segment(data):
    """{"t_from", "t_to", "pid", "kinds": {name: [(path tuple, tid, label, [v0, v1, v2])]},
    "marks": [(t, label)], "gc_seconds": [{...}], "gc_collections": [{...}],
    "gc_omitted": collections left out, "counters": [{name, units, incrementing, t, interval_s,
    value}]}; raises ValueError
    for a torn or altered file."""
    if len(data) < 24 or data[:8] != b"clrshist":
        raise ValueError("not a segment")
    raw, zn, crc = struct.unpack_from("<III", data, 12)
    if len(data) - 24 != zn:
        raise ValueError("torn")
    if zlib.crc32(data[24:]) != crc:
        raise ValueError("checksum")
    p = zlib.decompress(data[24:])
    if len(p) != raw:
        raise ValueError("length")
    r = Reader(p)
    seg = {"t_from": r.u(), "t_to": r.u(), "pid": r.u(), "kinds": {}, "marks": []}
    strs = [r.s() for _ in range(r.u())]
    for _ in range(r.u()):
        kind, nn = r.u(), r.u()
        parent, name = [0], ["all"]
        for _ in range(1, nn):
            parent.append(r.u())
            name.append(strs[r.u()])
        rows = []
        for _ in range(r.u()):
            node, tid, label = r.u(), r.u(), r.u()
            v = [r.u(), r.u(), r.u()]
            path = []
            while node:
                path.append(name[node])
                node = parent[node]
            rows.append((tuple(reversed(path)), tid, strs[label], v))
        seg["kinds"][KINDS[kind]] = rows
    for _ in range(r.u()):
        seg["marks"].append((r.u() / 1000.0, r.s()))
    seg["gc_seconds"] = [{"t": r.u() / 1e3, "dt": r.u() / 1e6, "process_cpu_s": r.u() / 1e6,
                          "gc_cpu_s": r.u() / 1e6, "gc_threads_cpu_s": r.u() / 1e6,
                          "gc_user_cpu_s": r.u() / 1e6, "pause_s": r.u() / 1e6,
                          "heap": [r.u() for _ in range(5)], "collections": [r.u() for _ in range(3)]}
                         for _ in range(r.u())]
    seg["gc_collections"] = [dict(zip(("number", "generation", "reason", "type", "complete",
                                       "t_ms", "duration_us", "pause_us", "heap_before",
                                       "heap_after", "promoted"), [r.u() for _ in range(11)]))
                             for _ in range(r.u())]
    seg["counters"], seg["gc_omitted"] = [], 0
    if data[8] >= 2:
        seg["gc_omitted"] = r.u()
        t_ms = seg["t_from"] * 1000
        for _ in range(r.u()):
            name, units, flags, dt, iv_ms, x = strs[r.u()], strs[r.u()], r.u(), r.u(), r.u(), r.u()
            t_ms += (dt >> 1) ^ -(dt & 1)
            value = float((x >> 1) ^ -(x & 1)) if flags & 2 else \
                struct.unpack("<d", struct.pack("<Q", x))[0]
            seg["counters"].append({"name": name, "units": units, "incrementing": flags & 1,
                                    "t": t_ms / 1e3, "interval_s": iv_ms / 1e3, "value": value})
    if r.i != len(p):
        raise ValueError("trailing bytes")
    return seg
