#!/usr/bin/env python3
"""An independent numpy (float64) reference for `tapegrad attention`.

The forward pass is the one of nn/attention.h, written out in numpy; the gradients of
L = 0.5 * sum(Y^2) are written by hand, one backward step under each forward step
(no autodiff library), so the C++ tape is checked against a second derivation.

    python3 attention_reference.py --in DIR --out DIR [--heads H] [--window W]
        [--no-scale] [--rope] [--rope-base B] [--dtype f64|f32]
    python3 attention_reference.py --selftest   # hand gradients vs central differences

Writes Y.npy, A.npy, loss.npy, dX.npy, dW_Q.npy, dW_K.npy, dW_V.npy (and dW_O.npy when
W_O.npy is given), with the shapes `tapegrad attention` writes. Computes in float64 always;
with --dtype f32 the inputs are first rounded to float32 and the outputs saved as float32.
Needs only numpy and the standard library.
"""

import argparse
import os
import sys

import numpy as np


# ---- forward pieces ----------------------------------------------------------------------

def causal_mask(T, window):
    """(T, T): 0 where j <= i (and j > i - window when window >= 1), -inf elsewhere."""
    i = np.arange(T)[:, None]
    j = np.arange(T)[None, :]
    allowed = j <= i
    if window >= 1:
        allowed &= j > i - window
    return np.where(allowed, 0.0, -np.inf)


