#!/usr/bin/env python3
"""Counts a GGUF file's tensors per GGML type ("q4_K 24, q6_K 5, f32 9"): reads only the header.
With --diff A.gguf B.gguf: every tensor whose type differs between the two files (exit 1 when any does)."""
import struct
import sys

TYPE_NAMES = {0: "f32", 1: "f16", 2: "q4_0", 3: "q4_1", 6: "q5_0", 7: "q5_1", 8: "q8_0", 10: "q2_K", 11: "q3_K",
              12: "q4_K", 13: "q5_K", 14: "q6_K", 15: "q8_K", 20: "iq4_nl", 23: "iq4_xs", 30: "bf16"}
SCALAR = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def tensor_types(path):
    """{tensor name: GGML type name} of a GGUF file."""
    with open(path, "rb") as f:
        data = f.read(64 << 20)
    pos = 0

    def take(fmt):
        nonlocal pos
        values = struct.unpack_from("<" + fmt, data, pos)
        pos += struct.calcsize("<" + fmt)
        return values[0] if len(values) == 1 else values

    def string():
        nonlocal pos
        n = take("Q")
        pos += n
        return data[pos - n:pos].decode("utf-8", "replace")

    def skip_value(t):
        nonlocal pos
        if t == 8:
            string()
        elif t == 9:
            item, n = take("I"), take("Q")
            if item in SCALAR:
                pos += SCALAR[item] * n
            else:
                for _ in range(n):
                    skip_value(item)
        else:
            pos += SCALAR[t]

    if data[:4] != b"GGUF":
        sys.exit(f"{path}: not a GGUF file")
    pos = 4
    take("I")
    n_tensors, n_kv = take("Q"), take("Q")
    for _ in range(n_kv):
        string()
        skip_value(take("I"))
    types = {}
    for _ in range(n_tensors):
        tensor = string()
        n_dims = take("I")
        pos += 8 * n_dims
        t = take("I")
        take("Q")
        types[tensor] = TYPE_NAMES.get(t, f"type{t}")
    return types


def main(args):
    if args[0] == "--diff":
        a, b = tensor_types(args[1]), tensor_types(args[2])
        differ = [f"{k}: {a.get(k)} vs {b.get(k)}" for k in sorted(set(a) | set(b)) if a.get(k) != b.get(k)]
        print(f"{len(a)} tensors, {len(differ)} of other types" + "".join("\n  " + d for d in differ))
        sys.exit(1 if differ else 0)
    counts = {}
    for name in tensor_types(args[0]).values():
        counts[name] = counts.get(name, 0) + 1
    print(", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])))


if __name__ == "__main__":
    main(sys.argv[1:])
