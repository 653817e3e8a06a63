/* Strata plugin ABI — the only contract between the runtime (the "host") and a plugin.
 *
 * Rules (see docs/ARCHITECTURE.md, "ABI rules"):
 *  - Pure C. Only <stddef.h>/<stdint.h> types cross the boundary; no C++ exceptions, no STL.
 *  - Versioned: STRATA_ABI_MAJOR must be equal between host and plugin; the plugin's MINOR must be <= the host's.
 *    A minor bump only appends optional slots at the end of a descriptor or struct, never reorders.
 *  - Sized: every descriptor and argument struct starts with `struct_size`. Fields up to `required_size` (descriptor
 *    header) are required and must be non-NULL; later ("optional") slots are tested with STRATA_HAS_SLOT.
 *  - Errors: functions that can fail return a strata_code and fill a caller-owned strata_status (code + message).
 *    On error, outputs are left untouched. Release/destroy functions return void and never fail.
 *  - Ownership is written on every function: "caller owns" means the caller frees it with the named function;
 *    "borrowed" pointers stay valid only for the call unless stated.
 *  - One exported symbol per library: strata_plugin_entry (STRATA_PLUGIN_ENTRY_SYMBOL).
 */
#ifndef STRATA_PLUGIN_ABI_H
#define STRATA_PLUGIN_ABI_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define STRATA_ABI_MAJOR 1
#define STRATA_ABI_MINOR 30
#define STRATA_PLUGIN_ENTRY_SYMBOL "strata_plugin_entry"

#if defined(_WIN32)
#define STRATA_EXPORT __declspec(dllexport)
#else
#define STRATA_EXPORT __attribute__((visibility("default")))
#endif

/* True when the sized struct `p` (one whose first member is `struct_size`) contains `field` and it is set. */
#define STRATA_STRUCT_HAS(p, field)                                                                                   \
    ((p) != NULL && (size_t)((p)->struct_size) >= offsetof(__typeof__(*(p)), field) + sizeof((p)->field) &&          \
     (p)->field != NULL)

/* True when the sized struct `p` is large enough to contain `field` and that slot is set. */
#define STRATA_HAS_SLOT(p, field)                                                                         \
    ((p) != NULL && (size_t)((p)->header.struct_size) >= offsetof(__typeof__(*(p)), field) + sizeof((p)->field) && \
     (p)->field != NULL)

/* ------------------------------------------------------------------------------------------------------------ */
/* Status                                                                                                        */

typedef enum strata_code {
    STRATA_OK = 0,
    STRATA_ERR_INVALID_ARGUMENT = 1,
    STRATA_ERR_OUT_OF_MEMORY = 2,
    STRATA_ERR_UNSUPPORTED = 3,
    STRATA_ERR_IO = 4,
    STRATA_ERR_NOT_FOUND = 5,
    STRATA_ERR_CANCELLED = 6,
    STRATA_ERR_INTERNAL = 7,
    /* The engine is at its waiting-queue limit ([scheduler] max_waiting_requests); retry later. Returned by the
     * engine API's submit; nothing was queued. An HTTP frontend answers 503 with Retry-After. */
    STRATA_ERR_BUSY = 8,
} strata_code;

#define STRATA_STATUS_MESSAGE_MAX 512

/* Caller-owned; the callee writes `code` and a NUL-terminated `message` when it fails. */
typedef struct strata_status {
    int32_t code;
    char message[STRATA_STATUS_MESSAGE_MAX];
} strata_status;

/* ------------------------------------------------------------------------------------------------------------ */
/* Plugin kinds and the common descriptor header                                                                  */

typedef enum strata_kind {
    STRATA_KIND_MODEL_ARCH = 1,
    STRATA_KIND_QUANT = 2,
    STRATA_KIND_DEVICE = 3,
    STRATA_KIND_TIER = 4,
    STRATA_KIND_FRONTEND = 5,
} strata_kind;

typedef struct strata_descriptor_header {
    uint32_t struct_size;   /* sizeof the whole kind descriptor as the plugin was compiled */
    uint32_t required_size; /* offset just past the last required slot (host checks both) */
    uint32_t kind;          /* strata_kind */
    uint32_t reserved;
    const char *name; /* unique within a kind, e.g. "cpu", "llama", "q8_0"; static storage */
} strata_descriptor_header;

/* ------------------------------------------------------------------------------------------------------------ */
/* Configuration: plugins declare their keys; the host validates the TOML table named after the plugin and      */
/* hands a read-only view to create().                                                                           */

typedef enum strata_config_type {
    STRATA_CONFIG_BOOL = 1,
    STRATA_CONFIG_INT = 2,
    STRATA_CONFIG_FLOAT = 3,
    STRATA_CONFIG_STRING = 4,
    STRATA_CONFIG_BYTES = 5,       /* integer bytes or a unit string such as "16GiB" */
    STRATA_CONFIG_STRING_LIST = 6, /* array of strings */
} strata_config_type;

typedef struct strata_config_key {
    const char *name;          /* key within the plugin's table */
    uint32_t type;             /* strata_config_type */
    const char *default_value; /* textual default as TOML would write it, e.g. "0", "\"text\"" ; NULL = none */
    double min_value;          /* inclusive range for INT/FLOAT/BYTES when min_value < max_value */
    double max_value;
    const char *help;  /* one line for `runtime --help` */
    /* optional command-line flag, e.g. "--threads"; NULL = only --set. Since 1.8 it may name other spellings after
     * '|', e.g. "--threads|-t" (llama.cpp's short flag); a spelling written "!--no-x" sets a boolean key to the
     * opposite of what it says (vLLM's --disable-log-requests for a log_requests key). The first is the flag shown. */
    const char *flag;
    const char *choices; /* optional for STRING: '|'-separated allowed values, e.g. "text|json" */
} strata_config_key;

/* Read-only, borrowed view; valid during create() and for the lifetime of the created object. */
typedef struct strata_config_view {
    uint32_t struct_size;
    void *ctx;
    /* Each getter returns 1 and writes *out when the key is set (or has a default), else 0. */
    int32_t (*get_bool)(void *ctx, const char *key, int32_t *out);
    int32_t (*get_int)(void *ctx, const char *key, int64_t *out);
    int32_t (*get_float)(void *ctx, const char *key, double *out);
    /* *out is borrowed, NUL-terminated. */
    int32_t (*get_string)(void *ctx, const char *key, const char **out);
    /* Number of strings in a STRING_LIST key (0 when unset); get_list_item returns a borrowed string. */
    int32_t (*get_list_size)(void *ctx, const char *key);
    const char *(*get_list_item)(void *ctx, const char *key, int32_t index);
} strata_config_view;

/* ------------------------------------------------------------------------------------------------------------ */
/* Logging from plugins goes through the host so it lands on stderr with the rest.                                */

typedef enum strata_log_level { STRATA_LOG_DEBUG = 0, STRATA_LOG_INFO = 1, STRATA_LOG_WARN = 2, STRATA_LOG_ERROR = 3 } strata_log_level;

typedef struct strata_host_services {
    uint32_t struct_size;
    uint32_t host_abi_major;
    uint32_t host_abi_minor;
    void *ctx;
    void (*log)(void *ctx, int32_t level, const char *plugin, const char *message);
    /* Host topology facts a plugin may want (from hwloc). */
    int32_t (*physical_cores)(void *ctx);
    int32_t (*logical_cpus)(void *ctx);
    /* Writes the OS cpu ids of the PUs to pin worker i to; returns count written (<= cap). */
    int32_t (*pinning_cpus)(void *ctx, int32_t *cpus, int32_t cap);
} strata_host_services;

/* ------------------------------------------------------------------------------------------------------------ */
/* Tensors as seen by devices and model architectures                                                             */

struct strata_quant_desc;

/* Strata's own weight formats, since 1.18: not GGUF types (no GGUF file may hold them) but the layouts quantized
 * Hugging Face checkpoints are repacked into at load, numbered from 1024 so they never meet a ggml type id. The
 * group-integer formats hold GPTQ's and AWQ's groups: a block of G consecutive elements of a row with an f16 scale,
 * a u8 zero point and one 0 byte, then the unsigned integers (4 bits: per 32 elements, byte j holds element j low
 * and j + 16 high; 8 bits: one byte each); w = scale * (q - zero). */
