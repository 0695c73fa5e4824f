"""PyTorch's side of tests/ops_torch_test.cpp: the ops with PyTorch's axis arguments, and the
elementwise ops, rms_norm and losses of the recurrent and Llama models.

--dir holds cases.txt, one case a line: `<case> <op> key=value ...`, and a folder per case with
x.npy (float64 input) and, for ops of several inputs, x1.npy, x2.npy ..., w.npy (fixed random
weights of the output's shape) and, for cross_entropy and nll_loss, targets.npy (int64) and
optionally weight.npy; pos_weight.npy for binary_cross_entropy_with_logits. For each case this
writes y.npy (the op's output), dx.npy, dx1.npy ... (the gradients of sum(y * w) with respect
to x, x1 ...) and y32.npy (the output with every float input rounded to float32) into its folder.

Cases with `inputs=N` (convolution, pooling, batch_norm and group_norm, the reductions and index ops; the runner in
tests/ops_torch_util.h) have in0.npy ... (X, W, b as the op takes them), w.npy and v0.npy ...,
and index.npy for gather and scatter_add; they get y.npy, y32.npy (the forward on the inputs in
float32), d0.npy ... (the gradients of sum(y * w)), dd0.npy ... (the gradients of
sum_k <d_k, v_k>, through create_graph) and, for max, min, argmax and argmin, idx.npy.
"""

import argparse
import os

import numpy as np
import torch
import torch.nn.functional as F


REDUCTIONS = {"mean", "sum", "none"}


def load(d, name, dtype):
    path = os.path.join(d, name)
    return torch.from_numpy(np.load(path)).to(dtype) if os.path.exists(path) else None


def inputs(d, dtype):
    xs, k = [load(d, "x.npy", dtype)], 1
    while os.path.exists(os.path.join(d, "x%d.npy" % k)):
        xs.append(load(d, "x%d.npy" % k, dtype))
        k += 1
    return [x.requires_grad_() for x in xs]


def forward(op, kw, d, xs, dtype):
    """The op on xs (PyTorch tensors of `dtype`); None for the ops of tapegrad's axis arguments."""
    x = xs[0]
    reduction = kw.get("reduction", "mean")
    assert reduction in REDUCTIONS
    if op == "sigmoid":
        return torch.sigmoid(x)
    if op == "silu":
        return F.silu(x)
    if op == "softplus":
        return F.softplus(x, beta=float(kw["beta"]), threshold=float(kw["threshold"]))
    if op == "abs":
        return torch.abs(x)
    if op == "pow":
        p = float(kw["p"])
        if "abs_plus" in kw:
            x = x.abs() + float(kw["abs_plus"])
        return torch.pow(x, p)
    if op == "clamp":
        return torch.clamp(x, float(kw["lo"]), float(kw["hi"]))
    if op == "maximum":
        return torch.maximum(x, xs[1])
    if op == "minimum":
        return torch.minimum(x, xs[1])
    if op == "rms_norm":  # PyTorch's reference, as Llama writes it
        y = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + float(kw["eps"]))
        return y * xs[1] if kw["weight"] == "1" else y
    if op == "mse_loss":
        return F.mse_loss(x, xs[1], reduction=reduction)
    if op == "l1_loss":
        return F.l1_loss(x, xs[1], reduction=reduction)
    if op == "binary_cross_entropy_with_logits":
        return F.binary_cross_entropy_with_logits(x, xs[1], reduction=reduction,
                                                  pos_weight=load(d, "pos_weight.npy", dtype))
    if op == "nll_loss":
        t = load(d, "targets.npy", torch.long)
        return F.nll_loss(x, t, weight=load(d, "weight.npy", dtype),
                          ignore_index=int(kw["ignore_index"]), reduction=reduction)
    return None


def run_model_op(op, kw, d):
    xs = inputs(d, torch.float64)
    y = forward(op, kw, d, xs, torch.float64)
    if y is None:
        return False
    w = torch.from_numpy(np.load(os.path.join(d, "w.npy")))
    grads = torch.autograd.grad((y * w).sum(), xs, allow_unused=True)
    np.save(os.path.join(d, "y.npy"), np.array(y.detach().numpy(), order="C"))
    for k, (x, g) in enumerate(zip(xs, grads)):
        g = torch.zeros_like(x) if g is None else g
        np.save(os.path.join(d, "dx%s.npy" % (k or "")), np.array(g.numpy(), order="C"))
    with torch.no_grad():
        y32 = forward(op, kw, d, [x.detach() for x in inputs(d, torch.float32)], torch.float32)
    np.save(os.path.join(d, "y32.npy"), np.array(y32.numpy(), order="C"))
    return True


def run(op, kw, d):
    if run_model_op(op, kw, d):
        return
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


def sizes(text):
    """"2,-1" -> [2, -1]; "" -> []."""
    return [int(v) for v in text.split(",") if v]


def shape_op(op, kw, d, xs):
    """The shape ops, or None."""
    x = xs[0]
    if op == "stack":
        return torch.stack(xs, int(kw["dim"]))
    if op == "chunk":
        dim = int(kw["dim"])
        pieces = torch.chunk(x, int(kw["chunks"]), dim)
        return torch.cat([p * (p * (k + 1)) for k, p in enumerate(pieces)], dim)
    if op == "squeeze":
        return torch.squeeze(x, int(kw["dim"])) if "dim" in kw else torch.squeeze(x)
    if op == "unsqueeze":
        return torch.unsqueeze(x, int(kw["dim"]))
    if op == "flatten":
        return torch.flatten(x, int(kw["start"]), int(kw["end"]))
    if op == "expand":
        return x.expand(*sizes(kw["sizes"]))
    if op == "pad":
        return F.pad(x, sizes(kw["pads"]), value=float.fromhex(kw["value"]))
    if op == "index_select":
        index = torch.from_numpy(np.load(os.path.join(d, "index.npy")))
        return torch.index_select(x, int(kw["dim"]), index)
    return None


