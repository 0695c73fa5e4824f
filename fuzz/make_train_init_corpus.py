#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/train_init/ (python3 stdlib only).

The --init files of fuzz/train_init_fuzz.cpp's tiny model (vocabulary "abc", 1 layer, 1 head,
n_embd 4, block 4): one that fits, in float32 and float64, and near misses that `tapegrad train`
must reject with a clear error (the fuzzer mutates them all). The generated files are committed,
so run this only after changing it:  python3 fuzz/make_train_init_corpus.py
"""

import math
import os
import random
import shutil
import struct

from safetensors_bytes import safetensors

HERE = os.path.dirname(os.path.abspath(__file__))
V, T, C = 3, 4, 4
SHAPES = [
    ("transformer.wte.weight", (V, C)),
    ("transformer.wpe.weight", (T, C)),
    ("transformer.h.0.ln_1.weight", (C,)),
    ("transformer.h.0.ln_1.bias", (C,)),
    ("transformer.h.0.attn.c_attn.weight", (3 * C, C)),
    ("transformer.h.0.attn.c_attn.bias", (3 * C,)),
    ("transformer.h.0.attn.c_proj.weight", (C, C)),
    ("transformer.h.0.attn.c_proj.bias", (C,)),
    ("transformer.h.0.ln_2.weight", (C,)),
    ("transformer.h.0.ln_2.bias", (C,)),
    ("transformer.h.0.mlp.c_fc.weight", (4 * C, C)),
    ("transformer.h.0.mlp.c_fc.bias", (4 * C,)),
    ("transformer.h.0.mlp.c_proj.weight", (C, 4 * C)),
    ("transformer.h.0.mlp.c_proj.bias", (C,)),
    ("transformer.ln_f.weight", (C,)),
    ("transformer.ln_f.bias", (C,)),
]


def model(dtype="F32", rng=None):
    rng = rng or random.Random(0)
    out = []
    for name, shape in SHAPES:
        n = math.prod(shape)
        if ".ln_" in name:  # LayerNorm: weight 1, bias 0
            values = [1.0 if name.endswith(".weight") else 0.0] * n
        elif name.endswith(".bias"):
            values = [0.0] * n
        else:
            values = [rng.gauss(0, 0.02) for _ in range(n)]
        out.append((name, dtype, shape, values))
    return out


def replace(tensors, name, **changes):
    return [(n, changes.get("dtype", d), changes.get("shape", s), changes.get("values", v))
            if n == name else (n, d, s, v) for n, d, s, v in tensors]


def cases():
    good = model()
    yield "valid_f32", safetensors(good)
    yield "valid_f64", safetensors(model("F64"))
    yield "with_lm_head", safetensors(good + [("lm_head.weight", "F32", (V, C), good[0][3])])
    yield "truncated", safetensors(good)[:-100]
    yield "wrong_shape", safetensors(replace(good, "transformer.wpe.weight", shape=(2, 8)))
    yield "missing_tensor", safetensors(good[:-1])
    yield "extra_tensor", safetensors(good + [("extra", "F32", (1,), [0.0])])
    nan = list(good[1][3])
    nan[3] = float("nan")
    yield "nan_value", safetensors(replace(good, "transformer.wpe.weight", values=nan))
    yield "int64_tensor", safetensors(
        replace(good, "transformer.ln_f.bias", dtype="I64", values=[0] * C))

    def overlap(entries):
        entries["transformer.wpe.weight"]["data_offsets"] = [0, 64]

    yield "overlapping_offsets", safetensors(good, header_edit=overlap)

    def unknown_dtype(entries):
        entries["transformer.wte.weight"]["dtype"] = "F16"

    yield "unknown_dtype", safetensors(good, header_edit=unknown_dtype)
    yield "header_past_end", struct.pack("<Q", 1 << 20) + b"{}"


def main():
    out = os.path.join(HERE, "corpus", "train_init")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    for name, data in cases():
        with open(os.path.join(out, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