enum {
    STRATA_TYPE_Q4_G32 = 1024,
    STRATA_TYPE_Q4_G64 = 1025,
    STRATA_TYPE_Q4_G128 = 1026,
    STRATA_TYPE_Q8_G32 = 1027,
    STRATA_TYPE_Q8_G64 = 1028,
    STRATA_TYPE_Q8_G128 = 1029,
    /* FP8 weights (compressed-tensors and fp8 checkpoints; new type values, no ABI change: a device that does not
     * know them refuses them in `supports`, one that computes through quant descriptors runs them). A block of B
     * consecutive elements of a row is an f32 scale, then B OCP e4m3 ("e4m3fn") bytes (sign, 4 exponent bits
     * biased by 7, 3 mantissa bits; no infinities, S.1111.111 is NaN); w = scale * e4m3(q). Per-tensor,
     * per-channel and 128x128-block scales all become the scale of each block. */
    STRATA_TYPE_F8_E4M3_B32 = 1030,
    STRATA_TYPE_F8_E4M3_B128 = 1031
};

/* Borrowed view of a 2-D (or 1-D: rows = 1) weight tensor in a quant format. Row-major: `rows` rows of `cols`
 * elements, each row `row_bytes` bytes long. `data` may live in any tier the device can read. */
typedef struct strata_tensor_view {
    uint32_t struct_size;
    uint32_t ggml_type; /* GGUF tensor type id, or one of Strata's own (STRATA_TYPE_*) */
    const struct strata_quant_desc *quant;
    const void *data;
    int64_t rows;
    int64_t cols;
    int64_t row_bytes;
    const char *name; /* borrowed, for messages */
    /* since 1.17, read only when struct_size covers them: the file's dimensions, ne[0] = cols, the rest multiplying
     * to rows, unused ones 1 (a 3-D expert tensor is [cols, rows per expert, experts]); n_dims 0 = unknown. A host
     * writes at most the caller's struct_size bytes of a view it is asked for. */
    int32_t n_dims;
    int64_t ne[4];
    /* since 1.19: NULL, or `cols` int32 values in the same memory as `data` (on the same tier, moved with it): the
     * weight's column j multiplies activation element input_order[j], a permutation of [0, cols). A GPTQ act-order
     * (desc_act) checkpoint quantizes its inputs in that order, so its groups are contiguous only after it. A device
     * built against 1.19 or later gathers x through it in matmul, or refuses the view (its `supports` and the op say
     * why); the host never hands such a view to an older device or model plugin. Set only on matrices. */
    const int32_t *input_order;
} strata_tensor_view;

/* ------------------------------------------------------------------------------------------------------------ */
/* quant: a block format                                                                                           */

typedef struct strata_quant_desc {
    strata_descriptor_header header;
    /* required */
    uint32_t ggml_type;   /* GGUF type id: 0 F32, 1 F16, 2 Q4_0, 8 Q8_0, 30 BF16 */
    uint32_t block_elems; /* elements per block (1 for F32/F16/BF16) */
    uint32_t block_bytes; /* bytes per block */
    uint32_t reserved;
    /* Reference conversions; n is a multiple of block_elems. Thread-safe, no allocation. */
    void (*dequantize_row)(const void *src, float *dst, int64_t n);
    void (*quantize_row)(const float *src, void *dst, int64_t n);
    /* Dot product of one quantized row with float activations, using the fastest kernel this CPU supports
     * (chosen once at load). Thread-safe, no allocation. */
    float (*dot_f32)(const void *row, const float *x, int64_t n);
    /* optional */
    const char *(*kernel_name)(void); /* e.g. "avx2+fma" or "scalar" */
    /* optional, since 1.1: integer dot path (llama.cpp's scheme). The activation vector is quantized once per
     * matmul into blocks of block_elems elements, act_block_bytes bytes each (0 = no integer path), and each weight
     * row is dotted with those blocks. A device uses the path only when act_block_bytes > 0 and both functions are
     * set (test the functions with STRATA_HAS_SLOT; act_block_bytes is valid whenever dot_act is). n is a multiple of
     * block_elems. Thread-safe, no allocation. */
    uint32_t act_block_bytes;
    uint32_t reserved_1_1; /* 0 */
    /* x (n floats) -> n / block_elems activation blocks at xq (caller-owned, n / block_elems * act_block_bytes
     * bytes, 16-byte aligned). The block layout is private to the quant plugin. */
    void (*quantize_activations)(const float *x, void *xq, int64_t n);
    /* Dot product of one quantized row with dequant(xq), xq as written by quantize_activations. */
    float (*dot_act)(const void *row, const void *xq, int64_t n);
    /* optional, since 1.2: one weight row against several activation vectors at once (batched matmul / prefill),
     * so each weight block is loaded and unpacked once for all of them. out[i] = dot_act(row, xq_i, n) bit for bit,
     * where xq_i = (const char *)xq + i * xq_stride_bytes, for i in [0, n_x); n_x >= 1, any count (the plugin
     * tiles it). Set only together with dot_act; a device falls back to dot_act when it is NULL (test with
     * STRATA_HAS_SLOT). Thread-safe, no allocation. */
    void (*dot_act_multi)(const void *row, const void *xq, int64_t xq_stride_bytes, int32_t n_x, int64_t n,
                          float *out);
    /* optional, since 1.10: damage check (llama.cpp's ggml_validate_row_data, --check-tensors). The element index
     * where the first block of the row starts whose scale or minimum (F32/F16/BF16: whose value) is NaN or infinite;
     * -1 when all are finite. n is a multiple of block_elems. Thread-safe, no allocation. */
    int64_t (*find_nonfinite)(const void *row, int64_t n);
    /* optional, since 1.22: the matmul as a GEMM over a block of weight rows. For r < n_rows and t < n_x,
     * out[t * out_stride + r] = the product of weight row r (at (const char *)w + r * row_bytes) with activation
     * vector t (at (const char *)xq + t * xq_stride_bytes, written by quantize_activations), n elements each. Each
     * output's bits depend only on its row and its vector, never on n_rows, n_x or where the two sit in the call, so
     * any split of a matmul into calls (threads, prompt chunks, one token at a time) gives the same bits. Its
     * arithmetic may differ from dot_act's: a device that uses gemm_act for a format uses it for every matmul on
     * that format, a single token included, and never mixes in dot_act / dot_act_multi there. Set only together
     * with dot_act (the same activation blocks). gemm_row_tile (>= 1) is the row count the format's GEMM kernel
     * (gemm_act or gemm_f32) computes at once: calls whose n_rows and row offsets are multiples of it are the fast
     * ones. Thread-safe, no allocation. */
    uint32_t gemm_row_tile;
    uint32_t reserved_1_22; /* 0 */
    void (*gemm_act)(const void *w, int64_t row_bytes, int64_t n_rows, const void *xq, int64_t xq_stride_bytes,
                     int32_t n_x, int64_t n, float *out, int64_t out_stride);
    /* optional, since 1.22: the same GEMM for a format without the integer path, on float activations:
     * out[t * out_stride + r] = row r . (x + t * x_stride), n elements. The same promise (an output's bits depend
     * only on its row and its vector) and the same rule (a device that uses it for a format uses it for every
     * matmul there, and never mixes in dot_f32). Thread-safe, no allocation. */
    void (*gemm_f32)(const void *w, int64_t row_bytes, int64_t n_rows, const float *x, int64_t x_stride,
                     int32_t n_x, int64_t n, float *out, int64_t out_stride);
} strata_quant_desc;

/* ------------------------------------------------------------------------------------------------------------ */
/* device: memory and the op kernels                                                                               */

typedef struct strata_device strata_device; /* opaque, plugin-owned */

typedef enum strata_rope_mode { STRATA_ROPE_PAIRS = 0, STRATA_ROPE_NEOX = 2 } strata_rope_mode;

/* The optional device slots a model may need (strata_model_arch_desc.device_op_need). */
typedef enum strata_device_op {
    STRATA_DEVICE_OP_ROPE_EXT = 1, /* rope_ext, since 1.11 */
    STRATA_DEVICE_OP_ADD_ROWS = 2, /* add_rows, since 1.12 */
    STRATA_DEVICE_OP_ROPE_SCALED = 3, /* rope_scaled, since 1.13 */
    STRATA_DEVICE_OP_SCALE = 4,       /* scale, since 1.14 */
    STRATA_DEVICE_OP_GEGLU = 5,       /* geglu, since 1.14 */
    STRATA_DEVICE_OP_SOFTCAP = 6,     /* softcap, since 1.14 */
    /* since 1.15: attention and paged_attention honour the softcap and window fields of their argument structs;
     * offered by a device whose descriptor reaches the 1.14 slots (it was built knowing those fields). */
    STRATA_DEVICE_OP_ATTENTION_TERMS = 7,
    STRATA_DEVICE_OP_MOE = 8,          /* moe_route, matmul_id and moe_combine, since 1.16 */
    STRATA_DEVICE_OP_SHARED_EXPERT = 9 /* sigmoid_gate_add, since 1.16 */
} strata_device_op;

