#!/usr/bin/env python3
"""The Python side of tests/safetensors_test.cpp's interchange tests (no `safetensors` package:
the format is parsed and written by hand, as its specification reads).

  safetensors_reference.py check FILE EXPECTED.json
      FILE was written by tapegrad. EXPECTED holds {"names": [...] in order, "metadata": {...},
      "tensors": {NAME: {"dtype": "F32", "shape": [...], "values": [...]}}}, float values as
      float.hex strings (exact), int64 values as integers. Exits 1 naming the first difference.
  safetensors_reference.py write FILE
      Writes torch tensors' bytes (float32, float64, int64) with the header keys sorted by name,
      so that their order differs from the order of the data.
"""

import json
import struct
import sys

import numpy as np

NUMPY_DTYPES = {"F32": "<f4", "F64": "<f8", "I64": "<i8"}


def fail(message):
    print("safetensors_reference.py: " + message, file=sys.stderr)
    sys.exit(1)


def no_duplicates(pairs):
    keys = [k for k, _ in pairs]
    if len(set(keys)) != len(keys):
        fail("duplicate keys %r" % keys)
    return pairs  # a list of pairs: keeps the order of the file


def read(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    if n % 8 != 0:
        fail("header length %d is not a multiple of 8" % n)
    text = raw[8:8 + n].decode("utf-8")
    if text.rstrip(" ") != text.rstrip(" \t\r\n") or not text.rstrip(" ").endswith("}"):
        fail("the header is not JSON padded with spaces: %r" % text[-16:])
    header = json.loads(text, object_pairs_hook=no_duplicates)
    data = raw[8 + n:]
    names, metadata, tensors, offset = [], {}, {}, 0
    for i, (name, entry) in enumerate(header):
        if name == "__metadata__":
            if i != len(header) - 1:
                fail("__metadata__ is not the last key")
            metadata = dict(entry)
            continue
        entry = dict(entry)
        if sorted(entry) != ["data_offsets", "dtype", "shape"]:
            fail("entry %s has keys %r" % (name, sorted(entry)))
        begin, end = entry["data_offsets"]
        if begin != offset:
            fail("entry %s begins at %d, expected %d" % (name, begin, offset))
        offset = end
        array = np.frombuffer(data[begin:end], dtype=NUMPY_DTYPES[entry["dtype"]])
        tensors[name] = (entry["dtype"], array.reshape(entry["shape"]))
        names.append(name)
    if offset != len(data):
        fail("the data has %d bytes, the entries cover %d" % (len(data), offset))
    return names, metadata, tensors


def check(path, expected_path):
    expected = json.load(open(expected_path))
    names, metadata, tensors = read(path)
    if names != expected["names"]:
        fail("names %r, expected %r" % (names, expected["names"]))
    if metadata != expected["metadata"]:
        fail("metadata %r, expected %r" % (metadata, expected["metadata"]))
    for name, want in expected["tensors"].items():
        dtype, array = tensors[name]
        if dtype != want["dtype"] or list(array.shape) != want["shape"]:
            fail("%s is %s %r, expected %s %r" % (name, dtype, array.shape, want["dtype"],
                                                  want["shape"]))
        if dtype == "I64":
            values = np.array(want["values"], dtype="<i8")
        else:
            values = np.array([float.fromhex(v) for v in want["values"]]).astype(array.dtype)
        if values.tobytes() != array.tobytes():
            fail("%s holds %r, expected %r" % (name, array.ravel().tolist(), values.tolist()))


def write(path):
    import torch

    tensors = [  # (name, tensor) in the order of the data
        ("w", torch.arange(24, dtype=torch.float32).reshape(2, 3, 4) / 8 - 1),
        ("t", (torch.arange(6, dtype=torch.float64).reshape(2, 3) * -1.5).t()),  # not contiguous
        ("idx", torch.tensor([[3, -1], [2**40, -2**62]], dtype=torch.int64)),
        ("s", torch.tensor(2.5, dtype=torch.float64)),
        ("e", torch.zeros(0, 3, dtype=torch.float32)),
        ("r4", torch.arange(6, dtype=torch.int64).reshape(1, 2, 1, 3)),
        ("z", torch.zeros(2, 0, dtype=torch.float64)),
    ]
    codes = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64"}
    header, chunks, offset = {}, [], 0
    for name, t in tensors:
        chunk = t.contiguous().numpy().tobytes()  # C order, little-endian on this host
        header[name] = {"dtype": codes[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(chunk)]}
        chunks.append(chunk)
        offset += len(chunk)
    header["__metadata__"] = {"format": "pt", "tapegrad.config": json.dumps({"n_layer": 2})}
    text = json.dumps(header, sort_keys=True, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "check":
        check(sys.argv[2], sys.argv[3])
    elif len(sys.argv) == 3 and sys.argv[1] == "write":
        write(sys.argv[2])
    else:
        fail("usage: safetensors_reference.py check FILE EXPECTED.json | write FILE")
