"""
test_gcdump.py - heap snapshots (POST /api/v1/gcdump and below) against the `heap` TestApp mode,
whose heap is known exactly: 100,000 TestApp.Heap.TreeNode in one tree under a static, 12,345
TestApp.Heap.Leaf each with its own byte[100], half of the leaves dropped with --free-after.

Checks: exact counts and bytes against the app's truth, the tree root's retained size (= the whole
tree, from the dominator tree), the shortest root path, the .gcdump file read back by an
independent reader and by `dotnet-gcdump report` (tools/test.sh installs it from NuGet into
BUILD/tools and sets $CLRSCOPE_GCDUMP_TOOL; else PATH; skipped, with a line, when neither has
it), the diff of a snapshot before and after the free, 409 while one runs, 404 for bad ids, the
heap-size guard and ?force=1, retention, and an unwritable dump directory failing cleanly.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import unittest

from harness import ProfiledApp
import gcdump_reader

TREE = "TestApp.Heap.TreeNode"
LEAF = "TestApp.Heap.Leaf"


def wait_done(app, sid, timeout=120):
    deadline = time.time() + timeout
    seen = []
    while time.time() < deadline:
        d = app.json(f"/api/v1/gcdump/{sid}?limit=100000")
        seen.append((d["status"], d["progress"]))
        assert 0 <= d["progress"] <= 1, d
        if d["status"] != "running":
            return d, seen
        time.sleep(0.1)
    raise AssertionError(f"snapshot {sid} still running after {timeout}s: {seen[-3:]}")


def types_by_name(details):
    return {t["type"]: t for t in details["types"]}


def byte_arrays_by_holder(dump):
    """(byte[] nodes that a TestApp.Heap.Leaf points at, the other byte[] nodes) in a dump."""
    types = dump["types"]
    nodes = dump["nodes"]
    held = set()
    for ti, _, kids in nodes:
        if types[ti][0] == LEAF:
            held.update(c for c in kids if types[nodes[c][0]][0] == "System.Byte[]")
    total = sum(1 for ti, _, _ in nodes if types[ti][0] == "System.Byte[]")
    return len(held), total - len(held)


def open_files(pid):
    """What the process's descriptors point at; one closed while listed is skipped."""
    held = []
    for n in os.listdir(f"/proc/{pid}/fd"):
        try:
            held.append(os.readlink(f"/proc/{pid}/fd/{n}"))
        except FileNotFoundError:
            pass
    return held


def gcdump_tool():
    tool = os.environ.get("CLRSCOPE_GCDUMP_TOOL") or shutil.which("dotnet-gcdump")
    return tool if tool and os.path.exists(tool) else None