/* What a device is asked before a model runs on it (since 1.17, strata_device_desc.supports), as ggml's supports_op:
 * the types and shapes of the model, not only which ops exist (strata_device_op). */
typedef enum strata_support_kind {
    STRATA_SUPPORT_WEIGHT = 1,    /* matmul, embedding and matmul_id over `weight` (its type, rows, cols, row_bytes) */
    STRATA_SUPPORT_ATTENTION = 2, /* attention and paged_attention with n_heads, n_kv_heads and head_dim */
    STRATA_SUPPORT_ROPE = 3       /* the rope ops over heads of head_dim with rot_dims rotated */
} strata_support_kind;

typedef struct strata_support_query {
    uint32_t struct_size;
    int32_t kind;                       /* strata_support_kind */
    const struct strata_tensor_view *weight; /* STRATA_SUPPORT_WEIGHT; its data pointer is not yet the device's */
    int32_t n_heads, n_kv_heads, head_dim, rot_dims;
    /* since 1.20, STRATA_SUPPORT_ATTENTION: the paged KV cache's element type (strata_kv_type). A device built
     * before 1.20 holds float32 KV only; the host asks it for nothing else. */
    uint32_t kv_type;
} strata_support_query;

/* The rotation of rope_scaled (since 1.13), ggml_rope_ext's terms in its float recipe: pair i of each head (i <
 * rot_dims / 2) has theta_extrap = pos * theta_base^(-2i/rot_dims) / freq_factors[i] (the power built by repeated float
 * multiplication) and theta_interp = freq_scale * theta_extrap. Without YaRN (ext_factor 0) the angle is theta_interp
 * and mscale = attn_factor; with it, ramp = 1 - clamp((i - corr_low) / max(0.001, corr_high - corr_low), 0, 1) times
 * ext_factor mixes the angle as theta_interp * (1 - ramp) + theta_extrap * ramp, and mscale = attn_factor * (1 + 0.1
 * ln(1 / freq_scale)). Both cos and sin are multiplied by mscale. */
typedef struct strata_rope_args {
    uint32_t struct_size;
    int32_t n_tokens, n_heads, head_dim, rot_dims;
    int32_t mode;               /* STRATA_ROPE_PAIRS or STRATA_ROPE_NEOX */
    const int32_t *positions;   /* n_tokens, host memory */
    float theta_base;
    float freq_scale;           /* 1 / the scaling factor; finite and > 0 */
    const float *freq_factors;  /* rot_dims / 2 floats in host memory, or NULL for all 1 */
    float attn_factor;          /* magnitude scale of cos and sin (LongRoPE's, YaRN's); finite and > 0 */
    float ext_factor;           /* YaRN's extrapolation mix, in [0, 1]; 0: none */
    float corr_low, corr_high;  /* YaRN's ramp over pair indices (ggml_rope_yarn_corr_dims) */
} strata_rope_args;

typedef struct strata_device_create_args {
    uint32_t struct_size;
    const strata_host_services *host;  /* borrowed; outlives the device */
    const strata_config_view *config;  /* borrowed; the plugin's own table */
    /* optional, since 1.27, read only when struct_size covers them: this process runs n_instances replicas of the
     * model (data parallel) and this device serves replica `instance` (0 <= instance < n_instances). Each takes its
     * own share of the hardware the table would give one instance: the cpu device the instance-th of n_instances
     * equal shares of its threads and cores, a GPU the device `instance` ordinals past the configured one. 0/0 and
     * 0/1 mean alone. A device that cannot give each replica a share of its own refuses with the reason. */
    int32_t instance;
    int32_t n_instances;
    /* optional, since 1.28, read only when struct_size covers them: the replica's layers are split into
     * n_pipeline_ranks pipeline stages in this process and this device serves stage `pipeline_rank` (0 <=
     * pipeline_rank < n_pipeline_ranks; 0/0 and 0/1 mean one stage). The stages of a step run one after another. A
     * device with memory of its own must give every stage a device of its own, and the host plans each stage with
     * the whole of what mem_info reports (cuda: the GPU instance * n_pipeline_ranks + pipeline_rank ordinals past the
     * configured one, refused when fewer are visible; the cpu device's separate_memory stand-in emulates one GPU
     * per create); a device computing in host memory serves the stages from its instance's share (they never run
     * at once), and the host plans 1/(n_pipeline_ranks * n_instances) of the RAM for each. A device of an older
     * minor is taken to share one device among the stages, 1/n_pipeline_ranks of it each. */
    int32_t pipeline_rank;
    int32_t n_pipeline_ranks;
} strata_device_create_args;

/* Attention over a contiguous per-layer KV cache for one sequence. K and V rows are n_kv_heads*head_dim floats,
 * `kv_row_stride` floats apart; query token t sits at absolute position positions[t] and attends to cache rows
 * 0..positions[t] (causal). */
typedef struct strata_attention_args {
    uint32_t struct_size;
    int32_t n_tokens;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;
    int32_t kv_row_stride;
    const int32_t *positions; /* n_tokens */
    const float *q;           /* n_tokens x n_heads*head_dim */
    const float *k_cache;
    const float *v_cache;
    float scale;
    float *out; /* n_tokens x n_heads*head_dim */
    /* since 1.14, read only when struct_size covers them; 0 = off */
    float softcap;  /* > 0: each score (after scale) becomes tanh(score * (1 / softcap)) * softcap (Gemma 2) */
    int32_t window; /* > 0: a query at position p attends only to positions > p - window (sliding window) */
} strata_attention_args;

/* The element type of the paged KV cache (since 1.20), numbered as GGUF/ggml tensor types where ggml has the type.
 * The FP8 types (since 1.21; OCP e4m3fn and e5m2, strata/float8.hpp: round to nearest even, saturating at the
 * largest finite value, vLLM's fp8 / fp8_e4m3 and fp8_e5m2 KV caches with scale 1), which ggml lacks, are numbered
 * from 1040. q8_0 (since 1.23) is ggml's block_q8_0, llama.cpp's -ctk/-ctv q8_0: groups of 32 values, a half scale
 * and 32 bytes (strata/kv_q8_0.hpp); a head must be whole groups (head_dim a multiple of 32). A device asked about a
 * type it does not know, or heads its type cannot split, answers "unsupported" (STRATA_SUPPORT_ATTENTION). */
typedef enum strata_kv_type {
    STRATA_KV_F32 = 0,
    STRATA_KV_F16 = 1,
    STRATA_KV_Q8_0 = 8, /* since 1.23 */
    STRATA_KV_BF16 = 30,
    STRATA_KV_FP8_E4M3 = 1040,
    STRATA_KV_FP8_E5M2 = 1041
} strata_kv_type;

/* since 1.5: the paged KV cache. The host keeps KV in blocks of `block_size` tokens. One block holds every layer:
 * for layer l, at byte offset l * 2 * block_size * R from the block's base (R: the bytes of one row of kv_dim values
 * of kv_type, kv_dim * 4 for float32, kv_dim / 32 * 34 for q8_0), block_size K rows of kv_dim values (kv_dim =
 * n_head_kv * head_dim), then block_size V rows. strata/kv_layout.hpp computes these offsets; host, models and devices all use it. Blocks of one sequence need
 * not be adjacent or in the same pool: the host passes each block's base address. Token slot p of a sequence is row
 * p % block_size of its block p / block_size. Index arrays are host memory; the block bases are addresses the device
 * can read and write (host addresses for the CPU device). kv_store converts float K/V rows to kv_type (round to
 * nearest even; FP8 saturates; q8_0 as ggml's reference quantizer); attention reads them back exactly. */
