#!/usr/bin/env python3
"""tapegrad against PyTorch eager, side by side, in one run.

Attention: for each case (B, T, D, H) and dtype, the same causal self-attention (X (B, T, D)
through W_Q, W_K, W_V, W_O of (D, D), H heads, L = 0.5 * sum(Y^2)) is timed forward and
forward+backward: tapegrad through its Google Benchmark binary, PyTorch eager in a child process
(bench/torch_side.py). PyTorch 1.13 has no fused attention, so its eager path is the composed
one (matmul, mask, softmax, matmul), as nanoGPT writes it. With --gpt, also one training step of
nanoGPT's CPU recipe (BM_GPT_TrainStep against tests/gpt_reference.py's model with the same
AdamW and clipping) and the peak RSS of each side running it.

Fair to PyTorch, on machines where fresh pages are expensive and the load comes and goes:
- Every measurement runs --repeat times, the sides taking turns, and each side reports its
  fastest run.
- PyTorch runs under two allocators and keeps the faster: glibc with MALLOC_TOP_PAD_ (1 GiB),
  MALLOC_MMAP_THRESHOLD_ (32 MiB, glibc's maximum) and MALLOC_TRIM_THRESHOLD_ raised, so freed
  memory is kept and reused instead of being returned to the OS and faulted in again; and
  tcmalloc (Debian's libtcmalloc-minimal4, LD_PRELOAD) with TCMALLOC_RELEASE_RATE=0 (never
  hands memory back). The table says which won.
- Threads are capped on both sides: OMP_NUM_THREADS for tapegrad; for PyTorch
  torch.set_num_threads plus OPENBLAS_NUM_THREADS / OMP_NUM_THREADS / MKL_NUM_THREADS, since
  torch.set_num_threads does not reach OpenBLAS's pool. The header prints what PyTorch reports
  (version, BLAS as built and as loaded, OpenBLAS's kernels and thread count).
The "CPU/wall" column is the CPU time PyTorch used per second of wall time (about 1 for one
thread on an idle core; less on a busy machine).

Usage: python3 bench/compare_pytorch.py [--bench build/release/bench/tapegrad_bench]
           [--threads 1,2] [--min-time 0.5] [--cases all|small|none|B,T,D,H;...]
           [--repeat 3] [--gpt]
"""

import argparse
import json
import os
import subprocess
import sys

CASES = [(1, 8, 4, 1), (1, 64, 64, 4), (1, 256, 256, 4), (1, 1024, 512, 8), (4, 512, 256, 8)]
MEMORY_CASE = (1, 4096, 256, 4)
GPT_NAME = "BM_GPT_TrainStep<{}>/V:65/L:4/H:4/C:128/T:64/B:12"
TORCH_SIDE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "torch_side.py")
TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"
ALLOCATORS = {
    "glibc": {"MALLOC_TOP_PAD_": str(1 << 30),
              "MALLOC_MMAP_THRESHOLD_": str(32 << 20),   # glibc's maximum
              "MALLOC_TRIM_THRESHOLD_": str(64 << 30)},
    "tcmalloc": {"LD_PRELOAD": TCMALLOC, "TCMALLOC_RELEASE_RATE": "0"},
}


def torch_env(allocator, threads):
    # torch.set_num_threads does not reach OpenBLAS's own thread pool: without these, PyTorch's
    # matrix products run on every core whatever the thread count says.
    return dict(os.environ, **ALLOCATORS[allocator], OPENBLAS_NUM_THREADS=str(threads),
                OMP_NUM_THREADS=str(threads), MKL_NUM_THREADS=str(threads))


def run_torch(args, allocator, threads):
    out = subprocess.run([sys.executable, TORCH_SIDE, *map(str, args)],
                         env=torch_env(allocator, threads), capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"compare_pytorch: torch_side.py {' '.join(map(str, args))} "
                         f"({allocator}) failed:\n{out.stderr}")
    return json.loads(out.stdout)


def best_torch(args, allocators, threads):
    """The fastest of one run per allocator: (result, allocator)."""
    runs = [(run_torch(args, alloc, threads), alloc) for alloc in allocators]
    return min(runs, key=lambda r: r[0]["seconds"])


