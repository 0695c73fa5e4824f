#!/usr/bin/env python3
"""An independent PyTorch (float64) reference for tapegrad's Llama (nn/llama.h).

Hugging Face's LlamaForCausalLM (transformers' modeling_llama.py) written out in plain
torch.nn: token embeddings, pre-norm blocks x = x + self_attn(input_layernorm(x));
x = x + mlp(post_attention_layernorm(x)), a final RMSNorm and lm_head (or the embedding when
tied). Rotary embeddings in the half-split form (rotate_half), grouped-query attention by
repeating each key/value head for its query heads, no biases.

    python3 llama_reference.py --in DIR --out DIR --vocab V --hidden C --intermediate I
        --layers L --heads H --kv-heads K --max-pos P [--eps E] [--theta B] [--tie]

Reads from DIR one NAME.npy per parameter (Hugging Face's names, e.g.
model.layers.0.self_attn.q_proj.weight.npy), and idx.npy, targets.npy (B, T) holding token ids
(-1 in targets is ignored). Writes to --out logits.npy (B, T, V), loss.npy (a scalar) and
grad.NAME.npy for every parameter, all float64.
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, size, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x):
        variance = x.pow(2).mean(-1, keepdim=True)
        return self.weight * (x * torch.rsqrt(variance + self.eps))


def rotate_half(x):
    first, second = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2 :]
    return torch.cat((-second, first), dim=-1)


class Rotary(nn.Module):
    def __init__(self, dim, theta):
        super().__init__()
        # in the default dtype, the run's (the tables are computed in the model's dtype)
        self.inv_freq = 1.0 / (theta ** (torch.arange(0, dim, 2).to(torch.get_default_dtype()) / dim))

    def forward(self, T):
        t = torch.arange(T).to(torch.get_default_dtype())
        freqs = torch.outer(t, self.inv_freq)           # (T, d/2)
        emb = torch.cat((freqs, freqs), dim=-1)         # (T, d)
        return emb.cos()[None, None], emb.sin()[None, None]  # (1, 1, T, d)


class Attention(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.heads, self.kv_heads = a.heads, a.kv_heads
        self.head_dim = a.hidden // a.heads
        self.q_proj = nn.Linear(a.hidden, a.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(a.hidden, a.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(a.hidden, a.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(a.heads * self.head_dim, a.hidden, bias=False)
        self.rotary = Rotary(self.head_dim, a.theta)

    def forward(self, x):
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.heads, self.head_dim).transpose(1, 2)     # (B, H, T, d)
        k = self.k_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, K, T, d)
        v = self.v_proj(x).view(B, T, self.kv_heads, self.head_dim).transpose(1, 2)  # (B, K, T, d)
        cos, sin = self.rotary(T)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        groups = self.heads // self.kv_heads
        k = k.repeat_interleave(groups, dim=1)  # (B, H, T, d): kv head j serves heads j g .. j g + g - 1
        v = v.repeat_interleave(groups, dim=1)
        att = q @ k.transpose(2, 3) / (self.head_dim ** 0.5)                          # (B, H, T, T)
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        att = att.masked_fill(~causal, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, -1)                                # (B, T, H d)
        return self.o_proj(y)


class MLP(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.gate_proj = nn.Linear(a.hidden, a.intermediate, bias=False)
        self.up_proj = nn.Linear(a.hidden, a.intermediate, bias=False)
        self.down_proj = nn.Linear(a.intermediate, a.hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.self_attn = Attention(a)
        self.mlp = MLP(a)
        self.input_layernorm = RMSNorm(a.hidden, a.eps)
        self.post_attention_layernorm = RMSNorm(a.hidden, a.eps)

    def forward(self, x):
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class Model(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.embed_tokens = nn.Embedding(a.vocab, a.hidden)
        self.layers = nn.ModuleList(DecoderLayer(a) for _ in range(a.layers))
        self.norm = RMSNorm(a.hidden, a.eps)


class LlamaForCausalLM(nn.Module):
    def __init__(self, a):
        super().__init__()
        self.model = Model(a)
        self.tie = a.tie
        if not a.tie:
            self.lm_head = nn.Linear(a.hidden, a.vocab, bias=False)

    def forward(self, idx):
        x = self.model.embed_tokens(idx)
        for layer in self.model.layers:
            x = layer(x)
        h = self.model.norm(x)
        return h @ self.model.embed_tokens.weight.T if self.tie else self.lm_head(h)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--in", dest="inp", required=True)
    p.add_argument("--out", required=True)
    for name in ("vocab", "hidden", "intermediate", "layers", "heads", "kv-heads", "max-pos"):
        p.add_argument("--" + name, type=int, required=True)
    p.add_argument("--eps", type=float, default=1e-6)
    p.add_argument("--theta", type=float, default=10000.0)
    p.add_argument("--tie", action="store_true")
    a = p.parse_args()

    torch.set_default_dtype(torch.float64)
    model = LlamaForCausalLM(a)
    state = {name: torch.from_numpy(np.load(os.path.join(a.inp, name + ".npy")))
             for name in model.state_dict()}
    model.load_state_dict(state)
    idx = torch.from_numpy(np.load(os.path.join(a.inp, "idx.npy"))).long()
    targets = torch.from_numpy(np.load(os.path.join(a.inp, "targets.npy"))).long()
    assert idx.shape[1] <= a.max_pos

    logits = model(idx)
    loss = F.cross_entropy(logits.reshape(-1, a.vocab), targets.reshape(-1), ignore_index=-1)
    loss.backward()

    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "logits.npy"), logits.detach().numpy())
    np.save(os.path.join(a.out, "loss.npy"), loss.detach().numpy())
    for name, param in model.named_parameters():
        np.save(os.path.join(a.out, "grad." + name + ".npy"), param.grad.numpy())


if __name__ == "__main__":
    main()
