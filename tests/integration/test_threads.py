"""
Thread dumps: what every managed thread is doing now (GET /api/v1/threads,
/debug/pprof/threads and its Go name goroutine, ?debug=1 and 2 as text).

The `threads` app runs threads whose places it knows: even "blocker-N" threads wait on an event in
Blocker.WaitOnEvent, odd ones sleep in Blocker.SleepLoop, "spinner-N" burn CPU in Blocker.Spin,
"lock-waiter-N" wait in Blocker.WaitForLock for the lock "lock-holder" holds in Blocker.HoldLock,
each pair "deadlock-I-a"/"deadlock-I-b" holds one lock and waits for the other's, and
"stale-b", whose wait for "stale-a"'s lock was interrupted, holds the lock stale-a now waits for.
The dump must group them by stack with exactly those counts and names, say which run and which
sleep, name the holder of the lock each waiter waits for, and report each pair as a deadlock, and
no other thread as one (not stale-a and stale-b, which a wait record left by the interrupted wait
made look like one). Threads without a managed name show the name they gave the OS, valid UTF-8
where the app cut it inside a character (as /proc's 15-byte comm does): the JSON and the text
forms stay readable.
"""
import os
import re
import subprocess
import time
import unittest

from harness import LAUNCHER, ProfiledApp, discovery_dir, go_pprof
from pprofdec import read_pprof

BLOCKERS, SPINNERS, WAITERS, DEADLOCKS, OS_NAMED = 10, 2, 3, 2, 2


def groups_with(dump, frame):
    return [g for g in dump["groups"] if frame in g["frames"]]


