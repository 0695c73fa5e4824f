#!/usr/bin/env python3
"""torch.optim as the reference for tapegrad's optim/ (tests/optim_test.cpp runs it).

    python3 optim_reference.py DIR

DIR holds config.json, the initial parameters param.NAME.npy (float64) and the gradients of
every update grad.S.NAME.npy. config.json:

    {"steps": S, "names": [NAME, ...],
     "runs": [{"name": RUN, "optimizer": "adamw" | "sgd", "dtype": "f32" | "f64",
               "lr": .., "lr_min": .., "warmup": .., "beta1": .., "beta2": .., "eps": ..,
               "weight_decay": .., "momentum": .., "decay_rank_min": .., "max_norm": ..}, ...],
     "schedules": [[lr, lr_min, warmup, steps], ...]}

Each run is a training loop as nanoGPT's: for update s, lr = get_lr(s) on every group, the
gradients are set, clip_grad_norm_(max_norm) (when max_norm > 0), then step(). Parameters of
rank >= decay_rank_min form the group with weight decay, the others a group without it.
Writes into DIR/ref: RUN.param.NAME.npy (the final parameters), RUN.m.NAME / RUN.v.NAME
(AdamW's exp_avg / exp_avg_sq) or RUN.momentum.NAME (SGD), RUN.norms.npy (the norms clipping
returned, float64), and schedule.K.npy (get_lr(it) for it = 0 .. steps - 1, float64).
"""

import json
import math
import os
import sys

import numpy as np
import torch


def get_lr(it, learning_rate, min_lr, warmup_iters, steps):
    """nanoGPT's get_lr (train.py), with lr_decay_iters = steps - 1 so that the last update
    uses min_lr; a decay span of zero (warmup_iters = steps - 1) gives min_lr from there on."""
    lr_decay_iters = steps - 1
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it >= lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    assert 0 <= decay_ratio <= 1
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


def load(path, dtype):
    return torch.from_numpy(np.load(path)).to(dtype)


def make_optimizer(run, params):
    decay = [p for p in params if p.dim() >= run["decay_rank_min"]]
    no_decay = [p for p in params if p.dim() < run["decay_rank_min"]]
    groups = [{"params": g, "weight_decay": wd}
              for g, wd in ((decay, run["weight_decay"]), (no_decay, 0.0)) if g]
    if run["optimizer"] == "adamw":
        return torch.optim.AdamW(groups, lr=run["lr"], betas=(run["beta1"], run["beta2"]),
                                 eps=run["eps"], foreach=False)
    return torch.optim.SGD(groups, lr=run["lr"], momentum=run["momentum"], foreach=False)


def train(run, config, src, out):
    dtype = torch.float32 if run["dtype"] == "f32" else torch.float64
    names = config["names"]
    params = [load(os.path.join(src, f"param.{n}.npy"), dtype).requires_grad_() for n in names]
    opt = make_optimizer(run, params)
    norms = []
    for s in range(config["steps"]):
        lr = get_lr(s, run["lr"], run["lr_min"], run["warmup"], config["steps"])
        for group in opt.param_groups:
            group["lr"] = lr
        for n, p in zip(names, params):
            p.grad = load(os.path.join(src, f"grad.{s}.{n}.npy"), dtype)
        if run["max_norm"] > 0:
            norms.append(float(torch.nn.utils.clip_grad_norm_(params, run["max_norm"])))
        opt.step()
    name = run["name"]
    np.save(os.path.join(out, f"{name}.norms.npy"), np.array(norms, dtype=np.float64))
    kinds = {"m": "exp_avg", "v": "exp_avg_sq"} if run["optimizer"] == "adamw" \
        else {"momentum": "momentum_buffer"} if run["momentum"] != 0 else {}
    for n, p in zip(names, params):
        np.save(os.path.join(out, f"{name}.param.{n}.npy"), p.detach().numpy())
        for kind, key in kinds.items():
            np.save(os.path.join(out, f"{name}.{kind}.{n}.npy"), opt.state[p][key].numpy())


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: optim_reference.py DIR")
    src = sys.argv[1]
    out = os.path.join(src, "ref")
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(src, "config.json")) as f:
        config = json.load(f)
    for run in config["runs"]:
        train(run, config, src, out)
    for k, (lr, lr_min, warmup, steps) in enumerate(config["schedules"]):
        rates = [get_lr(it, lr, lr_min, warmup, steps) for it in range(steps)]
        np.save(os.path.join(out, f"schedule.{k}.npy"), np.array(rates, dtype=np.float64))


if __name__ == "__main__":
    main()
