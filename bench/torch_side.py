#!/usr/bin/env python3
"""PyTorch's side of compare_pytorch.py: one measurement per process, one JSON line on stdout.

    torch_side.py info THREADS
    torch_side.py attention B T D H float|double Fwd|FwdBwd THREADS MIN_TIME
    torch_side.py gpt float|double THREADS MIN_TIME
    torch_side.py gpt2 float|double THREADS MIN_TIME
    torch_side.py hessian_mlp float|double THREADS MIN_TIME
    torch_side.py hvp_gpt float|double THREADS MIN_TIME
    torch_side.py conv2d N C_in C_out H float|double Fwd|FwdBwd THREADS MIN_TIME
    torch_side.py lstm B T I H float|double THREADS MIN_TIME
    torch_side.py cnn_epoch DIR LIMIT THREADS
    torch_side.py cnn_recipe DIR EPOCHS THREADS   (not timed: the accuracy of ./build.sh fashion's
                                                   recipe in PyTorch, for the README)
    torch_side.py conv_backend THREADS
    torch_side.py bare THREADS   (nothing measured: this script's imports and thread setting, the
                                  baseline of a peak-RSS figure)

A fresh process per measurement, so the allocator (chosen by compare_pytorch.py through the
environment: glibc's MALLOC_* settings or tcmalloc by LD_PRELOAD) and the thread settings apply
from the first allocation, and each run's peak RSS (wait4) is its own.
"""

import ctypes
import gzip
import importlib.util
import json
import math
import os
import re
import sys
import time
import types

import numpy as np
import torch
import torch.nn.functional as F

# nanoGPT's shakespeare_char CPU recipe, as BM_GPT_TrainStep runs it (bench/gpt_bench.cpp).
GPT_RECIPE = dict(vocab=65, layers=4, heads=4, embd=128, block=64, batch=12)
# GPT-2 small (124M parameters, 1024 positions) on llm.c's CPU setting: sequences of 64 tokens,
# 4 at a time, as BM_GPT2_TrainStep.
GPT2_SMALL = dict(vocab=50257, layers=12, heads=12, embd=768, block=1024, seq=64, batch=4)
# The functional API's cases (bench/functional_bench.cpp): the MLP (N, D, H, O) of ~1,000
# parameters whose loss's Hessian is timed, and the small GPT whose loss's hvp is.
HESSIAN_MLP = dict(N=32, D=16, H=32, O=14)
HVP_GPT = dict(vocab=65, layers=2, heads=2, embd=64, block=32, batch=4)
# tapegrad train --images's defaults for --arch cnn: batches of 64, AdamW lr 1e-3, weight decay
# 0.01; the test set scored in the fewest equal batches of at most 256 (data/image_batches.h).
CNN_RECIPE = dict(batch=64, lr=1e-3, weight_decay=0.01, eval_batch=256)


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


