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

from torch_image_models import Mlp, Net  # noqa: F401 (the case expressions name them)


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
    root = ap.parse_args().dir
    cases = [l.rstrip("\n").split(" ", 1) for l in open(os.path.join(root, "cases.txt"))]
    for case, expression in cases:
        run_case(os.path.join(root, case), expression)


if __name__ == "__main__":
    main()