typedef struct strata_paged_kv {
    uint32_t struct_size;
    int32_t block_size;
    int32_t kv_dim;
    int32_t n_seqs;
    const int32_t *seq_block_start; /* n_seqs + 1: blocks of sequence s are block_base[seq_block_start[s] .. [s + 1]) */
    void *const *block_base;        /* seq_block_start[n_seqs] block base addresses */
    uint64_t layer_offset_bytes;    /* this layer's K rows within a block (V rows follow block_size rows on) */
    /* since 1.20, read only when struct_size covers it: strata_kv_type (0, float32, before). A device that answered
     * STRATA_SUPPORT_ATTENTION for it at load runs it; others refuse a type they do not know. */
    uint32_t kv_type;
} strata_paged_kv;

/* Writes K and V rows of n_tokens tokens into their slots: token t of sequence token_seq[t] at positions[t]. */
typedef struct strata_kv_store_args {
    uint32_t struct_size;
    int32_t n_tokens;
    const int32_t *token_seq; /* n_tokens, in [0, kv->n_seqs) */
    const int32_t *positions; /* n_tokens */
    const float *k;           /* n_tokens x kv_dim */
    const float *v;           /* n_tokens x kv_dim */
    const strata_paged_kv *kv;
} strata_kv_store_args;

/* Attention of n_tokens query tokens, each over its own sequence's slots 0..positions[t] (causal), through the block
 * table. Per token the result equals strata_attention_args over the same rows laid out contiguously, bit for bit. */
typedef struct strata_paged_attention_args {
    uint32_t struct_size;
    int32_t n_tokens;
    int32_t n_heads;
    int32_t n_kv_heads;
    int32_t head_dim;
    const int32_t *token_seq; /* n_tokens */
    const int32_t *positions; /* n_tokens */
    const float *q;           /* n_tokens x n_heads*head_dim */
    float scale;
    float *out;               /* n_tokens x n_heads*head_dim */
    const strata_paged_kv *kv;
    /* since 1.14, as in strata_attention_args; 0 = off */
    float softcap;
    int32_t window;
} strata_paged_attention_args;

/* Expert routing of a mixture-of-experts layer (since 1.16), as ggml's build_moe_ffn with softmax gating: per token,
 * probs = softmax of its n_expert router logits (ggml's float steps: the max, exponentials summed in double, one
 * multiply by the float reciprocal); ids = the k experts of largest probability, largest first (equal ones: lower id
 * first); weights = their probabilities, divided by their float sum (clamped below at 6.103515625e-5) when
 * normalize is 1 (Mixtral, Qwen3-MoE). All pointers are device memory. */
typedef struct strata_moe_route_args {
    uint32_t struct_size;
    int32_t n_tokens, n_expert, k;
    int32_t normalize;
    const float *logits; /* n_tokens x n_expert */
    int32_t *ids;        /* n_tokens x k */
    float *weights;      /* n_tokens x k */
} strata_moe_route_args;

/* A matmul over each token's selected experts (since 1.16, ggml's mul_mat_id): w holds n_expert matrices of w.rows /
 * n_expert rows one after another (a GGUF [cols, rows, n_expert] tensor); slot s of token t multiplies expert
 * ids[t * k + s] with x row t (x_per_slot 0) or row t * k + s (x_per_slot 1) into y row t * k + s. Each row of y is
 * what matmul gives for that expert's rows and that x row, bit for bit. x, ids and y are device memory. */
typedef struct strata_matmul_id_args {
    uint32_t struct_size;
    const strata_tensor_view *w;
    int32_t n_expert;
    int32_t n_tokens, k;
    const int32_t *ids;
    const float *x;
    int32_t x_per_slot;
    float *y;
} strata_matmul_id_args;

typedef enum strata_copy_kind { STRATA_COPY_H2D = 1, STRATA_COPY_D2H = 2, STRATA_COPY_D2D = 3 } strata_copy_kind;

