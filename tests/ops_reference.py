"""PyTorch's side of tests/ops_torch_test.cpp: the ops with PyTorch's axis arguments.

--dir holds cases.txt, one case a line: `<case> <op> key=value ...`, and a folder per case with
x.npy (float64 input), w.npy (fixed random weights of the output's shape) and, for
cross_entropy, targets.npy (int64) and optionally weight.npy. For each case this writes y.npy
(the op's output) and dx.npy (the gradient of sum(y * w) with respect to x) into its folder.

Cases with `inputs=N` (convolution and pooling) have in0.npy ... (X, W, b as the op takes them),
w.npy and v0.npy ...; they get y.npy, y32.npy (the forward on the inputs in float32), d0.npy ...
(the gradients of sum(y * w)) and dd0.npy ... (the gradients of sum_k <d_k, v_k>, through
create_graph).
"""

import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F


def run(op, kw, d):
    x = torch.from_numpy(np.load(os.path.join(d, "x.npy"))).requires_grad_()
    if op == "softmax":
        y = torch.softmax(x, int(kw["dim"]))
    elif op == "log_softmax":
        y = torch.log_softmax(x, int(kw["dim"]))
    elif op == "transpose":
        y = torch.transpose(x, int(kw["dim0"]), int(kw["dim1"]))
    elif op in ("sum", "mean"):
        dims = [int(v) for v in kw["dims"].split(",") if v]
        reduce = torch.sum if op == "sum" else torch.mean
        y = reduce(x, dims, keepdim=kw["keepdim"] == "1")
    elif op == "cross_entropy":
        # tapegrad's (..., V) logits with (...) targets: PyTorch's (N, C) with (N,) flattened.
        t = torch.from_numpy(np.load(os.path.join(d, "targets.npy"))).long()
        weight_file = os.path.join(d, "weight.npy")
        weight = torch.from_numpy(np.load(weight_file)) if os.path.exists(weight_file) else None
        V = x.shape[-1]
        y = F.cross_entropy(x.reshape(-1, V), t.reshape(-1), weight=weight,
                            ignore_index=int(kw.get("ignore_index", "-100")),
                            label_smoothing=float(kw.get("label_smoothing", "0")))
    else:
        raise SystemExit("unknown op " + op)
    w = torch.from_numpy(np.load(os.path.join(d, "w.npy")))
    (y * w).sum().backward()
    # C order (transpose gives a strided view); np.array keeps rank 0, unlike ascontiguousarray
    np.save(os.path.join(d, "y.npy"), np.array(y.detach().numpy(), order="C"))
    np.save(os.path.join(d, "dx.npy"), np.array(x.grad.numpy(), order="C"))


def ints(text):
    """"2,1" -> (2, 1); "2" -> 2, as PyTorch's int-or-tuple arguments."""
    v = tuple(int(e) for e in text.split(","))
    return v[0] if len(v) == 1 else v


def multi_op(op, kw, xs):
    if op in ("conv1d", "conv2d"):
        conv = F.conv1d if op == "conv1d" else F.conv2d
        b = xs[2] if len(xs) > 2 else None
        return conv(xs[0], xs[1], b, stride=ints(kw["stride"]), padding=ints(kw["padding"]),
                    dilation=ints(kw["dilation"]), groups=int(kw["groups"]))
    pool = {"max_pool1d": F.max_pool1d, "max_pool2d": F.max_pool2d,
            "avg_pool1d": F.avg_pool1d, "avg_pool2d": F.avg_pool2d}[op]
    return pool(xs[0], ints(kw["kernel"]), stride=ints(kw["stride"]),
                padding=ints(kw["padding"]))


def run_multi(op, kw, d):
    n = int(kw["inputs"])
    load = lambda name: torch.from_numpy(np.load(os.path.join(d, name)))
    xs = [load("in%d.npy" % k).requires_grad_() for k in range(n)]
    y = multi_op(op, kw, xs)
    w = load("w.npy")
    grads = torch.autograd.grad((y * w).sum(), xs, create_graph=True)
    s = sum((g * load("v%d.npy" % k)).sum() for k, g in enumerate(grads))
    second = [None] * n
    if s.requires_grad:
        second = torch.autograd.grad(s, xs, allow_unused=True)
    with torch.no_grad():
        y32 = multi_op(op, kw, [x.detach().float() for x in xs])
    np.save(os.path.join(d, "y.npy"), np.array(y.detach().numpy(), order="C"))
    np.save(os.path.join(d, "y32.npy"), np.array(y32.double().numpy(), order="C"))
    for k in range(n):
        np.save(os.path.join(d, "d%d.npy" % k), np.array(grads[k].detach().numpy(), order="C"))
        dd = second[k] if second[k] is not None else torch.zeros_like(xs[k])
        np.save(os.path.join(d, "dd%d.npy" % k), np.array(dd.detach().numpy(), order="C"))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    a = p.parse_args()
    with open(os.path.join(a.dir, "cases.txt")) as f:
        for line in f:
            parts = line.split()
            if not parts:
                continue
            kw = dict(kv.split("=", 1) for kv in parts[2:])
            if "inputs" in kw:
                run_multi(parts[1], kw, os.path.join(a.dir, parts[0]))
            else:
                run(parts[1], kw, os.path.join(a.dir, parts[0]))


if __name__ == "__main__":
    main()