def run_tapegrad(bench, name, threads, min_time):
    """Wall and main-thread CPU seconds per iteration of one benchmark."""
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    out = subprocess.run([bench, f"--benchmark_filter=^{name}$", "--benchmark_format=json",
                          f"--benchmark_min_time={min_time}"], env=env, capture_output=True,
                         text=True, check=True)
    rows = json.loads(out.stdout)["benchmarks"]
    if not rows:
        raise SystemExit(f"compare_pytorch: no benchmark named {name}")
    scale = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}[rows[0]["time_unit"]]
    return {"seconds": rows[0]["real_time"] * scale, "cpu_seconds": rows[0]["cpu_time"] * scale}


def peak_rss_mb(cmd, env):
    """Maximum resident set of one child process, in MiB (from wait4's rusage)."""
    p = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(p.pid, 0)
    if status != 0:
        raise SystemExit(f"compare_pytorch: {' '.join(cmd)} failed")
    return usage.ru_maxrss / 1024


def name(kind, dtype, case):
    B, T, D, H = case
    return f"BM_{kind}<{dtype}>/B:{B}/T:{T}/D:{D}/H:{H}"


def fmt_time(s):
    return f"{s * 1e6:.1f} us" if s < 1e-3 else f"{s * 1e3:.2f} ms"


class Targets:
    """Collects each target's verdict, printed together at the end."""

    def __init__(self):
        self.verdicts, self.lines = [], []

    def check(self, ok, text):
        self.verdicts.append(ok)
        self.lines.append(f"  [{'met' if ok else 'NOT MET'}] {text}")

    def report(self):
        print("\nTargets:\n" + "\n".join(self.lines))
        return all(self.verdicts)


def print_header(a, threads_list, allocators):
    print("tapegrad vs PyTorch eager; threads " + ", ".join(map(str, threads_list))
          + "; each side's fastest of " + str(a.repeat) + " alternating runs")
    for threads in threads_list:
        i = run_torch(["info", threads], "glibc", threads)
        print(f"PyTorch {i['version']} at {threads} thread(s): torch threads {i['torch_threads']}"
              f" (interop {i['interop_threads']}), {i['parallel']}; BLAS_INFO={i['blas_info']}, "
              f"loaded {', '.join(i['blas_libs']) or 'no BLAS library'}"
              + (f"; {i['openblas']}, {i['openblas_threads']} thread(s)" if "openblas" in i
                 else ""))
        if not any("openblas" in lib for lib in i["blas_libs"]):
            print("warning: PyTorch runs on the reference BLAS here; install "
                  "libopenblas0-pthread for a fair comparison")
    print("PyTorch allocators: " + "; ".join(
        f"{k}: " + ", ".join(f"{e}={v}" for e, v in env.items()) for k, env in ALLOCATORS.items()
        if k in allocators))
    if "tcmalloc" not in allocators:
        print(f"note: {TCMALLOC} is missing (Debian: libtcmalloc-minimal4); PyTorch runs on "
              "glibc only")