class ThreadDump(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.app = app = ProfiledApp("threads", [
            "--threads", str(BLOCKERS), "--spinners", str(SPINNERS), "--lock-waiters",
            str(WAITERS), "--deadlocks", str(DEADLOCKS), "--stale-wait", "--os-named", str(OS_NAMED),
            "--seconds", "30"])
        app.start()
        try:
            app.wait_ready()
            time.sleep(3)  # the deadlock pairs meet at their barrier; spinners burn a while
            cls.dump = app.json("/api/v1/threads")
            cls.again = app.json("/api/v1/threads")  # within TDUMP_REUSE_MS: the same dump
            time.sleep(0.7)
            cls.later = app.json("/api/v1/threads")
            cls.text1 = app.request("/debug/pprof/threads?debug=1")
            cls.text2 = app.request("/debug/pprof/goroutine?debug=2")
            cls.pprof_path = app.pprof("/debug/pprof/threads",
                                       os.path.join(app.tmp, "threads.pb.gz"))
            cls.bad = app.request("/debug/pprof/threads?debug=3")
            cls.cli = subprocess.run([LAUNCHER, "threads", str(app.pid)], capture_output=True,
                                     text=True, timeout=60)
            cls.cli_grouped = subprocess.run([LAUNCHER, "threads", "--grouped", str(app.pid)],
                                             capture_output=True, text=True, timeout=60)
            cls.stale_results = []
            d = discovery_dir()
            mine = os.path.join(d, f"{app.pid}.json")
            gone = subprocess.Popen(["true"])
            gone.wait()  # a pid no process has now
            stale = os.path.join(d, f"{gone.pid}.json")
            with open(mine) as f:
                text = f.read().replace(f'"pid":{app.pid}', f'"pid":{gone.pid}')
            with open(stale, "w") as f:
                f.write(text)
            try:
                r = subprocess.run([LAUNCHER, "threads", str(gone.pid)], capture_output=True,
                                   text=True, timeout=30)
                cls.stale_results.append((r.returncode, r.stderr))
            finally:
                os.unlink(stale)
            time.sleep(0.7)  # the newest dump is past TDUMP_REUSE_MS: a GET would take anew
            cls.dumps_before_head = app.json("/api/v1/status")["thread_dumps"]
            cls.head = app.request("/api/v1/threads", method="HEAD")
            cls.head_pprof = app.request("/debug/pprof/threads?debug=1", method="HEAD")
            cls.status_after = app.json("/api/v1/status")
        finally:
            cls.truth = None
            app.stop()
        cls.truth = app.wait_truth(timeout=60)

    def names(self, group):
        return sorted(t["name"] for t in group["threads"])

    def test_blocked_threads_grouped_by_place(self):
        frames = self.truth["frames"]
        wait = groups_with(self.dump, frames["wait"])
        sleep = groups_with(self.dump, frames["sleep"])
        self.assertEqual(len(wait), 1, [g["frames"] for g in wait])
        self.assertEqual(len(sleep), 1, [g["frames"] for g in sleep])
        self.assertEqual(wait[0]["count"], self.truth["event_waiters"])
        self.assertEqual(self.names(wait[0]),
                         sorted(f"blocker-{i}" for i in range(0, BLOCKERS, 2)))
        self.assertEqual(self.names(sleep[0]),
                         sorted(f"blocker-{i}" for i in range(1, BLOCKERS, 2)))
        # leaf first: the wait is below (before) the method that waits
        f = wait[0]["frames"]
        self.assertLess(f.index("System.Threading.WaitHandle.WaitOneNoCheck"), f.index(frames["wait"]))
        for t in wait[0]["threads"] + sleep[0]["threads"]:
            self.assertEqual(t["state"], "sleeping", t)
            self.assertLess(t["cpu_s"], 0.5, t)

    def test_spinners_run(self):
        spin = groups_with(self.dump, self.truth["frames"]["spin"])
        self.assertEqual(sum(g["count"] for g in spin), SPINNERS)
        for g in spin:
            for t in g["threads"]:
                self.assertTrue(t["name"].startswith("spinner-"), t)
                self.assertEqual(t["state"], "running", t)
                self.assertGreater(t["cpu_s"], 0.5, t)  # ~3 s of a core shared by two
        self.assertGreaterEqual(self.dump["states"].get("running", 0), SPINNERS)

    def test_lock_waiters_name_the_holder(self):
        frames = self.truth["frames"]
        holder = groups_with(self.dump, frames["hold"])
        self.assertEqual([self.names(g) for g in holder], [["lock-holder"]])
        holder_tid = holder[0]["threads"][0]["tid"]
        waiters = groups_with(self.dump, frames["wait_lock"])
        self.assertEqual(len(waiters), 1)
        self.assertEqual(self.names(waiters[0]), [f"lock-waiter-{i}" for i in range(WAITERS)])
        locks = set()
        for t in waiters[0]["threads"]:
            w = t.get("waiting_for")
            self.assertIsNotNone(w, t)
            self.assertEqual(w["owner_tid"], holder_tid)
            self.assertEqual(w["owner_name"], "lock-holder")
            self.assertGreater(w["for_s"], 1.0)
            self.assertNotIn("deadlock", t)
            locks.add(w["lock"])
        self.assertEqual(len(locks), 1, "they all wait for the one lock")

    def test_deadlocks_found(self):
        frames = self.truth["frames"]
        dl = self.dump["deadlocks"]
        self.assertEqual(len(dl), DEADLOCKS, dl)
        pairs = sorted(sorted(t["name"] for t in c["threads"]) for c in dl)
        self.assertEqual(pairs, [[f"deadlock-{i}-a", f"deadlock-{i}-b"] for i in range(DEADLOCKS)])
        by_tid = {t["tid"]: t for g in self.dump["groups"] for t in g["threads"]}
        for c in dl:
            a, b = c["threads"]
            self.assertEqual(a["held_by"], b["tid"])
            self.assertEqual(b["held_by"], a["tid"])
            self.assertNotEqual(a["waits_for_lock"], b["waits_for_lock"])
            self.assertEqual(by_tid[a["tid"]]["waiting_for"]["lock"], a["waits_for_lock"])
        in_cycle = [t for t in by_tid.values() if t.get("deadlock")]
        self.assertEqual(len(in_cycle), 2 * DEADLOCKS, [t["name"] for t in in_cycle])
        # stale-b's wait for stale-a's lock was interrupted (no ContentionStop comes then); it
        # holds the lock stale-a waits for: a wait, not a deadlock
        self.assertTrue(self.truth["stale_wait"])
        by_name = {t["name"]: t for t in by_tid.values()}
        a, b = by_name["stale-a"], by_name["stale-b"]
        self.assertEqual(a["waiting_for"]["owner_tid"], b["tid"])
        self.assertNotIn("waiting_for", b)
        self.assertNotIn("deadlock", a)
        dgroups = groups_with(self.dump, frames["deadlock"])
        self.assertEqual(sum(g["count"] for g in dgroups), 2 * DEADLOCKS)

    def test_os_name_cut_inside_a_character(self):
        # app.json decoded the dump strictly; the OS names' cut character reads '?'
        self.assertEqual(self.truth["os_named"], OS_NAMED)
        groups = groups_with(self.dump, self.truth["frames"]["os_named"])
        self.assertEqual(sum(g["count"] for g in groups), OS_NAMED)
        for g in groups:
            for t in g["threads"]:
                self.assertEqual(t["name"], "ПотокРа?")
        self.assertIn('"ПотокРа?"', self.text2[2].decode("utf-8"))

    def test_dump_memory_accounted(self):
        # the newest dump stays for reuse: its threads (~100 bytes each) count in self.mem
        me = self.status_after["self"]
        self.assertEqual(me["mem_bytes"], sum(me["mem"].values()))
        self.assertGreaterEqual(me["mem"]["thread_dumps"], 64 * self.later["threads_total"], me)
        self.assertLess(me["mem"]["thread_dumps"], 1 << 20, me)

    def test_every_thread_once(self):
        tids = [t["tid"] for g in self.dump["groups"] for t in g["threads"]]
        self.assertEqual(len(tids), len(set(tids)))
        self.assertEqual(len(tids), self.dump["threads_total"])
        self.assertEqual(sum(g["count"] for g in self.dump["groups"]), len(tids))
        app_threads = (BLOCKERS + SPINNERS + WAITERS + 1 + 2 * DEADLOCKS + 2 + 1  # holder, stale, main
                       + OS_NAMED)
        self.assertGreaterEqual(len(tids), app_threads)
        counts = [g["count"] for g in self.dump["groups"]]
        self.assertEqual(counts, sorted(counts, reverse=True), "largest group first")
        self.assertEqual(self.dump["omitted"], 0)
        self.assertGreater(self.dump["suspend_ms"], 0)
        self.assertLess(self.dump["suspend_ms"], 1000)

    def test_reused_then_new(self):
        self.assertEqual(self.again["seq"], self.dump["seq"], "asked again at once: the same dump")
        self.assertGreater(self.later["seq"], self.dump["seq"], "asked 0.7 s later: a new one")
        self.assertGreater(self.later["t"], self.dump["t"])

    def test_head_stops_nothing(self):
        # HEAD answers from the newest dump however old: a probe does not stop the world
        for status, headers, body in (self.head, self.head_pprof):
            self.assertEqual(status, 200)
            self.assertEqual(body, b"")
            self.assertGreater(int(headers["Content-Length"]), 100)
        self.assertIn("json", self.head[1]["Content-Type"])
        self.assertIn("text/plain", self.head_pprof[1]["Content-Type"])
        before, after = self.dumps_before_head, self.status_after["thread_dumps"]
        self.assertEqual(after["taken"], before["taken"], (before, after))
        self.assertEqual(after["reused"], before["reused"] + 2, (before, after))

    def test_text_forms(self):
        status, headers, body = self.text1
        self.assertEqual(status, 200)
        self.assertIn("text/plain", headers["Content-Type"])
        text = body.decode()
        self.assertRegex(text, r"^threads profile: total \d+ in \d+ stacks")
        self.assertEqual(len(re.findall(r"^DEADLOCK \d+ of \d+", text, re.M)), DEADLOCKS)
        self.assertRegex(text, rf"(?m)^{BLOCKERS // 2} @ .*\"blocker-0\"")
        self.assertIn("#\tTestApp.Threads.Blocker.WaitOnEvent\n", text)
        self.assertIn('held by thread', text)
        status, headers, body = self.text2
        self.assertEqual(status, 200)
        text = body.decode()
        for i in range(BLOCKERS):
            self.assertEqual(len(re.findall(rf'^thread \d+ "blocker-{i}" \[', text, re.M)), 1, i)
        self.assertRegex(text, r'(?m)^thread \d+ "spinner-0" \[running, [\d.]+ s CPU\]:$')
        self.assertRegex(text, r'(?m)^thread \d+ "lock-waiter-0" \[sleeping, [\d.]+ s CPU\] '
                               r'waiting [\d.]+ s for lock 0x[0-9a-f]+ held by thread \d+ '
                               r'"lock-holder":$')
        self.assertIn("(DEADLOCK", text)

    def test_pprof(self):
        p = read_pprof(self.pprof_path)
        self.assertEqual(p.sample_types, [("threads", "count")])
        stacks = p.stacks()
        self.assertEqual(sum(v[0] for _, v, _ in stacks), self.later["threads_total"])
        spin = [labels for frames, _, labels in stacks
                if self.truth["frames"]["spin"] in frames]
        self.assertEqual(len(spin), SPINNERS)
        for labels in spin:
            self.assertEqual(labels["state"], "running")
            self.assertTrue(labels["thread name"].startswith("spinner-"))
        out = go_pprof(["-traces"], self.pprof_path)
        self.assertIn("TestApp.Threads.Blocker.WaitForLock", out)
        self.assertRegex(out, r"thread name:\s+lock-waiter-0")

    def test_bad_input_and_app_unharmed(self):
        status, headers, body = self.bad
        self.assertEqual(status, 400)
        self.assertIn("json", headers["Content-Type"])
        self.assertIn(b"debug", body)
        # the app ran on: the waiters got the lock once the holder let go at the end
        self.assertEqual(self.truth["lock_acquired"], WAITERS + 1)  # + stale-a
        self.assertEqual(self.truth["threads_started"],
                         BLOCKERS + SPINNERS + WAITERS + 1 + 2)


    def test_cli(self):
        """`clrscope threads PID` finds the process through its discovery file."""
        self.assertEqual(self.cli.returncode, 0, self.cli.stderr)
        out = self.cli.stdout
        self.assertRegex(out, r"^threads dump: total \d+")
        for i in range(BLOCKERS):
            self.assertEqual(len(re.findall(rf'^thread \d+ "blocker-{i}" \[', out, re.M)), 1, i)
        self.assertEqual(len(re.findall(r"^DEADLOCK \d+ of \d+", out, re.M)), DEADLOCKS)
        self.assertEqual(self.cli_grouped.returncode, 0, self.cli_grouped.stderr)
        self.assertRegex(self.cli_grouped.stdout, rf"(?m)^{WAITERS} @ .*\"lock-waiter-0\"")
        r = subprocess.run([LAUNCHER, "threads", "999999999"], capture_output=True, text=True,
                           timeout=30)
        self.assertEqual(r.returncode, 1)
        self.assertIn("no process 999999999", r.stderr)
        # a discovery file a killed process left behind is not followed to whatever now
        # answers at its port (here: our app's)
        self.assertEqual(len(self.stale_results), 1, self.stale_results)
        code, err = self.stale_results[0]
        self.assertEqual(code, 1, err)
        self.assertIn("no process", err)
        r = subprocess.run([LAUNCHER, "threads", "x"], capture_output=True, text=True, timeout=30)
        self.assertEqual(r.returncode, 2)


class PoolStarvation(unittest.TestCase):
    """`pool-starve` queues 200 work items that each block on one unfinished task (sync over
    async) until --free-after: every pool thread is blocked in Blocker.SyncOverAsync and the rest
    of the items wait. The dump must call that starvation, count the pool threads the app counts
    (ThreadPool.ThreadCount), and name the blocking frame; once the task completes, not."""

    @classmethod
    def setUpClass(cls):
        cls.app = app = ProfiledApp("pool-starve", ["--free-after", "5", "--seconds", "30",
                                                    "--truth-every-second"])
        app.start()
        try:
            app.wait_ready()
            time.sleep(3)
            before = app.next_truth()
            cls.starved = app.json("/api/v1/threads")
            cls.text = app.request("/debug/pprof/threads?debug=1")[2].decode()
            after = app.next_truth()
            cls.truth_around = (before, after)
            deadline = time.time() + 20
            while time.time() < deadline:  # released at 5 s: every item ends, the pool idles
                t = app.truth_lines()[-1]
                if t["released"] and t["completed"] == t["queued"]:
                    break
                time.sleep(0.2)
            time.sleep(0.6)
            cls.relieved = app.json("/api/v1/threads")
            cls.final_truth = app.truth_lines()[-1]
        finally:
            app.stop()

    def test_starvation_found(self):
        tp = self.starved["thread_pool"]
        before, after = self.truth_around
        self.assertFalse(after["released"], "the dump was taken while the items blocked")
        self.assertTrue(tp["starvation_likely"], tp)
        self.assertEqual(tp["idle"], 0, tp)
        # every pool thread is a worker the dump sees (the pool adds threads while we look)
        self.assertGreaterEqual(tp["workers"], min(before["pool_threads"], after["pool_threads"]))
        self.assertLessEqual(tp["workers"], max(before["pool_threads"], after["pool_threads"]))
        self.assertGreaterEqual(tp["blocked"], tp["workers"] * 3 / 4)
        self.assertEqual(tp["blocked_at"][0]["frame"], before["frame"])
        self.assertEqual(tp["blocked_at"][0]["count"], tp["blocked"])
        self.assertGreater(before["pending"], 0, "items wait in the queue")
        if tp["queue_length"] is not None:  # the runtime counter, once a second
            self.assertGreater(tp["queue_length"], 0)
        self.assertIn("THREAD POOL STARVATION likely", self.text)
        self.assertRegex(self.text, rf"(?m)^  \d+ blocked at {re.escape(before['frame'])}$")

    def test_relieved(self):
        tp = self.relieved["thread_pool"]
        self.assertTrue(self.final_truth["released"])
        self.assertEqual(self.final_truth["completed"], self.final_truth["queued"])
        self.assertFalse(tp["starvation_likely"], tp)
        self.assertEqual(tp["blocked"], 0, tp)
        self.assertGreater(tp["idle"], 0, tp)
        self.assertEqual(tp["blocked_at"], [])


class WithoutSampler(unittest.TestCase):
    def test_unavailable_says_why(self):
        with ProfiledApp("wait", ["--seconds", "20"], env={"CLRSCOPE_PROFILES": "gc"}) as app:
            app.wait_ready()
            status, headers, body = app.request("/api/v1/threads")
            self.assertEqual(status, 503)
            self.assertIn(b"CLRSCOPE_PROFILES", body)
            status, _, _ = app.request("/debug/pprof/threads?debug=2")
            self.assertEqual(status, 503)
            r = subprocess.run([LAUNCHER, "threads", str(app.pid)], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 1)
            self.assertIn("answered 503", r.stderr)


class CliWithToken(unittest.TestCase):
    def test_token_from_the_discovery_file(self):
        with ProfiledApp("threads", ["--threads", "2", "--seconds", "20"],
                         env={"CLRSCOPE_TOKEN": "auto"}) as app:
            app.wait_ready()
            self.assertTrue(app.token, "a token was made")
            status, _, _ = app.request("/api/v1/threads", headers={"Authorization": "Bearer x"})
            self.assertEqual(status, 401)
            r = subprocess.run([LAUNCHER, "threads", str(app.pid)], capture_output=True,
                               text=True, timeout=30)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn('"blocker-0"', r.stdout)


if __name__ == "__main__":
    unittest.main()
