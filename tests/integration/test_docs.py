"""
The documentation against the code and a real app, so that neither drifts from the other:

- every endpoint in docs/api.md answers on a real .NET app under the profiler, with every field
  its table lists (optional fields only when present), and /metrics with exactly the metric
  families the table lists;
- every variable in docs/configuration.md is one the C sources read, and every one they read is
  in it;
- every path the server routes is in docs/api.md;
- every relative link in README.md and docs/**/*.md resolves, #anchors to a heading, and every
  file of the repository they name in code (`profiler/store/prof_store.c`) exists.

The docs are read the way their pages say: an endpoint is a heading "## `METHOD /path`" (with
"Aliases:" and "Example:" lines below it), a field table has "field" as its first column (`a.b`,
`a[].b`, `a.{x,y}`; "optional" in the type column), the metric table "metric", and a variable
table "variable".
"""
import glob
import gzip
import json
import os
import re
import unittest

from harness import REPO, ProfiledApp

DOCS = os.path.join(REPO, "docs")
API_MD = os.path.join(DOCS, "api.md")
# the contract's endpoints: the JSON API, and the pprof and Prometheus endpoints beside it
API_PAGES = [API_MD, os.path.join(DOCS, "pprof-and-metrics.md")]
CONFIG_MD = os.path.join(DOCS, "configuration.md")

# Where the server's routes are declared (the route table and the handlers that parse a
# sub-path), and where the environment is read: every C file of these trees.
ROUTE_TABLE = os.path.join(REPO, "api", "api_routes.c")
VARIABLE_SOURCES = [os.path.join(REPO, d) for d in ("profiler", "web", "api", "tools")]


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def c_files(roots):
    out = []
    for root in roots:
        out += glob.glob(os.path.join(root, "**", "*.[ch]"), recursive=True)
    return sorted(out)


def expand(name):
    """`a.{x,y}.b` -> ["a.x.b", "a.y.b"]: the field tables' shorthand."""
    m = re.search(r"\{([^{}]*)\}", name)
    if not m:
        return [name]
    return [x for alt in m.group(1).split(",")
            for x in expand(name[:m.start()] + alt.strip() + name[m.end():])]


def table_rows(section, first_header):
    """The rows (lists of cells) of each table in `section` whose first header cell is
    `first_header`."""
    rows, inside = [], False
    for line in section.splitlines():
        if not line.startswith("|"):
            inside = False
            continue
        cells = [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]
        if not inside:
            inside = cells and cells[0] == first_header
            header = True
            continue
        if header:  # the |---| line
            header = False
            continue
        rows.append(cells)
    return rows


def doc_endpoints(text):
    """[{method, path, example, aliases, fields: [(path, optional)], metrics: [name]}]"""
    out = []
    parts = re.split(r"^## ", text, flags=re.M)
    for part in parts[1:]:
        m = re.match(r"`(GET|POST|DELETE) (/[^`]*)`\s*$", part.splitlines()[0])
        if not m:
            continue
        ep = {"method": m.group(1), "path": m.group(2), "aliases": [], "fields": [],
              "metrics": []}
        ex = re.search(r"Example: `(?:GET|POST|DELETE) ([^`]+)`", part)
        ep["example"] = ex.group(1) if ex else ep["path"]
        al = re.search(r"^Aliases: (.*)$", part, flags=re.M)
        if al:
            ep["aliases"] = re.findall(r"`(?:GET|POST|DELETE) (/[^`]*)`", al.group(1))
        for cells in table_rows(part, "field"):
            optional = "optional" in cells[1]
            for name in re.findall(r"`([^`]+)`", cells[0]):
                ep["fields"] += [(f, optional) for f in expand(name)]
        for cells in table_rows(part, "metric"):
            for name in re.findall(r"`([^`]+)`", cells[0]):
                ep["metrics"] += expand(name)
        out.append(ep)
    return out


def missing_fields(reply, fields):
    """The documented fields (not optional) that `reply` lacks, and the fields present whose
    optional ancestor is absent are skipped: ["path: why", ...]."""
    optional = {f for f, opt in fields if opt}
    problems = []
    for path, opt in fields:
        nodes = [reply]
        walked = ""
        for seg in path.split("."):
            is_list = seg.endswith("[]")
            key = seg[:-2] if is_list else seg
            walked = f"{walked}.{key}" if walked else key
            nxt = []
            for node in nodes:
                if not isinstance(node, dict) or key not in node:
                    if not (opt or walked in optional or any(
                            walked.startswith(o + ".") or walked.startswith(o + "[]")
                            for o in optional)):
                        problems.append(f"{path}: no '{walked}'")
                    continue
                value = node[key]
                if is_list:
                    if not isinstance(value, list):
                        problems.append(f"{path}: '{walked}' is not an array")
                        continue
                    nxt += value[:50]
                else:
                    nxt.append(value)
            nodes = [n for n in nxt if n is not None]
            walked += "[]" if is_list else ""
            if not nodes:
                break
    return sorted(set(problems))


