#!/usr/bin/env python3
"""hf_quantize: an unquantized HF checkpoint folder written as a GPTQ or AWQ checkpoint, packed exactly as AutoGPTQ
(and GPTQModel's gptq_v2) and AutoAWQ (GEMM) publish theirs, plus the same model with every quantized layer
dequantized from the same integers (the float reference a runtime's logits are compared with).

  hf_quantize.py IN_DIR OUT_DIR --method gptq|awq [--bits 4|8] [--group-size N|-1] [--asym]
                 [--act-order] [--checkpoint-format gptq|gptq_v2] [--dequantized DIR]

Round-to-nearest with AutoGPTQ's Quantizer ranges (sym: +-max|w| around the middle zero point; asym: [min(w, 0),
max(w, 0)]), not GPTQ's Hessian search: the packing, not the rounding, is what a reader must get right. Scales are
float16 and each integer is computed with the float16 scale, so dequantized = scale * (q - zero) in float32 is the
exact float model. Packing (AutoGPTQ qlinear_cuda_old.pack / AutoAWQ WQLinear_GEMM.from_linear):
  GPTQ: qweight I32 [in / (32/bits), out], value of input i at bits * (i % (32/bits)) of word i // (32/bits);
        qzeros I32 [groups, out / (32/bits)], the same along the outputs, storing zero - 1 in the v1 "gptq" format;
        scales F16 [groups, out]; g_idx I32 [in] (group of each input; --act-order permutes it as desc_act does).
  AWQ:  qweight I32 [in, out / 8], the eight outputs of a word in the order 0 2 4 6 1 3 5 7 (value k at 4 k);
        qzeros I32 [groups, out / 8] the same; scales F16 [groups, out].
Only the Python standard library is used.
"""
import argparse
import json
import math
import os
import random
import shutil
import struct
import sys
from array import array

AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]


