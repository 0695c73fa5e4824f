"""The bytes of a .safetensors file, for the seed-corpus scripts (python3 stdlib only)."""

import json
import struct

FORMATS = {"F32": "<%df", "F64": "<%dd", "I64": "<%dq"}


def safetensors(tensors, metadata=None, header=None, data=None, pad=True, header_edit=None):
    """tensors: [(name, dtype, shape, values)] in data order. header_edit(entries) changes the
    header's entries in place; header (text) and data (bytes) replace what tensors give."""
    entries, chunks, offset = {}, [], 0
    for name, dtype, shape, values in tensors:
        chunk = struct.pack(FORMATS[dtype] % len(values), *values)
        entries[name] = {"dtype": dtype, "shape": list(shape),
                         "data_offsets": [offset, offset + len(chunk)]}
        chunks.append(chunk)
        offset += len(chunk)
    if metadata:
        entries["__metadata__"] = metadata
    if header_edit:
        header_edit(entries)
    text = header if header is not None else json.dumps(entries, separators=(",", ":"))
    text = text.encode("utf-8")
    if pad:
        text += b" " * (-len(text) % 8)
    body = data if data is not None else b"".join(chunks)
    return struct.pack("<Q", len(text)) + text + body
