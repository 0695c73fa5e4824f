#!/usr/bin/env python3
"""Peak RSS and time per step of `tapegrad train` with and without --checkpoint-blocks.

The GPT of activation checkpointing's case (8 layers, 8 heads, n_embd 256, block 256, batch 16,
float32) trains a few steps on a char-level text, each side in its own process, the sides
alternating; the peak RSS of each process is the kernel's (wait4's ru_maxrss), which includes the
model, AdamW's moments and the text, so the ratio is of whole runs. The time per step is the
run's wall time over its steps after the first (which touches every fresh page).

  python3 bench/checkpoint_memory.py [--tapegrad build/release/tools/tapegrad] [--rounds 2]
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time


def run(tapegrad, text, out, steps, checkpointed, threads):
    cmd = [tapegrad, "train", "--text", text, "--out", out, "--layers", "8", "--heads", "8",
           "--embd", "256", "--block", "256", "--batch", "16", "--steps", str(steps),
           "--eval-every", "0", "--warmup", "0", "--threads", str(threads)]
    if checkpointed:
        cmd.append("--checkpoint-blocks")
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    err = proc.stderr.read().decode()
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit("tapegrad train failed:\n" + err)
    return usage.ru_maxrss / 1024.0, wall  # MiB, s


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tapegrad", default="build/release/tools/tapegrad")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        text = os.path.join(tmp, "text.txt")
        with open(text, "w") as f:
            for name in sorted(os.listdir("/usr/share/common-licenses")):
                path = os.path.join("/usr/share/common-licenses", name)
                if os.path.isfile(path):
                    with open(path, errors="replace") as g:
                        f.write(g.read())
        results = {False: [], True: []}
        for r in range(args.rounds):
            for checkpointed in (False, True):
                out = os.path.join(tmp, f"run{r}{int(checkpointed)}")
                rss, wall = run(args.tapegrad, text, out, 1, checkpointed, args.threads)
                rss_n, wall_n = run(args.tapegrad, text, out + "n", args.steps + 1, checkpointed,
                                    args.threads)
                step = (wall_n - wall) / args.steps
                results[checkpointed].append((max(rss, rss_n), step))
                print(f"round {r} {'checkpointed' if checkpointed else 'plain       '}: "
                      f"peak RSS {max(rss, rss_n):7.1f} MiB, {step * 1e3:8.1f} ms/step", flush=True)
        plain_rss = min(x[0] for x in results[False])
        ckpt_rss = min(x[0] for x in results[True])
        plain_step = min(x[1] for x in results[False])
        ckpt_step = min(x[1] for x in results[True])
        print(f"peak RSS: checkpointed {ckpt_rss:.1f} MiB / plain {plain_rss:.1f} MiB = "
              f"{ckpt_rss / plain_rss:.2f}x; time per step {ckpt_step * 1e3:.1f} / "
              f"{plain_step * 1e3:.1f} ms = {ckpt_step / plain_step:.2f}x")


if __name__ == "__main__":
    main()