def tests_module(name):
    """tests/NAME.py, loaded by path: tests/ is not a package."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", name + ".py")
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def reference_gpt():
    """nanoGPT's model as tests/gpt_reference.py writes it (the one PyTorch copy of the model in
    this repository)."""
    return tests_module("gpt_reference").GPT


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


def gpt(dtype, threads, min_time, r=GPT_RECIPE):
    """One nanoGPT training step, as BM_GPT_TrainStep: forward, cross-entropy, backward,
    clip_grad_norm_ 1.0, AdamW (lr 1e-3, betas (0.9, 0.99), weight decay 0.1 on rank >= 2,
    torch 1.13's CPU default: the single-tensor loop, foreach off), zero_grad(set_to_none) as
    nanoGPT's train.py. GELU tanh, as tapegrad's default (nanoGPT's nn.GELU() is erf). Sequences
    of r["seq"] tokens where the recipe gives one, else of its block size."""
    model = initialised_gpt(r, dtype, threads)
    model.train()
    params = list(model.parameters())  # wte once: the head is tied to it
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": 0.1},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=1e-3, betas=(0.9, 0.99), eps=1e-8, foreach=False)
    shape = (r["batch"], r.get("seq", r["block"]))
    x, y = torch.randint(r["vocab"], shape), torch.randint(r["vocab"], shape)

    def step():
        _, loss = model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)

    print(json.dumps(time_loop(step, min_time)))


def gpt2(dtype, threads, min_time):
    """gpt's step for GPT-2 small (GPT2_SMALL), as BM_GPT2_TrainStep."""
    gpt(dtype, threads, min_time, GPT2_SMALL)


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
    shape = (r["batch"], r.get("seq", r["block"]))
    x, y = torch.randint(r["vocab"], shape), torch.randint(r["vocab"], shape)

    def loss(*p):
        return functional_call(model, dict(zip(names, p)), (x, y))[1]

    print(json.dumps(time_loop(lambda: torch.autograd.functional.hvp(loss, params, v), min_time)))


def conv2d(N, C_in, C_out, H, dtype, mode, threads, min_time):
    """F.conv2d with bias, 3 x 3, stride 1, no padding, as BM_Conv2d_MNIST_Fwd / _FwdBwd: X (N,
    C_in, H, H), W (C_out, C_in, 3, 3), b (C_out); the backward seeded with a fixed random
    grad_output and giving X, W and b their gradients (torch.autograd.grad, as tg::grad)."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    dt = torch.float32 if dtype == "float" else torch.float64
    inputs = [torch.randn(N, C_in, H, H, dtype=dt), torch.randn(C_out, C_in, 3, 3, dtype=dt),
              torch.randn(C_out, dtype=dt)]
    if mode == "Fwd":
        def step():
            with torch.no_grad():
                F.conv2d(*inputs)
    else:
        for t in inputs:
            t.requires_grad_()
        g = torch.randn(N, C_out, H - 2, H - 2, dtype=dt)  # grad_output, as the Y it seeds

        def step():
            torch.autograd.grad(F.conv2d(*inputs), inputs, g)

    print(json.dumps(time_loop(step, min_time)))


def lstm(B, T, I, H, dtype, threads, min_time):
    """torch.nn.LSTM(I, H) forward and backward, as BM_LSTM_FwdBwd: x (T, B, I) requiring grad,
    the loss sum(output * w) with fixed random w, backward into x and every parameter."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    dt = torch.float32 if dtype == "float" else torch.float64
    layer = torch.nn.LSTM(I, H).to(dt)
    x = torch.randn(T, B, I, dtype=dt, requires_grad=True)
    w = torch.randn(T, B, H, dtype=dt)

    def step():
        layer.zero_grad(set_to_none=True)
        x.grad = None
        (layer(x)[0] * w).sum().backward()

    print(json.dumps(time_loop(step, min_time)))


def op_chain(n, dtype, mode, threads, min_time):
    """BM_OpChain_FwdBwd / BM_OpChain_Fwd: a chain of n scalar ops, y = y * w + b repeated, on
    leaves that take a gradient; mode "fwdbwd" (backward into x, w and b) or "fwd" (under
    no_grad). Seconds per chain: divide by n for an op's overhead."""
    torch.set_num_threads(threads)
    dt = torch.float32 if dtype == "float" else torch.float64
    x, w, b = (torch.tensor(v, dtype=dt, requires_grad=True) for v in (0.5, 0.999, 0.001))

    def chain():
        y = x
        for _ in range(n // 2):
            y = y * w + b
        return y

    def step():
        for t in (x, w, b):
            t.grad = None
        chain().backward()

    def forward():
        with torch.no_grad():
            chain()

    print(json.dumps(time_loop(step if mode == "fwdbwd" else forward, min_time)))


def bare(threads):
    torch.set_num_threads(threads)
    print(json.dumps({}))


def read_idx(path):
    """One gzip-compressed IDX file of unsigned bytes (data/idx.h's format) as a numpy array."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    if data[:3] != b"\0\0\x08" or not 1 <= data[3] <= 4:
        raise SystemExit(f"torch_side.py: {path}: not an IDX file of unsigned bytes")
    dims = [int.from_bytes(data[4 + 4 * i:8 + 4 * i], "big") for i in range(data[3])]
    values = np.frombuffer(data, np.uint8, offset=4 + 4 * len(dims))
    if values.size != math.prod(dims):
        raise SystemExit(f"torch_side.py: {path}: {values.size} values, the dims say {dims}")
    return values.reshape(dims)


def image_folder(folder):
    """The training and test sets of an IDX folder as tapegrad reads them (DESIGN's "Image
    data"): x / 255, then (x - mean) / std with the mean and population standard deviation of
    every training pixel in float64; images (N, 1, 28, 28) float32, labels int64."""
    def images(name):
        return read_idx(os.path.join(folder, name + "-images-idx3-ubyte.gz")) / 255.0

    def labels(name):
        return torch.from_numpy(
            read_idx(os.path.join(folder, name + "-labels-idx1-ubyte.gz")).astype(np.int64))

    train, test = images("train"), images("t10k")
    mean, std = train.mean(), train.std()

    def tensor(x):
        return torch.from_numpy(((x - mean) / std).astype(np.float32)).unsqueeze(1)

    return (tensor(train), labels("train")), (tensor(test), labels("t10k"))


def net_and_adamw(threads):
    """pytorch/examples' MNIST Net (tests/torch_image_models.py) in train mode and
    torch.optim.AdamW (lr 1e-3, weight decay 0.01 on the rank >= 2 parameters as tapegrad's;
    torch 1.13's CPU default, the single-tensor loop), seeded."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    r = CNN_RECIPE
    model = tests_module("torch_image_models").Net()
    model.train()
    params = list(model.parameters())
    groups = [{"params": [p for p in params if p.dim() >= 2], "weight_decay": r["weight_decay"]},
              {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0}]
    return model, torch.optim.AdamW(groups, lr=r["lr"])


def train_epoch(model, opt, x, y, n, rate=None):
    """One epoch over the first n images in a shuffled order, batches of 64 (the last one
    smaller), cross-entropy, dropout on; rate(), when given, sets the rate before each update."""
    model.train()
    order = torch.randperm(n)
    for i in range(0, n, CNN_RECIPE["batch"]):
        if rate:
            lr = rate()
            for g in opt.param_groups:
                g["lr"] = lr
        batch = order[i:i + CNN_RECIPE["batch"]]
        loss = F.cross_entropy(model(x[batch]), y[batch])
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)


def score(model, x_test, y_test):
    """The test set under no_grad in eval mode, in the fewest equal batches of at most 256 as
    tapegrad scores it: (accuracy, mean loss)."""
    model.eval()
    size = len(x_test) // -(-len(x_test) // CNN_RECIPE["eval_batch"])
    correct, test_loss = 0, 0.0
    with torch.no_grad():
        for i in range(0, len(x_test) - size + 1, size):
            logits = model(x_test[i:i + size])
            test_loss += F.cross_entropy(logits, y_test[i:i + size], reduction="sum").item()
            correct += (logits.argmax(1) == y_test[i:i + size]).sum().item()
    scored = size * (len(x_test) // size)
    return correct / scored, test_loss / scored


def cnn_epoch(folder, limit, threads):
    """One training epoch of Net as `tapegrad train --images DIR --arch cnn --epochs 1` runs it
    (the first `limit` training images, all when 0), then the test set. "seconds" is the epoch's
    updates alone (from the first batch to the last step; reading the files and the test set are
    outside it), "eval_seconds" the test set's."""
    model, opt = net_and_adamw(threads)
    (x, y), (x_test, y_test) = image_folder(folder)
    n = limit or len(x)
    start, cpu = time.perf_counter(), time.process_time()
    train_epoch(model, opt, x, y, n)
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    start = time.perf_counter()
    accuracy, test_loss = score(model, x_test, y_test)
    eval_seconds = time.perf_counter() - start
    print(json.dumps({"seconds": seconds, "cpu_seconds": cpu, "cores": cpu / seconds,
                      "eval_seconds": eval_seconds, "accuracy": accuracy,
                      "test_loss": test_loss, "images": n,
                      "threads": torch.get_num_threads()}))


def cnn_recipe(folder, epochs, threads):
    """The image recipe of ./build.sh fashion (`tapegrad train --images DIR --epochs E --lr-min
    0`): Net with AdamW over E epochs of all the training images, the rate decayed from 1e-3 to 0
    by the cosine schedule over the updates (DESIGN's get_lr with warmup 0: the last update at
    0); the test set scored after every epoch. Prints the test accuracy and loss of each."""
    model, opt = net_and_adamw(threads)
    (x, y), (x_test, y_test) = image_folder(folder)
    steps = epochs * -(-len(x) // CNN_RECIPE["batch"])
    it = 0

    def rate():
        nonlocal it
        lr = 0.5 * (1 + math.cos(math.pi * it / (steps - 1))) * CNN_RECIPE["lr"]
        it += 1
        return lr

    accuracy, loss = [], []
    start = time.perf_counter()
    for _ in range(epochs):
        train_epoch(model, opt, x, y, len(x), rate)
        a, l = score(model, x_test, y_test)
        accuracy.append(a)
        loss.append(l)
    print(json.dumps({"test_accuracy": accuracy, "test_loss": loss,
                      "seconds": time.perf_counter() - start, "threads": torch.get_num_threads()}))


def conv_backend(threads):
    """One forward and backward of Net on a batch of 64, for compare_pytorch.py to run under
    ONEDNN_VERBOSE=1 (oneDNN then prints a line per primitive on stdout, before this JSON line):
    whether oneDNN (mkldnn) is available and enabled and the ATen convolution ops the autograd
    profiler saw."""
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    model = tests_module("torch_image_models").Net()
    with torch.autograd.profiler.profile() as prof:
        model(torch.randn(64, 1, 28, 28)).sum().backward()
    ops = sorted({e.name for e in prof.function_events if "conv" in e.name
                  and e.name not in ("aten::conv2d", "aten::convolution", "aten::_convolution",
                                     "aten::convolution_backward")})
    sys.stdout.flush()  # oneDNN's lines first
    print(json.dumps({"mkldnn_available": torch.backends.mkldnn.is_available(),
                      "mkldnn_enabled": torch.backends.mkldnn.enabled, "aten_ops": ops}))


# Each measurement's function and how to read its arguments, in the docstring's order.
MEASUREMENTS = {
    "info": (info, [int]),
    "attention": (attention, [int, int, int, int, str, str, int, float]),
    "gpt": (gpt, [str, int, float]),
    "gpt2": (gpt2, [str, int, float]),
    "hessian_mlp": (hessian_mlp, [str, int, float]),
    "hvp_gpt": (hvp_gpt, [str, int, float]),
    "conv2d": (conv2d, [int, int, int, int, str, str, int, float]),
    "lstm": (lstm, [int, int, int, int, str, int, float]),
    "cnn_epoch": (cnn_epoch, [str, int, int]),
    "cnn_recipe": (cnn_recipe, [str, int, int]),
    "conv_backend": (conv_backend, [int]),
    "bare": (bare, [int]),
    "op_chain": (op_chain, [int, str, str, int, float]),
}


def main(argv):
    kind = argv[0] if argv else ""
    if kind not in MEASUREMENTS:
        raise SystemExit(f"torch_side.py: unknown measurement {kind!r}; one of "
                         + ", ".join(MEASUREMENTS))
    measure, parse = MEASUREMENTS[kind]
    if len(argv) - 1 != len(parse):
        raise SystemExit(f"torch_side.py {kind}: {len(parse)} arguments, got {len(argv) - 1}")
    measure(*(read(v) for read, v in zip(parse, argv[1:])))


if __name__ == "__main__":
    main(sys.argv[1:])
