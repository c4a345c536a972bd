#include "trainsim/model.hpp"

namespace trainsim {

double ModelSpec::layer_params() const {
    const double h = static_cast<double>(hidden);
    const double d = static_cast<double>(head_dim());
    const double a = static_cast<double>(heads);
    const double g = static_cast<double>(kv_heads);
    const double f = static_cast<double>(ffn_hidden);
    const double qkv = h * (a + 2 * g) * d;
    const double proj = a * d * h;
    const bool gpt = mlp == MlpKind::gelu;
    const double mlp_w = gpt ? 2 * h * f : 3 * h * f;
    const double biases = gpt ? (a + 2 * g) * d + h + f + h : 0.0;
    const double norms = gpt ? 4 * h : 2 * h;  // LayerNorm: weight + bias, twice; RMSNorm: weight, twice
    return qkv + proj + mlp_w + biases + norms;
}

double ModelSpec::linear_params() const {
    const double h = static_cast<double>(hidden);
    const double d = static_cast<double>(head_dim());
    const double a = static_cast<double>(heads);
    const double g = static_cast<double>(kv_heads);
    const double f = static_cast<double>(ffn_hidden);
    return h * (a + 2 * g) * d + a * d * h + (mlp == MlpKind::gelu ? 2.0 : 3.0) * h * f;
}

double ModelSpec::embedding_params() const {
    return static_cast<double>(vocab) * static_cast<double>(hidden);
}

double ModelSpec::output_params() const {
    const double norm = (mlp == MlpKind::gelu ? 2.0 : 1.0) * static_cast<double>(hidden);
    return (tied_embeddings ? 0.0 : embedding_params()) + norm;
}

double ModelSpec::total_params() const {
    return static_cast<double>(layers) * layer_params() + embedding_params() + output_params();
}

double ModelSpec::model_flops(double sequences) const {
    const double B = sequences;
    const double s = static_cast<double>(seq_len);
    const double L = static_cast<double>(layers);
    const double h = static_cast<double>(hidden);
    const double a = static_cast<double>(heads);
    const double g = static_cast<double>(kv_heads);
    const double q = static_cast<double>(head_dim()) * a;
    const double ffn = static_cast<double>(ffn_hidden);
    const double V = static_cast<double>(vocab);
    const double swiglu = mlp == MlpKind::swiglu ? 1.5 : 1.0;
    return 12.0 * B * s * L * h * h *
           ((1.0 + g / a + s / h) * (q / h) + (ffn / h) * swiglu + V / (2.0 * L * h));
}

double ModelSpec::layer_forward_flops(double tokens) const {
    const double s = static_cast<double>(seq_len);
    const double h = static_cast<double>(hidden);
    const double a = static_cast<double>(heads);
    const double g = static_cast<double>(kv_heads);
    const double q = static_cast<double>(head_dim()) * a;
    const double ffn = static_cast<double>(ffn_hidden);
    const double swiglu = mlp == MlpKind::swiglu ? 1.5 : 1.0;
    return 4.0 * tokens * h * h * ((1.0 + g / a + s / h) * (q / h) + (ffn / h) * swiglu);
}

}  // namespace trainsim
