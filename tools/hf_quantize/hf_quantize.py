#!/usr/bin/env python3
"""hf_quantize: an unquantized HF checkpoint folder written as a GPTQ, AWQ or FP8 checkpoint, packed exactly as
AutoGPTQ (and GPTQModel's gptq_v2), AutoAWQ (GEMM), llm-compressor (compressed-tensors float-quantized) and AutoFP8 /
transformers' FineGrainedFP8 (fp8) publish theirs, plus the same model with every quantized layer dequantized from
the same integers (the float reference a runtime's logits are compared with).

  hf_quantize.py IN_DIR OUT_DIR --method gptq|awq [--bits 4|8] [--group-size N|-1] [--asym]
                 [--act-order] [--checkpoint-format gptq|gptq_v2] [--dequantized DIR]
  hf_quantize.py IN_DIR OUT_DIR --method compressed-tensors|fp8 --scheme tensor|channel|block [--block-size N]
                 [--static-activations] [--scale-dtype F32|BF16] [--dequantized DIR]

Round-to-nearest with AutoGPTQ's Quantizer ranges (sym: +-max|w| around the middle zero point; asym: [min(w, 0),
max(w, 0)]), not GPTQ's Hessian search: the packing, not the rounding, is what a reader must get right. Scales are
float16 and each integer is computed with the float16 scale, so dequantized = scale * (q - zero) in float32 is the
exact float model. Packing (AutoGPTQ qlinear_cuda_old.pack / AutoAWQ WQLinear_GEMM.from_linear):
  GPTQ: qweight I32 [in / (32/bits), out], value of input i at bits * (i % (32/bits)) of word i // (32/bits);
        qzeros I32 [groups, out / (32/bits)], the same along the outputs, storing zero - 1 in the v1 "gptq" format;
        scales F16 [groups, out]; g_idx I32 [in] (group of each input; --act-order permutes it as desc_act does).
  AWQ:  qweight I32 [in, out / 8], the eight outputs of a word in the order 0 2 4 6 1 3 5 7 (value k at 4 k);
        qzeros I32 [groups, out / 8] the same; scales F16 [groups, out].
FP8 (e4m3, rounded to nearest even, saturating at 448, as torch's float8_e4m3fn cast after the quantizers' clamp):
  scale = max |w| / 448 over the tensor, each output channel or each N x N block (stored as --scale-dtype), q =
  e4m3(w / scale), dequantized = scale * e4m3 value in float32.
  compressed-tensors: weight F8_E4M3 [out, in]; weight_scale [1] / [out, 1] / [ceil(out/N), ceil(in/N)];
        input_scale [1] with --static-activations; config_groups with one scheme targeting Linear, lm_head ignored.
  fp8:  weight F8_E4M3 [out, in]; weight_scale [] (tensor) or weight_scale_inv [ceil(out/N), ceil(in/N)] (block,
        weight_block_size [N, N]); input_scale [] with --static-activations (activation_scheme static).
Only the Python standard library is used.
"""
import bisect
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


def e4m3_value(q):
    """The value of an e4m3 (e4m3fn) byte; None for NaN."""
    e, m = (q >> 3) & 15, q & 7
    if e == 15 and m == 7:
        return None
    v = m * 2.0 ** -9 if e == 0 else (8 + m) * 2.0 ** (e - 10)
    return -v if q & 0x80 else v


E4M3_POSITIVE = [e4m3_value(q) for q in range(0x7f)]  # codes 0..0x7e in increasing order


def to_e4m3(v):
    """v rounded to the nearest e4m3 code, ties to the even code (the even mantissa), saturating at +-448."""
    sign = 0x80 if v < 0 or (v == 0 and math.copysign(1.0, v) < 0) else 0
    a = abs(v)
    if a >= 448.0:
        return sign | 0x7e
    i = bisect.bisect_left(E4M3_POSITIVE, a)
    if E4M3_POSITIVE[i] == a:
        return sign | i
    lo, hi = E4M3_POSITIVE[i - 1], E4M3_POSITIVE[i]
    if a - lo < hi - a or (a - lo == hi - a and (i - 1) % 2 == 0):
        return sign | (i - 1)
    return sign | i


