#!/usr/bin/env python3
"""What a CPU sample costs on linux-arm64 under qemu-user against x86-64, indicative only (qemu
translates every instruction and emulates every system call): TestApp `cpu-split` for each
architecture (the arm64 one under qemu-aarch64-static with the cross build's library, as
integration.test_arm64 runs it), and from /api/v1/budget over its 10 s window the signal
handler's time and clrscope's threads' CPU, each per CPU sample taken in that window.

Usage: python3 bench/arm64_sampler_cost.py BUILD     (CLRSCOPE_ARM64_BUILD: the cross build,
build-arm64 by default; needs what test_arm64 needs: tools/test.sh builds it)
"""
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "tests", "integration"))
if len(sys.argv) > 1:
    os.environ["CLRSCOPE_BUILD"] = os.path.abspath(sys.argv[1])
from benchlib import emit  # noqa: E402
from harness import ProfiledApp  # noqa: E402
import test_arm64  # noqa: E402


def per_sample(app):
    app.wait_ready(timeout=120)
    time.sleep(16)  # a whole 10 s budget window after start-up
    b = app.json("/api/v1/budget")
    cpu = app.json("/api/v1/flamegraph?type=cpu&seconds=10")
    hz = app.json("/api/v1/status")["sampling_hz"]
    samples = cpu["total"] / 1e9 * hz
    proc = b["process_cpu_s"]
    by = b["by_source"]
    return (by["signal_handler"] * proc / samples * 1e6, by["threads"] * proc / samples * 1e6,
            samples)


def main():
    why = test_arm64.missing()
    if why:
        sys.exit(why)
    got = {}
    for arch, app in (("x86-64", ProfiledApp("cpu-split", ["--seconds", "30"])),
                      ("arm64 (qemu)", test_arm64.arm64_app("cpu-split", ["--seconds", "30"]))):
        with app:
            got[arch] = per_sample(app)
        h, t, n = got[arch]
        print(f"{arch}: signal handler {h:.1f} us, clrscope's threads {t:.1f} us per CPU sample "
              f"({n:.0f} samples in 10 s)")
    (hx, tx, _), (ha, ta, _) = got["x86-64"], got["arm64 (qemu)"]
    print(f"arm64 under qemu / x86-64: handler {ha / hx:.1f}x, threads {ta / tx:.1f}x")
    emit("arm64 sampler", "handler per sample, arm64 qemu / x86-64", round(ha / hx, 2), "x")
    emit("arm64 sampler", "threads per sample, arm64 qemu / x86-64", round(ta / tx, 2), "x")


if __name__ == "__main__":
    main()
