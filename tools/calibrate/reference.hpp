// trainsim-calibrate's CPU references for `--self-check`: the element formats the GPU writes (bf16, fp16,
// e4m3) decoded to float, and straightforward float implementations of what each timed GPU path computes.
// Row-major throughout. Device-independent: unit-tested in tests/unit/test_calibrate.cpp.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim::calibrate::reference {

/// bfloat16 bits -> float (the upper half of an IEEE single).
float bf16_to_float(std::uint16_t bits);
/// IEEE half bits -> float (subnormals, infinities and NaN included).
float fp16_to_float(std::uint16_t bits);
/// OCP FP8 E4M3 bits -> float (bias 7, no infinities, S.1111.111 is NaN; max 448).
float e4m3_to_float(std::uint8_t bits);

/// y[batch][m, n] = x[batch][m, k] . W[batch][n, k]^T.
std::vector<float> gemm_xwt(const std::vector<float>& x, const std::vector<float>& w, std::int64_t m,
                            std::int64_t n, std::int64_t k, std::int64_t batch);

/// Causal attention forward of `bh` heads of [seq, d]: P = causal softmax(alpha Q.K^T), O = P.V.
struct AttentionForward {
    std::vector<float> p, o;
};
AttentionForward attention_forward(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, std::int64_t bh, std::int64_t seq,
                                   std::int64_t d, float alpha);

/// Its backward from P (as the forward left it) and dO: dV = P^T.dO, dP = dO.V^T, dS = P (dP - rowsum(dP P)),
/// dQ = alpha dS.K, dK = alpha dS^T.Q.
struct AttentionBackward {
    std::vector<float> dq, dk, dv;
};
AttentionBackward attention_backward(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, const std::vector<float>& p,
                                     const std::vector<float>& dout, std::int64_t bh, std::int64_t seq,
                                     std::int64_t d, float alpha);

/// Layer norm over rows of `cols` (eps 1e-5): y = (x - mean) / sqrt(var + eps) * gamma + beta.
std::vector<float> layernorm(const std::vector<float>& x, const std::vector<float>& gamma,
                             const std::vector<float>& beta, std::int64_t rows, std::int64_t cols);

/// GeLU, tanh approximation: 0.5 v (1 + tanh(sqrt(2/pi) (v + 0.044715 v^3))).
std::vector<float> gelu(const std::vector<float>& x);

/// The worst |got - want| / (rtol * max|want| + atol) over the elements: <= 1 passes. A size mismatch is
/// infinite.
double worst_error(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol);

}  // namespace trainsim::calibrate::reference
