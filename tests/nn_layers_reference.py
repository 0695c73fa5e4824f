"""PyTorch's side of tests/nn_layers_torch_test.cpp: the layers of torch.nn (and pytorch/examples'
mnist Net, and the MLP) from tapegrad's weights.

--dir holds cases.txt, one case a line: `<case> <python expression building the torch module>`,
and a folder per case with x.npy (float64 input), w.npy (fixed random weights of the output's
shape) and p.NAME.npy for every parameter, by its state_dict name. The module is loaded with
load_state_dict (strict: the names must be tapegrad's), run in eval mode on x, and writes y.npy
(its output), dx.npy and g.NAME.npy (the gradients of sum(y * w)) into the case's folder.
"""

import argparse
import os

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


class Net(nn.Module):
    """pytorch/examples' mnist/main.py Net."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(9216, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = F.max_pool2d(x, 2)
        x = self.dropout1(x)
        x = torch.flatten(x, 1)
        x = F.relu(self.fc1(x))
        x = self.dropout2(x)
        return self.fc2(x)


class Mlp(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.fc1 = nn.Linear(784, hidden)
        self.fc2 = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(torch.flatten(x, 1))))


def run_case(d, expression):
    module = eval(expression).double().eval()
    state = {}
    for f in os.listdir(d):
        if f.startswith("p.") and f.endswith(".npy"):
            state[f[2:-4]] = torch.from_numpy(np.load(os.path.join(d, f)))
    module.load_state_dict(state, strict=True)
    x = torch.from_numpy(np.load(os.path.join(d, "x.npy"))).requires_grad_()
    w = torch.from_numpy(np.load(os.path.join(d, "w.npy")))
    y = module(x)
    (y * w).sum().backward()
    np.save(os.path.join(d, "y.npy"), y.detach().numpy())
    np.save(os.path.join(d, "dx.npy"), x.grad.numpy())
    for name, p in module.named_parameters():
        np.save(os.path.join(d, "g.%s.npy" % name), p.grad.numpy())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    args = ap.parse_args()
    with open(os.path.join(args.dir, "cases.txt")) as f:
        for line in f:
            case, expression = line.rstrip("\n").split(" ", 1)
            run_case(os.path.join(args.dir, case), expression)


if __name__ == "__main__":
    main()
