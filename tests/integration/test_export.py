"""
Continuous export to the Datadog agent, against fake_agent.py playing the agent:

- TCP: every upload is a well-formed multipart POST (request line, headers, parts, event.json
  fields and tags); the profiles' windows are contiguous; `go tool pprof` decodes them and finds
  the CPU split of cpu-split that the app itself measured; the export directory gets the same
  profiles; /api/v1/status reports the health.
- unix socket and agentless (the intake URL redirected to the fake receiver), and bad DD_* values;
  a 200 whose body never ends or ends early counts as delivered, at once.
- the receiver down, hanging, answering 500 or garbage, resetting the connection: the app runs on
  unaffected, the queue stays capped and drops are counted, each failure kind is logged once, a
  profile sent whole is never sent twice, uploads resume when the receiver comes back, and a
  hanging agent does not hold up the exit.
"""
import calendar
import concurrent.futures
import glob
import gzip
import json
import os
import re
import shutil
import tempfile
import time
import unittest

from fake_agent import AGENT_PATH, FakeAgent, check_request
from harness import ProfiledApp, go_pprof
from pprofdec import Profile

HEAVY = "|ct:CpuWork |cg: |fn:HeavyCaller "
LIGHT = "|ct:CpuWork |cg: |fn:LightCaller "
EXIT = "3"  # a distinctive exit code the app must keep
DD_TYPES = ["cpu-samples/count", "cpu/nanoseconds", "wall/nanoseconds", "alloc-samples/count",
            "alloc-size/bytes", "exception/count", "lock-count/count", "lock-time/nanoseconds",
            "inuse-objects/count", "inuse-space/bytes"]
HAVE_GO = shutil.which("go") is not None


def parse_raw(text):
    """`go tool pprof -raw` output -> (sample types, [(values, [frame names leaf first])])."""
    lines = text.splitlines()
    types, samples, locs = [], [], {}
    i = lines.index("Samples:") + 1
    types = lines[i].split()
    i += 1
    while i < len(lines) and lines[i] != "Locations":
        m = re.match(r"^\s+(-?\d+(?:\s+-?\d+)*):((?:\s+\d+)*)\s*$", lines[i])
        if m:
            samples.append(([int(v) for v in m.group(1).split()],
                            [int(x) for x in m.group(2).split()]))
        i += 1
    for line in lines[i + 1:]:
        m = re.match(r"^\s+(\d+): 0x[0-9a-f]+ M=\d+ (.*) :\d+ s=\d+$", line)
        if m:
            locs[int(m.group(1))] = m.group(2)
        elif line.startswith("Mappings"):
            break
    return types, [(v, [locs.get(x, "?") for x in ids]) for v, ids in samples]


def caller_cpu(raw_text):
    types, samples = parse_raw(raw_text)
    col = types.index("cpu/nanoseconds")
    heavy = light = 0
    for values, frames in samples:
        names = " ".join(f + " " for f in frames)
        heavy += values[col] if HEAVY in names else 0
        light += values[col] if LIGHT in names else 0
    return heavy, light


def export_env(agent_url, **extra):
    env = {"DD_PROFILING_ENABLED": "true", "DD_PROFILING_UPLOAD_PERIOD": "3",
           "DD_TRACE_AGENT_URL": agent_url}
    env.update(extra)
    return env


def status_export(app):
    s = app.json("/api/v1/status")
    return s["export"], s["self"]["rss_bytes"]