def reduction_op(op, kw, d, xs):
    """The reductions and index ops: (y, the int64 indices or None)."""
    x = xs[0]
    y = shape_op(op, kw, d, xs)
    if y is not None:
        return y, None
    if op in ("argmax", "argmin") and "dim" not in kw:  # over the flattened input
        y = (x.reshape(-1).max(0) if op == "argmax" else x.reshape(-1).min(0)).values
        return y, (torch.argmax(x) if op == "argmax" else torch.argmin(x))
    dim, keep = int(kw.get("dim", "0")), kw.get("keepdim", "0") == "1"
    if op in ("max", "min"):
        r = torch.max(x, dim, keep) if op == "max" else torch.min(x, dim, keep)
        return r.values, r.indices
    if op in ("argmax", "argmin"):
        r = torch.max(x, dim, keep) if op == "argmax" else torch.min(x, dim, keep)
        arg = torch.argmax if op == "argmax" else torch.argmin
        return r.values, arg(x, dim, keep)
    if op in ("amax", "amin"):
        return (torch.amax if op == "amax" else torch.amin)(x, dim, keep), None
    if op == "logsumexp":
        return torch.logsumexp(x, dim, keep), None
    if op == "var":
        return torch.var(x, dim, correction=int(kw["correction"]), keepdim=keep), None
    index = torch.from_numpy(np.load(os.path.join(d, "index.npy")))
    if op == "gather":
        return torch.gather(x, dim, index), None
    if op == "scatter_add":
        return torch.scatter_add(x, dim, index, xs[1]), None
    return None


def multi_op(op, kw, d, xs):
    """The ops of several inputs: (y, the int64 indices the op also returns, or None)."""
    affine = (xs[1], xs[2]) if len(xs) == 3 else (None, None)  # the norms' weight and bias
    if op == "batch_norm":
        C = xs[0].shape[1]
        rm = torch.linspace(-0.5, 0.5, C, dtype=xs[0].dtype)
        rv = torch.linspace(0.5, 1.5, C, dtype=xs[0].dtype)
        return F.batch_norm(xs[0], rm, rv, *affine, training=kw["training"] == "1",
                            momentum=float(kw["momentum"]), eps=float(kw["eps"])), None
    if op == "group_norm":
        return F.group_norm(xs[0], int(kw["groups"]), *affine, eps=float(kw["eps"])), None
    if op in ("conv1d", "conv2d"):
        conv = F.conv1d if op == "conv1d" else F.conv2d
        b = xs[2] if len(xs) > 2 else None
        return conv(xs[0], xs[1], b, stride=ints(kw["stride"]), padding=ints(kw["padding"]),
                    dilation=ints(kw["dilation"]), groups=int(kw["groups"])), None
    pools = {"max_pool1d": F.max_pool1d, "max_pool2d": F.max_pool2d,
             "avg_pool1d": F.avg_pool1d, "avg_pool2d": F.avg_pool2d}
    if op in pools:
        return pools[op](xs[0], ints(kw["kernel"]), stride=ints(kw["stride"]),
                         padding=ints(kw["padding"])), None
    r = reduction_op(op, kw, d, xs)
    if r is None:
        raise SystemExit("unknown op " + op)
    return r


def dense(g, x):
    """A gradient as a numpy array; zeros for None and for the "efficient zero" tensors some
    backward formulas return (abs's sgn), whose .numpy() reads memory they do not own."""
    if g is None or g._is_zerotensor():
        g = torch.zeros_like(x)
    return np.array(g.detach().numpy(), order="C")


def run_multi(op, kw, d, multi_op=multi_op):
    """One case of the runner: multi_op(op, kw, d, xs) gives (y, indices or None)."""
    n = int(kw["inputs"])
    load = lambda name: torch.from_numpy(np.load(os.path.join(d, name)))
    xs = [load("in%d.npy" % k).requires_grad_() for k in range(n)]
    y, idx = multi_op(op, kw, d, xs)
    w = load("w.npy")
    grads = torch.autograd.grad((y * w).sum(), xs, create_graph=True)
    s = sum((g * load("v%d.npy" % k)).sum() for k, g in enumerate(grads))
    second = [None] * n
    if s.requires_grad:
        second = torch.autograd.grad(s, xs, allow_unused=True)
    with torch.no_grad():
        y32 = multi_op(op, kw, d, [x.detach().float() for x in xs])[0]
    np.save(os.path.join(d, "y.npy"), np.array(y.detach().numpy(), order="C"))
    np.save(os.path.join(d, "y32.npy"), np.array(y32.double().numpy(), order="C"))
    if idx is not None:
        np.save(os.path.join(d, "idx.npy"), np.array(idx.numpy(), order="C"))
    for k in range(n):
        np.save(os.path.join(d, "d%d.npy" % k), dense(grads[k], xs[k]))
        np.save(os.path.join(d, "dd%d.npy" % k), dense(second[k], xs[k]))


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
