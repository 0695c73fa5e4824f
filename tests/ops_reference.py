"""PyTorch's side of tests/ops_torch_test.cpp: the ops with PyTorch's axis arguments.

--dir holds cases.txt, one case a line: `<case> <op> key=value ...`, and a folder per case with
x.npy (float64 input), w.npy (fixed random weights of the output's shape) and, for
cross_entropy, targets.npy (int64) and optionally weight.npy. For each case this writes y.npy
(the op's output) and dx.npy (the gradient of sum(y * w) with respect to x) into its folder.
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
            run(parts[1], kw, os.path.join(a.dir, parts[0]))


if __name__ == "__main__":
    main()
