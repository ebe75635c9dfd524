"""
pprofdec.py - a minimal reader of gzip'd pprof profiles (google/pprof proto/profile.proto), enough
for tests to check sample types, sum values and see frame names and labels without `go`.

    p = read_pprof(path)
    p.sample_types        -> [("exception", "count")]
    p.totals()            -> {"exception": 22003}
    p.stacks()            -> [(["leaf", ..., "root"], [values], {"label key": "value"})]
"""
import gzip


def _varint(b, i):
    shift = result = 0
    while True:
        c = b[i]
        i += 1
        result |= (c & 0x7F) << shift
        if not c & 0x80:
            return result, i
        shift += 7


def _fields(b):
    """Yields (field number, wire type, value) of one message; value is int or bytes."""
    i = 0
    while i < len(b):
        key, i = _varint(b, i)
        fn, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint(b, i)
        elif wt == 2:
            n, i = _varint(b, i)
            v, i = b[i:i + n], i + n
        elif wt == 1:
            v, i = int.from_bytes(b[i:i + 8], "little"), i + 8
        elif wt == 5:
            v, i = int.from_bytes(b[i:i + 4], "little"), i + 4
        else:
            raise ValueError(f"wire type {wt}")
        yield fn, wt, v


def _ints(wt, v):
    """A repeated int64 field: packed (bytes) or one value."""
    if wt == 0:
        return [v]
    out, i = [], 0
    while i < len(v):
        x, i = _varint(v, i)
        out.append(x - (1 << 64) if x >= 1 << 63 else x)
    return out


class Profile:
    def __init__(self, data):
        self.time_nanos = self.duration_nanos = 0
        raw_types, raw_samples, locs, funcs, strings = [], [], {}, {}, []
        for fn, wt, v in _fields(data):
            if fn == 1:
                raw_types.append(dict((f, x) for f, _, x in _fields(v)))
            elif fn == 2:
                loc_ids, vals, labels = [], [], []
                for f, w, x in _fields(v):
                    if f == 1:
                        loc_ids += _ints(w, x)
                    elif f == 2:
                        vals += _ints(w, x)
                    elif f == 3:
                        labels.append(dict((g, y) for g, _, y in _fields(x)))
                raw_samples.append((loc_ids, vals, labels))
            elif fn == 4:
                lid, fids = 0, []
                for f, w, x in _fields(v):
                    if f == 1:
                        lid = x
                    elif f == 4:
                        fids += [y for g, _, y in _fields(x) if g == 1]
                locs[lid] = fids
            elif fn == 5:
                d = dict((f, x) for f, _, x in _fields(v))
                funcs[d.get(1, 0)] = d.get(2, 0)
            elif fn == 6:
                strings.append(v.decode("utf-8", "replace"))
            elif fn == 9:
                self.time_nanos = v
            elif fn == 10:
                self.duration_nanos = v
        s = lambda k: strings[k] if 0 <= k < len(strings) else ""
        self.strings = strings
        self.sample_types = [(s(t.get(1, 0)), s(t.get(2, 0))) for t in raw_types]
        self.samples = []
        for loc_ids, vals, labels in raw_samples:
            frames = [s(funcs.get(fid, 0)) for lid in loc_ids for fid in locs.get(lid, [])]
            lab = {s(l.get(1, 0)): s(l.get(2, 0)) if l.get(2) else l.get(3, 0) for l in labels}
            self.samples.append((frames, vals, lab))

    def totals(self):
        out = {name: 0 for name, _ in self.sample_types}
        for _, vals, _ in self.samples:
            for (name, _), v in zip(self.sample_types, vals):
                out[name] += v
        return out

    def stacks(self):
        return list(self.samples)


def read_pprof(path):
    with open(path, "rb") as f:
        return Profile(gzip.decompress(f.read()))
