#!/usr/bin/env python3
"""Writes the seed corpora fuzz/corpus/npy/ and fuzz/corpus/attention/ (python3 stdlib only).

Small valid and near-valid inputs; the fuzzers mutate them. The generated files are committed,
so run this only after changing it:  python3 fuzz/make_corpus.py
The attention input layout is documented at the top of fuzz/attention_fuzz.cpp.
"""

import os
import random
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
SEP = b"|npy|"


def npy(shape, descr="<f8", values=None, major=1, fortran="False", dict_text=None,
        data=None, rng=None):
    """A .npy file as numpy writes it: header padded to a 64-byte data offset."""
    if dict_text is None:
        dims = ", ".join(str(d) for d in shape) + ("," if len(shape) == 1 else "")
        dict_text = "{'descr': '%s', 'fortran_order': %s, 'shape': (%s), }" % (
            descr, fortran, dims)
    if data is None:
        n = 1
        for d in shape:
            n *= d
        if values is None:
            rng = rng or random.Random(0)
            values = [round(rng.gauss(0, 0.5), 3) for _ in range(n)]
        fmt = "<%d%s" % (n, "f" if descr == "<f4" else "d")
        data = struct.pack(fmt, *values)
    header = dict_text.encode("latin-1" if major < 3 else "utf-8")
    length_bytes = 2 if major == 1 else 4
    prefix = 8 + length_bytes
    pad = (-(prefix + len(header) + 1)) % 64
    header += b" " * pad + b"\n"
    length = struct.pack("<H" if major == 1 else "<I", len(header))
    return b"\x93NUMPY" + bytes([major, 0]) + length + header + data


def npy_cases():
    good = npy((2, 3))
    c = {
        "f8_2x3": good,
        "f4_3": npy((3,), "<f4"),
        "f8_scalar": npy((), values=[1.5]),
        "f8_v2_2x2x2": npy((2, 2, 2), major=2),
        "f4_v3_rank4": npy((1, 2, 1, 2), "<f4", major=3),
        "empty_0x3": npy((0, 3)),
        "empty_2x0x4": npy((2, 0, 4)),
        "double_quotes_no_comma": npy((2,), dict_text='{"shape": (2,), "descr": "<f8", '
                                      '"fortran_order": False}'),
        "fortran_true": npy((2, 3), fortran="True"),
        "big_endian": npy((2,), ">f8", data=b"\0" * 16),
        "int32": npy((2,), "<i4", data=b"\0" * 8),
        "structured": npy((1,), dict_text="{'descr': [('a', '<f8')], 'fortran_order': False, "
                          "'shape': (1,), }", data=b"\0" * 8),
        "truncated_data": good[:-5],
        "trailing_data": good + b"\0\0\0\0",
        "header_len_lies": good[:8] + struct.pack("<H", 0xFFFF) + good[10:],
        "bad_magic": b"\x93NUMPZ" + good[6:],
        "version_4": good[:6] + bytes([4, 0]) + good[8:],
        "version_1_1": good[:6] + bytes([1, 1]) + good[8:],
        "preamble_only": good[:9],
        "no_newline": good[:10] + good[10:good.index(b"\n")] + b" " + good[good.index(b"\n") + 1:],
        "unterminated_string": npy((2,), dict_text="{'descr': '<f8, 'fortran_order': False, "
                                   "'shape': (2,), }", data=b"\0" * 16),
        "deep_nesting": npy((), dict_text="{'descr': '<f8', 'fortran_order': False, 'shape': "
                            "((((((((((1,),),),),),),),),),), }", data=b"\0" * 8),
        "dim_overflow": npy((), dict_text="{'descr': '<f8', 'fortran_order': False, 'shape': "
                            "(99999999999999999999,), }", data=b""),
        "size_overflow": npy((), dict_text="{'descr': '<f8', 'fortran_order': False, 'shape': "
                             "(4294967296, 4294967296), }", data=b""),
        "negative_dim": npy((), dict_text="{'descr': '<f8', 'fortran_order': False, 'shape': "
                            "(-1, 2), }", data=b""),
        "rank5": npy((1, 1, 1, 1, 1)),
        "missing_key": npy((), dict_text="{'descr': '<f8', 'shape': (), }", data=b"\0" * 8),
        "duplicate_key": npy((), dict_text="{'descr': '<f8', 'descr': '<f8', "
                             "'fortran_order': False, 'shape': (), }", data=b"\0" * 8),
        "unknown_key": npy((), dict_text="{'descr': '<f8', 'fortran_order': False, "
                           "'shape': (), 'x': None}", data=b"\0" * 8),
        "shape_list": npy((), dict_text="{'descr': '<f8', 'fortran_order': False, "
                          "'shape': [2], }", data=b"\0" * 16),
        "float_dim": npy((), dict_text="{'descr': '<f8', 'fortran_order': False, "
                         "'shape': (2.0,), }", data=b"\0" * 16),
        "empty_file": b"",
    }
    return c


