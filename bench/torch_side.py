#!/usr/bin/env python3
"""PyTorch's side of compare_pytorch.py: one measurement per process, one JSON line on stdout.

    torch_side.py info THREADS
    torch_side.py attention B T D H float|double Fwd|FwdBwd THREADS MIN_TIME
    torch_side.py gpt float|double THREADS MIN_TIME
    torch_side.py hessian_mlp float|double THREADS MIN_TIME
    torch_side.py hvp_gpt float|double THREADS MIN_TIME

A fresh process per measurement, so the allocator (chosen by compare_pytorch.py through the
environment: glibc's MALLOC_* settings or tcmalloc by LD_PRELOAD) and the thread settings apply
from the first allocation, and each run's peak RSS (wait4) is its own.
"""

import ctypes
import importlib.util
import json
import math
import os
import re
import sys
import time
import types

import torch

# nanoGPT's shakespeare_char CPU recipe, as BM_GPT_TrainStep runs it (bench/gpt_bench.cpp).
GPT_RECIPE = dict(vocab=65, layers=4, heads=4, embd=128, block=64, batch=12)
# The functional API's cases (bench/functional_bench.cpp): the MLP (N, D, H, O) of ~1,000
# parameters whose loss's Hessian is timed, and the small GPT whose loss's hvp is.
HESSIAN_MLP = dict(N=32, D=16, H=32, O=14)
HVP_GPT = dict(vocab=65, layers=2, heads=2, embd=64, block=32, batch=4)


def time_loop(step, min_time):
    """Seconds per step (after two warm-up steps, which touch the fresh pages), the process's CPU
    seconds per step and its CPU time per second of wall time (about 1 for one busy thread)."""
    for _ in range(2):
        step()
    n, start, cpu = 0, time.perf_counter(), time.process_time()
    while True:
        step()
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_time and n >= 3:
            break
    cpu = time.process_time() - cpu
    return {"seconds": elapsed / n, "cpu_seconds": cpu / n, "threads": torch.get_num_threads(),
            "cores": cpu / elapsed}


def loaded(fragment):
    """Paths of the shared libraries mapped into this process whose file name holds fragment."""
    with open("/proc/self/maps") as maps:
        paths = {line.split()[-1] for line in maps if line.rstrip().count("/")}
    return sorted(p for p in paths if fragment in os.path.basename(p) and ".so" in p)


def info(threads):
    """What PyTorch runs on: version, BLAS (as built and as loaded), threads, allocator."""
    torch.set_num_threads(threads)
    a = torch.randn(64, 64)
    _ = a @ a  # loads the BLAS
    build = torch.__config__.show()
    blas_info = re.search(r"BLAS_INFO=([^,\s]+)", build)
    out = {"version": torch.__version__, "blas_info": blas_info[1] if blas_info else "?", "blas_libs": loaded("blas"),
           "torch_threads": torch.get_num_threads(),
           "interop_threads": torch.get_num_interop_threads(),
           "parallel": next((l.strip() for l in torch.__config__.parallel_info().splitlines()
                             if l.startswith("ATen parallel backend")), "?"),
           "malloc": loaded("tcmalloc") or ["glibc"]}
    for path in out["blas_libs"]:  # OpenBLAS says which kernels and how many threads it runs
        lib = ctypes.CDLL(path)
        if hasattr(lib, "openblas_get_config"):
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_get_corename.restype = ctypes.c_char_p
            out["openblas"] = (lib.openblas_get_config().decode() + ", core "
                               + lib.openblas_get_corename().decode())
            out["openblas_threads"] = lib.openblas_get_num_threads()
    print(json.dumps(out))