typedef struct strata_device_desc {
    strata_descriptor_header header;
    /* required */
    /* 0 = cannot run on this machine; higher = better. No side effects. */
    int32_t (*score)(void);
    /* Caller owns the result; free with destroy. */
    strata_device *(*create)(const strata_device_create_args *args, strata_status *st);
    void (*destroy)(strata_device *dev);
    /* Device memory: caller owns, frees with mem_free. Host-addressable for the CPU device. */
    void *(*mem_alloc)(strata_device *dev, uint64_t bytes, strata_status *st);
    void (*mem_free)(strata_device *dev, void *ptr);
    /* Ops. All pointers are borrowed for the call; activations are row-major float, one row per token. No op
     * allocates memory. */
    /* y[t][r] = dot(W row r, x[t]) for t < n_tokens; x is n_tokens x W.cols, y is n_tokens x W.rows. */
    int32_t (*matmul)(strata_device *dev, const strata_tensor_view *w, const float *x, int32_t n_tokens, float *y,
                      strata_status *st);
    /* out[t] = dequantized row tokens[t] of the table. */
    int32_t (*embedding)(strata_device *dev, const strata_tensor_view *table, const int32_t *tokens, int32_t n_tokens,
                         float *out, strata_status *st);
    /* out[t] = x[t] / rms(x[t]) * weight (weight is F32, dim elements). out may equal x. */
    int32_t (*rms_norm)(strata_device *dev, const float *x, const float *weight, int32_t n_tokens, int32_t dim,
                        float eps, float *out, strata_status *st);
    /* Rotates the first rot_dims of each head of x in place (x is n_tokens x n_heads*head_dim). */
    int32_t (*rope)(strata_device *dev, float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                    int32_t rot_dims, const int32_t *positions, float theta_base, int32_t mode, strata_status *st);
    int32_t (*attention)(strata_device *dev, const strata_attention_args *args, strata_status *st);
    /* out = silu(gate) * up, n elements; out may equal gate. */
    int32_t (*swiglu)(strata_device *dev, const float *gate, const float *up, int64_t n, float *out, strata_status *st);
    /* out = a + b, n elements; out may equal a. */
    int32_t (*add)(strata_device *dev, const float *a, const float *b, int64_t n, float *out, strata_status *st);
    /* In-place softmax over each of n_rows rows of n_cols. */
    int32_t (*softmax)(strata_device *dev, float *x, int32_t n_rows, int32_t n_cols, strata_status *st);
    /* optional */
    int32_t (*thread_count)(strata_device *dev);
    /* optional, since 1.5 (test with STRATA_HAS_SLOT) */
    int32_t (*kv_store)(strata_device *dev, const strata_kv_store_args *args, strata_status *st);
    int32_t (*paged_attention)(strata_device *dev, const strata_paged_attention_args *args, strata_status *st);
    /* Copies between host memory and device memory (strata_copy_kind), complete when it returns. Without it the
     * device's memory is host memory and the host uses memcpy. */
    int32_t (*copy)(strata_device *dev, void *dst, const void *src, uint64_t bytes, int32_t kind, strata_status *st);
    /* 1 when the device's ops can read and write host memory directly (the CPU device), so KV blocks kept in a host
     * tier can be attended in place; 0: the host keeps a running sequence's blocks in device memory. Absent: 1 when
     * the device has no `copy` slot (its memory is host memory), else 0. */
    int32_t (*host_addressable)(strata_device *dev);
    /* optional, since 1.6 (test with STRATA_HAS_SLOT) */
    /* Page-locks host memory the host will copy from or to (staging buffers, tier regions) so copies run at the
     * link's speed (cudaHostRegister); host_unregister undoes it before the memory is freed. A device whose memory is
     * host memory leaves them NULL. */
    int32_t (*host_register)(strata_device *dev, void *ptr, uint64_t bytes, strata_status *st);
    void (*host_unregister)(strata_device *dev, void *ptr);
    /* Free and total bytes of device memory now (cudaMemGetInfo), for gpu_memory_utilization / limit_gpu_memory. */
    int32_t (*mem_info)(strata_device *dev, uint64_t *free_bytes, uint64_t *total_bytes, strata_status *st);
    /* optional, since 1.7 (test with STRATA_HAS_SLOT) */
    /* Per-layer ordering for a device that queues its ops (a GPU). fence_record marks the point after every op queued
     * so far and returns its id in *fence (ids grow; 0 is never returned). copy_after is `copy` ordered only after
     * that fence, not after the ops queued since, so a prefetch copy into a ring slot overlaps the layers queued
     * after the slot's last reader; it is complete on return and later ops are ordered after it. A fence too old to
     * track may be treated as a newer one (never an older one). Devices whose ops complete on return may leave both
     * NULL or offer them trivially (ids, and `copy`), as the CPU device does so the host's fence path runs there. */
    int32_t (*fence_record)(strata_device *dev, uint64_t *fence, strata_status *st);
    int32_t (*copy_after)(strata_device *dev, uint64_t fence, void *dst, const void *src, uint64_t bytes, int32_t kind,
                          strata_status *st);
    /* The device's PCI bus id, "dddd:bb:dd.f" (cudaDeviceGetPCIBusId), so the host can put pinned memory on the NUMA
     * node nearest it. Writes a NUL-terminated string of at most cap bytes; returns 1 when known, else 0. */
    int32_t (*pci_bus_id)(strata_device *dev, char *buf, uint32_t cap);
    /* optional, since 1.11 (test with STRATA_HAS_SLOT) */
    /* `rope` with llama.cpp's frequency terms (ggml_rope_ext without YaRN): pair i of each head turns by the angle
     * (pos * theta_base^(-2i/rot_dims) / freq_factors[i]) * freq_scale, in that float order. freq_factors: rot_dims/2
     * floats in host memory, like positions (a model's rope_freqs tensor, Llama 3.1+), or NULL for all 1;
     * freq_scale: 1 / the linear RoPE scaling factor, finite and > 0. With NULL and 1 it is `rope`, bit for bit. */
    int32_t (*rope_ext)(strata_device *dev, float *x, int32_t n_tokens, int32_t n_heads, int32_t head_dim,
                        int32_t rot_dims, const int32_t *positions, float theta_base, int32_t mode, float freq_scale,
                        const float *freq_factors, strata_status *st);
    /* optional, since 1.12 (test with STRATA_HAS_SLOT) */
    /* out[r * n_cols + i] = x[r * n_cols + i] + row[i] for n_rows rows (a bias added to every token, as ggml_add
     * broadcasts it): one float add per element, so every device gives the same bits. x, row and out are device
     * memory; out may be x. */
    int32_t (*add_rows)(strata_device *dev, const float *x, const float *row, int32_t n_rows, int32_t n_cols, float *out,
                        strata_status *st);
    /* optional, since 1.13 (test with STRATA_HAS_SLOT) */
    /* RoPE with every term of ggml_rope_ext (strata_rope_args), for YaRN and for LongRoPE's magnitude scale; with
     * attn_factor 1 and ext_factor 0 it is rope_ext, bit for bit. x is device memory; positions and freq_factors are
     * host memory. */
    int32_t (*rope_scaled)(strata_device *dev, float *x, const struct strata_rope_args *args, strata_status *st);
    /* optional, since 1.14 (test with STRATA_HAS_SLOT): element-wise ops of Gemma-style models, one float expression
     * per element in ggml's order, so every device gives the same bits up to its tanhf/expf. x, gate, up and out are
     * device memory of n floats; out may alias an input. */
    /* out[i] = x[i] * s (ggml_scale: Gemma's embedding scale sqrt(n_embd)). */
    int32_t (*scale)(strata_device *dev, const float *x, int64_t n, float s, float *out, strata_status *st);
    /* out[i] = gelu(gate[i]) * up[i] with GELU's tanh approximation in float, 0.5 g (1 + tanh(sqrt(2/pi) g (1 +
     * 0.044715 g^2))) (ggml_gelu_f32, ggml's CUDA GEGLU and PyTorch's gelu(approximate="tanh"); ggml's CPU backend
     * reads the same function from an F16 table). */
    int32_t (*geglu)(strata_device *dev, const float *gate, const float *up, int64_t n, float *out, strata_status *st);
    /* out[i] = tanh(x[i] * (1 / cap)) * cap, cap finite and > 0 (Gemma 2's final-logit soft-capping as ggml builds it:
     * scale, tanh, scale). */
    int32_t (*softcap)(strata_device *dev, const float *x, int64_t n, float cap, float *out, strata_status *st);
    /* optional, since 1.16 (test with STRATA_HAS_SLOT): the steps of a mixture-of-experts feed-forward. */
    int32_t (*moe_route)(strata_device *dev, const strata_moe_route_args *args, strata_status *st);
    int32_t (*matmul_id)(strata_device *dev, const strata_matmul_id_args *args, strata_status *st);
    /* out[t][i] = the sum over slots s < k, in slot order, of y[(t * k + s) * dim + i] * weights[t * k + s] (ggml's
     * mul by the weights, then adds: a float multiply, then a float add, per term). Device memory. */
    int32_t (*moe_combine)(strata_device *dev, const float *y, const float *weights, int32_t n_tokens, int32_t k,
                           int32_t dim, float *out, strata_status *st);
    /* acc[r][i] = acc[r][i] + y[r][i] * (silu(g) / g) with g = gate[r] and silu(g) = g / (1 + exp(-g)), each step a
     * float operation as ggml runs Qwen2-MoE's shared-expert gate (silu, div, mul, add). Device memory. */
    int32_t (*sigmoid_gate_add)(strata_device *dev, const float *y, const float *gate, int32_t n_rows, int32_t n_cols,
                                float *acc, strata_status *st);
    /* optional, since 1.17: 1 when the device computes what `q` describes, else 0 with the reason in why (why_cap
     * bytes, NUL-terminated): asked at load for every weight and the model's attention and RoPE shapes, so a type or
     * shape the device cannot run is a start-up error naming the tensor. Without the slot the host assumes yes. */
    int32_t (*supports)(strata_device *dev, const strata_support_query *q, char *why, uint32_t why_cap);
} strata_device_desc;

/* ------------------------------------------------------------------------------------------------------------ */
/* model_arch: recognises a model and runs its forward pass with a device's ops                                    */

typedef struct strata_model strata_model; /* opaque, plugin-owned */

/* Borrowed accessors over the model file, valid during create() and for the model's lifetime. */
typedef struct strata_model_source {
    uint32_t struct_size;
    void *ctx;
    /* Metadata getters: return 1 and write *out when the key exists with a compatible type, else 0. */
    int32_t (*get_u64)(void *ctx, const char *key, uint64_t *out); /* any unsigned/signed integer type */
    int32_t (*get_f64)(void *ctx, const char *key, double *out);   /* float32/float64 */
    int32_t (*get_str)(void *ctx, const char *key, const char **out); /* borrowed */
    /* Fills *out with the named weight; returns 1 when found, 0 otherwise. */
    int32_t (*get_tensor)(void *ctx, const char *name, strata_tensor_view *out);
    const strata_host_services *host;
    /* optional, since 1.7: the named weight as host memory the host device can compute on — the tier's mapping for
     * an offloaded weight, else the file's — for layers run on the host device (strata_forward_args.layer_on_host).
     * Returns 1 when the tensor exists, else 0. */
    int32_t (*get_host_tensor)(void *ctx, const char *name, strata_tensor_view *out);
    /* optional, since 1.13: the context one sequence may reach as the user set it (max_model_len), 0 when unset
     * (the model's trained context applies). A model whose forward depends on it reads it: Phi-3's LongRoPE picks its
     * long frequency factors when it exceeds the original context, as llama.cpp does with its context size. */
    int64_t n_ctx_seq;
    /* optional, since 1.29: tensor parallel (Megatron's split, vLLM's --tensor-parallel-size). When struct_size covers
     * these and tensor_parallel_size > 1, the model is created as rank tensor_parallel_rank's part: the host hands
     * every weight as that rank's part of it, as the whole model's tensor_split said (get_tensor's shapes are the
     * part's), the model reads the file's sizes and divides those it splits (head counts, FFN size) by the size (each
     * a multiple of it, else create fails saying so), and its forward sums the ranks' partial products with
     * strata_forward_args.all_reduce. Its classifier holds rank r's piece of the vocabulary (strata_split_piece of
     * n_vocab): forward writes each logits row's columns [first, first + count) only, n_logits rows of `count`
     * floats one after another, and the host joins the ranks' pieces. 0/0 and 0/1 mean the whole model. */
    int32_t tensor_parallel_rank;
    int32_t tensor_parallel_size;
    /* optional, since 1.30: the whole model's vocabulary (the whole model's n_vocab) for a model created as a part
     * (tensor_parallel_size > 1). A host whose struct covers this field sets it for every part, so a model created by
     * such a host may split its embedding by vocabulary (tensor_split: ROWS in one group of n_vocab, Megatron's and
     * vLLM's VocabParallelEmbedding): a part's embedding then holds rows [first, first + count) of strata_split_piece
     * only, and the part cannot count the vocabulary from it. Its forward looks up the tokens of its piece, writes
     * zeros for the others and sums the ranks' rows with all_reduce. A part without it (0) is refused. */
    int64_t tensor_parallel_n_vocab;
} strata_model_source;

