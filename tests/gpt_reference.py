#!/usr/bin/env python3
"""An independent PyTorch (float64) reference for tapegrad's GPT (nn/gpt.h).

nanoGPT's architecture and parameter names, written out in plain torch.nn: token + position
embeddings, pre-LN blocks x = x + attn(ln_1(x)); x = x + mlp(ln_2(x)), a final ln_f and the
lm_head tied to wte. No dropout (the comparison runs with dropout 0).

    python3 gpt_reference.py --in DIR --out DIR --vocab V --block T --layers L --heads H
        --embd C [--no-bias] [--gelu tanh|erf] [--attention-only]

Reads from DIR one NAME.npy per parameter (NAME as in the state dict, e.g.
transformer.h.0.attn.c_attn.weight.npy), and idx.npy, targets.npy (B, T) holding token ids
(float64 or int64; -1 in targets is ignored). Writes to --out logits.npy (B, T, V), loss.npy
(a scalar) and grad.NAME.npy for every parameter, all float64.
"""

import argparse
import math
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.n_head, self.n_embd = a.heads, a.embd
        self.c_attn = nn.Linear(a.embd, 3 * a.embd, bias=a.bias)
        self.c_proj = nn.Linear(a.embd, a.embd, bias=a.bias)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(self.n_embd, dim=2)                     # 3 x (B, T, C)
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)       # (B, H, T, d)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)       # (B, H, T, d)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)       # (B, H, T, d)
        att = q @ k.transpose(-2, -1) / math.sqrt(k.shape[-1])                # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)         # (B, H, T, T)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)              # (B, T, C)
        return self.c_proj(y)                                                 # (B, T, C)


class MLP(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.c_fc = nn.Linear(a.embd, 4 * a.embd, bias=a.bias)
        self.c_proj = nn.Linear(4 * a.embd, a.embd, bias=a.bias)
        self.approximate = "tanh" if a.gelu == "tanh" else "none"

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate=self.approximate))  # (B, T, C)


class Block(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.ln_1 = nn.LayerNorm(a.embd)
        self.attn = CausalSelfAttention(a)
        self.attention_only = a.attention_only
        if not a.attention_only:
            self.ln_2 = nn.LayerNorm(a.embd)
            self.mlp = MLP(a)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))          # (B, T, C)
        if not self.attention_only:
            x = x + self.mlp(self.ln_2(x))       # (B, T, C)
        return x


class GPT(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(a.vocab, a.embd),
            wpe=nn.Embedding(a.block, a.embd),
            h=nn.ModuleList([Block(a) for _ in range(a.layers)]),
            ln_f=nn.LayerNorm(a.embd),
        ))
        if not a.bias:  # nanoGPT's LayerNorm without bias
            for m in self.modules():
                if isinstance(m, nn.LayerNorm):
                    m.bias = None

    def forward(self, idx, targets):
        B, T = idx.shape
        pos = torch.arange(T)
        x = self.transformer.wte(idx) + self.transformer.wpe(pos)   # (B, T, C)
        for block in self.transformer.h:
            x = block(x)                                            # (B, T, C)
        x = self.transformer.ln_f(x)                                # (B, T, C)
        logits = x @ self.transformer.wte.weight.T                  # (B, T, V): tied lm_head
        loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), targets.view(-1),
                               ignore_index=-1)
        return logits, loss


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--in", dest="indir", required=True)
    p.add_argument("--out", dest="outdir", required=True)
    for flag in ("vocab", "block", "layers", "heads", "embd"):
        p.add_argument("--" + flag, type=int, required=True)
    p.add_argument("--no-bias", dest="bias", action="store_false")
    p.add_argument("--gelu", choices=("tanh", "erf"), default="tanh")
    p.add_argument("--attention-only", action="store_true")
    a = p.parse_args()

    torch.set_default_dtype(torch.float64)
    model = GPT(a)
    state = {}
    for name in model.state_dict():
        state[name] = torch.from_numpy(np.load(os.path.join(a.indir, name + ".npy")).astype(np.float64))
    model.load_state_dict(state, strict=True)
    idx = torch.from_numpy(np.load(os.path.join(a.indir, "idx.npy")).astype(np.int64))
    targets = torch.from_numpy(np.load(os.path.join(a.indir, "targets.npy")).astype(np.int64))

    logits, loss = model(idx, targets)
    loss.backward()
    os.makedirs(a.outdir, exist_ok=True)
    np.save(os.path.join(a.outdir, "logits.npy"), logits.detach().numpy())
    np.save(os.path.join(a.outdir, "loss.npy"), loss.detach().numpy())
    for name, param in model.named_parameters():
        np.save(os.path.join(a.outdir, "grad." + name + ".npy"), param.grad.numpy())


if __name__ == "__main__":
    main()
