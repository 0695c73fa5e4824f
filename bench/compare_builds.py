#!/usr/bin/env python3
"""Two builds of tapegrad_bench side by side, at 1 and 2 threads, optionally beside a busy process.

For a change's before and after: each benchmark runs on both binaries and both thread counts in
turn, --repeat times, and each of the four reports its fastest run, so all four see the same
machine. --busy starts one process spinning on one core for the whole run, as on a shared
machine. Prints a Markdown table: each build's 1- and 2-thread times and their ratio.

Usage: python3 bench/compare_builds.py BEFORE_BENCH AFTER_BENCH [--busy] [--repeat 2]
           [--min-time 1] [--filter NAME ...]
"""

import argparse
import json
import os
import subprocess
import sys

DEFAULT = ["BM_GPT_TrainStep<float>/V:65/L:4/H:4/C:128/T:64/B:12",
           "BM_Attention_FwdBwd<float>/B:1/T:1024/D:512/H:8",
           "BM_Attention_FwdBwd<float>/B:1/T:256/D:256/H:4",
           "BM_Attention_FwdBwd<float>/B:4/T:512/D:256/H:8",
           "BM_Gemm_Peak<float>/N:1024"]


def seconds(bench, name, threads, min_time):
    out = subprocess.run([bench, f"--benchmark_filter=^{name}$", "--benchmark_format=json",
                          f"--benchmark_min_time={min_time}"],
                         env=dict(os.environ, OMP_NUM_THREADS=str(threads)),
                         capture_output=True, text=True, check=True)
    rows = json.loads(out.stdout)["benchmarks"]
    if not rows:
        raise SystemExit(f"compare_builds: {bench} has no benchmark {name}")
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[rows[0]["time_unit"]]
    return rows[0]["real_time"] * scale


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("before")
    ap.add_argument("after")
    ap.add_argument("--busy", action="store_true", help="beside one busy process")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--min-time", type=float, default=1.0)
    ap.add_argument("--filter", nargs="*", default=DEFAULT, help="benchmark names")
    a = ap.parse_args()
    busy = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if a.busy else None
    try:
        print("| benchmark | before 1T | before 2T | 2T / 1T | after 1T | after 2T | 2T / 1T |")
        print("|---|---|---|---|---|---|---|")
        for name in a.filter:
            runs = {}
            for _ in range(a.repeat):
                for build in ("before", "after"):
                    for threads in (1, 2):
                        runs.setdefault((build, threads), []).append(
                            seconds(getattr(a, build), name, threads, a.min_time))
            t = {k: min(v) for k, v in runs.items()}
            cells = [f"{t[(b, n)] * 1e3:.1f} ms" for b in ("before", "after") for n in (1, 2)]
            ratio = {b: t[(b, 2)] / t[(b, 1)] for b in ("before", "after")}
            print(f"| `{name}` | {cells[0]} | {cells[1]} | {ratio['before']:.2f}x | {cells[2]} "
                  f"| {cells[3]} | {ratio['after']:.2f}x |", flush=True)
    finally:
        if busy:
            busy.kill()
            busy.wait()


if __name__ == "__main__":
    main()