def bf16(x):
    """x rounded to bfloat16 (nearest even), as a float."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    u = (u + 0x7fff + ((u >> 16) & 1)) & 0xffff0000
    return struct.unpack("<f", struct.pack("<I", u))[0]


def scale_bytes(values, dtype):
    if dtype == "F32":
        return array("f", values).tobytes()
    return array("H", [struct.unpack("<I", struct.pack("<f", v))[0] >> 16 for v in values]).tobytes()


def quantize_fp8_linear(w, out_f, in_f, args, rng):
    """w: row-major [out, in] floats. Returns (tensors dict suffix -> (dtype, shape, bytes), dequantized floats)."""
    n = args.block_size
    if args.scheme == "tensor":
        tiles = lambda o, i: 0
        n_scales, scale_shape = 1, ([1] if args.method == "compressed-tensors" else [])
    elif args.scheme == "channel":
        tiles = lambda o, i: o
        n_scales, scale_shape = out_f, [out_f, 1]
    else:
        cols = (in_f + n - 1) // n
        tiles = lambda o, i: (o // n) * cols + i // n
        n_scales, scale_shape = ((out_f + n - 1) // n) * cols, [(out_f + n - 1) // n, cols]
    amax = [0.0] * n_scales
    for o in range(out_f):
        for i in range(in_f):
            t = tiles(o, i)
            amax[t] = max(amax[t], abs(w[o * in_f + i]))
    round_scale = f32 if args.scale_dtype == "F32" else bf16
    scales = [round_scale(a / 448.0) if a > 0 else 1.0 for a in amax]
    q = bytearray(out_f * in_f)
    deq = [0.0] * (out_f * in_f)
    for o in range(out_f):
        for i in range(in_f):
            s = scales[tiles(o, i)]
            code = to_e4m3(w[o * in_f + i] / s)
            q[o * in_f + i] = code
            deq[o * in_f + i] = f32(e4m3_value(code) * s)
    scale_name = "weight_scale_inv" if args.method == "fp8" and args.scheme == "block" else "weight_scale"
    t = {"weight": ("F8_E4M3", [out_f, in_f], bytes(q)),
         scale_name: (args.scale_dtype, scale_shape, scale_bytes(scales, args.scale_dtype))}
    if args.static_activations:
        t["input_scale"] = ("F32", [1] if args.method == "compressed-tensors" else [],
                            array("f", [f32(rng.uniform(0.01, 0.1))]).tobytes())
    return t, deq


def fp8_quantization_config(args):
    if args.method == "fp8":
        c = {"quant_method": "fp8", "activation_scheme": "static" if args.static_activations else "dynamic"}
        if args.scheme == "block":
            c["weight_block_size"] = [args.block_size, args.block_size]
        return c
    weights = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": args.scheme, "dynamic": False,
               "group_size": None, "block_structure": [args.block_size, args.block_size] if args.scheme == "block" else None,
               "actorder": None, "observer": "minmax", "observer_kwargs": {}}
    if args.static_activations:
        acts = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "tensor", "dynamic": False,
                "group_size": None, "block_structure": None, "actorder": None, "observer": "minmax", "observer_kwargs": {}}
    else:
        acts = {"num_bits": 8, "type": "float", "symmetric": True, "strategy": "token", "dynamic": True,
                "group_size": None, "block_structure": None, "actorder": None, "observer": None, "observer_kwargs": {}}
    return {"quant_method": "compressed-tensors", "format": "float-quantized", "quantization_status": "compressed",
            "global_compression_ratio": 1.5, "ignore": ["lm_head"], "kv_cache_scheme": None, "sparsity_config": {},
            "version": "0.9.4",
            "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights, "input_activations": acts,
                                          "output_activations": None}}}


ITEM_SIZE = {"F8_E4M3": 1, "F16": 2, "BF16": 2, "I32": 4, "F32": 4}


def write_safetensors(path, tensors):
    """As the safetensors library writes: the larger element types first (then by name), so every tensor's data is
    aligned to its elements."""
    header, offset, blobs = {}, 0, []
    for name in sorted(tensors, key=lambda n: (-ITEM_SIZE[tensors[n][0]], n)):
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
    """The blocks' linear layers (Mixtral's experts are w1 / w2 / w3); routers and the shared expert's gate stay float,
    as the quantizers leave them."""
    return (name.startswith("model.layers.") and name.endswith(("proj.weight", ".w1.weight", ".w2.weight", ".w3.weight"))
            and len(shape) == 2)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("input")
    p.add_argument("output")
    p.add_argument("--method", choices=["gptq", "awq", "compressed-tensors", "fp8"], required=True)
    p.add_argument("--scheme", choices=["tensor", "channel", "block"], default="channel",
                   help="FP8: one scale per tensor, per output channel or per block")
    p.add_argument("--block-size", type=int, default=128, help="FP8 --scheme block: N x N blocks")
    p.add_argument("--static-activations", action="store_true", help="FP8: static activation scales (input_scale)")
    p.add_argument("--scale-dtype", choices=["F32", "BF16"], default="F32", help="FP8: the scale tensors' dtype")
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
    fp8 = args.method in ("compressed-tensors", "fp8")
    if args.method == "fp8" and args.scheme == "channel":
        sys.exit("hf_quantize: fp8 checkpoints have per-tensor or block scales (use compressed-tensors for channel)")
    rng = random.Random(args.seed)
    tensors = read_folder(args.input)
    quantized, dequantized = {}, {}
    for name in sorted(tensors):
        dtype, shape, raw = tensors[name]
        if not is_quantized_layer(name, shape):
            quantized[name] = dequantized[name] = (dtype, shape, raw)
            continue
        out_f, in_f = shape
        quantize = quantize_fp8_linear if fp8 else quantize_linear
        parts, deq = quantize(to_floats(dtype, raw), out_f, in_f, args, rng)
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
    elif fp8:
        config["quantization_config"] = fp8_quantization_config(args)
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
