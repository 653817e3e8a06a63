// Capability asked at load: every optional device op a model's forward calls (strata_model_arch_desc.device_op_need,
// ABI 1.12) must be offered by the device that runs it, else start-up stops naming the op, what in the file needs it
// and the device — never a failure at the first forward.
#pragma once

#include "plugin_host/plugin_handle.hpp"

#include <strata/plugin_abi.h>

#include <functional>
#include <string>

namespace strata {
class model_file;
}

namespace strata::engine {

// The ABI minor from which a device is told its pipeline stage (strata_device_create_args.pipeline_rank): one with
// memory of its own then gives each stage a device of its own; an older one's stages share one device.
inline constexpr uint32_t k_pipeline_rank_minor = 28;

// The device slot name of a strata_device_op ("rope_ext"), or nullptr for an id this runtime does not know.
const char *device_op_name(int32_t op);

// Whether `device` fills the slot of `op` (false for an unknown op).
bool device_offers(const strata_device_desc &device, int32_t op);

// Why `device` (its role: "device" or "offload_device") cannot run the model — an op the model needs that it lacks,
// named with what in the file needs it — or "" when it can. A model plugin without device_op_need needs nothing
// beyond the required slots. `path` is the model file, for the message.
// `skip_op` (a strata_device_op, or -1) is not asked here (the engine asks for it later, once it knows where it runs).
std::string missing_model_op(const strata_model_arch_desc &arch, const strata_model *model,
                             const strata_device_desc &device, const std::string &role, const std::string &path,
                             int32_t skip_op = -1);

// Why `device` cannot compute this model's weights (their types and shapes) or its attention and RoPE shapes, as
// its `supports` slot answers (ABI 1.17; without the slot: nothing), every refusal listed (8, then the count); "" when
// it can. A weight with an input order (GPTQ act-order) is refused on a device plugin built before ABI 1.19, which
// would not read it. Asked at load, before any weight is placed.
// ask_tensor (null: every tensor) picks the weights to ask about; attention is asked only when ask_attention (an
// offload device computes whole layers but never attends).
std::string unsupported_model_shapes(const strata_model_arch_desc &arch, const strata_model *model,
                                     const strata_model_hparams &hp, const plugins::handle<strata_device_desc> &device,
                                     strata_device *dev, const std::string &role, const std::string &path,
                                     const std::function<bool(const std::string &tensor)> &ask_tensor = nullptr,
                                     bool ask_attention = true);

// Why the model cannot keep its KV cache in kv_type (strata_kv_type) on `device`: "" for float32, which every device
// and model plugin holds; for another type, a device or model plugin built before ABI 1.20 (which lays KV out in
// float32 only) is refused by name, and the device's `supports` is asked (STRATA_SUPPORT_ATTENTION with kv_type).
std::string unsupported_kv_type(uint32_t kv_type, const strata_model_hparams &hp,
                                const plugins::handle<strata_device_desc> &device, strata_device *dev,
                                const plugins::handle<strata_model_arch_desc> &arch, const std::string &path);

// Throws strata::error when the file holds a weight with an input order (strata_tensor_view.input_order, ABI 1.19)
// and the model plugin `arch` was built before it: its views would drop the order.
void check_model_reads_input_order(const model_file &file, const plugins::handle<strata_model_arch_desc> &arch,
                                   const std::string &path);

// Why the model plugin `arch` cannot run `model` as pipeline ranks (each rank a stage with KV blocks of its layers
// only): no `pipeline_stages` slot or one that answers no (ABI 1.24), or a plugin built before `kv_first_layer`
// (ABI 1.25) — or "" when it can. `path` is the model file, for the message.
std::string unsupported_pipeline_ranks(const plugins::handle<strata_model_arch_desc> &arch, const strata_model *model,
                                       const std::string &path);

// Throws strata::error with missing_model_op's message when it has one.
void check_device_offers_model_ops(const strata_model_arch_desc &arch, const strata_model *model,
                                   const strata_device_desc &device, const std::string &role, const std::string &path,
                                   int32_t skip_op = -1);

} // namespace strata::engine
