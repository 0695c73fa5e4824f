#!/usr/bin/env python3
"""nanoGPT's training loop in PyTorch eager, for tests/gpt_train_torch_test.cpp.

The model is tests/gpt_reference.py's (nanoGPT's architecture and names), or with --arch llama
tests/llama_reference.py's (Hugging Face's Llama: --kv-heads, --intermediate). It starts from the
weights in DIR/init/NAME.npy, trains `--steps` updates on DIR/batches.npy ((N, B, T + 1) token
ids; update s uses batch s mod N, x = window[:T], y = window[1:]) as nanoGPT's train.py does:
get_lr (tests/optim_reference.py), forward and loss, backward, clip_grad_norm_, AdamW with
nanoGPT's two parameter groups (weight decay on parameters of rank >= 2 only), zero_grad. Writes
DIR/torch/losses.npy, grad_norms.npy and NAME.npy for every final weight.

    python3 gpt_train_reference.py DIR --dtype float64|float32 --vocab V --block T --layers L
        --heads H --embd C --steps S --lr LR --lr-min LR --warmup W --beta1 B1 --beta2 B2
        --eps E --weight-decay WD --grad-clip G [--arch llama --kv-heads K --intermediate I]
"""

import argparse
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt_reference import GPT  # noqa: E402
from llama_reference import LlamaForCausalLM  # noqa: E402
from optim_reference import get_lr  # noqa: E402


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--dtype", choices=("float64", "float32"), required=True)
    for flag in ("vocab", "block", "layers", "heads", "embd", "steps", "warmup"):
        p.add_argument("--" + flag, type=int, required=True)
    for flag in ("lr", "lr-min", "beta1", "beta2", "eps", "weight-decay", "grad-clip"):
        p.add_argument("--" + flag, type=float, required=True)
    p.add_argument("--arch", choices=("gpt", "llama"), default="gpt")
    p.add_argument("--kv-heads", type=int)
    p.add_argument("--intermediate", type=int)
    a = p.parse_args()
    a.bias, a.gelu, a.attention_only = True, "tanh", False
    a.hidden, a.max_pos, a.eps_norm, a.theta, a.tie = a.embd, a.block, 1e-6, 10000.0, False
    dtype = getattr(torch, a.dtype)
    torch.set_default_dtype(dtype)

    if a.arch == "gpt":
        model = GPT(a)
    else:
        llama = LlamaForCausalLM(argparse.Namespace(**{**vars(a), "eps": a.eps_norm}))

        def model(x, y):  # as GPT's forward: logits and the mean cross-entropy
            logits = llama(x)
            return logits, torch.nn.functional.cross_entropy(logits.reshape(-1, a.vocab),
                                                             y.reshape(-1), ignore_index=-1)
        model.state_dict, model.load_state_dict = llama.state_dict, llama.load_state_dict
        model.parameters = llama.parameters
    state = {name: torch.from_numpy(np.load(os.path.join(a.dir, "init", name + ".npy"))).to(dtype)
             for name in model.state_dict()}
    model.load_state_dict(state, strict=True)
    batches = torch.from_numpy(np.load(os.path.join(a.dir, "batches.npy")).astype(np.int64))

    params = list(model.parameters())
    groups = [{"params": [q for q in params if q.dim() >= 2], "weight_decay": a.weight_decay},
              {"params": [q for q in params if q.dim() < 2], "weight_decay": 0.0}]
    opt = torch.optim.AdamW(groups, lr=a.lr, betas=(a.beta1, a.beta2), eps=a.eps, foreach=False)
    losses, norms = [], []
    for it in range(a.steps):
        lr = get_lr(it, a.lr, a.lr_min, a.warmup, a.steps)
        for g in opt.param_groups:
            g["lr"] = lr
        window = batches[it % batches.shape[0]]
        _, loss = model(window[:, :-1].contiguous(), window[:, 1:].contiguous())
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(params, a.grad_clip)
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
        norms.append(norm.item())

    out = os.path.join(a.dir, "torch")
    os.makedirs(out, exist_ok=True)
    np.save(os.path.join(out, "losses.npy"), np.array(losses, dtype=np.float64))
    np.save(os.path.join(out, "grad_norms.npy"), np.array(norms, dtype=np.float64))
    for name, param in model.state_dict().items():
        np.save(os.path.join(out, name + ".npy"), param.detach().to(torch.float64).numpy())


if __name__ == "__main__":
    main()