def code_variables(roots=VARIABLE_SOURCES):
    """Every CLRSCOPE_* and DD_* name a C string literal starts with."""
    names = set()
    for path in c_files(roots):
        names |= set(re.findall(r'"((?:CLRSCOPE|DD)_[A-Z0-9_]*[A-Z0-9])', read(path)))
    return names


def doc_variables(text):
    names = set()
    for cells in table_rows(text, "variable"):
        names |= set(re.findall(r"`((?:CLRSCOPE|DD)_[A-Z0-9_]+)`", cells[0]))
    return names


def routed_paths(path=ROUTE_TABLE):
    """The routes the server serves, read from the API's route table (api/api_routes.c, one row
    a line: {METHODS, "/path", handler, message}): [(method, path)]. The {name} rows are the
    table's catch-alls, which answer 404 for what no other row names: they are no endpoint."""
    methods = {"API_GET": ["GET"], "API_POST": ["POST"], "API_DELETE": ["DELETE"]}
    text = read(path)
    for alias, value in re.findall(r"#define\s+(\w+)\s+\(([^)]*)\)", text):
        methods[alias] = [m for part in value.split("|") for m in methods.get(part.strip(), [])]
    routes = []
    for flags, route in re.findall(r'^\s*\{([A-Z_| ]+),\s*"(/[^"]*)"', text, flags=re.M):
        if "{name}" in route:
            continue
        for flag in flags.split("|"):
            routes += [(m, route) for m in methods.get(flag.strip(), [flag.strip()])]
    return routes