class ExportTcp(unittest.TestCase):
    """cpu-split for 12 s, a profile every 3 s to the fake agent over TCP."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="clrscope-export-")
        cls.files = os.path.join(cls.tmp, "files")
        cls.agent = FakeAgent("ok").start()
        env = export_env(cls.agent.url, DD_SERVICE="clrscope-export-test", DD_ENV="ci",
                         DD_VERSION="1.2.3", DD_TAGS="team:perf, tier:backend",
                         CLRSCOPE_EXPORT_DIR=cls.files)
        cls.app = ProfiledApp("cpu-split", ["--seconds", "12", "--exit", EXIT], env=env)
        try:
            cls.app.start()
            cls.app.wait_ready()
            cls.agent.wait_requests(2, timeout=30)
            cls.status, _ = status_export(cls.app)
            cls.truth = cls.app.wait_truth(timeout=120)
            cls.exit_code = cls.app.proc.returncode
            time.sleep(0.5)
        finally:
            cls.app.stop()
            cls.agent.stop()
        cls.reqs = sorted(cls.agent.requests, key=lambda r: int(r.tag("profile_seq")))

    def test_requests_are_well_formed(self):
        self.assertGreaterEqual(len(self.reqs), 4, "12 s at one profile per 3 s, plus the last")
        for r in self.reqs:
            self.assertEqual(check_request(r, pid=self.app.pid, service="clrscope-export-test",
                                           env="ci", version="1.2.3",
                                           user_tags=[("team", "perf"), ("tier", "backend")]), [])
            self.assertEqual(r.transport, "tcp")

    def test_windows_are_contiguous(self):
        seqs = [int(r.tag("profile_seq")) for r in self.reqs]
        self.assertEqual(seqs, list(range(len(seqs))), "every profile built was delivered")
        for a, b in zip(self.reqs, self.reqs[1:]):
            self.assertEqual(a.event["end"], b.event["start"], "no gap and no overlap")
        self.assertEqual(len({r.tag("runtime-id") for r in self.reqs}), 1)
        # each pprof spans what its event.json says, the last (cut short at exit) too, not on to
        # the end of its last whole second
        def ns(t):
            whole, frac = t[:-1].split(".")
            return (calendar.timegm(time.strptime(whole, "%Y-%m-%dT%H:%M:%S")) * 10**9
                    + int(frac.ljust(9, "0")[:9]))
        for r in self.reqs:
            p = Profile(gzip.decompress(r.pprof))
            self.assertEqual(p.time_nanos, ns(r.event["start"]), r.event)
            self.assertAlmostEqual(p.duration_nanos, ns(r.event["end"]) - ns(r.event["start"]),
                                   delta=2e6, msg=r.event)

    @unittest.skipUnless(HAVE_GO, "go tool pprof not installed")
    def test_cpu_split_matches_truth(self):
        heavy = light = 0
        for r in self.reqs:
            path = os.path.join(self.tmp, f"upload-{r.tag('profile_seq')}.pprof")
            with open(path, "wb") as f:
                f.write(r.pprof)
            h, l = caller_cpu(go_pprof(["-raw"], path))
            heavy, light = heavy + h, light + l
        self.assertGreater(heavy + light, 0.5e9, "at least 0.5 s of caller CPU exported")
        t = self.truth
        true_share = t["heavy_cpu_ms"] / (t["heavy_cpu_ms"] + t["light_cpu_ms"])
        self.assertAlmostEqual(heavy / (heavy + light), true_share, delta=0.05,
                               msg=f"heavy share {heavy / (heavy + light):.3f} vs {true_share:.3f}")

    @unittest.skipUnless(HAVE_GO, "go tool pprof not installed")
    def test_one_pprof_holds_every_type_with_datadog_names(self):
        path = os.path.join(self.tmp, "first.pprof")
        with open(path, "wb") as f:
            f.write(self.reqs[0].pprof)
        raw = go_pprof(["-raw"], path)
        types, samples = parse_raw(raw)
        self.assertEqual(types, DD_TYPES)
        self.assertIn("PeriodType: RealTime Nanoseconds", raw)
        self.assertIn("thread id:[", raw)
        self.assertIn("thread name:[cpu-worker]", raw)
        self.assertIn(" |ns:TestApp |ct:CpuWork |cg: |fn:SpinLeaf |fg: |sg:", raw)
        top = go_pprof(["-top", "-sample_index=cpu"], path)
        self.assertIn("Type: cpu", top)

    def test_status_reports_health(self):
        s = self.status
        self.assertTrue(s["enabled"])
        self.assertEqual(s["endpoint"], self.agent.url + AGENT_PATH)
        self.assertEqual(s["period_s"], 3)
        self.assertEqual(s["last_status"], 200)
        self.assertGreaterEqual(s["uploads"], 1)
        self.assertEqual((s["failures"], s["dropped"], s["queue"]), (0, 0, 0))
        self.assertGreater(s["bytes_sent"], 1000)
        self.assertAlmostEqual(s["last_upload"], time.time(), delta=120)
        self.assertEqual(s["service"], "clrscope-export-test")

    @unittest.skipUnless(HAVE_GO, "go tool pprof not installed")
    def test_export_dir_holds_the_same_profiles(self):
        files = sorted(glob.glob(os.path.join(self.files, "*.pprof")))
        self.assertEqual(len(files), len(self.reqs))
        uploaded = {r.pprof for r in self.reqs}
        for path in files:
            with open(path, "rb") as f:
                self.assertIn(f.read(), uploaded)
        self.assertIn("Type: cpu", go_pprof(["-top", "-sample_index=cpu"], files[-1]))

    def test_app_unaffected(self):
        self.assertEqual(self.exit_code, int(EXIT))
        self.assertEqual(self.truth["exit_code"], int(EXIT))
        self.assertTrue(any(line.startswith("ready pid=") for line in self.app.stdout_lines))
        self.assertTrue(any(line.startswith("truth: ") for line in self.app.stdout_lines))


def run_short(env, agent, mode="cpu-split", seconds="6"):
    """Runs the app briefly; returns (app, status export block, requests)."""
    app = ProfiledApp(mode, ["--seconds", seconds], env=env)
    try:
        app.start()
        app.wait_ready()
        if agent:
            agent.wait_requests(1, timeout=30)
        st, _ = status_export(app)
        app.wait_truth(timeout=120)
    finally:
        app.stop()
        if agent:
            agent.stop()
    return app, st, list(agent.requests) if agent else []


def thread_cpu_s(pid, name):
    """CPU seconds (user + system) of the process's threads called `name`; None if none is."""
    total = None
    for path in glob.glob(f"/proc/{pid}/task/*/stat"):
        try:
            with open(path) as f:
                s = f.read()
        except OSError:
            continue
        if s[s.index("(") + 1:s.rindex(")")] == name:
            fields = s[s.rindex(")") + 2:].split()  # from field 3 (state) on
            total = (total or 0) + (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def run_answer(agent):
    """An agent whose 200 never ends (endless) or ends early (cut): each upload must finish on
    its status, not read on until the request's timeout (60 s here). Returns (status export
    block after two requests, the requests' arrival times, the export thread's CPU seconds 3 s
    after the first request arrived)."""
    env = export_env(agent.url, DD_PROFILING_UPLOAD_PERIOD="2", CLRSCOPE_EXPORT_TIMEOUT_S="60")
    app = ProfiledApp("wait", ["--seconds", "10"], env=env)
    try:
        app.start()
        app.wait_ready()
        agent.wait_requests(1, timeout=30)
        time.sleep(3)  # the export thread must not read the endless answer meanwhile
        cpu = thread_cpu_s(app.pid, "clrscope-export")
        agent.wait_requests(2, timeout=30)  # not after the first's whole 60 s
        time.sleep(0.5)
        st, _ = status_export(app)
        app.wait_truth(timeout=120)
    finally:
        app.stop()
        agent.stop()
    return st, [q.time for q in agent.requests], cpu


class ExportOtherEndpoints(unittest.TestCase):
    """unix socket, agentless and bad DD_* values, an endless and a cut answer, side by side."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="clrscope-export-")
        cls.sock = os.path.join(cls.tmp, "apm.socket")
        cls.uds = FakeAgent("ok", tcp=False, unix_path=cls.sock).start()
        cls.intake = FakeAgent("ok").start()
        cls.nocurl_agent = FakeAgent("ok").start()
        jobs = {
            "unix": (export_env(cls.uds.unix_url, DD_PROFILING_UPLOAD_PERIOD="2",
                                CLRSCOPE_EXPORT_DIR=os.path.join(cls.tmp, "files"),
                                CLRSCOPE_EXPORT_DIR_KEEP="2"), cls.uds),
            "agentless": ({"DD_PROFILING_ENABLED": "1", "DD_PROFILING_UPLOAD_PERIOD": "2",
                           "DD_PROFILING_AGENTLESS": "true", "DD_API_KEY": "k3y-s3cr3t",
                           "DD_SITE": "datad0g.com", "DD_TRACE_AGENT_URL": "http://127.0.0.1:9",
                           "CLRSCOPE_INTERNAL_INTAKE_URL": cls.intake.url + "/api/v2/profile"},
                          cls.intake),
            "nocurl": (export_env(cls.nocurl_agent.url, DD_PROFILING_UPLOAD_PERIOD="2",
                                  CLRSCOPE_CURL_LIBRARY="/nonexistent/libcurl.so.4",
                                  CLRSCOPE_EXPORT_DIR=os.path.join(cls.tmp, "nocurl")), None),
            "bad": ({"DD_PROFILING_ENABLED": "auto", "DD_PROFILING_UPLOAD_PERIOD": "soon",
                     "DD_TRACE_AGENT_URL": "ftp://agent", "DD_TRACE_AGENT_PORT": "99999",
                     "DD_TAGS": "novalue,ok:1", "CLRSCOPE_EXPORT_QUEUE": "0"}, None),
        }
        answers = ("endless", "cut")
        with concurrent.futures.ThreadPoolExecutor(len(jobs) + len(answers)) as ex:
            futs = {k: ex.submit(run_short, env, agent, *(("wait", "4") if k == "bad" else ()))
                    for k, (env, agent) in jobs.items()}
            afuts = {m: ex.submit(run_answer, FakeAgent(m).start()) for m in answers}
            cls.res = {k: f.result() for k, f in futs.items()}
            cls.answers = {m: f.result() for m, f in afuts.items()}
        cls.nocurl_agent.stop()

    def test_without_libcurl_only_uploads_stop(self):
        # libcurl is loaded when the export starts: without it (here: a path that does not
        # exist), one error line, no upload, and everything else goes on, export dir included
        app, st, _ = self.res["nocurl"]
        err = [line for line in app.stderr_lines if "libcurl" in line]
        self.assertEqual(len(err), 1, "\n".join(app.stderr_lines))
        self.assertIn("not uploaded", err[0])
        self.assertEqual(self.nocurl_agent.requests, [])
        self.assertFalse(st["enabled"], "uploads are off")
        self.assertIn("libcurl could not be loaded", st["last_error"])
        files = glob.glob(os.path.join(self.tmp, "nocurl", "*.pprof"))
        self.assertGreaterEqual(len(files), 1, "the export directory still gets the profiles")
        self.assertEqual(app.proc.returncode, 0)

    def test_unix_socket(self):
        app, st, reqs = self.res["unix"]
        self.assertEqual(st["endpoint"], "unix://" + self.sock)
        self.assertGreaterEqual(len(reqs), 1)
        for r in reqs:
            self.assertEqual(r.transport, "unix")
            self.assertEqual(r.headers.get("host"), "localhost")
            self.assertEqual(check_request(r, pid=app.pid, service="TestApp"), [])

    def test_export_dir_keeps_the_newest(self):
        app, st, reqs = self.res["unix"]
        self.assertGreaterEqual(len(reqs), 3)
        files = sorted(glob.glob(os.path.join(self.tmp, "files", "*.pprof")))
        self.assertEqual(len(files), 2, "CLRSCOPE_EXPORT_DIR_KEEP=2")
        newest = sorted(reqs, key=lambda r: int(r.tag("profile_seq")))[-2:]
        kept = set()
        for path in files:
            with open(path, "rb") as f:
                kept.add(f.read())
        self.assertEqual(kept, {r.pprof for r in newest})

    def test_agentless_request_shape(self):
        app, st, reqs = self.res["agentless"]
        self.assertTrue(st["agentless"])
        self.assertEqual(st["endpoint"], self.intake.url + "/api/v2/profile")
        self.assertGreaterEqual(len(reqs), 1)
        for r in reqs:
            self.assertEqual(check_request(r, pid=app.pid, path="/api/v2/profile",
                                           api_key="k3y-s3cr3t"), [])
        self.assertNotIn("k3y-s3cr3t", json.dumps(st), "the API key never shows in status")

    def test_endless_answer_is_cut_short(self):
        st, times, cpu = self.answers["endless"]
        self.assertGreaterEqual(len(times), 2)
        self.assertLess(times[1] - times[0], 10, times)  # the period, not the 60 s timeout
        self.assertGreaterEqual(st["uploads"], 1, st)
        self.assertEqual(st["last_status"], 200, st)
        self.assertEqual((st["failures"], st["dropped"]), (0, 0), st)  # delivered, not failed
        # 64 KiB read, not a stream at full speed for seconds
        self.assertIsNotNone(cpu, "no clrscope-export thread")
        self.assertLess(cpu, 0.5, "the export thread's CPU seconds 3 s after the first upload")

    def test_answer_cut_after_its_status_is_delivered(self):
        # a 200 whose body ends early (the connection closed): the agent took the profile, which
        # is no failure and no profile dropped unanswered
        st, times, _ = self.answers["cut"]
        self.assertGreaterEqual(len(times), 2)
        self.assertGreaterEqual(st["uploads"], 1, st)
        self.assertEqual(st["last_status"], 200, st)
        self.assertEqual((st["failures"], st["dropped"]), (0, 0), st)

    def test_bad_values_warn_once_and_fall_back(self):
        app, st, _ = self.res["bad"]
        err = "\n".join(app.stderr_lines)
        socket = os.path.exists("/var/run/datadog/apm.socket")  # then the port is never read
        for var in ("DD_PROFILING_UPLOAD_PERIOD", "DD_TRACE_AGENT_URL", "DD_TAGS",
                    "CLRSCOPE_EXPORT_QUEUE") + (() if socket else ("DD_TRACE_AGENT_PORT",)):
            self.assertEqual(err.count(var), 1, f"one warning naming {var}:\n{err}")
        self.assertTrue(st["enabled"], "auto counts as on")
        self.assertEqual(st["period_s"], 60)
        self.assertEqual(st["queue_cap"], 4)
        default = ("unix:///var/run/datadog/apm.socket" if socket
                   else "http://localhost:8126" + AGENT_PATH)
        self.assertEqual(st["endpoint"], default)
        self.assertEqual(app.proc.returncode, 0)


def failure_scenario(mode):
    """cpu-split with the receiver in `mode` for ~10 s, then ok."""
    agent = FakeAgent(mode).start()
    env = export_env(agent.url, DD_PROFILING_UPLOAD_PERIOD="2", CLRSCOPE_EXPORT_QUEUE="2",
                     CLRSCOPE_EXPORT_TIMEOUT_S="3")
    app = ProfiledApp("cpu-split", ["--seconds", "16", "--exit", EXIT], env=env)
    out = {"mode": mode, "app": app, "agent": agent, "samples": []}
    try:
        app.start()
        app.wait_ready()
        t0 = time.time()
        while time.time() - t0 < 10:
            st, rss = status_export(app)
            out["samples"].append((time.time() - t0, st, rss))
            time.sleep(1)
        out["before"] = out["samples"][-1][1]
        agent.set_mode("ok")
        agent.wait_requests(1, timeout=30, pred=lambda r: r.mode == "ok")
        deadline = time.time() + 20
        while time.time() < deadline:
            st, _ = status_export(app)
            if st["uploads"] >= 1 and st["last_status"] == 200:
                break
            time.sleep(0.5)
        out["after"] = st
        app.wait_exit(timeout=120)
        out["exit_code"] = app.proc.returncode
        with open(app.truth_path) as f:
            out["truth"] = json.load(f)
    finally:
        app.stop()
        agent.stop()
    return out


class ExportFailures(unittest.TestCase):
    """The receiver down, hanging, answering 500 or garbage, resetting, then back; all runs side
    by side."""

    @classmethod
    def setUpClass(cls):
        modes = ["down", "hang", "500", "429", "garbage", "reset"]
        with concurrent.futures.ThreadPoolExecutor(len(modes) + 1) as ex:
            futs = {m: ex.submit(failure_scenario, m) for m in modes}
            hang_exit = ex.submit(cls.hang_at_exit)
            cls.res = {m: f.result() for m, f in futs.items()}
            cls.hang_exit = hang_exit.result()

    @classmethod
    def hang_at_exit(cls):
        """The agent hangs through the app's exit: the exit must not wait for it."""
        agent = FakeAgent("hang").start()
        env = export_env(agent.url, DD_PROFILING_UPLOAD_PERIOD="2")  # 10 s request timeout
        app = ProfiledApp("cpu-split", ["--seconds", "7", "--exit", EXIT], env=env)
        try:
            app.start()
            app.wait_ready()
            agent.wait_requests(1, timeout=30)
            while not any(line.startswith("truth: ") and '"final":true' in line
                          for line in app.stdout_lines):
                time.sleep(0.05)
            t_truth = time.time()
            app.wait_exit(timeout=120)
            return {"exit_code": app.proc.returncode, "truth_to_exit_s": time.time() - t_truth}
        finally:
            app.stop()
            agent.stop()

    def check_mode(self, mode):
        r = self.res[mode]
        app = r["app"]
        # the app ran on unaffected: its exit code, its output, its truth
        self.assertEqual(r["exit_code"], int(EXIT))
        self.assertEqual(r["truth"]["exit_code"], int(EXIT))
        self.assertGreater(r["truth"]["heavy_calls"], 0)
        self.assertEqual([line.split(" ")[0] for line in app.stdout_lines
                          if not line.startswith("truth: ")], ["ready"])
        # failures counted, queue capped, drops counted, memory flat
        before = r["before"]
        self.assertGreaterEqual(before["failures"], 1)
        self.assertEqual(before["uploads"], 0)
        for _, st, _ in r["samples"]:
            self.assertLessEqual(st["queue"], 2)
            self.assertEqual(st["queue_cap"], 2)
        self.assertGreaterEqual(before["dropped"], 1, f"{before}")
        self.assertEqual(before["drops"]["queue_full"] + before["drops"]["unanswered"],
                         before["dropped"])
        rss = [x for _, _, x in r["samples"]]
        self.assertLess(max(rss[len(rss) // 3:]) - rss[len(rss) // 3], 64 << 20,
                        f"RSS grew: {rss}")
        self.assertLess(max(st["queue_bytes"] for _, st, _ in r["samples"]), 8 << 20)
        # each failure kind is logged once
        warns = [line for line in app.stderr_lines if "export: upload to" in line]
        self.assertEqual(len(warns), len(set(w.split("failed: ")[1][:20] for w in warns)),
                         "\n".join(warns))
        self.assertGreaterEqual(len(warns), 1)
        # uploads resumed once the receiver was back
        after = r["after"]
        self.assertGreaterEqual(after["uploads"], 1)
        self.assertEqual(after["last_status"], 200)
        ok = [q for q in r["agent"].requests if q.mode == "ok"]
        self.assertGreaterEqual(len(ok), 1)
        self.assertEqual(check_request(ok[0], pid=app.pid), [])
        return before

    def test_agent_down(self):
        before = self.check_mode("down")
        self.assertIsInstance(before["last_status"], str)  # "Couldn't connect to server"

    def test_agent_hangs(self):
        before = self.check_mode("hang")
        self.assertIn("imeout", before["last_error"])
        # the agent read every request whole and never answered: none is sent twice (it may
        # have arrived), though each would fit in the queue again
        self.assertGreaterEqual(before["drops"]["unanswered"], 1, before)
        hung = [q.event.get("start") for q in self.res["hang"]["agent"].requests
                if q.mode == "hang" and q.event]
        self.assertEqual(len(hung), len(set(hung)), hung)

    def test_agent_asks_to_wait(self):
        """429 with Retry-After: 4: the next request comes no sooner than 4 s later (the backoff
        alone would send it after 1, 2, 2 s). With profiles every 2 s and a queue
        of 2, the one refused has been pushed out by newer ones by then: each is sent once."""
        self.check_mode("429")
        times = [q.time for q in self.res["429"]["agent"].requests if q.mode == "429"]
        self.assertGreaterEqual(len(times), 2)
        gaps = [b - a for a, b in zip(times, times[1:])]
        self.assertGreater(min(gaps), 3.5, gaps)

    def test_agent_answers_500(self):
        before = self.check_mode("500")
        self.assertEqual(before["last_status"], 500)

    def check_sent_once(self, mode):
        """The receiver read each request whole and gave no HTTP answer: every failure is a
        profile dropped unanswered, and no profile arrives twice, also not once the receiver is
        back (the intake does not deduplicate: a profile sent again counts its samples twice)."""
        before = self.check_mode(mode)
        self.assertGreaterEqual(before["drops"]["unanswered"], 1, before)
        self.assertEqual(before["failures"], before["drops"]["unanswered"], before)
        seqs = [int(q.tag("profile_seq")) for q in self.res[mode]["agent"].requests if q.event]
        self.assertEqual(len(seqs), len(set(seqs)), sorted(seqs))
        self.assertGreaterEqual(len(seqs), 2, "profiles offered while failing, then once back")

    def test_agent_answers_garbage(self):
        self.check_sent_once("garbage")

    def test_agent_resets_the_connection(self):
        self.check_sent_once("reset")
        warns = [line for line in self.res["reset"]["app"].stderr_lines
                 if "export: upload to" in line]
        self.assertTrue(any("not sent again" in w for w in warns), "\n".join(warns))

    def test_hanging_agent_does_not_hold_up_exit(self):
        r = self.hang_exit
        self.assertEqual(r["exit_code"], int(EXIT))
        # the request timeout is 10 s; stop gives the uploads ~1 s
        self.assertLess(r["truth_to_exit_s"], 6.0)


if __name__ == "__main__":
    unittest.main()