def read_safetensors(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, e in header.items():
        if name == "__metadata__":
            continue
        b, end = e["data_offsets"]
        out[name] = (e["dtype"], e["shape"], data[b:end])
    return out


def read_folder(folder):
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        shards = sorted(set(json.load(open(index))["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    tensors = {}
    for s in shards:
        tensors.update(read_safetensors(os.path.join(folder, s)))
    return tensors


def to_floats(dtype, raw):
    if dtype == "F32":
        a = array("f")
        a.frombytes(raw)
        return list(a)
    if dtype == "F16":
        return list(struct.unpack("<%de" % (len(raw) // 2), raw))
    if dtype == "BF16":
        h = array("H")
        h.frombytes(raw)
        return [struct.unpack("<f", struct.pack("<I", v << 16))[0] for v in h]
    sys.exit("hf_quantize: cannot read dtype %s" % dtype)


def f16(x):
    """x rounded to float16 (as torch's .half())."""
    return struct.unpack("<e", struct.pack("<e", x))[0]


def f32(x):
    return struct.unpack("<f", struct.pack("<f", x))[0]


def quantize_group(ws, bits, sym):
    """AutoGPTQ's Quantizer.find_params (per output channel, one group) then quantize; returns (scale, zero, qs)."""
    maxq = (1 << bits) - 1
    xmin, xmax = min(min(ws), 0.0), max(max(ws), 0.0)
    if sym:
        xmax = max(abs(xmin), xmax)
        if xmin < 0:
            xmin = -xmax
    if xmin == 0 and xmax == 0:
        xmin, xmax = -1.0, 1.0
    scale = f16((xmax - xmin) / maxq)
    if scale == 0:
        scale = f16(2.0 ** -14)
    zero = (maxq + 1) // 2 if sym else int(round(-xmin / scale))
    zero = min(max(zero, 0), maxq)
    qs = [min(max(int(round(w / scale)) + zero, 0), maxq) for w in ws]
    return scale, zero, qs


def pack_words(values, bits, shift_of):
    """values: list of ints (length multiple of 32 / bits) -> list of int32 words."""
    pf = 32 // bits
    words = []
    for w in range(len(values) // pf):
        word = 0
        for k in range(pf):
            word |= values[w * pf + k] << shift_of(k)
        words.append(word - (1 << 32) if word >= 1 << 31 else word)
    return words


def i32_bytes(words):
    return array("i", words).tobytes()


def quantize_linear(w, out_f, in_f, args, rng):
    """w: row-major [out, in] floats. Returns (tensors dict suffix -> (dtype, shape, bytes), dequantized floats)."""
    bits, method = args.bits, args.method
    gs = args.group_size if args.group_size > 0 else in_f
    if in_f % gs:
        sys.exit("hf_quantize: group size %d does not divide %d inputs" % (gs, in_f))
    n_groups = in_f // gs
    # Input order of the groups: act-order quantizes the inputs in a permuted order, group j = perm[j*gs:(j+1)*gs].
    perm = list(range(in_f))
    if args.act_order:
        rng.shuffle(perm)
    g_idx = [0] * in_f
    for pos, i in enumerate(perm):
        g_idx[i] = pos // gs
    scales = [[0.0] * out_f for _ in range(n_groups)]
    zeros = [[0] * out_f for _ in range(n_groups)]
    q = [[0] * in_f for _ in range(out_f)]
    deq = [0.0] * (out_f * in_f)
    for o in range(out_f):
        row = w[o * in_f:(o + 1) * in_f]
        for g in range(n_groups):
            members = perm[g * gs:(g + 1) * gs]
            scale, zero, qs = quantize_group([row[i] for i in members], bits, not args.asym)
            scales[g][o], zeros[g][o] = scale, zero
            # What a reader decodes: AutoGPTQ's v1 format stores zero - 1 masked, so a zero point of 0 reads back
            # as 2^bits (its kernels and vLLM's add the 1 back unmasked); the reference uses the decoded zero.
            decoded = ((zero - 1) & ((1 << bits) - 1)) + 1 if method == "gptq" and args.checkpoint_format == "gptq" else zero
            for i, v in zip(members, qs):
                q[o][i] = v
                deq[o * in_f + i] = f32(scale * (v - decoded))
    pf = 32 // bits
    maxq = (1 << bits) - 1
    t = {}
    if method == "gptq":
        seq = lambda k: bits * k
        qweight = []
        for r in range(in_f // pf):
            for o in range(out_f):
                word = 0
                for k in range(pf):
                    word |= q[o][r * pf + k] << (bits * k)
                qweight.append(word - (1 << 32) if word >= 1 << 31 else word)
        stored = lambda z: (z - 1) & maxq if args.checkpoint_format == "gptq" else z
        qzeros = []
        for g in range(n_groups):
            qzeros += pack_words([stored(z) for z in zeros[g]], bits, seq)
        t["qweight"] = ("I32", [in_f // pf, out_f], i32_bytes(qweight))
        t["qzeros"] = ("I32", [n_groups, out_f // pf], i32_bytes(qzeros))
        t["g_idx"] = ("I32", [in_f], i32_bytes(g_idx))
    else:
        awq = lambda k: 4 * k  # value k of the word at 4 k; the outputs go in in AWQ_ORDER
        qweight = []
        for i in range(in_f):
            for ob in range(0, out_f, 8):
                qweight += pack_words([q[ob + AWQ_ORDER[k]][i] for k in range(8)], 4, awq)
        qzeros = []
        for g in range(n_groups):
            for ob in range(0, out_f, 8):
                qzeros += pack_words([zeros[g][ob + AWQ_ORDER[k]] for k in range(8)], 4, awq)
        t["qweight"] = ("I32", [in_f, out_f // 8], i32_bytes(qweight))
        t["qzeros"] = ("I32", [n_groups, out_f // 8], i32_bytes(qzeros))
    t["scales"] = ("F16", [n_groups, out_f], struct.pack("<%de" % (n_groups * out_f), *[s for g in scales for s in g]))
    return t, deq


def write_safetensors(path, tensors):
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        offset += len(raw)
        blobs.append(raw)
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for b in blobs:
            f.write(b)


def copy_side_files(src, dst):
    os.makedirs(dst, exist_ok=True)
    for name in os.listdir(src):
        if name.endswith(".safetensors") or name == "model.safetensors.index.json":
            continue
        shutil.copy(os.path.join(src, name), os.path.join(dst, name))


def is_quantized_layer(name, shape):
    return name.startswith("model.layers.") and name.endswith("proj.weight") and len(shape) == 2


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--method", choices=["gptq", "awq"], required=True)
    p.add_argument("--bits", type=int, default=4, choices=[4, 8])
    p.add_argument("--group-size", type=int, default=128)
    p.add_argument("--asym", action="store_true", help="GPTQ: asymmetric ranges (sym false); AWQ is always asym")
    p.add_argument("--act-order", action="store_true", help="GPTQ desc_act: groups over a permutation of the inputs")
    p.add_argument("--checkpoint-format", default="gptq", choices=["gptq", "gptq_v2"])
    p.add_argument("--dequantized", help="also write the float32 model dequantized from the same integers here")
    p.add_argument("--seed", type=int, default=1)
    args = p.parse_args()
    if args.method == "awq" and (args.bits != 4 or args.act_order):
        sys.exit("hf_quantize: AWQ is 4 bits without act-order")
    if args.method == "awq":
        args.asym = True
    rng = random.Random(args.seed)
    tensors = read_folder(args.input)
    quantized, dequantized = {}, {}
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        if not is_quantized_layer(name, shape):
            quantized[name] = dequantized[name] = (dtype, shape, raw)
            continue
        out_f, in_f = shape
        parts, deq = quantize_linear(to_floats(dtype, raw), out_f, in_f, args, rng)
        prefix = name[: -len(".weight")]
        for suffix, t in parts.items():
            quantized[prefix + "." + suffix] = t
        dequantized[name] = ("F32", shape, array("f", deq).tobytes())
    config = json.load(open(os.path.join(args.input, "config.json")))
    if args.method == "gptq":
        config["quantization_config"] = {
            "bits": args.bits, "group_size": args.group_size, "damp_percent": 0.01, "desc_act": args.act_order,
            "static_groups": False, "sym": not args.asym, "true_sequential": True, "model_name_or_path": None,
            "model_file_base_name": "model", "quant_method": "gptq", "checkpoint_format": args.checkpoint_format}
    else:
        config["quantization_config"] = {"quant_method": "awq", "zero_point": True, "group_size": args.group_size,
                                         "bits": 4, "version": "gemm", "modules_to_not_convert": None}
    copy_side_files(args.input, args.output)
    json.dump(config, open(os.path.join(args.output, "config.json"), "w"), indent=2)
    write_safetensors(os.path.join(args.output, "model.safetensors"), quantized)
    if args.dequantized:
        copy_side_files(args.input, args.dequantized)
        write_safetensors(os.path.join(args.dequantized, "model.safetensors"), dequantized)


if __name__ == "__main__":
    main()
