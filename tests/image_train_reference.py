"""PyTorch's side of tests/train_images_test.cpp: pytorch/examples' mnist Net trained as
`tapegrad train --images DIR --no-shuffle --dropout 0 --dtype f64` trains it, and a tapegrad
model.safetensors scored on the test images.

  replay:   --images DIR --init FILE.safetensors --epochs E --batch B --out LOSSES
            every update's training loss, one a line as float.hex
  accuracy: --images DIR --model FILE.safetensors [--arch cnn|mlp --hidden H]
            prints the test accuracy of the model (loaded with load_state_dict, strict)

DIR holds the four uncompressed IDX files. The images are x / 255 normalised with the mean and
the population standard deviation of every training pixel (float64), as tapegrad's data/idx.h.
A safetensors file is read here by hand (8-byte length, JSON header, the bytes).
"""

import argparse
import json
import os
import struct

import numpy as np
import torch
import torch.nn.functional as F

from torch_image_models import Mlp, Net


def read_idx(path):
    with open(path, "rb") as f:
        data = f.read()
    assert data[0] == 0 and data[1] == 0 and data[2] == 8, path
    ndim = data[3]
    dims = struct.unpack(">" + "I" * ndim, data[4:4 + 4 * ndim])
    return np.frombuffer(data[4 + 4 * ndim:], dtype=np.uint8).reshape(dims)


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    kinds = {"F32": np.float32, "F64": np.float64, "I64": np.int64}
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        a = np.frombuffer(data[8 + n + b:8 + n + end], dtype=kinds[e["dtype"]])
        out[name] = torch.from_numpy(a.reshape(e["shape"]).copy())
    return out


def images(d):
    train = read_idx(os.path.join(d, "train-images-idx3-ubyte")).astype(np.float64) / 255
    mean, std = train.mean(), train.std()
    def norm(x):
        return torch.from_numpy(((x - mean) / std)[:, None, :, :])
    test = read_idx(os.path.join(d, "t10k-images-idx3-ubyte")).astype(np.float64) / 255
    labels = lambda name: torch.from_numpy(read_idx(os.path.join(d, name)).astype(np.int64))
    return (norm(train), labels("train-labels-idx1-ubyte"),
            norm(test), labels("t10k-labels-idx1-ubyte"))


def replay(args):
    torch.set_num_threads(1)  # as tapegrad --threads 1; a shared machine's cores stay free
    x, y, _, _ = images(args.images)
    model = Net().double()
    model.load_state_dict(read_safetensors(args.init), strict=True)
    model.train()
    model.dropout1.p = model.dropout2.p = 0.0
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.01},
                             {"params": no_decay, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.999), eps=1e-8)
    losses = []
    for _ in range(args.epochs):
        for start in range(0, x.shape[0], args.batch):
            loss = F.cross_entropy(model(x[start:start + args.batch]), y[start:start + args.batch])
            losses.append(loss.item())
            opt.zero_grad()
            loss.backward()
            opt.step()
    with open(args.out, "w") as f:
        f.write("".join(float.hex(v) + "\n" for v in losses))


def accuracy(args):
    _, _, x, y = images(args.images)
    state = read_safetensors(args.model)
    dtype = next(iter(state.values())).dtype
    model = (Net() if args.arch == "cnn" else Mlp(args.hidden)).to(dtype)
    model.load_state_dict(state, strict=True)
    model.eval()
    with torch.no_grad():
        correct = (model(x.to(dtype)).argmax(1) == y).sum().item()
    print("%d %d" % (correct, y.shape[0]))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--images", required=True)
    ap.add_argument("--init")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--out")
    ap.add_argument("--model")
    ap.add_argument("--arch", default="cnn")
    ap.add_argument("--hidden", type=int, default=256)
    args = ap.parse_args()
    replay(args) if args.model is None else accuracy(args)


if __name__ == "__main__":
    main()