def compare_attention(a, cases, threads, allocators, results):
    print(f"\nAttention, {threads} thread(s)\n")
    print("| case (B, T, D, H) | dtype | pass | tapegrad | PyTorch | PyTorch / tapegrad "
          "| PyTorch's allocator | baseline | tapegrad / baseline | PyTorch CPU/wall |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for case in cases:
        for dtype in ("float", "double"):
            for mode in ("Fwd", "FwdBwd"):
                tgs, pts, bs = [], [], []
                for _ in range(a.repeat):  # alternating, so both sides see the same machine
                    tgs.append(run_tapegrad(a.bench, name(f"Attention_{mode}", dtype, case),
                                            threads, a.min_time)["seconds"])
                    pts.append(best_torch(["attention", *case, dtype, mode, threads, a.min_time],
                                          allocators, threads))
                    if mode == "FwdBwd":
                        bs.append(run_tapegrad(a.bench,
                                               name("AttentionBaseline_FwdBwd", dtype, case),
                                               threads, a.min_time)["seconds"])
                tg = min(tgs)
                pt_run, alloc = min(pts, key=lambda r: r[0]["seconds"])
                pt = pt_run["seconds"]
                base = ratio_base = ""
                if mode == "FwdBwd":
                    b = min(bs)
                    base, ratio_base = fmt_time(b), f"{tg / b:.2f}x"
                    results[(threads, case, dtype, mode, "baseline")] = b
                results[(threads, case, dtype, mode)] = (tg, pt)
                print(f"| {case} | {dtype} | {mode.replace('FwdBwd', 'fwd+bwd').lower()} "
                      f"| {fmt_time(tg)} | {fmt_time(pt)} | {pt / tg:.2f}x | {alloc} | {base} "
                      f"| {ratio_base} | {pt_run['cores']:.2f} |", flush=True)


def attention_targets(targets, results, threads):
    def get(case, dtype, mode="FwdBwd"):
        return results.get((threads, case, dtype, mode))

    tiny = get((1, 8, 4, 1), "double")
    if tiny:
        tg, pt = tiny
        b = results[(threads, (1, 8, 4, 1), "double", "FwdBwd", "baseline")]
        targets.check(pt / tg >= 100, f"{threads}T (1, 8, 4, 1) double fwd+bwd: {pt / tg:.1f}x "
                      "faster than PyTorch (>= 100x)")
        targets.check(tg / b <= 1, f"{threads}T (1, 8, 4, 1) double fwd+bwd: {tg / b:.2f}x the "
                      "hand-written baseline (<= 1x)")
    for case, bound in (((1, 1024, 512, 8), 0.5), ((1, 256, 256, 4), 0.6)):
        r = get(case, "float")
        if r:
            targets.check(r[0] / r[1] <= bound, f"{threads}T {case} float fwd+bwd: "
                          f"{r[0] / r[1]:.2f}x PyTorch's time (<= {bound}x)")
    rows = {k: v for k, v in results.items() if len(k) == 4 and k[0] == threads}
    if rows:
        slow = [k for k, v in rows.items() if v[0] > 0.8 * v[1]]
        targets.check(not slow, f"{threads}T every case within 0.8x PyTorch's time" + (
            ": not in " + ", ".join(f"{k[1]} {k[2]} {k[3]} ({rows[k][0] / rows[k][1]:.2f}x)"
                                    for k in slow) if slow else ""))


def scaling_target(a, targets):
    # 1 and 2 threads alternating, at least five times each: a 2-thread run needs both cores of
    # a shared machine, so it is the noisier of the two
    big = name("Attention_FwdBwd", "float", (1, 1024, 512, 8))
    one, two = [], []
    for _ in range(max(5, a.repeat)):
        one.append(run_tapegrad(a.bench, big, 1, a.min_time)["seconds"])
        two.append(run_tapegrad(a.bench, big, 2, a.min_time)["seconds"])
    tg, tg2 = min(one), min(two)
    targets.check(tg / tg2 >= 1.7, f"(1, 1024, 512, 8) float fwd+bwd: 2 threads {tg / tg2:.2f}x "
                  f"faster than 1 ({fmt_time(tg2)} vs {fmt_time(tg)}; >= 1.7x)")


def memory_target(a, targets, threads):
    env = dict(os.environ, OMP_NUM_THREADS=str(threads))
    rss = {kind: peak_rss_mb([a.bench, "--benchmark_filter=^" + name(kind, "float", MEMORY_CASE)
                              + "$", "--benchmark_min_time=0"], env)
           for kind in ("Attention_FwdBwd", "AttentionComposed_FwdBwd")}
    fused, composed = rss["Attention_FwdBwd"], rss["AttentionComposed_FwdBwd"]
    targets.check(fused <= 0.1 * composed, f"peak RSS of fwd+bwd at {MEMORY_CASE} float: fused "
                  f"{fused:.0f} MiB vs composed {composed:.0f} MiB = {fused / composed:.3f}x "
                  "(<= 0.1x; maximum resident set of a process running one such benchmark)")


def compare_gpt(a, threads_list, allocators, targets):
    print("\nGPT training step (nanoGPT's CPU recipe: V 65, L 4, H 4, C 128, T 64, B 12; "
          "AdamW, clip 1.0)\n")
    print("| threads | dtype | tapegrad | PyTorch | PyTorch / tapegrad | PyTorch's allocator "
          "| CPU-time ratio | tapegrad tokens/s | PyTorch CPU/wall |")
    print("|---|---|---|---|---|---|---|---|---|")
    for threads in threads_list:
        for dtype in ("float", "double"):
            tgs, pts = [], []
            for _ in range(a.repeat):
                tgs.append(run_tapegrad(a.bench, GPT_NAME.format(dtype), threads, a.min_time))
                pts.append(best_torch(["gpt", dtype, threads, a.min_time], allocators, threads))
            tg = min(tgs, key=lambda r: r["seconds"])
            pt, alloc = min(pts, key=lambda r: r[0]["seconds"])
            # one thread: both sides' CPU seconds, steadier than wall time on a busy machine
            cpu_ratio = (f"{pt['cpu_seconds'] / tg['cpu_seconds']:.2f}x" if threads == 1
                         else "")
            print(f"| {threads} | {dtype} | {fmt_time(tg['seconds'])} | {fmt_time(pt['seconds'])} "
                  f"| {pt['seconds'] / tg['seconds']:.2f}x | {alloc} | {cpu_ratio} "
                  f"| {12 * 64 / tg['seconds']:.0f} | {pt['cores']:.2f} |", flush=True)
            if dtype == "float":
                targets.check(tg["seconds"] <= 0.5 * pt["seconds"],
                              f"{threads}T GPT train step float: "
                              f"{tg['seconds'] / pt['seconds']:.2f}x PyTorch's time (<= 0.5x)")
    threads = threads_list[0]
    tg_rss = peak_rss_mb([a.bench, "--benchmark_filter=^" + GPT_NAME.format("float") + "$",
                          "--benchmark_min_time=0"], dict(os.environ, OMP_NUM_THREADS=str(threads)))
    pt_rss = {alloc: peak_rss_mb([sys.executable, TORCH_SIDE, "gpt", "float", str(threads), "0"],
                                 torch_env(alloc, threads)) for alloc in allocators}
    bare = peak_rss_mb([sys.executable, "-c", "import torch"], torch_env("glibc", threads))
    best = min(pt_rss, key=pt_rss.get)
    targets.check(tg_rss <= pt_rss[best], f"peak RSS running the float GPT step: tapegrad "
                  f"{tg_rss:.0f} MiB, PyTorch {pt_rss[best]:.0f} MiB ({best}; "
                  + ", ".join(f"{k} {v:.0f}" for k, v in pt_rss.items())
                  + f"; `import torch` alone {bare:.0f} MiB) (tapegrad <= PyTorch)")


def parse_cases(text):
    if text in ("all", "small", "none"):
        return {"all": CASES, "small": CASES[:2], "none": []}[text]
    return [tuple(int(v) for v in c.split(",")) for c in text.split(";")]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default="build/release/bench/tapegrad_bench")
    ap.add_argument("--threads", default="1,2",
                    help="thread counts, comma separated; every target is checked at each")
    ap.add_argument("--min-time", type=float, default=0.5)
    ap.add_argument("--cases", default="all",
                    help="all, small, none or cases as B,T,D,H;B,T,D,H")
    ap.add_argument("--repeat", type=int, default=3,
                    help="alternating runs per measurement; each side reports its fastest")
    ap.add_argument("--gpt", action="store_true", help="also the GPT training step and its RSS")
    ap.add_argument("--no-extras", action="store_true",
                    help="skip the 1-vs-2-thread scaling and fused-vs-composed memory targets")
    a = ap.parse_args()
    try:
        subprocess.run([sys.executable, "-c", "import torch"], check=True, capture_output=True)
    except subprocess.CalledProcessError:
        print("compare_pytorch: PyTorch is not installed (Debian: python3-torch); skipping.")
        return
    if not os.access(a.bench, os.X_OK):
        raise SystemExit(f"compare_pytorch: no benchmark binary at {a.bench}; run ./build.sh first")
    threads_list = [int(t) for t in a.threads.split(",")]
    allocators = ["glibc"] + (["tcmalloc"] if os.path.exists(TCMALLOC) else [])
    cases = parse_cases(a.cases)

    print_header(a, threads_list, allocators)
    results = {}
    for threads in threads_list:
        compare_attention(a, cases, threads, allocators, results)
    targets = Targets()
    if a.gpt:
        compare_gpt(a, threads_list, allocators, targets)
    for threads in threads_list:
        attention_targets(targets, results, threads)
    if not a.no_extras and (1, 1024, 512, 8) in cases:
        scaling_target(a, targets)
    if not a.no_extras and cases:
        memory_target(a, targets, threads_list[0])
    sys.exit(0 if targets.report() else 1)


if __name__ == "__main__":
    main()