typedef struct strata_model_hparams {
    uint32_t struct_size;
    int32_t n_vocab;
    int32_t n_ctx_train;
    int32_t n_embd;
    int32_t n_layer;
    int32_t n_head;
    int32_t n_head_kv;
    int32_t head_dim;
    int32_t n_ff;
    float norm_eps;
    float rope_theta;
    int32_t rope_dims;
    int32_t rope_mode;
} strata_model_hparams;

/* Everything one forward step needs; the host owns every buffer. */
typedef struct strata_forward_args {
    uint32_t struct_size;
    const strata_device_desc *device_ops;
    strata_device *device;
    const int32_t *tokens;    /* n_tokens */
    const int32_t *positions; /* n_tokens, absolute positions in the sequence */
    int32_t n_tokens;
    /* KV cache of this sequence: per layer, k[l] and v[l] each hold n_ctx rows of n_head_kv*head_dim floats. */
    float *const *k_cache;
    float *const *v_cache;
    int32_t n_ctx;
    /* Workspace of at least workspace_bytes(n_tokens) bytes (see strata_model_arch_desc). */
    void *workspace;
    uint64_t workspace_size;
    /* Logits of the last token (n_vocab floats). */
    float *logits;
    /* Called before layer l's weights are used, so the host can wait for their prefetch; may be NULL. */
    int32_t (*layer_begin)(void *user, int32_t layer, strata_status *st);
    void *user;
    /* optional, since 1.5: a batch of several sequences over the paged KV cache. When struct_size covers these and
     * paged_kv != NULL, k_cache/v_cache/n_ctx are ignored: token t belongs to sequence token_seq[t] at positions[t],
     * its K/V go into that sequence's blocks (device kv_store) and it attends through them (paged_attention). Logits
     * are written for the n_logits tokens listed in logits_tokens (indexes into the batch), n_logits x n_vocab floats
     * at `logits`, in that order. The workspace for n_tokens (workspace_bytes) covers every n_logits <= n_tokens. */
    const strata_paged_kv *paged_kv; /* layer_offset_bytes ignored: the model sets it per layer */
    const int32_t *token_seq;        /* n_tokens */
    const int32_t *logits_tokens;    /* n_logits indexes into the batch, strictly ascending */
    int32_t n_logits;                /* 0 is valid: a step whose prefill chunks all end inside their prompts */
    /* optional, since 1.7: hybrid placement (llama.cpp's -ngl). When struct_size covers these and host_device_ops and
     * layer_on_host are set, each layer l with layer_on_host[l] != 0 runs its weight ops on host_device from the
     * weights' host copies (strata_model_source.get_host_tensor), while its KV store and attention run on `device`,
     * where the paged KV blocks are; activations cross with the device's `copy`. The residual stream stays in
     * host_workspace across consecutive host layers. Only the paged path supports it. */
    const strata_device_desc *host_device_ops;
    strata_device *host_device;
    const uint8_t *layer_on_host; /* n_layer flags */
    void *host_workspace;         /* host memory, at least workspace_bytes(n_tokens) bytes */
    uint64_t host_workspace_size;
    /* optional, since 1.17: experts on the host (llama.cpp's --n-cpu-moe / -ot exps=CPU). When struct_size covers it
     * and it is set with host_device_ops, host_device and host_workspace, each layer l with experts_on_host[l] != 0
     * that runs on `device` computes its routed experts on host_device from the host copies of its expert tensors
     * (get_host_tensor): the router's logits and the normed activations go over, the routing, the selected experts'
     * matmuls and their weighted sum run there, the sum comes back. Attention, the router and a shared expert stay
     * on `device`. layer_on_host may then be NULL (no whole layer on the host). Only the paged path supports it. */
    const uint8_t *experts_on_host; /* n_layer flags */
    /* optional, since 1.24: a pipeline stage (pipeline parallel: each rank runs a contiguous range of the layers).
     * When struct_size covers these and layer_end > 0, forward runs layers [layer_first, layer_end) only
     * (0 <= layer_first < layer_end <= n_layer), on the paged path. A stage that starts past layer 0 takes the residual
     * stream from hidden_in (n_tokens x n_embd floats in the device's memory: what the stage before wrote to its
     * hidden_out) instead of embedding the tokens; a stage that ends before n_layer writes the residual stream after
     * its last layer to hidden_out (n_tokens x n_embd floats, the device's memory) and computes no logits (`logits`
     * may then be NULL). Tokens, positions, token_seq and paged_kv are the step's, as for the whole model; each layer
     * keeps its own KV offset in the blocks. A model answers pipeline_stages = 1 when it honours these; layer_end = 0
     * (or a struct without them) runs every layer. */
    int32_t layer_first;
    int32_t layer_end;
    const float *hidden_in;
    float *hidden_out;
    /* optional, since 1.25: KV of a layer range. When struct_size covers it, the paged KV blocks hold layers
     * kv_first_layer, kv_first_layer + 1, ... only (a pipeline rank keeps the KV of its own layers): layer l's rows
     * are at kv_layout::layer_offset(l - kv_first_layer). 0 <= kv_first_layer <= layer_first; 0 (or a struct without
     * it) is the whole model's block, every layer from 0. */
    int32_t kv_first_layer;
    /* optional, since 1.29: tensor parallel. For a model created as a rank's part
     * (strata_model_source.tensor_parallel_size > 1) the host sets all_reduce: forward calls it on each partial sum
     * (a decoder: the n_tokens x n_embd outputs of attn_output and ffn_down, and since 1.30 the embedding rows of a
     * vocabulary split and a mixture's weighted sum of its experts, in the memory of the device that computed them)
     * before their biases and the residual; it returns when `data` holds the sum of every rank's `data`, the
     * same bits on every rank, or an error (a rank failed: the others return too, never wait for ever). */
    int32_t (*all_reduce)(void *user, float *data, int64_t n, strata_status *st);
    void *all_reduce_user;
} strata_forward_args;

/* since 1.29: how a tensor-parallel rank takes its part of a weight (strata_model_arch_desc.tensor_split). The view's
 * rows (STRATA_SPLIT_ROWS) or columns (STRATA_SPLIT_COLS; a bias vector's elements) are n_parts consecutive groups of
 * part[0], part[1], ... (one group, unless the tensor is fused: Phi-3's attn_qkv holds q, k and v rows); each group is
 * cut into tensor_parallel_size pieces (strata_split_piece) and rank r holds piece r of every group, in order.
 * STRATA_SPLIT_NONE: every rank holds the whole tensor. */
enum { STRATA_SPLIT_NONE = 0, STRATA_SPLIT_ROWS = 1, STRATA_SPLIT_COLS = 2 };

/* Rank r's piece of a group of n rows (or columns) split among `size` ranks: [n * r / size, n * (r + 1) / size),
 * equal pieces when size divides n, else pieces one apart (none empty while n >= size). Heads and FFN columns are
 * multiples of the size (a model refuses other sizes); a vocabulary need not be. */
static inline void strata_split_piece(int64_t n, int32_t rank, int32_t size, int64_t *first, int64_t *count) {
    if (size < 1) size = 1;
    const int64_t a = n * rank / size;
    const int64_t b = n * (rank + 1) / size;
    *first = a;
    *count = b - a;
}

typedef struct strata_tensor_split {
    uint32_t struct_size;
    int32_t axis;    /* STRATA_SPLIT_* */
    int32_t n_parts; /* 1..4 */
    /* since 1.30 (reserved, 0, before): the groups part[0..n_parts) follow one another `repeat` times along the axis
     * (0 or 1: once). A 3-D expert tensor [cols, rows, n_expert] splits its rows as n_expert repeats of one group of
     * `rows`, so rank r holds piece r of every expert's rows; its columns split as a matrix's (every row's). A model
     * asks for it only from a host whose strata_model_source covers tensor_parallel_n_vocab (1.30). */
    int32_t repeat;
    int64_t part[4];
} strata_tensor_split;

