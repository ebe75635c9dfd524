"""
gcdump_reader.py - an independent, strict reader of .gcdump files (FastSerialization stream with a
GCHeapDump entry object holding a Graphs.MemoryGraph), written from the format's public definition
(microsoft/perfview src/FastSerialization/FastSerialization.cs, src/MemoryGraph/graph.cs,
src/HeapDump/GCHeapDump.cs). It follows the C# reader's rules: signature, tags, versions, the
undefined node, compressed ints, child ranges, end tags and the trailer, and raises ValueError on
anything the real reader would reject.

    dump = read_gcdump(path)
    dump["nodes"] -> list of (type_index, size, [children]); dump["types"] -> [(name, size, module)]
    heapstat(dump) -> {type name: (count, bytes)} as `dotnet-gcdump report` sums it
"""
import struct

TAG_NULL, TAG_OBJREF, TAG_FWDREF, TAG_BEGIN, TAG_BEGIN_PRIVATE, TAG_END = 1, 2, 3, 4, 5, 6
TAG_FWDDEF, TAG_BYTE, TAG_INT16, TAG_INT32, TAG_INT64, TAG_SKIP, TAG_STRING, TAG_BLOB = \
    7, 8, 9, 10, 11, 12, 13, 14


class Stream:
    def __init__(self, data):
        self.d = data
        self.p = 0

    def need(self, n):
        if n < 0 or self.p + n > len(self.d):
            raise ValueError(f"truncated at {self.p} (need {n} bytes)")

    def u8(self):
        self.need(1)
        v = self.d[self.p]
        self.p += 1
        return v

    def i32(self):
        self.need(4)
        v = struct.unpack_from("<i", self.d, self.p)[0]
        self.p += 4
        return v

    def i64(self):
        self.need(8)
        v = struct.unpack_from("<q", self.d, self.p)[0]
        self.p += 8
        return v

    def f32(self):
        self.need(4)
        v = struct.unpack_from("<f", self.d, self.p)[0]
        self.p += 4
        return v

    def string(self):
        n = self.i32()
        if n == -1:
            return None
        if n < 0:
            raise ValueError(f"bad string length {n} at {self.p - 4}")
        units = []
        while len(units) < n:
            b = self.u8()
            if b < 0x80:
                units.append(b)
            elif b < 0xE0:
                units.append(((b & 0x1F) << 6) | (self.u8() & 0x3F))
            else:
                b2, b3 = self.u8(), self.u8()
                units.append(((b & 0x0F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F))
        return struct.pack(f"<{n}H", *units).decode("utf-16-le", errors="replace")

    def tag(self, want=None):
        t = self.u8()
        if want is not None and t != want:
            raise ValueError(f"expected tag {want} at {self.p - 1}, found {t}")
        return t


def cint(data, p):
    """Graph's compressed int: signed, 7 bits per byte, most significant first."""
    if p >= len(data):
        raise ValueError("compressed int past the blob")
    b = data[p]
    v = b & 0x7F
    if v & 0x40:
        v -= 0x80
    n = 1
    while b & 0x80:
        if n == 5 or p + n >= len(data):
            raise ValueError("compressed int too long")
        b = data[p + n]
        v = (v << 7) + (b & 0x7F)
        n += 1
    v &= 0xFFFFFFFF  # C# int arithmetic
    if v >= 0x80000000:
        v -= 0x100000000
    return v, p + n


def read_type(s):
    """An inline SerializationType object: returns (version, min_reader, name)."""
    s.tag(TAG_BEGIN)
    s.tag(TAG_NULL)
    version, min_reader, name = s.i32(), s.i32(), s.string()
    s.tag(TAG_END)
    return version, min_reader, name


def read_gcdump(path_or_bytes):
    data = path_or_bytes if isinstance(path_or_bytes, (bytes, bytearray)) else \
        open(path_or_bytes, "rb").read()
    s = Stream(data)
    if s.i32() != 20 or s.d[s.p:s.p + 20] != b"!FastSerialization.1":
        raise ValueError("not a FastSerialization stream")
    s.p += 20
    s.tag(TAG_BEGIN)
    version, min_reader, name = read_type(s)
    if name != "GCHeapDump":
        raise ValueError(f"entry object is {name!r}, not GCHeapDump")
    if version < 9 or min_reader > 10 or version < 4:
        raise ValueError(f"GCHeapDump version {version} / reader {min_reader} not readable")
    # MemoryGraph
    s.tag(TAG_BEGIN)
    gv, gmin, gname = read_type(s)
    if gname != "Graphs.MemoryGraph" or gmin > 1:
        raise ValueError(f"graph object {gname!r} v{gv} min reader {gmin}")
    total = s.i64()
    root = s.i32()
    ntypes = s.i32()
    if ntypes < 1:
        raise ValueError("no types")
    types = [(s.string(), s.i32(), s.string()) for _ in range(ntypes)]
    nnodes = s.i32()
    offsets = [s.i32() for _ in range(nnodes)]
    bloblen = s.i32()
    s.need(bloblen)
    blob = s.d[s.p:s.p + bloblen]
    s.p += bloblen
    if gmin >= 1:
        raise ValueError("deferred-type region not expected")
    naddr = s.i32()
    if naddr != nnodes:
        raise ValueError(f"{naddr} addresses for {nnodes} nodes")
    addrs = [s.i64() for _ in range(naddr)]
    is64 = False
    if s.d[s.p] == TAG_BYTE:
        s.p += 1
        is64 = s.u8() != 0
    s.tag(TAG_END)  # MemoryGraph's end (the C# reader skips unknown tagged fields first)
    # the rest of GCHeapDump
    s.u8()  # Is64Bit again
    cmul, smul = s.f32(), s.f32()
    s.tag(TAG_NULL)  # JSHeapInfo (we write none)
    t = s.tag()
    if t != TAG_NULL:
        raise ValueError("DotNetHeapInfo object not expected from clrscope")
    meta = {"log": s.string(), "ticks": s.i64(), "machine": s.string(), "process": s.string(),
            "pid": s.i32(), "commit": s.i64(), "working_set": s.i64()}
    nmul = s.i32()
    if nmul:
        [s.f32() for _ in range(nmul)]
    tool = None
    if s.d[s.p] == TAG_STRING:
        s.p += 1
        tool = s.string()
    s.tag(TAG_END)  # GCHeapDump
    s.tag(TAG_END)  # end of objects
    table = s.p
    if s.i32() != 0:
        raise ValueError("forward references not expected")
    trailer = s.p
    if s.i32() != table:
        raise ValueError("trailer does not point at the forward-reference table")
    if s.i32() != trailer:
        raise ValueError("last label does not point at the trailer")
    if s.p != len(data):
        raise ValueError(f"{len(data) - s.p} bytes after the trailer")
    # decode the nodes
    if blob[:2] != b"\x00\x00":
        raise ValueError("blob does not start with the undefined node")
    nodes = []
    size_sum = 0
    for i, off in enumerate(offsets):
        if off <= 0 or off >= bloblen:
            raise ValueError(f"node {i}: offset {off} outside the blob (or undefined)")
        ts, p = cint(blob, off)
        ti = ts >> 1
        if ti < 0 or ti >= ntypes:
            raise ValueError(f"node {i}: type {ti} out of range")
        if ts & 1:
            size, p = cint(blob, p)
        else:
            size = types[ti][1]
        nkids, p = cint(blob, p)
        if nkids < 0:
            raise ValueError(f"node {i}: negative child count")
        kids = []
        for _ in range(nkids):
            d, p = cint(blob, p)
            c = d + i
            if c < 0 or c >= nnodes:
                raise ValueError(f"node {i}: child {c} out of range")
            kids.append(c)
        nodes.append((ti, size, kids))
        size_sum += size
    if size_sum != total:
        raise ValueError(f"total size {total} != sum of node sizes {size_sum}")
    if not (0 <= root < nnodes):
        raise ValueError(f"root index {root} out of range")
    # each type's recorded size is the size of its first node, as Graph.SetNode records it
    first = {}
    for ti, size, _ in nodes:
        first.setdefault(ti, size)
    for ti, (name, tsize, _) in enumerate(types):
        if ti in first and first[ti] != tsize:
            raise ValueError(f"type {name!r}: size {tsize} is not its first node's {first[ti]}")
    return {"version": version, "types": types, "nodes": nodes, "addresses": addrs,
            "root": root, "total": total, "is64": is64, "tool": tool, "meta": meta,
            "multipliers": (cmul, smul)}


def heapstat(dump):
    """{type name: [count, bytes]} over every node (what dotnet-gcdump's report sums)."""
    out = {}
    for ti, size, _ in dump["nodes"]:
        name = dump["types"][ti][0]
        e = out.setdefault(name, [0, 0])
        e[0] += 1
        e[1] += size
    return out


def reachable(dump):
    """Node indices reachable from the root (iterative)."""
    seen = bytearray(len(dump["nodes"]))
    stack = [dump["root"]]
    seen[dump["root"]] = 1
    while stack:
        v = stack.pop()
        for c in dump["nodes"][v][2]:
            if not seen[c]:
                seen[c] = 1
                stack.append(c)
    return seen


def main(argv):
    d = read_gcdump(argv[1])
    hs = heapstat(d)
    lines = [f"{d['total']:>15,}  GC Heap bytes", f"{len(d['nodes']):>15,}  GC Heap objects"]
    for name, (count, size) in sorted(hs.items(), key=lambda kv: -kv[1][1])[:40]:
        if size:
            lines.append(f"{size:>15,}  {count:>8,}  {name}")
    try:
        print("\n".join(lines))
    except BrokenPipeError:
        pass


if __name__ == "__main__":
    import sys
    main(sys.argv)