def attention(B, T, D, H, dtype, mode, threads, min_time):
    """The benchmarked attention, composed as nanoGPT writes it (PyTorch 1.13 has no fused
    attention): X (B, T, D) through W_Q, W_K, W_V, W_O (D, D), H heads, L = 0.5 sum(Y^2)."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    dt = torch.float32 if dtype == "float" else torch.float64
    X = torch.randn(B, T, D, dtype=dt)
    W = [(torch.randn(D, D, dtype=dt) / D ** 0.5).requires_grad_() for _ in range(4)]
    mask = torch.triu(torch.full((T, T), float("-inf"), dtype=dt), 1)
    dh = D // H

    def forward():
        q = (X @ W[0]).view(B, T, H, dh).transpose(1, 2)           # (B, H, T, dh)
        k = (X @ W[1]).view(B, T, H, dh).transpose(1, 2)
        v = (X @ W[2]).view(B, T, H, dh).transpose(1, 2)
        a = torch.softmax(q @ k.transpose(-2, -1) / dh ** 0.5 + mask, dim=-1)  # (B, H, T, T)
        y = (a @ v).transpose(1, 2).reshape(B, T, D) @ W[3]        # (B, T, D)
        return 0.5 * (y * y).sum()

    def step():
        if mode == "Fwd":
            with torch.no_grad():
                forward()
        else:
            for w in W:
                w.grad = None
            forward().backward()

    print(json.dumps(time_loop(step, min_time)))


def reference_gpt():
    """nanoGPT's model as tests/gpt_reference.py writes it (the one PyTorch copy of the model in
    this repository), loaded by path: tests/ is not a package."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests",
                        "gpt_reference.py")
    spec = importlib.util.spec_from_file_location("gpt_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.GPT


def nanogpt_init(model, layers):
    """nanoGPT's _init_weights (the reference leaves torch's defaults): N(0, 0.02) weights, zero
    biases, c_proj N(0, 0.02 / sqrt(2 L)). Only for likeness: the speed does not depend on it."""
    for name, p in model.named_parameters():
        if name.endswith("bias") or "ln_" in name:
            continue
        std = 0.02 / math.sqrt(2 * layers) if name.endswith("c_proj.weight") else 0.02
        torch.nn.init.normal_(p, 0.0, std)


def initialised_gpt(r, dtype, threads):
    """The reference GPT of recipe r (bias, GELU tanh) in dtype, which also becomes the default,
    with nanoGPT's init from seed 0, at `threads` threads."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    torch.set_default_dtype(torch.float32 if dtype == "float" else torch.float64)
    args = types.SimpleNamespace(vocab=r["vocab"], block=r["block"], layers=r["layers"],
                                 heads=r["heads"], embd=r["embd"], bias=True, gelu="tanh",
                                 attention_only=False)
    model = reference_gpt()(args)
    nanogpt_init(model, r["layers"])
    return model


def gpt(dtype, threads, min_time):
    """One nanoGPT training step, as BM_GPT_TrainStep: forward, cross-entropy, backward,
    clip_grad_norm_ 1.0, AdamW (lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on rank >= 2,
    torch 1.13's CPU default: the single-tensor loop, foreach off), zero_grad(set_to_none) as
    nanoGPT's train.py. GELU tanh, as tapegrad's default (nanoGPT's nn.GELU() is erf)."""
    r = GPT_RECIPE
    model = initialised_gpt(r, dtype, threads)
    model.train()
    params = list(model.parameters())  # wte once: the head is tied to it
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99), eps=1e-8, foreach=False)
    x = torch.randint(r["vocab"], (r["batch"], r["block"]))
    y = torch.randint(r["vocab"], (r["batch"], r["block"]))

    def step():
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    print(json.dumps(time_loop(step, min_time)))


def hessian_mlp(dtype, threads, min_time):
    """torch.autograd.functional.hessian(vectorize=True) of mean((y - t)^2) for the MLP
    y = tanh(x W1^T + b1) W2^T + b2 in its four parameters, as BM_Functional_HessianMlp."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    dt = torch.float32 if dtype == "float" else torch.float64
    c = HESSIAN_MLP
    x, t = torch.randn(c["N"], c["D"], dtype=dt), torch.randn(c["N"], c["O"], dtype=dt)
    params = (0.3 * torch.randn(c["H"], c["D"], dtype=dt), 0.1 * torch.randn(c["H"], dtype=dt),
              0.3 * torch.randn(c["O"], c["H"], dtype=dt), 0.1 * torch.randn(c["O"], dtype=dt))

    def loss(W1, b1, W2, b2):
        return ((torch.tanh(x @ W1.T + b1) @ W2.T + b2 - t) ** 2).mean()

    print(json.dumps(time_loop(lambda: torch.autograd.functional.hessian(
        loss, params, vectorize=True), min_time)))


def hvp_gpt(dtype, threads, min_time):
    """torch.autograd.functional.hvp of the small GPT's loss (tests/gpt_reference.py's model,
    dropout 0) in all its parameters, as BM_Functional_HvpGpt."""
    from torch.nn.utils.stateless import functional_call
    r = HVP_GPT
    model = initialised_gpt(r, dtype, threads)
    names = [n for n, _ in model.named_parameters()]
    params = tuple(p.detach() for _, p in model.named_parameters())
    v = tuple(torch.randn_like(p) for p in params)
    x = torch.randint(r["vocab"], (r["batch"], r["block"]))
    y = torch.randint(r["vocab"], (r["batch"], r["block"]))

    def loss(*p):
        return functional_call(model, dict(zip(names, p)), (x, y))[1]

    print(json.dumps(time_loop(lambda: torch.autograd.functional.hvp(loss, params, v), min_time)))


def main(argv):
    kind = argv[0]
    if kind == "info":
        info(int(argv[1]))
    elif kind == "attention":
        B, T, D, H, dtype, mode, threads, min_time = argv[1:]
        attention(int(B), int(T), int(D), int(H), dtype, mode, int(threads), float(min_time))
    elif kind == "gpt":
        dtype, threads, min_time = argv[1:]
        gpt(dtype, int(threads), float(min_time))
    elif kind in ("hessian_mlp", "hvp_gpt"):
        dtype, threads, min_time = argv[1:]
        (hessian_mlp if kind == "hessian_mlp" else hvp_gpt)(dtype, int(threads), float(min_time))
    else:
        raise SystemExit(f"torch_side.py: unknown measurement {kind}")


if __name__ == "__main__":
    main(sys.argv[1:])