def slug(heading):
    """GitHub's anchor of a heading."""
    s = re.sub(r"[`*]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip())
    s = re.sub(r"[^\w\- ]", "", s.lower(), flags=re.U)
    return s.replace(" ", "-")


def anchors(path):
    text = re.sub(r"^```.*?^```", "", read(path), flags=re.M | re.S)
    seen, out = {}, set()
    for h in re.findall(r"^#{1,6} (.+?)\s*#*$", text, flags=re.M):
        base = slug(h)
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def markdown_files():
    return [os.path.join(REPO, "README.md")] + sorted(
        glob.glob(os.path.join(DOCS, "**", "*.md"), recursive=True))


def broken_links(path):
    text = re.sub(r"^```.*?^```", "", read(path), flags=re.M | re.S)
    text = re.sub(r"`[^`\n]*`", "", text)
    bad = []
    for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
        if re.match(r"[a-z]+:", target):
            continue  # http:, https:, mailto:
        file, _, anchor = target.partition("#")
        dest = os.path.normpath(os.path.join(os.path.dirname(path), file)) if file else path
        if not os.path.exists(dest):
            bad.append(f"{target}: no {os.path.relpath(dest, REPO)}")
        elif anchor and dest.endswith(".md") and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {os.path.relpath(dest, REPO)}")
    return bad


def missing_source_paths(path):
    """Files of the repository a page names in code spans (`profiler/store/prof_store.c`,
    `tests/apps/README.md`) that do not exist: a module moved and its page not updated."""
    text = re.sub(r"^```.*?^```", "", read(path), flags=re.M | re.S)
    roots = ("profiler", "api", "web", "static", "tests", "tools", "bench")
    names = re.findall(r"`((?:%s)/[\w./-]+)`" % "|".join(roots), text)
    return sorted({n for n in names if not os.path.exists(os.path.join(REPO, n.rstrip("/")))})


class Documents(unittest.TestCase):
    """The docs against the sources: no app needed."""

    def test_every_variable_documented_is_read_and_every_one_read_is_documented(self):
        code = code_variables()
        doc = doc_variables(read(CONFIG_MD))
        self.assertGreater(len(code), 40, "the scan of the C sources found too few variables")
        self.assertEqual(sorted(doc - code), [], "in docs/configuration.md, read by no code")
        self.assertEqual(sorted(code - doc), [], "read by the code, not in docs/configuration.md")

    def test_every_routed_path_is_documented(self):
        routes = routed_paths()
        self.assertGreater(len(routes), 10, "the scan found no route table: point ROUTE_TABLE "
                           "at the file that declares the routes")
        documented = set()
        for ep in doc_endpoints("\n".join(read(p) for p in API_PAGES)):
            for p in [ep["path"]] + ep["aliases"]:
                documented.add((ep["method"], p.rstrip("/") or "/"))
        missing = [f"{m} {p}" for m, p in routes if (m, p.rstrip("/") or "/") not in documented]
        self.assertEqual(missing, [], "routed by the server, not in docs/api.md")

    def test_relative_links_resolve(self):
        files = markdown_files()
        self.assertGreater(len(files), 5)
        bad = {os.path.relpath(f, REPO): broken_links(f) for f in files}
        self.assertEqual({k: v for k, v in bad.items() if v}, {})

    def test_source_files_named_exist(self):
        bad = {os.path.relpath(f, REPO): missing_source_paths(f) for f in markdown_files()}
        self.assertEqual({k: v for k, v in bad.items() if v}, {}, "named in the docs, not in the "
                         "repository: update the page for the move")


class Endpoints(unittest.TestCase):
    """Every endpoint of docs/api.md on a real app (the demo: every workload, every profile)."""

    @classmethod
    def setUpClass(cls):
        cls.endpoints = doc_endpoints("\n".join(read(p) for p in API_PAGES))
        # three heap snapshots and the documented POST, back to back: no interval between them
        cls.app = ProfiledApp("demo", ["--seconds", "0", "--mb-per-s", "20"],
                              env={"CLRSCOPE_DUMP_MIN_INTERVAL_S": "0"})
        cls.app.start()
        cls.app.wait_ready()
        # history for every table, the runtime's counters, and heap snapshots for {id}
        cls.app.wait_json("/api/v1/counters", lambda c: c["counters"], timeout=60)
        cls.app.wait_json("/api/v1/exceptions", lambda e: e["types"], timeout=60)
        cls.snapshots = [cls.snapshot() for _ in range(3)]

    @classmethod
    def tearDownClass(cls):
        cls.app.stop()

    @classmethod
    def snapshot(cls):
        created = cls.app.json("/api/v1/gcdump", expect=202, method="POST")
        cls.app.wait_json(f"/api/v1/gcdump/{created['id']}?limit=0",
                          lambda s: s["status"] != "running", timeout=120)
        return created["id"]

    def url_of(self, example):
        ids = iter(self.snapshots)
        return re.sub(r"\{id\}", lambda _: str(next(ids)), example)

    def test_api_md_lists_the_endpoints(self):
        self.assertGreater(len(self.endpoints), 20)

    def test_every_endpoint_answers_with_its_documented_fields(self):
        # deletion last: it takes the third snapshot away
        for ep in sorted(self.endpoints, key=lambda e: e["method"] == "DELETE"):
            for path in [ep["example"]] + ep["aliases"]:
                with self.subTest(endpoint=f"{ep['method']} {path}"):
                    self.check(ep, self.url_of(path))

    def check(self, ep, url):
        if ep["method"] == "DELETE":
            url = f"/api/v1/gcdump/{self.snapshots[-1]}"
        status, headers, body = self.app.request(url, method=ep["method"])
        self.assertIn(status, (200, 201, 202), f"{ep['method']} {url}: {status} {body[:300]!r}")
        kind = headers.get("Content-Type", "")
        if kind.startswith("application/json"):
            reply = json.loads(body)
            self.assertEqual(missing_fields(reply, ep["fields"]), [],
                             f"{url}: fields docs/api.md lists that the reply lacks")
            if not ep["fields"]:
                self.assertNotIn("error", reply)
        elif ep["metrics"]:
            families = set(re.findall(r"^# TYPE (\S+) ", body.decode(), flags=re.M))
            self.assertEqual(sorted(set(ep["metrics"]) - families), [],
                             "documented, not served")
            self.assertEqual(sorted(families - set(ep["metrics"])), [], "served, not documented")
        elif kind == "application/octet-stream" and url.startswith("/debug/pprof/"):
            self.assertGreater(len(gzip.decompress(body)), 0)
        else:
            self.assertGreater(len(body), 0, url)
        self.assertFalse(ep["fields"] and not kind.startswith("application/json"),
                         f"{url}: fields documented, but the reply is {kind}")


if __name__ == "__main__":
    unittest.main()