class GcdumpTest(unittest.TestCase):
    def test_snapshot_diff_and_file(self):
        dumps = tempfile.mkdtemp(prefix="clrscope-dumps-")
        # (snapshots back to back: no CLRSCOPE_DUMP_MIN_INTERVAL_S between them)
        with ProfiledApp("heap", ["--seconds", "90", "--free-after", "12"],
                         env={"CLRSCOPE_DUMP_DIR": dumps,
                              "CLRSCOPE_DUMP_MIN_INTERVAL_S": "0"}) as app:
            app.wait_ready()
            # one at a time: a request while one runs is refused. A snapshot of this heap takes
            # 100+ ms and the second request follows at once; should the machine stall the test
            # that long, the pair is retried (the refusal itself is what is checked)
            for attempt in range(3):
                st, _, body = app.request("/api/v1/gcdump", method="POST", data=b"")
                self.assertEqual(st, 202, body)
                first = json.loads(body)
                self.assertEqual(first["status"], "running")
                st2, _, body2 = app.request("/api/v1/gcdump", method="POST", data=b"")
                if st2 == 202:
                    wait_done(app, json.loads(body2)["id"])
                    continue
                self.assertEqual(st2, 409, body2)
                self.assertEqual(json.loads(body2).get("running_id"), first["id"])
                self.assertIn("error", json.loads(body2))
                break
            else:
                self.fail("never saw 409 while a snapshot ran")

            # the file asked for while the snapshot runs, back to back: each 409 must leave no
            # descriptor behind, also once the file is written but the summary not yet done
            early, stop = [], threading.Event()

            def ask_file():
                while not stop.is_set():
                    early.append(app.request(f"/api/v1/gcdump/{first['id']}/file",
                                             method="HEAD")[0])
            asker = threading.Thread(target=ask_file)
            asker.start()
            try:
                a, seen = wait_done(app, first["id"])
            finally:
                stop.set()
                asker.join()
            self.assertIn(409, early)
            # (a HEAD that got its 200 closed its descriptor before replying, so none may be open)
            self.assertEqual([h for h in open_files(app.pid) if h.startswith(dumps)], [],
                             "descriptors left open")
            self.assertEqual(a["status"], "done", a.get("error"))
            self.assertIsNone(a["error"])
            self.assertEqual(a["progress"], 1)

            t = types_by_name(a)
            self.assertEqual(t[TREE]["count"], 100000)
            self.assertEqual(t[LEAF]["count"], 12345)
            # a type nested in a generic type, named as C# writes it
            self.assertEqual(t["TestApp.Heap.Box<System.Int32>.Slot"]["count"], 321, sorted(t)[:40])
            # closures are objects of the compiler's display class, not of their enclosing type
            # (the 77 must not show as "TestApp.Heap.HeapRoots", a static class)
            found = app.json(f"/api/v1/gcdump/{first['id']}?search=HeapRoots")["types"]
            names = {x["type"]: x["count"] for x in found}
            closures = sum(c for n, c in names.items()
                           if n.startswith("TestApp.Heap.HeapRoots.<>c__DisplayClass"))
            self.assertEqual(closures, 77, names)
            self.assertNotIn("TestApp.Heap.HeapRoots", names)
            listing = app.json("/api/v1/gcdump")
            self.assertEqual(listing["snapshots"][0]["id"], first["id"], "newest first")
            self.assertEqual(listing["snapshots"][0]["objects"], a["objects"])
            self.assertIsNone(listing["running"])

            # sizes: the app measured its own objects while building them (truth after the free)
            app.wait_stdout("freed leaves=")
            truth = json.loads(app.wait_stdout("truth: ")[len("truth: "):])
            node, leaf, payload = (truth["tree_node_size"], truth["leaf_size"],
                                   truth["leaf_payload_size"])
            self.assertEqual(t[TREE]["bytes"], 100000 * node)
            self.assertEqual(t[LEAF]["bytes"], 12345 * leaf)
            # retained (dominator tree): the root node holds the whole tree, nothing else
            self.assertEqual(t[TREE]["retained"], 100000 * node)
            # each leaf dominates its own byte[100]
            self.assertEqual(t[LEAF]["retained"], 12345 * (leaf + payload))
            self.assertGreaterEqual(t["System.Byte[]"]["count"], 12345)
            self.assertGreaterEqual(t["TestApp.Heap.Leaf[]"]["retained"],
                                    12345 * (leaf + payload) + truth["leaf_array_size"])
            self.assertEqual(a["types"][0]["type"], TREE, "largest retained first")
            self.assertEqual(a["bytes"], sum(x["bytes"] for x in a["types"]))
            self.assertEqual(a["objects"], sum(x["count"] for x in a["types"]))

            # search / limit / sort
            q = app.json(f"/api/v1/gcdump/{first['id']}?search=testapp.heap&sort=count&limit=2")
            self.assertEqual([x["type"] for x in q["types"]], [TREE, LEAF])
            self.assertEqual(app.json(f"/api/v1/gcdump/{first['id']}?limit=0")["types"], [])

            # shortest path from a root: the static field, then the tree's root node
            p = app.json(f"/api/v1/gcdump/{first['id']}/paths?type={TREE}")
            self.assertEqual(p["type"], TREE)
            self.assertGreaterEqual(len(p["paths"]), 1)
            self.assertEqual(p["paths"][0][-1], TREE)
            self.assertEqual(len(p["paths"][0]), 2, p["paths"][0])
            self.assertIn("Tree", p["paths"][0][0])
            lp = app.json(f"/api/v1/gcdump/{first['id']}/paths?type={LEAF}")
            self.assertEqual(lp["paths"][0][-2:], ["TestApp.Heap.Leaf[]", LEAF])

            # the file: a real .gcdump with the same objects
            st, headers, data = app.request(f"/api/v1/gcdump/{first['id']}/file")
            self.assertEqual(st, 200)
            self.assertIn("attachment", headers.get("Content-Disposition", ""))
            self.assertEqual(len(data), a["file_bytes"])
            dump = gcdump_reader.read_gcdump(data)
            hs = gcdump_reader.heapstat(dump)
            self.assertEqual(hs[TREE], [100000, 100000 * node])
            self.assertEqual(hs[LEAF], [12345, 12345 * leaf])
            self.assertEqual(dump["total"], a["bytes"])
            self.assertEqual(dump["tool"], "clrscope")
            self.assertEqual(dump["meta"]["pid"], app.pid)
            # each type names its module's file, as the runtime's own dumps do (arrays: the
            # element type's module), so PerfView and `dotnet-gcdump report` can show it
            mods = {name: mod for name, _, mod in dump["types"]}
            self.assertEqual(os.path.basename(mods[TREE] or ""), "TestApp.dll", mods[TREE])
            self.assertEqual(os.path.basename(mods["TestApp.Heap.Leaf[]"] or ""), "TestApp.dll")
            self.assertEqual(os.path.basename(mods["System.Byte[]"] or ""),
                             "System.Private.CoreLib.dll")
            self.assertEqual(os.path.basename(mods["System.String"] or ""),
                             "System.Private.CoreLib.dll")
            self.assertIsNone(mods["[.NET Roots]"])
            reach = gcdump_reader.reachable(dump)
            tree_nodes = [i for i, (ti, _, _) in enumerate(dump["nodes"])
                          if dump["types"][ti][0] == TREE]
            self.assertTrue(all(reach[i] for i in tree_nodes), "every tree node reachable")
            path = os.path.join(app.tmp, "a.gcdump")
            with open(path, "wb") as f:
                f.write(data)
            tool = gcdump_tool()
            if not tool:
                print("dotnet-gcdump not installed ($CLRSCOPE_GCDUMP_TOOL, PATH): its report "
                      "check skipped", file=sys.stderr)
            else:
                # Microsoft's reader of the same file: its totals (every node, the zero-size
                # root nodes included) and the app's types by count and module
                out = subprocess.run([tool, "report", path], capture_output=True, text=True,
                                     timeout=120)
                self.assertEqual(out.returncode, 0, out.stderr)
                head = {m.group(2): int(m.group(1).replace(",", ""))
                        for m in re.finditer(r"^\s*([\d,]+)\s+GC Heap (bytes|objects)\s*$",
                                             out.stdout, re.M)}
                self.assertEqual(head.get("bytes"), a["bytes"], out.stdout[:500])
                self.assertEqual(head.get("objects"), len(dump["nodes"]), out.stdout[:500])
                for name, count in ((TREE, 100000), (LEAF, 12345),
                                    ("TestApp.Heap.Box<System.Int32>.Slot", 321)):
                    row = [l for l in out.stdout.splitlines()
                           if l.rstrip().endswith(" " + name + "  [TestApp.dll]")]
                    self.assertEqual(len(row), 1, (name, out.stdout[:2000]))
                    self.assertEqual(int(row[0].split()[1].replace(",", "")), count, row[0])

            # after the free: a second snapshot and the diff
            st, _, body = app.request("/api/v1/gcdump", method="POST", data=b"")
            self.assertEqual(st, 202, body)
            second = json.loads(body)["id"]
            b, _ = wait_done(app, second)
            self.assertEqual(b["status"], "done", b.get("error"))
            freed = 12345 - truth["leaves"]
            self.assertEqual(freed, 6173)
            self.assertEqual(types_by_name(b)[LEAF]["count"], truth["leaves"])
            d = app.json(f"/api/v1/gcdump/diff?a={first['id']}&b={second}&limit=100000")
            self.assertEqual((d["a"], d["b"]), (first["id"], second))
            dt = {x["type"]: x for x in d["types"]}
            self.assertEqual(dt[LEAF]["count_a"], 12345)
            self.assertEqual(dt[LEAF]["count_b"], truth["leaves"])
            self.assertEqual(dt[LEAF]["count_delta"], -freed)
            self.assertEqual(dt[LEAF]["bytes_delta"], -freed * leaf)
            # every freed leaf took its byte[100] with it. The heap holds other byte[] too, and
            # their number changes between the snapshots (the runtime's ArrayPool trims its
            # buffers on a full GC: 82 before and 10 after in one run), so each file is read
            # back and its byte[] are split into those a Leaf holds and the others: the diff's
            # delta is exactly the freed payloads plus the others' change
            st, _, data_b = app.request(f"/api/v1/gcdump/{second}/file")
            self.assertEqual(st, 200)
            held_a, other_a = byte_arrays_by_holder(dump)
            held_b, other_b = byte_arrays_by_holder(gcdump_reader.read_gcdump(data_b))
            self.assertEqual((held_a, held_b), (12345, truth["leaves"]))
            self.assertEqual(held_a + other_a, dt["System.Byte[]"]["count_a"])
            self.assertEqual(held_b + other_b, dt["System.Byte[]"]["count_b"])
            self.assertEqual(dt["System.Byte[]"]["count_delta"], -freed + (other_b - other_a),
                             dt["System.Byte[]"])
            self.assertEqual(types_by_name(b)[LEAF]["retained"],
                             truth["leaves"] * (leaf + payload), "each kept leaf holds its bytes")
            self.assertNotIn(TREE, dt, "the tree did not change")
            self.assertEqual(d["types"][0]["type"], "System.Byte[]", "largest change first")

            # bad ids and resources: JSON 404s
            for bad in ("/api/v1/gcdump/999999", "/api/v1/gcdump/abc", "/api/v1/gcdump/-1",
                        "/api/v1/gcdump/0", "/api/v1/gcdump/1x", "/api/v1/gcdump/999999/file",
                        "/api/v1/gcdump/999999/paths?type=X",
                        f"/api/v1/gcdump/{first['id']}/nope",
                        f"/api/v1/gcdump/{first['id']}/paths?type=No.Such.Type",
                        f"/api/v1/gcdump/diff?a={first['id']}&b=999999"):
                st, _, body = app.request(bad)
                self.assertEqual(st, 404, bad)
                self.assertIn("error", json.loads(body), bad)
            st, _, _ = app.request("/api/v1/gcdump/diff?a=x&b=1")
            self.assertEqual(st, 400)
            st, _, _ = app.request(f"/api/v1/gcdump/{first['id']}/paths")
            self.assertEqual(st, 400)

            # delete: gone from the list and from disk
            nfiles = len(os.listdir(dumps))
            self.assertEqual(nfiles, len(app.json("/api/v1/gcdump")["snapshots"]))
            st, _, _ = app.request(f"/api/v1/gcdump/{first['id']}", method="DELETE")
            self.assertEqual(st, 200)
            st, _, _ = app.request(f"/api/v1/gcdump/{first['id']}")
            self.assertEqual(st, 404)
            self.assertEqual(len(os.listdir(dumps)), nfiles - 1)
            self.assertEqual(app.json("/api/v1/status")["pid"], app.pid)
        shutil.rmtree(dumps, ignore_errors=True)

    def test_guards_keep_and_unwritable_dir(self):
        dumps = tempfile.mkdtemp(prefix="clrscope-dumps-")
        # files left by earlier processes: of those that exited, the newest KEEP (2) stay once
        # older than an hour; a live process's, a recent one and other names are not touched
        dead = 4194000
        while os.path.exists(f"/proc/{dead}"):
            dead -= 1
        old = time.time() - 7200
        planted = {}
        for i in range(5):
            planted[f"clrscope-{dead}-{i + 1}.gcdump"] = old + i
        planted[f"clrscope-{dead}-9.gcdump"] = time.time() - 60   # under an hour old
        planted[f"clrscope-{os.getpid()}-1.gcdump"] = old - 100    # a live process's
        planted["notes.txt"] = old - 200
        for name, t in planted.items():
            with open(os.path.join(dumps, name), "w") as f:
                f.write("x")
            os.utime(os.path.join(dumps, name), (t, t))
        with ProfiledApp("heap", ["--seconds", "60"],
                         env={"CLRSCOPE_DUMP_DIR": dumps, "CLRSCOPE_DUMP_MAX_HEAP_MB": "1",
                              "CLRSCOPE_DUMP_KEEP": "2", "CLRSCOPE_DUMP_MIN_INTERVAL_S": "0"}) as app:
            app.wait_ready()
            st, _, body = app.request("/api/v1/gcdump", method="POST", data=b"")
            self.assertEqual(st, 413, body)
            why = json.loads(body)
            self.assertEqual(why["reason"], "heap_too_large")
            self.assertGreater(why["heap_bytes"], why["limit_bytes"])
            self.assertIn("force=1", why["error"])
            self.assertEqual(app.json("/api/v1/gcdump")["snapshots"], [])
            ids = []
            for _ in range(3):
                st, _, body = app.request("/api/v1/gcdump?force=1", method="POST", data=b"")
                self.assertEqual(st, 202, body)
                sid = json.loads(body)["id"]
                d, _ = wait_done(app, sid)
                self.assertEqual(d["status"], "done", d.get("error"))
                self.assertTrue(d["forced"])
                ids.append(sid)
            listing = app.json("/api/v1/gcdump")
            self.assertEqual([s["id"] for s in listing["snapshots"]], ids[:0:-1])
            mine = [n for n in os.listdir(dumps) if n.startswith(f"clrscope-{app.pid}-")]
            self.assertEqual(len(mine), 2, "the oldest file was removed")
            left = set(os.listdir(dumps)) - set(mine)
            self.assertEqual(left, {f"clrscope-{dead}-4.gcdump", f"clrscope-{dead}-5.gcdump",
                                    f"clrscope-{dead}-9.gcdump",
                                    f"clrscope-{os.getpid()}-1.gcdump", "notes.txt"})
            st, _, _ = app.request(f"/api/v1/gcdump/{ids[0]}")
            self.assertEqual(st, 404)
            # A request the moment the previous snapshot is done (a client polling with POST):
            # it once joined the finished worker while holding the lock that worker still
            # needed on its way out, and the API and the process's exit hung for good.
            started, end = 0, time.monotonic() + 4
            while time.monotonic() < end:
                st, _, body = app.request("/api/v1/gcdump?force=1", method="POST", data=b"",
                                          timeout=10)
                self.assertIn(st, (202, 409), body)
                started += st == 202
            self.assertGreaterEqual(started, 3)
            self.assertEqual(app.request("/api/v1/gcdump", timeout=10)[0], 200)
            self.assertNotEqual(app.stop(timeout=20), -9, "the process exits on SIGTERM")
        shutil.rmtree(dumps, ignore_errors=True)

        # a dump directory that cannot exist: the snapshot fails with the reason, the app runs on
        blocker = tempfile.NamedTemporaryFile(prefix="clrscope-notadir-", delete=False)
        blocker.close()
        # and a file at the directory's own name: refused before the snapshot's GC, not when the
        # file is written after all the work
        for where in (blocker.name + "/dumps", blocker.name):
            with ProfiledApp("heap", ["--seconds", "8"], env={"CLRSCOPE_DUMP_DIR": where}) as app:
                app.wait_ready()
                st, _, body = app.request("/api/v1/gcdump", method="POST", data=b"")
                self.assertEqual(st, 202, body)
                d, _ = wait_done(app, json.loads(body)["id"])
                self.assertEqual(d["status"], "failed")
                self.assertIn(blocker.name, d["error"])
                self.assertIn("cannot write snapshots", d["error"])
                self.assertIsNone(d.get("file"))
                st, _, _ = app.request(f"/api/v1/gcdump/{d['id']}/file")
                self.assertEqual(st, 404)
                self.assertEqual(app.json("/api/v1/status")["pid"], app.pid)
                truth = app.wait_truth()
                self.assertEqual(truth["tree_nodes"], 100000)
                self.assertEqual(app.proc.returncode, 0)
        os.unlink(blocker.name)

    def test_size_guard_counts_what_was_allocated_since_the_last_gc(self):
        """The GC's heap figure is the one of its last GC: 200 MB of large arrays allocated since
        are not in it, and the guard must count them, so such a heap does not pass a 100 MB
        guard unforced."""
        # with the allocation events off, as the overhead governor may have them when the heap
        # grows, only the runtime's counter sees the arrays: the guard must wait for its
        # interval that covers the request (the app asks the moment they are allocated)
        for profiles in ("all", "cpu,gc,heap"):
            with self.subTest(profiles=profiles), \
                    ProfiledApp("heap", ["--seconds", "4", "--big-mb", "200"],
                                env={"CLRSCOPE_DUMP_MAX_HEAP_MB": "100",
                                     "CLRSCOPE_PROFILES": profiles}) as app:
                app.wait_ready()
                st, _, body = app.request("/api/v1/gcdump", method="POST", data=b"")
                if st != 413:
                    body += json.dumps({k: v for k, v in app.json("/api/v1/status").items()
                                        if k in ("alloc", "counters", "governor", "gc")}).encode()
                self.assertEqual(st, 413, body)
                why = json.loads(body)
                self.assertEqual(why["reason"], "heap_too_large")
                self.assertGreater(why["heap_bytes"], 200 << 20, why)
                truth = app.wait_truth()
                self.assertEqual(truth["big_bytes"], 200 << 20)

    def test_default_dir_must_be_ours(self):
        """The default dump directory ($XDG_RUNTIME_DIR/clrscope/dumps, else
        /tmp/clrscope-dumps-UID) must be a real directory of this user's: a directory or link
        another user made at that name must not get the app's whole heap."""
        rt = tempfile.mkdtemp(prefix="clrscope-xdg-")
        self.addCleanup(shutil.rmtree, rt, True)
        os.mkdir(os.path.join(rt, "clrscope"), 0o700)
        dumps = os.path.join(rt, "clrscope", "dumps")
        public = os.path.join(rt, "public")
        os.mkdir(public)
        os.chmod(public, 0o777)
        cases = [("link", None)]
        if os.geteuid() == 0:
            cases.append(("theirs", "belongs to another user"))
        cases.append(("ours, open to all", None))
        for what, said in cases:
            with self.subTest(dumps=what):
                if os.path.islink(dumps):
                    os.unlink(dumps)
                elif os.path.isdir(dumps):
                    shutil.rmtree(dumps)
                if what == "link":
                    os.symlink(public, dumps)
                else:
                    os.mkdir(dumps)
                    os.chmod(dumps, 0o777)
                    if what == "theirs":
                        os.chown(dumps, 65534, 65534)
                with ProfiledApp("heap", ["--seconds", "30"],
                                 env={"XDG_RUNTIME_DIR": rt}) as app:
                    app.wait_ready()
                    st, _, body = app.request("/api/v1/gcdump", method="POST", data=b"")
                    self.assertEqual(st, 202, body)
                    d, _ = wait_done(app, json.loads(body)["id"])
                if what == "ours, open to all":
                    self.assertEqual(d["status"], "done", d.get("error"))
                    self.assertEqual(os.stat(dumps).st_mode & 0o777, 0o700, "closed to others")
                    f = os.path.join(dumps, os.listdir(dumps)[0])
                    self.assertEqual(os.stat(f).st_mode & 0o777, 0o600)
                else:
                    self.assertEqual(d["status"], "failed")
                    self.assertIn(dumps, d["error"])
                    if said:
                        self.assertIn(said, d["error"])
                    self.assertEqual(os.listdir(public), [], "nothing written through the link")
                    if what == "theirs":
                        self.assertEqual(os.listdir(dumps), [])


if __name__ == "__main__":
    unittest.main()
