#!/usr/bin/env python3
"""PyTorch's side of tests/functional_torch_test.cpp: torch.autograd.functional's vjp, jacobian,
hessian, hvp, vhp and jvp (tapegrad's jvp and forward-mode jacobian and hessian are compared
with PyTorch's jvp, jacobian and hessian) in float64 of the functions of tests/functional_util.h, written out in torch:

  attention1, attention2: Y = multi-head causal attention (nn/attention.h's layout: head h takes
      columns [h d/H, (h+1) d/H) of Q, K, V; scores scaled by 1/sqrt(d/H); Y = concat(A V) W_O)
      of X (T, D), W_Q, W_K, W_V, W_O; the scalar is 0.5 * sum(Y^2)
  mlp: y = tanh(x W1^T + b1) W2^T + b2; the scalar mean((y - t)^2), t the targets
  gpt: tests/gpt_reference.py's GPT (vocab 5, block 4, 2 layers, 2 heads, n_embd 4, biases,
      tanh GELU) as a function of its parameters (torch.nn.utils.stateless.functional_call):
      the outputs (flattened logits, loss), the scalar the loss

    python3 functional_reference.py --dir DIR

DIR/cases.txt holds one case a line, `<case> <model> <function> [perturb]`; DIR/<case>/ holds
x<k>.npy (the inputs), v<k>.npy (vjp's cotangents, or hvp's and vhp's vectors), for the MLP t.npy,
for the GPT names.txt (the parameter names in input order), idx.npy and targets.npy. `perturb`
moves x1[0, 0] by 1e-6 relative (a negative control). Writes y<i>.npy (f's outputs), r<j>.npy
(the vjp, hvp or vhp for input j) or J<i>_<j>.npy (the Jacobian or Hessian blocks).
"""

import argparse
import math
import os
import sys
from types import SimpleNamespace

import numpy as np
import torch
from torch.autograd import functional
from torch.nn.utils.stateless import functional_call

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_reference import GPT  # noqa: E402


def attention(heads):
    def Y(X, W_Q, W_K, W_V, W_O):
        T = X.shape[0]
        def split(P):                                                   # (T, d) -> (H, T, d/H)
            return P.reshape(T, heads, -1).transpose(0, 1)
        q, k, v = split(X @ W_Q), split(X @ W_K), split(X @ W_V)
        S = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])            # (H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        A = S.masked_fill(~causal, float("-inf")).softmax(dim=-1)       # (H, T, T)
        return (A @ v).transpose(0, 1).reshape(T, -1) @ W_O             # (T, d_v)
    return Y, lambda *x: 0.5 * (Y(*x) ** 2).sum()


def mlp(t):
    def y(x, W1, b1, W2, b2):
        return torch.tanh(x @ W1.T + b1) @ W2.T + b2                    # (N, 2)
    return y, lambda *x: ((y(*x) - t) ** 2).mean()


def gpt(d):
    a = SimpleNamespace(vocab=5, block=4, layers=2, heads=2, embd=4, bias=True, gelu="tanh",
                        attention_only=False)
    model = GPT(a)
    names = open(os.path.join(d, "names.txt")).read().split()
    idx = torch.from_numpy(np.load(os.path.join(d, "idx.npy")).astype(np.int64))
    targets = torch.from_numpy(np.load(os.path.join(d, "targets.npy")).astype(np.int64))

    def run(*params):
        return functional_call(model, dict(zip(names, params)), (idx, targets))
    def outputs(*params):
        logits, loss = run(*params)
        return logits.reshape(-1), loss
    return outputs, lambda *p: run(*p)[1]


def run_case(d, model, function, perturb):
    load = lambda name: torch.from_numpy(np.load(os.path.join(d, name)))
    n = len([f for f in os.listdir(d) if f.startswith("x")])
    x = tuple(load("x%d.npy" % k) for k in range(n))
    if perturb:
        x[1][0, 0] *= 1 + 1e-6
    if model.startswith("attention"):
        f, scalar = attention(int(model[len("attention"):]))
    elif model == "mlp":
        f, scalar = mlp(load("t.npy"))
    else:
        f, scalar = gpt(d)
    vs = [f for f in os.listdir(d) if f.startswith("v") and f.endswith(".npy")]
    v = tuple(load("v%d.npy" % k) for k in range(len(vs)))

    def save(name, t):
        np.save(os.path.join(d, name), t.detach().numpy())
    def save_outputs(y):
        for i, yi in enumerate(y if isinstance(y, tuple) else (y,)):
            save("y%d.npy" % i, yi)

    if function == "vjp":
        y, r = functional.vjp(f, x, v if len(v) > 1 else v[0])
    elif function == "hvp":
        y, r = functional.hvp(scalar, x, v)
    elif function == "vhp":
        y, r = functional.vhp(scalar, x, v)
    elif function == "jvp":  # tapegrad's forward mode against PyTorch's jvp
        y, r = functional.jvp(f, x, v)
        r = r if isinstance(r, tuple) else (r,)
    else:
        # jacobian_forward, hessian_forward: tapegrad's forward mode against PyTorch's blocks
        jac = function in ("jacobian", "jacobian_forward")
        y = f(*x) if jac else scalar(*x)
        J = functional.jacobian(f, x) if jac else functional.hessian(scalar, x)
        if not isinstance(J[0], tuple):  # one output: a tuple over the inputs
            J = (J,)
        for i, row in enumerate(J):
            for j, block in enumerate(row):
                save("J%d_%d.npy" % (i, j), block)
        save_outputs(y)
        return
    save_outputs(y)
    for j, rj in enumerate(r):
        save("r%d.npy" % j, rj)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    root = ap.parse_args().dir
    torch.set_default_dtype(torch.float64)
    for line in open(os.path.join(root, "cases.txt")):
        case, model, function, *rest = line.split()
        run_case(os.path.join(root, case), model, function, rest == ["perturb"])


if __name__ == "__main__":
    main()