def rope_tables(T, d_h, base):
    """cos and sin of the angle m * theta_i, theta_i = base^(-2i/d_h): both (T, d_h/2)."""
    theta = base ** (-2.0 * np.arange(d_h // 2) / d_h)  # (d_h/2,)
    angle = np.arange(T)[:, None] * theta[None, :]     # (T, d_h/2)
    return np.cos(angle), np.sin(angle)


def rotate_pairs(x, cos, sin):
    """Rotates each interleaved pair (x[..., 2i], x[..., 2i+1]) of x (.., T, d_h) by the
    angle whose cos and sin are given; rotate_pairs(dy, cos, -sin) is its transpose."""
    x0, x1 = x[..., 0::2], x[..., 1::2]  # (.., T, d_h/2)
    y = np.empty_like(x)
    y[..., 0::2] = x0 * cos - x1 * sin
    y[..., 1::2] = x0 * sin + x1 * cos
    return y


def split_heads(P, H):
    """(B, T, d) -> (B, H, T, d/H): head h owns columns [h d/H, (h+1) d/H)."""
    B, T, d = P.shape
    return P.reshape(B, T, H, d // H).transpose(0, 2, 1, 3)


def merge_heads(P):
    """(B, H, T, d_h) -> (B, T, H d_h), the inverse of split_heads."""
    B, H, T, d_h = P.shape
    return P.transpose(0, 2, 1, 3).reshape(B, T, H * d_h)


def softmax_masked(S):
    """Row softmax of S (.., T, T) whose -inf entries get exactly 0 (every row keeps its
    diagonal, so every row max is finite)."""
    E = np.exp(S - S.max(axis=-1, keepdims=True))
    return E / E.sum(axis=-1, keepdims=True)


# ---- the model, forward and backward ------------------------------------------------------

def attention(X, W_Q, W_K, W_V, W_O, heads=1, window=0, scale=True, rope=False,
              rope_base=10000.0):
    """Forward and hand-written backward. X is (T, D) or (B, T, D).

    Returns a dict with Y, A, loss and dX, dW_Q, dW_K, dW_V (and dW_O when W_O is given),
    shaped as `tapegrad attention` writes them."""
    batched = X.ndim == 3
    X3 = X if batched else X[None]  # (B, T, D)
    B, T, D = X3.shape
    H = heads
    d_k, d_v = W_Q.shape[1], W_V.shape[1]
    d_h = d_k // H
    c = 1.0 / np.sqrt(d_h) if scale else 1.0

    # forward
    Q = X3 @ W_Q                                   # (B, T, d_k)
    K = X3 @ W_K                                   # (B, T, d_k)
    V = X3 @ W_V                                   # (B, T, d_v)
    Qh, Kh, Vh = split_heads(Q, H), split_heads(K, H), split_heads(V, H)  # (B, H, T, d)
    if rope:
        cos, sin = rope_tables(T, d_h, rope_base)
        Qr, Kr = rotate_pairs(Qh, cos, sin), rotate_pairs(Kh, cos, sin)
    else:
        Qr, Kr = Qh, Kh
    S = c * (Qr @ Kr.swapaxes(-1, -2)) + causal_mask(T, window)  # (B, H, T, T)
    A = softmax_masked(S)                                        # (B, H, T, T)
    O = A @ Vh                                                   # (B, H, T, d_v/H)
    Yc = merge_heads(O)                                          # (B, T, d_v)
    Y = Yc @ W_O if W_O is not None else Yc                      # (B, T, d_v)
    loss = 0.5 * np.sum(Y * Y)

    # backward of L = 0.5 sum(Y^2)
    dY = Y
    out = {}
    if W_O is not None:
        # Y = Yc W_O
        out["dW_O"] = np.einsum("btd,bte->de", Yc, dY)
        dYc = dY @ W_O.T
    else:
        dYc = dY
    dO = split_heads(dYc, H)                       # Yc = merge_heads(O)
    # O = A Vh
    dA = dO @ Vh.swapaxes(-1, -2)                  # (B, H, T, T)
    dVh = A.swapaxes(-1, -2) @ dO                  # (B, H, T, d_v/H)
    # A = softmax(S): dS = A * (dA - sum(dA * A, -1)); masked entries have A = 0, so dS = 0
    dS = A * (dA - np.sum(dA * A, axis=-1, keepdims=True))
    # S = c Qr Kr^T + M
    dQr = c * (dS @ Kr)
    dKr = c * (dS.swapaxes(-1, -2) @ Qr)
    if rope:
        # Qr = R Qh with R a rotation: dQh = R^T dQr, the rotation by the opposite angle
        dQh, dKh = rotate_pairs(dQr, cos, -sin), rotate_pairs(dKr, cos, -sin)
    else:
        dQh, dKh = dQr, dKr
    dQ, dK, dV = merge_heads(dQh), merge_heads(dKh), merge_heads(dVh)  # Qh = split_heads(Q)
    # Q = X W_Q, K = X W_K, V = X W_V: X fans out into three products
    out["dW_Q"] = np.einsum("btd,bte->de", X3, dQ)
    out["dW_K"] = np.einsum("btd,bte->de", X3, dK)
    out["dW_V"] = np.einsum("btd,bte->de", X3, dV)
    dX3 = dQ @ W_Q.T + dK @ W_K.T + dV @ W_V.T

    out["Y"] = Y if batched else Y[0]
    out["A"] = A if batched else (A[0, 0] if H == 1 else A[0])
    out["loss"] = np.array(loss)
    out["dX"] = dX3 if batched else dX3[0]
    return out


# ---- self-test: the hand gradients against central differences ---------------------------

def selftest():
    """Central differences of the loss against every hand-written gradient, on a few
    configurations; returns the process exit status."""
    rng = np.random.default_rng(7)
    configs = [
        dict(shape=(5, 4), d_k=4, d_v=4, W_O=False, heads=1),
        dict(shape=(2, 5, 4), d_k=4, d_v=6, W_O=True, heads=1, window=2, scale=False),
        dict(shape=(2, 4, 6), d_k=8, d_v=4, W_O=True, heads=2, rope=True),
        dict(shape=(6, 4), d_k=4, d_v=4, W_O=True, heads=2, window=3, rope=True, rope_base=7.0),
    ]
    eps, worst = 1e-6, 0.0
    for cfg in configs:
        D = cfg["shape"][-1]
        inputs = {"X": rng.normal(size=cfg["shape"]),
                  "W_Q": rng.normal(size=(D, cfg["d_k"])),
                  "W_K": rng.normal(size=(D, cfg["d_k"])),
                  "W_V": rng.normal(size=(D, cfg["d_v"])),
                  "W_O": rng.normal(size=(cfg["d_v"], cfg["d_v"])) if cfg["W_O"] else None}
        options = {k: v for k, v in cfg.items() if k not in ("shape", "d_k", "d_v", "W_O")}

        def loss_of(values):
            return attention(values["X"], values["W_Q"], values["W_K"], values["W_V"],
                             values["W_O"], **options)["loss"]

        analytic = attention(inputs["X"], inputs["W_Q"], inputs["W_K"], inputs["W_V"],
                             inputs["W_O"], **options)
        for name, value in inputs.items():
            if value is None:
                continue
            numeric = np.zeros_like(value)
            for k in np.ndindex(value.shape):
                plus = dict(inputs, **{name: value.copy()})
                minus = dict(inputs, **{name: value.copy()})
                plus[name][k] += eps
                minus[name][k] -= eps
                numeric[k] = (loss_of(plus) - loss_of(minus)) / (2 * eps)
            g = analytic["d" + name]
            err = np.max(np.abs(g - numeric)) / max(np.max(np.abs(numeric)), 1e-300)
            worst = max(worst, err)
            if err > 1e-6:
                print(f"selftest: d{name} of {cfg}: relative error {err:.3g}", file=sys.stderr)
                return 1
    print(f"selftest: {len(configs)} configurations passed (worst relative error {worst:.3g})")
    return 0


# ---- command line -------------------------------------------------------------------------

def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--selftest", action="store_true", help="check the hand gradients and exit")
    p.add_argument("--in", dest="in_dir")
    p.add_argument("--out", dest="out_dir")
    p.add_argument("--heads", type=int, default=1)
    p.add_argument("--window", type=int, default=0)
    p.add_argument("--no-scale", action="store_true")
    p.add_argument("--rope", action="store_true")
    p.add_argument("--rope-base", type=float, default=10000.0)
    p.add_argument("--dtype", choices=("f64", "f32"), default="f64")
    a = p.parse_args(argv)
    if a.selftest:
        return selftest()
    if not a.in_dir or not a.out_dir:
        p.error("--in and --out are required")

    def load(name):
        x = np.load(os.path.join(a.in_dir, name + ".npy"), allow_pickle=False)
        if a.dtype == "f32":
            x = x.astype(np.float32)  # the values tapegrad computes with
        return x.astype(np.float64)

    W_O_path = os.path.join(a.in_dir, "W_O.npy")
    W_O = load("W_O") if os.path.exists(W_O_path) else None
    out = attention(load("X"), load("W_Q"), load("W_K"), load("W_V"), W_O, heads=a.heads,
                    window=a.window, scale=not a.no_scale, rope=a.rope, rope_base=a.rope_base)
    os.makedirs(a.out_dir, exist_ok=True)
    out_dtype = np.float32 if a.dtype == "f32" else np.float64
    for name, value in out.items():
        np.save(os.path.join(a.out_dir, name + ".npy"), value.astype(out_dtype))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