typedef struct strata_model_arch_desc {
    strata_descriptor_header header;
    /* required */
    /* 1 when this plugin handles GGUF general.architecture `arch`. */
    int32_t (*matches)(const char *arch);
    /* Reads hyperparameters and resolves every weight; caller owns the result (destroy). */
    strata_model *(*create)(const strata_model_source *src, strata_status *st);
    void (*destroy)(strata_model *model);
    void (*get_hparams)(const strata_model *model, strata_model_hparams *out);
    /* Bytes of workspace forward() needs for a batch of n_tokens. */
    uint64_t (*workspace_bytes)(const strata_model *model, int32_t n_tokens);
    int32_t (*forward)(strata_model *model, const strata_forward_args *args, strata_status *st);
    /* optional */
    /* Number of weight tensors and their views, in use order (for the memory planner). */
    int32_t (*tensor_count)(const strata_model *model);
    int32_t (*tensor_at)(const strata_model *model, int32_t index, strata_tensor_view *out, int32_t *layer);
    /* optional, since 1.12 */
    /* The optional device ops this model's forward calls, so the host refuses at start-up a device (or offload
     * device) that lacks one, naming the op, what in the file needs it and the device, instead of failing at the
     * first forward. For index = 0, 1, ...: returns 1 and writes *op (a strata_device_op) and *what (borrowed, valid
     * for the model's lifetime, e.g. "tensor 'blk.0.attn_q.bias'"), or 0 past the last need. */
    int32_t (*device_op_need)(const strata_model *model, int32_t index, int32_t *op, const char **what);
    /* optional, since 1.17 */
    /* 1 when forward honours strata_forward_args.experts_on_host for this model (a mixture of experts that can run
     * its routed experts on the host device), else 0. Without the slot the host never asks for it. */
    int32_t (*host_experts)(const strata_model *model);
    /* optional, since 1.24 */
    /* 1 when forward honours strata_forward_args.layer_first / layer_end / hidden_in / hidden_out for this model (it
     * can run as pipeline stages), else 0. Without the slot the host never splits it. */
    int32_t (*pipeline_stages)(const strata_model *model);
    /* optional, since 1.29 */
    /* 1 when this model can be created as tensor-parallel parts (strata_model_source.tensor_parallel_rank/size),
     * says how each weight splits (tensor_split) and its forward calls strata_forward_args.all_reduce, else 0 (the
     * decoder answers 0 for a mixture of experts when the host is older than 1.30 and cannot cut stacked experts).
     * Asked of the whole model, before any part is created. Without the slot the host never splits it. */
    int32_t (*tensor_parallel)(const strata_model *model);
    /* How tensor_at's weight `index` is split among tensor-parallel ranks (asked of the whole model, with
     * tensor_parallel). Returns STRATA_OK, or an error for an index out of range. */
    int32_t (*tensor_split)(const strata_model *model, int32_t index, strata_tensor_split *out);
} strata_model_arch_desc;

/* ------------------------------------------------------------------------------------------------------------ */
/* tier: a place to keep bytes (pinned RAM, NUMA RAM, NVMe)                                                        */

typedef struct strata_tier strata_tier; /* opaque, plugin-owned */

typedef struct strata_tier_create_args {
    uint32_t struct_size;
    const strata_host_services *host;
    const strata_config_view *config;
    uint64_t capacity_bytes; /* budget the planner gives this tier */
    /* optional, since 1.26, read only when struct_size covers it: the pipeline rank this instance serves (0 alone).
     * Ranks in one process each create their own instance from the same table, so a tier backed by a named
     * resource keeps one per rank (nvme: its file `path` for rank 0, `path`.rank<r> for rank r). Since 1.27 the
     * rank counts across data-parallel replicas too: replica d's pipeline rank r is d * pipeline ranks + r. */
    int32_t rank;
} strata_tier_create_args;

typedef struct strata_tier_desc {
    strata_descriptor_header header;
    /* required */
    strata_tier *(*create)(const strata_tier_create_args *args, strata_status *st); /* caller owns; destroy */
    void (*destroy)(strata_tier *tier); /* frees every region still live */
    uint64_t (*capacity)(strata_tier *tier);
    /* Reserves `bytes`; writes an opaque region id. Exhaustion is STRATA_ERR_OUT_OF_MEMORY, never a crash. */
    int32_t (*region_alloc)(strata_tier *tier, uint64_t bytes, uint64_t *region, strata_status *st);
    void (*region_free)(strata_tier *tier, uint64_t region);
    /* Synchronous copies in and out of a region (thread-safe for distinct or identical regions). */
    int32_t (*write)(strata_tier *tier, uint64_t region, uint64_t offset, const void *src, uint64_t bytes,
                     strata_status *st);
    int32_t (*read)(strata_tier *tier, uint64_t region, uint64_t offset, void *dst, uint64_t bytes, strata_status *st);
    /* optional */
    /* Host address of a region when the CPU can compute on it in place, else NULL. */
    void *(*map)(strata_tier *tier, uint64_t region);
    /* optional, since 1.4: the most bytes an instance with this configuration could hold, known before one exists
     * (the RAM and locked-memory limit for pinned RAM, the bound NUMA nodes' memory, free space where an nvme file
     * goes). args->capacity_bytes is ignored. Writes a short NUL-terminated reason ("RLIMIT_MEMLOCK", "free space in
     * /mnt/nvme") into why (why_cap bytes). Returns 0 when unknown, or when the configuration is invalid (create()
     * then reports why). The planner fills and checks tiers against it without knowing any tier by name. */
    uint64_t (*capacity_limit)(const strata_tier_create_args *args, char *why, uint32_t why_cap);
} strata_tier_desc;

/* ------------------------------------------------------------------------------------------------------------ */
/* Engine API: the only thing a frontend calls                                                                     */

typedef struct strata_engine strata_engine; /* opaque, host-owned */
typedef uint64_t strata_request_id;

typedef enum strata_finish_reason {
    STRATA_FINISH_NONE = 0,   /* still running */
    STRATA_FINISH_STOP = 1,   /* EOS or a stop sequence */
    STRATA_FINISH_LENGTH = 2, /* max_tokens or max_model_len reached */
    STRATA_FINISH_CANCELLED = 3,
    STRATA_FINISH_ERROR = 4,
} strata_finish_reason;

typedef struct strata_sampling_params {
    uint32_t struct_size;
    float temperature; /* 0 = greedy */
    int32_t top_k;     /* <= 0: off */
    float top_p;       /* 1: off */
    float min_p;       /* 0: off */
    float repetition_penalty; /* 1: off */
    int32_t repetition_last_n;
    uint64_t seed;
    int32_t max_tokens;
    int32_t ignore_eos;
} strata_sampling_params;

/* One event per generated token, then a final one with finish != NONE. Called on an engine thread; `piece` is
 * borrowed for the call. Must not block for long and must not call back into the engine except cancel(). */
typedef struct strata_token_event {
    uint32_t struct_size;
    strata_request_id id;
    int32_t token;       /* -1 on the final event */
    const char *piece;   /* UTF-8 bytes of this token (may be a partial character), length piece_len */
    int32_t piece_len;
    int32_t finish;      /* strata_finish_reason */
    const char *error;   /* when finish == ERROR */
    /* optional, since 1.4: only when the request asked for logprobs (strata_request.logprobs != 0); test with
     * struct_size before reading. Log-probabilities are of the model's raw output (log-softmax of the logits before
     * penalties, temperature and the filters), as vLLM reports them by default. */
    float logprob;                /* of `token` */
    int32_t n_top;                /* entries in top_tokens/top_logprobs, most likely first; 0 when not asked */
    const int32_t *top_tokens;    /* borrowed for the call */
    const float *top_logprobs;    /* borrowed for the call */
} strata_token_event;

typedef void (*strata_token_callback)(void *user, const strata_token_event *ev);

typedef struct strata_request {
    uint32_t struct_size;
    const char *prompt;    /* UTF-8 text, or NULL when prompt_tokens is set */
    const int32_t *prompt_tokens;
    int32_t n_prompt_tokens;
    int32_t add_bos;       /* text prompts: add the model's special tokens (BOS, and EOS) where its vocabulary asks for
                            * them, as llama.cpp's add_special; special-token texts in the prompt become those tokens */
    strata_sampling_params sampling;
    strata_token_callback on_token;
    void *user;
    /* optional, since 1.4: read only when struct_size covers them (older frontends get 0 = off). They live here,
     * not in strata_sampling_params, because that struct is embedded by value above and cannot grow. */
    float presence_penalty;  /* OpenAI semantics, [-2, 2]: subtracted once from each token already seen */
    float frequency_penalty; /* OpenAI semantics, [-2, 2]: subtracted once per earlier occurrence */
    int32_t logprobs;        /* top-n alternatives to report per token (<= 20), 0 = none, -1 = only the chosen token's */
    /* optional, since 1.9: constrained decoding. Every generated token keeps the output a prefix of a text the
     * constraint accepts, and end-of-generation tokens are allowed only where the text is complete (as llama.cpp's
     * grammars and vLLM's guided decoding). A constraint the engine cannot build (a GBNF syntax error, a JSON-schema
     * keyword it does not implement) makes submit fail with STRATA_ERR_INVALID_ARGUMENT naming it. */
    int32_t constraint_kind; /* strata_constraint_kind */
    const char *constraint;  /* GBNF text, a JSON schema or a regex (UTF-8, NUL-terminated); NULL for ANY_JSON_OBJECT */
} strata_request;

