#!/usr/bin/env python3
"""Halves the MiniLM checkpoint for the trip to a device machine, and restores it there.

A device call carries at most 64 MiB; the fp32 safetensors file alone is 91 MB. The GPU encoder
runs in fp16 anyway, and the GPU-vs-CPU comparisons run both sides on the same rounded weights,
so the round trip loses nothing those checks depend on (the reference-vector test stays on CPU
hosts with the original file).
  minilm_f16.py pack   SRC.safetensors DST.safetensors   fp32 -> fp16
  minilm_f16.py unpack SRC.safetensors DST.safetensors   fp16 -> fp32
"""
import json
import struct
import sys

try:
    import numpy as np
except ImportError:  # slower, same bytes
    np = None


def cast(data, to):
    if np is not None:
        src, dst = (np.float32, np.float16) if to == "F16" else (np.float16, np.float32)
        return np.frombuffer(data, dtype=src).astype(dst).tobytes()
    src, dst = ("f", "e") if to == "F16" else ("e", "f")
    n = len(data) // struct.calcsize(src)
    return struct.pack(f"<{n}{dst}", *struct.unpack(f"<{n}{src}", data))


def convert(src, dst, to):
    with open(src, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    base = 8 + n
    out, parts, offset = {}, [], 0
    for name, t in header.items():
        if name == "__metadata__":
            continue
        begin, end = t["data_offsets"]
        data, dtype = blob[base + begin:base + end], t["dtype"]
        if dtype == ("F32" if to == "F16" else "F16"):  # integer tensors (position_ids) travel as they are
            data, dtype = cast(data, to), to
        out[name] = {"dtype": dtype, "shape": t["shape"], "data_offsets": [offset, offset + len(data)]}
        parts.append(data)
        offset += len(data)
    text = json.dumps(out).encode()
    text += b" " * ((8 - len(text) % 8) % 8)  # keeps tensor data 8-byte aligned
    with open(dst, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for p in parts:
            f.write(p)


if __name__ == "__main__":
    if len(sys.argv) != 4 or sys.argv[1] not in ("pack", "unpack"):
        sys.exit(__doc__)
    convert(sys.argv[2], sys.argv[3], "F16" if sys.argv[1] == "pack" else "F32")
