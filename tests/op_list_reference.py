"""PyTorch's side of tests/op_list_torch_test.cpp: every op of ops/op_list.cpp in PyTorch, as the
op list's row calls it (its fixed options, index inputs, masks and tables made here by the same
rules). cases.txt and the case folders are those of the runner in tests/ops_torch_util.h; the
cases are the rows at op_list_small()'s sizes: most sizes come from the inputs, and the shapes
broadcast_to, expand and embedding fix from SMALL below. An op PyTorch 1.13 has no function for
(add_mask, rope, rotary, rms_norm, the fused attentions) is written from torch ops by its
definition in ops/.
"""

import argparse
import math
import os

import torch
import torch.nn.functional as F

import ops_reference


def cycled(shape, n):
    """The rows' fixed indices: entry i (row-major) is (i * 7919) mod n."""
    count = math.prod(shape)
    return ((torch.arange(count, dtype=torch.int64) * 7919) % n).reshape(shape)


def mask(shape):
    """The rows' fixed mask (where, masked_fill): entry i holds unless (i * 7919) mod 3 == 0."""
    return cycled(shape, 3) != 0


def angles(T, half, dtype):
    t = torch.arange(T, dtype=dtype)[:, None]
    i = torch.arange(half, dtype=dtype)[None, :]
    return t / (i + 1)


def causal(T, dtype):
    return torch.full((T, T), -math.inf, dtype=dtype).triu(1)


def attention(q, k, v, scale):
    s = q @ k.transpose(-2, -1) * scale + causal(q.shape[-2], q.dtype)
    return torch.softmax(s, -1) @ v


