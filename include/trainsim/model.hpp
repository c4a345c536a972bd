// Decoder-only transformer described by its shapes, its parameter counts and its FLOP counts.
//
// Conventions (as in Megatron-LM): `mlp = gelu` means a GPT-style block (LayerNorm with weight and bias,
// linear biases, two MLP matrices ffn_hidden wide); `mlp = swiglu` means a Llama-style block (RMSNorm, no
// biases, three MLP matrices: gate, up, down). kv_heads < heads is grouped-query attention; head_dim = hidden
// / heads.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainsim/schema.hpp"

namespace trainsim {

enum class MlpKind { gelu, swiglu };

struct ModelSpec {
    std::string name;
    std::int64_t layers = 0;
    std::int64_t hidden = 0;
    std::int64_t heads = 0;
    std::int64_t kv_heads = 0;
    std::int64_t ffn_hidden = 0;
    std::int64_t vocab = 0;
    std::int64_t seq_len = 0;
    MlpKind mlp = MlpKind::gelu;
    bool tied_embeddings = true;
    /// Dropout after attention softmax and after the attention and MLP blocks (Megatron-LM's default
    /// --attention-dropout 0.1 --hidden-dropout 0.1, as GPT-3 trained); its 1-byte masks are activations.
    /// Llama-style recipes train without dropout.
    bool dropout = true;

    std::int64_t head_dim() const { return hidden / heads; }

    /// Parameters of one transformer layer (attention + MLP + norms, biases for gelu models).
    double layer_params() const;
    /// Weights of the four linear layers of one transformer layer (QKV, projection, MLP matrices), no
    /// biases: what QLoRA quantizes to 4 bits.
    double linear_params() const;
    /// Parameters of the input embedding (vocab x hidden).
    double embedding_params() const;
    /// Parameters of the output layer (0 when tied to the input embedding) plus the final norm.
    double output_params() const;
    /// Total parameters (counting tied embeddings once).
    double total_params() const;

    /// Model FLOPs of one iteration for `sequences` sequences, forward + backward, no recomputation.
    /// General form of Megatron-Core r0.8.0 `num_floating_point_operations` (megatron/training/training.py):
    ///   12·B·s·L·h²·[(1 + g/a + s/h)·(q/h) + (ffn/h)·(3/2 if SwiGLU else 1) + V/(2·L·h)]
    /// with q = head_dim·a = h here; equals 72·B·s·L·h²·(1 + s/(6h) + V/(12·L·h)) for a GPT layer
    /// (Korthikanti et al. 2022, arXiv:2205.05198, Sec. 6.3). The s² attention term is not halved for the
    /// causal mask.
    double model_flops(double sequences) const;
    /// Forward FLOPs of one transformer layer for `tokens` tokens (the same count, one third of fwd+bwd).
    double layer_forward_flops(double tokens) const;
};

/// The names of MlpKind's values in enum order ("gelu", "swiglu").
const std::vector<std::string>& mlp_kind_names();

/// The model's fields as a workload file's "model" object writes them (include/trainsim/schema.hpp), in the
/// order the loader reads them. docs/inputs.md is generated from it.
const schema::Table<ModelSpec>& model_fields();

}  // namespace trainsim
