#!/usr/bin/env python3
"""check_layers.py SOURCE_DIR NM OBJECT... - the house's direction, checked on the code itself.

runtime -> profiler/ (capture) -> api/ (replies built from what capture publishes) -> web/
(civetweb) + static/. Fails, naming the file and line, when:
- a file under profiler/ includes a header of api/ or web/ (the composition root, prof_entry.c,
  is the one file that starts both capture and the server);
- a file under api/ includes <civetweb.h> or a header of web/;
- a CMakeLists.txt links with --start-group (libraries link one way: core <- api <- web);
- a source file (C, JavaScript, CSS, HTML) of the product is over 1,000 lines;
- the objects' calls (a file calls a function another file defines, read from `nm`) form a
  circle of more than three files.
"""
import collections
import os
import re
import subprocess
import sys

MAX_LINES = 1000
MAX_CIRCLE = 3
COMPOSITION_ROOT = "prof_entry.c"


def headers_of(folder):
    return {f for _, _, files in os.walk(folder) for f in files if f.endswith(".h")}


def sources(root, top, exts):
    for d, _, files in os.walk(os.path.join(root, top)):
        for f in sorted(files):
            if f.endswith(exts):
                yield os.path.join(d, f)


def includes(path):
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            m = re.match(r'\s*#\s*include\s*([<"])([^>"]+)[>"]', line)
            if m:
                yield n, m.group(1), os.path.basename(m.group(2))


def check_includes(root, problems):
    api_h, web_h = headers_of(os.path.join(root, "api")), headers_of(os.path.join(root, "web"))
    for path in sources(root, "profiler", (".c", ".h")):
        if os.path.basename(path) == COMPOSITION_ROOT:
            continue
        for n, _, name in includes(path):
            if name in api_h or name in web_h:
                problems.append(f"{os.path.relpath(path, root)}:{n}: capture includes {name}")
    for path in sources(root, "api", (".c", ".h")):
        for n, kind, name in includes(path):
            if name in web_h or (kind == "<" and name == "civetweb.h"):
                problems.append(f"{os.path.relpath(path, root)}:{n}: the api includes {name}")


def check_link_lines(root, problems):
    for d, dirs, files in os.walk(root):
        dirs[:] = [x for x in dirs if not x.startswith(".") and not x.startswith("build")
                   and x != "node_modules"]
        if "CMakeLists.txt" in files:
            path = os.path.join(d, "CMakeLists.txt")
            with open(path, encoding="utf-8") as f:
                for n, line in enumerate(f, 1):
                    if "--start-group" in line and not line.lstrip().startswith("#"):
                        problems.append(f"{os.path.relpath(path, root)}:{n}: --start-group")


def check_sizes(root, problems):
    for top in ("profiler", "api", "web", "static", "tools"):
        for path in sources(root, top, (".c", ".h", ".js", ".mjs", ".css", ".html")):
            with open(path, encoding="utf-8", errors="replace") as f:
                n = sum(1 for _ in f)
            if n > MAX_LINES:
                problems.append(f"{os.path.relpath(path, root)}: {n} lines (at most {MAX_LINES})")


def call_graph(nm, objects):
    defined, undefined = {}, {}
    for o in objects:
        name = re.sub(r"\.c\.o$", "", os.path.basename(o))
        out = subprocess.run([nm, o], capture_output=True, text=True, check=True).stdout
        d, u = set(), set()
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 3 and parts[1] in "TDBR":
                d.add(parts[2])
            elif len(parts) == 2 and parts[0] == "U":
                u.add(parts[1])
        defined[name], undefined[name] = d, u
    owner = {s: n for n, d in defined.items() for s in d}
    edges = collections.defaultdict(set)
    for n, u in undefined.items():
        for s in u:
            if s in owner and owner[s] != n:
                edges[n].add(owner[s])
    return edges


def circles(edges):
    """Strongly connected components (Tarjan's, without recursion)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    nodes = sorted(set(edges) | {b for s in edges.values() for b in s})
    for start in nodes:
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, ()))))]
        index[start] = low[start] = counter[0]
        counter[0] += 1
        stack.append(start)
        on.add(start)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def main():
    root, nm = sys.argv[1], sys.argv[2]
    objects = [o for arg in sys.argv[3:] for o in arg.split(";") if o]  # CMake's lists too
    problems = []
    check_includes(root, problems)
    check_link_lines(root, problems)
    check_sizes(root, problems)
    edges = call_graph(nm, objects)
    for comp in circles(edges):
        if len(comp) > MAX_CIRCLE:
            ties = [f"{a} -> {b}" for a in comp for b in sorted(edges[a]) if b in comp]
            problems.append(f"a circle of {len(comp)} files: " + ", ".join(ties))
    for p in problems:
        print("FAIL", p)
    print(f"{0 if problems else 1} passed, {len(problems)} failed: layers, link lines, sizes, "
          f"circles of {len(objects)} objects")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