def heads(x, h):
    B, T, C = x.shape
    return x.reshape(B, T, h, C // h).transpose(1, 2)


def merge(o):
    B, h, T, d = o.shape
    return o.transpose(1, 2).reshape(B, T, h * d)


def rope(x, base=10000.0):
    """Interleaved pairs (2i, 2i + 1) at position m (axis -2) turned by m base^(-2i / d)."""
    T, d = x.shape[-2], x.shape[-1]
    theta = base ** (-torch.arange(0, d, 2, dtype=x.dtype) / d)
    a = torch.arange(T, dtype=x.dtype)[:, None] * theta[None, :]
    c, s = torch.cos(a), torch.sin(a)
    e, o = x[..., 0::2], x[..., 1::2]
    return torch.stack((e * c - o * s, e * s + o * c), -1).flatten(-2)


def rotary(x):
    """Hugging Face's half-split rotation of (B, T, H, d) by the rows' tables (T, d / 2)."""
    T, d = x.shape[1], x.shape[-1]
    a = angles(T, d // 2, x.dtype)
    c, s = torch.cos(a).repeat(1, 2)[:, None, :], torch.sin(a).repeat(1, 2)[:, None, :]
    half = torch.cat((-x[..., d // 2:], x[..., :d // 2]), -1)
    return x * c + half * s


def cross_entropy_options(x):
    V = x.shape[-1]
    w = 0.5 + (torch.arange(V) % 3).to(x.dtype)
    t = cycled(x.shape[:-1], V)
    return F.cross_entropy(x.reshape(-1, V), t.reshape(-1), weight=w, ignore_index=-1,
                           label_smoothing=0.1)


def batch_norm(x, w, b):
    C = x.shape[1]
    rm, rv = torch.zeros(C, dtype=x.dtype), torch.ones(C, dtype=x.dtype)
    return F.batch_norm(x, rm, rv, w, b, training=True)


def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


# The sizes of op_list_small() (kSmall in ops/op_list.cpp) that no input of a row shows: the
# leading B H of broadcast_to's and expand's output, d of expand's, and embedding's (B, T) tokens.
SMALL = {"bh": 2, "d": 8, "b": 2, "bt": 4}

# The rows of ops/op_list.cpp, by name: each a function of the row's float inputs.
def lstm_scan(gi, w_hh, b, h, c):
    """PyTorch's own LSTM cell a step (torch.lstm_cell; the identity as w_ih passes gi through),
    the hidden states, then the cell states: (2, T, B, H)."""
    eye = torch.eye(gi.shape[-1], dtype=gi.dtype)
    hs, cs = [], []
    for t in range(gi.shape[0]):
        h, c = torch.lstm_cell(gi[t], (h, c), eye, w_hh, b)
        hs.append(h)
        cs.append(c)
    return torch.stack((torch.stack(hs), torch.stack(cs)))


def gru_scan(gi, w_hh, b_hh, h):
    """PyTorch's own GRU cell a step (torch.gru_cell; the identity as w_ih passes gi through,
    b_ih is already in gi), the hidden states: (T, B, H)."""
    eye = torch.eye(gi.shape[-1], dtype=gi.dtype)
    hs = []
    for t in range(gi.shape[0]):
        h = torch.gru_cell(gi[t], h, eye, w_hh, None, b_hh)
        hs.append(h)
    return torch.stack(hs)


OPS = {
    "abs": lambda x: torch.abs(x[0]),
    "add": lambda x: x[0] + x[1],
    # -inf where masked whatever x holds, with no gradient there: masked_fill, not x + mask.
    "add_mask": lambda x: x[0].masked_fill(torch.ones(x[0].shape[-2:]).triu(1) == 1, -math.inf),
    "amax": lambda x: torch.amax(x[0], -1),
    "amin": lambda x: torch.amin(x[0], -2, keepdim=True),
    "avg_pool1d": lambda x: F.avg_pool1d(x[0], 2),
    "avg_pool2d": lambda x: F.avg_pool2d(x[0], 2),
    "batch_norm": lambda x: batch_norm(*x),
    "binary_cross_entropy_with_logits":
        lambda x: F.binary_cross_entropy_with_logits(x[0], torch.sigmoid(x[1])),
    "broadcast_to": lambda x: torch.broadcast_to(x[0], (SMALL["bh"], *x[0].shape)),
    "cat": lambda x: torch.cat((x[0], x[1]), -1),
    "causal_attention": lambda x: attention(x[0], x[1], x[2], 0.125),
    "causal_attention_heads":
        lambda x: merge(attention(heads(x[0], 4), heads(x[1], 4), heads(x[2], 4), 0.125)),
    "causal_attention_qkv": lambda x: merge(attention(
        *(heads(p, 4) for p in torch.split(x[0], x[0].shape[-1] // 3, -1)), 0.125)),
    "chunk": lambda x: torch.chunk(x[0], 3, -1)[1],
    "clamp": lambda x: torch.clamp(x[0], -0.5, 0.5),
    "conv1d": lambda x: F.conv1d(*x),
    "conv2d": lambda x: F.conv2d(*x),
    "cross_entropy": lambda x: F.cross_entropy(x[0], cycled(x[0].shape[:1], x[0].shape[-1])),
    "cross_entropy_options": lambda x: cross_entropy_options(x[0]),
    "div": lambda x: x[0] / x[1],
    "embedding": lambda x: F.embedding(cycled((SMALL["b"], SMALL["bt"]), x[0].shape[0]), x[0]),
    "erf": lambda x: torch.erf(x[0]),
    "exp": lambda x: torch.exp(x[0]),
    "expand": lambda x: x[0].expand(SMALL["bh"], -1, SMALL["d"]),
    "flatten": lambda x: torch.flatten(x[0], 1),
    "gather": lambda x: torch.gather(x[0], -1, cycled((*x[0].shape[:-1], x[0].shape[-1] // 2),
                                                      x[0].shape[-1])),
    "gelu": lambda x: F.gelu(x[0], approximate="tanh"),
    "group_norm": lambda x: F.group_norm(x[0], x[0].shape[1] // 8, x[1], x[2]),
    "gru_scan": lambda x: gru_scan(*x),
    "index_select": lambda x: torch.index_select(x[0], 1, cycled((x[0].shape[1] // 2,),
                                                                 x[0].shape[1])),
    "l1_loss": lambda x: F.l1_loss(x[0], x[1]),
    "layer_norm": lambda x: F.layer_norm(x[0], x[0].shape[-1:], x[1], x[2]),
    "linear": lambda x: F.linear(*x),
    "log": lambda x: torch.log(x[0]),
    "log_softmax": lambda x: torch.log_softmax(x[0], -1),
    "log_softmax_dim": lambda x: torch.log_softmax(x[0], -2),
    "logsumexp": lambda x: torch.logsumexp(x[0], -1),
    "lstm_scan": lambda x: lstm_scan(*x),
    "masked_fill": lambda x: x[0].masked_fill(mask(x[0].shape), -1.5),
    "matmul": lambda x: x[0] @ x[1],
    "max": lambda x: torch.max(x[0], -1).values,
    "max_pool1d": lambda x: F.max_pool1d(x[0], 2),
    "max_pool2d": lambda x: F.max_pool2d(x[0], 2),
    "maximum": lambda x: torch.maximum(x[0], x[1]),
    "mean": lambda x: x[0].mean(-1, keepdim=True),
    "mean_dims": lambda x: x[0].mean((0, 1)),
    "min": lambda x: torch.min(x[0], -2, keepdim=True).values,
    "minimum": lambda x: torch.minimum(x[0], x[1]),
    "mse_loss": lambda x: F.mse_loss(x[0], x[1]),
    "mul": lambda x: x[0] * x[1],
    "narrow": lambda x: x[0].narrow(-1, x[0].shape[-1] // 8, x[0].shape[-1] // 2),
    "nll_loss": lambda x: F.nll_loss(torch.log_softmax(x[0], -1),
                                     cycled(x[0].shape[:1], x[0].shape[-1])),
    "pad": lambda x: F.pad(x[0], (1, 2, 0, 3)),
    "permute": lambda x: x[0].permute(0, 2, 1, 3),
    "pow": lambda x: torch.pow(x[0], 1.5),
    "relu": lambda x: torch.relu(x[0]),
    "reshape": lambda x: x[0].reshape(-1, x[0].shape[-1]),
    "rms_norm": lambda x: rms_norm(x[0], x[1], 1e-6),
    "rope": lambda x: rope(x[0]),
    "rotary": lambda x: rotary(x[0]),
    "rsqrt": lambda x: torch.rsqrt(x[0]),
    "scale": lambda x: x[0] * 0.125,
    "scatter_add": lambda x: torch.scatter_add(x[0], -1, cycled(x[1].shape, x[0].shape[-1]), x[1]),
    "sigmoid": lambda x: torch.sigmoid(x[0]),
    "silu": lambda x: F.silu(x[0]),
    "softmax": lambda x: torch.softmax(x[0], -1),
    "softmax_dim": lambda x: torch.softmax(x[0], -2),
    "softplus": lambda x: F.softplus(x[0]),
    "split": lambda x: torch.split(x[0], x[0].shape[-1] // 2, -1)[1],
    "sqrt": lambda x: torch.sqrt(x[0]),
    "squeeze": lambda x: torch.squeeze(x[0], 1),
    "stack": lambda x: torch.stack((x[0], x[1]), 1),
    "sub": lambda x: x[0] - x[1],
    "sum": lambda x: x[0].sum(-1, keepdim=True),
    "sum_dims": lambda x: x[0].sum((0, 1)),
    "sum_of_squares": lambda x: (x[0] * x[0]).sum(),
    "sum_to": lambda x: x[0].sum_to_size(x[0].shape[1:]),
    "tanh": lambda x: torch.tanh(x[0]),
    "transpose": lambda x: x[0].transpose(-2, -1),
    "transpose_dims": lambda x: x[0].transpose(1, 2),
    "unsqueeze": lambda x: torch.unsqueeze(x[0], -2),
    "var": lambda x: torch.var(x[0], -1),
    "where": lambda x: torch.where(mask(x[0].shape), x[0], x[1]),
}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--dir", required=True)
    a = p.parse_args()

    def multi_op(op, kw, d, xs):
        if op not in OPS:
            raise SystemExit("op_list_reference.py: no PyTorch form for the op '%s'" % op)
        return OPS[op](xs), None

    with open(os.path.join(a.dir, "cases.txt")) as f:
        for line in f:
            parts = line.split()
            if parts:
                kw = dict(kv.split("=", 1) for kv in parts[2:])
                ops_reference.run_multi(parts[1], kw, os.path.join(a.dir, parts[0]), multi_op)


if __name__ == "__main__":
    main()
