#!/usr/bin/env python3
"""Writes the seed corpus fuzz/corpus/safetensors/ (python3 stdlib only).

Small valid files, laid out as the reference implementation writes them, and near-valid ones
that the reader must reject; the fuzzer mutates them. The generated files are committed, so run
this only after changing it:  python3 fuzz/make_safetensors_corpus.py
"""

import os
import shutil
import struct

from safetensors_bytes import safetensors

HERE = os.path.dirname(os.path.abspath(__file__))


def cases():
    w = ("w", "F32", (2, 3), [0.5, -1.0, 2.0, 0.0, 1e-3, -7.25])
    b = ("b", "F64", (3,), [1.5, -2.5, 3.0])
    idx = ("idx", "I64", (2, 2), [0, -1, 2**40, 7])
    good = safetensors([w, b])
    n = struct.unpack("<Q", good[:8])[0]
    return {
        "f32_f64": good,
        "all_dtypes_meta": safetensors([w, b, idx], {"tapegrad.config": '{"n_layer": 2}'}),
        "scalar": safetensors([("s", "F64", (), [2.5])]),
        "rank4": safetensors([("r", "I64", (1, 2, 1, 2), [1, 2, 3, 4])]),
        "empty_tensors": safetensors([("e", "F32", (0, 3), []), ("z", "I64", (2, 0), []), b]),
        "nothing": safetensors([]),
        "unpadded": safetensors([w], pad=False),
        "keys_out_of_order": safetensors([], header='{"b":{"data_offsets":[8,16],"shape":[1],'
                                         '"dtype":"F64"},"a":{"shape":[2],"dtype":"F32",'
                                         '"data_offsets":[0,8]}}', data=b"\0" * 16),
        "truncated": good[:-4],
        "trailing": good + b"\0\0\0\0",
        "header_len_lies": struct.pack("<Q", n + 100) + good[8:],
        "bf16": safetensors([], header='{"a":{"dtype":"BF16","shape":[2],"data_offsets":[0,4]}}',
                            data=b"\0" * 4),
        "overlap": safetensors([], header='{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},'
                               '"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}}',
                               data=b"\0" * 12),
        "gap": safetensors([], header='{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},'
                           '"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}',
                           data=b"\0" * 12),
        "shape_mismatch": safetensors([], header='{"a":{"dtype":"F64","shape":[3],'
                                      '"data_offsets":[0,16]}}', data=b"\0" * 16),
        "negative_dim": safetensors([], header='{"a":{"dtype":"F32","shape":[-1],'
                                    '"data_offsets":[0,0]}}'),
        "duplicate_name": safetensors([], header='{"a":{"dtype":"F32","shape":[],"data_offsets"'
                                      ':[0,4]},"a":{"dtype":"F32","shape":[],"data_offsets":'
                                      '[0,4]}}', data=b"\0" * 4),
        "metadata_not_string": safetensors([w], {"k": 1}),
        "malformed_json": safetensors([], header='{"a":{"dtype":"F32",'),
        "not_an_object": safetensors([], header="[1, 2]"),
        "short": b"\x02\0\0",
    }


def main():
    folder = os.path.join(HERE, "corpus", "safetensors")
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for name, data in sorted(cases().items()):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


if __name__ == "__main__":
    main()