# ---- attention: two option bytes, then X, W_Q, W_K, W_V[, W_O] joined by SEP -------------------

def opts(heads=1, window=0, no_scale=False, rope=False, f32=False, base=0, out_exists=False,
         out_is_file=False):
    b0 = (heads - 1) | (window << 2)
    b1 = (no_scale << 0) | (rope << 1) | (f32 << 2) | (base << 3) | (out_exists << 6) | (
        out_is_file << 7)
    return bytes([b0, b1])


def attention_case(seed, X, dk, dv, wo=True, descr="<f8", **kw):
    rng = random.Random(seed)
    D = X[-1]
    files = [npy(X, descr, rng=rng), npy((D, dk), descr, rng=rng), npy((D, dk), descr, rng=rng),
             npy((D, dv), descr, rng=rng)]
    if wo:
        files.append(npy((dv, dv), descr, rng=rng))
    return files, opts(**kw)


def attention_cases():
    c = {}

    def add(name, files, o):
        c[name] = o + SEP.join(files)

    add("single_2d", *attention_case(1, (5, 4), 4, 3, wo=False))
    add("single_2d_wo_window2", *attention_case(2, (6, 4), 4, 3, window=2))
    add("single_3d_rope", *attention_case(3, (2, 4, 3), 4, 2, wo=False, rope=True))
    add("multi_h2_3d_wo_rope", *attention_case(4, (2, 4, 3), 4, 4, heads=2, rope=True, base=1))
    add("multi_h4_2d_f32_noscale", *attention_case(5, (5, 4), 8, 4, heads=4, no_scale=True,
                                                   f32=True))
    add("multi_h3_f4_window1", *attention_case(6, (1, 3, 2), 6, 3, descr="<f4", heads=3,
                                               window=1, out_exists=True))
    add("multi_h2_t70", *attention_case(7, (1, 70, 2), 2, 2, wo=False, heads=2, window=4))
    files, o = attention_case(8, (4, 3), 4, 2)
    files[2] = npy((3, 2), rng=random.Random(8))  # W_K does not match W_Q
    add("shape_mismatch", files, o)
    files, o = attention_case(9, (4, 3), 4, 2)
    files[3] = b""  # W_V.npy absent
    add("missing_w_v", files, o)
    files, o = attention_case(10, (3, 2), 2, 2, wo=False)
    files[0] = npy((3, 2), values=[0.1, float("nan"), 0.3, 0.4, 0.5, 0.6])
    add("nan_in_x", files, o)
    files, o = attention_case(11, (3, 2), 2, 2, wo=False, f32=True)
    files[0] = npy((3, 2), values=[1e300, 1, 2, 3, 4, 5])
    add("f32_out_of_range", files, o)
    add("rope_odd_head", *attention_case(12, (3, 4), 6, 2, wo=False, heads=3, rope=True))
    add("rope_base_zero", *attention_case(13, (3, 4), 4, 2, wo=False, rope=True, base=5))
    add("out_is_file", *attention_case(14, (3, 2), 2, 2, wo=False, out_is_file=True))
    files, o = attention_case(15, (4, 2), 2, 2, wo=False, no_scale=True)
    files[0] = npy((4, 2), values=[30.0, -20.0, 25.0, 40.0, -35.0, 10.0, 50.0, -45.0])
    add("big_logits", files, o)
    files, o = attention_case(16, (3, 2), 2, 2)
    files[4] = npy((3, 3), rng=random.Random(16))  # W_O must be (d_v, d_v)
    add("bad_w_o", files, o)
    return c


def write(folder, cases):
    shutil.rmtree(folder, ignore_errors=True)
    os.makedirs(folder)
    for name, data in sorted(cases.items()):
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)


def main():
    write(os.path.join(HERE, "corpus", "npy"), npy_cases())
    write(os.path.join(HERE, "corpus", "attention"), attention_cases())


if __name__ == "__main__":
    main()
