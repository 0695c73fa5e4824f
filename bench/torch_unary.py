#!/usr/bin/env python3
"""PyTorch's side of BM_Erf, BM_Exp, BM_GeluErf and BM_Gelu (float32, the op list's activation
shape (8, 256, 64)): each op forward, and forward + backward (torch.autograd.grad with a random
grad_output), fastest mean of 15 rounds of 40 calls, microseconds.

Usage: OPENBLAS_NUM_THREADS=N LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \\
           python3 bench/torch_unary.py N
"""

import sys
import time

import torch


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    torch.set_num_threads(threads)
    x0 = torch.randn(8, 256, 64)
    g = torch.randn(8, 256, 64)

    def forward(f):
        return lambda: f(x0)

    def forward_backward(f):
        def run():
            x = x0.detach().requires_grad_()
            torch.autograd.grad(f(x), x, g)
        return run

    cases = [("Erf", torch.erf), ("Exp", torch.exp),
             ("GeluErf", torch.nn.functional.gelu),
             ("Gelu", lambda t: torch.nn.functional.gelu(t, approximate="tanh"))]
    for name, f in cases:
        for kind, run in (("Fwd", forward(f)), ("FwdBwd", forward_backward(f))):
            best = float("inf")
            for _ in range(15):
                t0 = time.perf_counter()
                for _ in range(40):
                    run()
                best = min(best, (time.perf_counter() - t0) / 40)
            print(f"{name}_{kind} {threads}T {best * 1e6:.1f} us", flush=True)


if __name__ == "__main__":
    main()
