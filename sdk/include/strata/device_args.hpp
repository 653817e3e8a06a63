// Header-only helpers for device plugins reading the op argument structs: the forms every device shares, so two
// devices cannot read the same ABI differently.
#pragma once

#include <strata/plugin.hpp>
#include <strata/plugin_abi.h>

#include <cmath>
#include <cstddef>

namespace strata::plugin {

// rope_ext's arguments (ABI 1.11) as the rope_scaled struct (ABI 1.13) with neutral magnitude and no YaRN, so a device
// implements rope_ext by calling its rope_scaled.
inline strata_rope_args rope_ext_args(int32_t n_tokens, int32_t n_heads, int32_t head_dim, int32_t rot_dims,
                                      const int32_t *positions, float theta_base, int32_t mode, float freq_scale,
                                      const float *freq_factors) {
    strata_rope_args a{};
    a.struct_size = sizeof a;
    a.n_tokens = n_tokens;
    a.n_heads = n_heads;
    a.head_dim = head_dim;
    a.rot_dims = rot_dims;
    a.mode = mode;
    a.positions = positions;
    a.theta_base = theta_base;
    a.freq_scale = freq_scale;
    a.freq_factors = freq_factors;
    a.attn_factor = 1.0f;
    return a;
}

// The ABI 1.14 tail of strata_attention_args / strata_paged_attention_args: softcap and window, 0 (off) when the
// caller's struct ends before them; checked (softcap finite and >= 0, window >= 0). `op` names the op in messages
// ("cpu paged_attention").
template <class Args>
int32_t attention_score_terms(const Args *a, const char *op, float *softcap, int32_t *window, strata_status *st) {
    *softcap = 0.0f;
    *window = 0;
    if (a->struct_size < offsetof(Args, window) + sizeof(a->window)) return STRATA_OK;
    if (!(a->softcap >= 0.0f) || !std::isfinite(a->softcap))
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: softcap = %g; must be finite and >= 0 (0: off)", op,
                    static_cast<double>(a->softcap));
    if (a->window < 0)
        return fail(st, STRATA_ERR_INVALID_ARGUMENT, "%s: window = %d; must be >= 0 (0: off)", op, a->window);
    *softcap = a->softcap;
    *window = a->window;
    return STRATA_OK;
}

} // namespace strata::plugin