typedef enum strata_constraint_kind {
    STRATA_CONSTRAINT_NONE = 0,
    STRATA_CONSTRAINT_GBNF = 1,            /* llama.cpp's grammar format, root rule "root" */
    STRATA_CONSTRAINT_JSON_SCHEMA = 2,     /* a JSON Schema the output must be an instance of */
    STRATA_CONSTRAINT_ANY_JSON_OBJECT = 3, /* OpenAI's response_format json_object */
    STRATA_CONSTRAINT_REGEX = 4,           /* the whole output matches this regular expression (vLLM's guided_regex) */
} strata_constraint_kind;

typedef struct strata_request_result {
    uint32_t struct_size;
    int32_t finish;          /* strata_finish_reason */
    int32_t n_prompt_tokens;
    int32_t n_completion_tokens;
    double prefill_seconds;
    double decode_seconds;
} strata_request_result;

typedef struct strata_engine_stats {
    uint32_t struct_size;
    int64_t requests_running;
    int64_t requests_waiting;
    int64_t requests_finished;
    int64_t prompt_tokens_total;
    int64_t generation_tokens_total;
    /* optional, since 1.5 (read only when struct_size covers them). KV tiers are indexed by strata_kv_tier. */
    int64_t kv_block_size;          /* tokens per block */
    int64_t kv_blocks_total[3];     /* blocks each tier can hold (0: tier not configured) */
    int64_t kv_blocks_used[3];      /* held by sequences or cached prefixes */
    int64_t kv_blocks_cached[3];    /* of used: prefix-cache blocks no sequence holds (reclaimable) */
    int64_t preemptions_swap;       /* preemptions by mode */
    int64_t preemptions_recompute;
    int64_t prefix_queries;         /* prompt tokens looked up in the prefix cache (whole blocks), as vLLM counts */
    int64_t prefix_hits[3];         /* of those, tokens found in each tier */
    int64_t kv_bytes_swapped_out;   /* device -> lower tiers */
    int64_t kv_bytes_swapped_in;    /* lower tiers -> device */
} strata_engine_stats;

typedef enum strata_kv_tier { STRATA_KV_DEVICE = 0, STRATA_KV_HOST = 1, STRATA_KV_NVME = 2 } strata_kv_tier;

typedef struct strata_engine_api {
    uint32_t struct_size;
    strata_engine *engine;
    /* Queues a request; the ids of the prompt tokens are fixed at submit. Writes *id. */
    int32_t (*submit)(strata_engine *e, const strata_request *req, strata_request_id *id, strata_status *st);
    /* Blocks until the request finishes; fills *result (may be NULL). Each id may be waited once. */
    int32_t (*wait)(strata_engine *e, strata_request_id id, strata_request_result *result, strata_status *st);
    /* Asks the request to stop; its final event reports CANCELLED. Safe from any thread, also from callbacks. */
    void (*cancel)(strata_engine *e, strata_request_id id);
    void (*get_stats)(strata_engine *e, strata_engine_stats *out);
    /* Tokenize: writes up to cap ids, sets *n to the full count (call again with a bigger buffer if > cap). Gives the
     * ids submit() would use for the same text and add_bos. */
    int32_t (*tokenize)(strata_engine *e, const char *text, int32_t add_bos, int32_t *ids, int32_t cap, int32_t *n,
                        strata_status *st);
    /* Detokenize: writes up to cap bytes (not NUL-terminated), sets *n to the full length. */
    int32_t (*detokenize)(strata_engine *e, const int32_t *ids, int32_t n_ids, char *text, int32_t cap, int32_t *n,
                          strata_status *st);
    const char *(*model_name)(strata_engine *e);
    int32_t (*max_model_len)(strata_engine *e);
    /* optional, since 1.3 (test with STRATA_STRUCT_HAS(api, model_metadata)) */
    /* A string metadata value of the model file (e.g. "tokenizer.chat_template"), borrowed for the engine's
     * lifetime; NULL when absent or not a string. */
    const char *(*model_metadata)(strata_engine *e, const char *key);
    /* optional, since 1.8 (STRATA_STRUCT_HAS(api, model_argument)): the model as the user named it (the --model or
     * `serve MODEL` argument, or the config's path, as written), for frontends that serve it under that id as vLLM
     * does; "" when unknown. Borrowed for the engine's lifetime. */
    const char *(*model_argument)(strata_engine *e);
    /* optional, since 1.9 (STRATA_STRUCT_HAS(api, apply_chat_template)): the prompt text of a chat, rendered by the
     * model's chat template as transformers' apply_chat_template (--chat-template, else the model file's own).
     * request_json: {"messages": [...OpenAI messages...], "tools": [...], "add_generation_prompt": true,
     * "chat_template_kwargs": {...}, "chat_template": "a template name or text"} (all but messages optional).
     * Writes up to cap bytes of the text (not NUL-terminated) and sets *n to its full length (call again with a
     * bigger buffer if > cap). Submit the text with add_bos = 1: a BOS the template wrote is already removed when
     * the vocabulary adds its own (llama.cpp's rule). A bad request or a template error (its raise_exception text,
     * a syntax error with line and column) is STRATA_ERR_INVALID_ARGUMENT with the message. */
    int32_t (*apply_chat_template)(strata_engine *e, const char *request_json, char *text, int32_t cap, int32_t *n,
                                   strata_status *st);
    /* optional, since 1.9: the source of the chat template a request would use by default ("" for the default one,
     * or a name such as "tool_use"); NULL when the model has no such template. Borrowed for the engine's life. For
     * frontends that recognise a family's tool-call format from its template. */
    const char *(*chat_template_source)(strata_engine *e, const char *name);
} strata_engine_api;

/* ------------------------------------------------------------------------------------------------------------ */
/* frontend: how users reach the engine                                                                            */

typedef struct strata_frontend strata_frontend; /* opaque, plugin-owned */

typedef struct strata_frontend_create_args {
    uint32_t struct_size;
    const strata_host_services *host;
    const strata_config_view *config;
    const strata_engine_api *engine; /* borrowed; outlives the frontend */
    const strata_sampling_params *default_sampling; /* from the [sampling] table */
} strata_frontend_create_args;

typedef struct strata_frontend_desc {
    strata_descriptor_header header;
    /* required */
    strata_frontend *(*create)(const strata_frontend_create_args *args, strata_status *st); /* caller owns */
    /* Serves until done or request_stop(); returns the process exit code (0 = success). */
    int32_t (*run)(strata_frontend *fe, strata_status *st);
    void (*request_stop)(strata_frontend *fe); /* thread-safe, async-signal-safe not required */
    void (*destroy)(strata_frontend *fe);
} strata_frontend_desc;

/* ------------------------------------------------------------------------------------------------------------ */
/* The plugin library                                                                                              */

typedef struct strata_plugin_info {
    uint32_t struct_size;
    uint32_t abi_major; /* STRATA_ABI_MAJOR the plugin was built with */
    uint32_t abi_minor;
    uint32_t n_descriptors;
    const char *name;        /* library name, e.g. "cpu" */
    const char *version;     /* plugin's own version, e.g. "0.1.0" */
    const char *license;     /* SPDX id */
    const char *description; /* one line */
    /* Descriptors this library provides (static storage). Each points to a kind descriptor starting with
     * strata_descriptor_header. */
    const strata_descriptor_header *const *descriptors;
    /* Config keys of the plugin's TOML table `[<name>]` (static storage). */
    const strata_config_key *config_keys;
    uint32_t n_config_keys;
} strata_plugin_info;

/* The one exported symbol. Returns static storage (never freed), or NULL with *st filled when the plugin cannot
 * run against this host. Must not throw; must be cheap (no device initialisation here). */
typedef const strata_plugin_info *(*strata_plugin_entry_fn)(const strata_host_services *host, strata_status *st);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* STRATA_PLUGIN_ABI_H */
