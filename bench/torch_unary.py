#!/usr/bin/env python3
"""PyTorch's side of BM_Erf, BM_Exp, BM_GeluErf, BM_Gelu and BM_Softplus (float32, the op
list's activation shape (8, 256, 64)) and of BM_Softmax, BM_SoftmaxDim, BM_LogSoftmax,
BM_LogSoftmaxDim and BM_Logsumexp (its scores shape (8, 256, 256); the Dim rows along the axis
before the last, the others along the last): each op forward, and forward + backward
(torch.autograd.grad with a random grad_output), fastest mean of 15 rounds of 40 calls,
microseconds.

Usage: OPENBLAS_NUM_THREADS=N LD_PRELOAD=/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4 \\
           python3 bench/torch_unary.py N
"""

import sys
import time

import torch


def main():
    threads = int(sys.argv[1]) if len(sys.argv) > 1 else 1
    torch.set_num_threads(threads)
    act = (torch.randn(8, 256, 64), torch.randn(8, 256, 64))
    scores = (torch.randn(8, 256, 256), torch.randn(8, 256, 256))

    def forward(f, x0):
        return lambda: f(x0)

    def forward_backward(f, x0, g):
        def run():
            x = x0.detach().requires_grad_()
            torch.autograd.grad(f(x), x, g)
        return run

    cases = [("Erf", torch.erf, act), ("Exp", torch.exp, act),
             ("GeluErf", torch.nn.functional.gelu, act),
             ("Gelu", lambda t: torch.nn.functional.gelu(t, approximate="tanh"), act),
             ("Softplus", torch.nn.functional.softplus, act),
             ("Softmax", lambda t: torch.softmax(t, -1), scores),
             ("SoftmaxDim", lambda t: torch.softmax(t, -2), scores),
             ("LogSoftmax", lambda t: torch.log_softmax(t, -1), scores),
             ("LogSoftmaxDim", lambda t: torch.log_softmax(t, -2), scores),
             ("Logsumexp", lambda t: torch.logsumexp(t, -1), (scores[0], scores[1][..., 0]))]
    for name, f, (x0, g) in cases:
        for kind, run in (("Fwd", forward(f, x0)), ("FwdBwd", forward_backward(f, x0, g))):
            best = float("inf")
            for _ in range(15):
                t0 = time.perf_counter()
                for _ in range(40):
                    run()
                best = min(best, (time.perf_counter() - t0) / 40)
            print(f"{name}_{kind} {threads}T {best * 1e6:.1f} us", flush=True)


if __name__ == "__main__":
    main()
