#include "reference.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace trainsim::calibrate::reference {

float bf16_to_float(std::uint16_t bits) {
    const std::uint32_t u = static_cast<std::uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

float fp16_to_float(std::uint16_t bits) {
    const int sign = bits >> 15, exp = (bits >> 10) & 0x1f, mant = bits & 0x3ff;
    float v;
    if (exp == 0)
        v = std::ldexp(static_cast<float>(mant), -24);  // subnormal: mant * 2^-10 * 2^-14
    else if (exp == 31)
        v = mant ? std::numeric_limits<float>::quiet_NaN() : std::numeric_limits<float>::infinity();
    else
        v = std::ldexp(1.0f + static_cast<float>(mant) / 1024.0f, exp - 15);
    return sign ? -v : v;
}

float e4m3_to_float(std::uint8_t bits) {
    const int sign = bits >> 7, exp = (bits >> 3) & 0xf, mant = bits & 0x7;
    float v;
    if (exp == 15 && mant == 7)
        v = std::numeric_limits<float>::quiet_NaN();
    else if (exp == 0)
        v = std::ldexp(static_cast<float>(mant), -9);  // subnormal: mant / 8 * 2^-6
    else
        v = std::ldexp(1.0f + static_cast<float>(mant) / 8.0f, exp - 7);
    return sign ? -v : v;
}

std::vector<float> gemm_xwt(const std::vector<float>& x, const std::vector<float>& w, std::int64_t m,
                            std::int64_t n, std::int64_t k, std::int64_t batch) {
    std::vector<float> y(static_cast<std::size_t>(batch * m * n));
    for (std::int64_t b = 0; b < batch; ++b)
        for (std::int64_t i = 0; i < m; ++i)
            for (std::int64_t j = 0; j < n; ++j) {
                double acc = 0;
                for (std::int64_t l = 0; l < k; ++l)
                    acc += static_cast<double>(x[(b * m + i) * k + l]) * w[(b * n + j) * k + l];
                y[(b * m + i) * n + j] = static_cast<float>(acc);
            }
    return y;
}

AttentionForward attention_forward(const std::vector<float>& q, const std::vector<float>& k,
                                   const std::vector<float>& v, std::int64_t bh, std::int64_t seq,
                                   std::int64_t d, float alpha) {
    AttentionForward r;
    r.p.assign(static_cast<std::size_t>(bh * seq * seq), 0.0f);
    r.o.assign(static_cast<std::size_t>(bh * seq * d), 0.0f);
    for (std::int64_t h = 0; h < bh; ++h)
        for (std::int64_t i = 0; i < seq; ++i) {
            std::vector<double> s(static_cast<std::size_t>(i + 1));
            double mx = -std::numeric_limits<double>::infinity();
            for (std::int64_t j = 0; j <= i; ++j) {
                double acc = 0;
                for (std::int64_t l = 0; l < d; ++l)
                    acc += static_cast<double>(q[(h * seq + i) * d + l]) * k[(h * seq + j) * d + l];
                s[j] = alpha * acc;
                mx = std::max(mx, s[j]);
            }
            double sum = 0;
            for (auto& e : s)
                sum += (e = std::exp(e - mx));
            for (std::int64_t j = 0; j <= i; ++j)
                r.p[(h * seq + i) * seq + j] = static_cast<float>(s[j] / sum);
            for (std::int64_t l = 0; l < d; ++l) {
                double acc = 0;
                for (std::int64_t j = 0; j <= i; ++j)
                    acc += static_cast<double>(r.p[(h * seq + i) * seq + j]) * v[(h * seq + j) * d + l];
                r.o[(h * seq + i) * d + l] = static_cast<float>(acc);
            }
        }
    return r;
}

AttentionBackward attention_backward(const std::vector<float>& q, const std::vector<float>& k,
                                     const std::vector<float>& v, const std::vector<float>& p,
                                     const std::vector<float>& dout, std::int64_t bh, std::int64_t seq,
                                     std::int64_t d, float alpha) {
    AttentionBackward r;
    const auto n = static_cast<std::size_t>(bh * seq * d);
    r.dq.assign(n, 0.0f);
    r.dk.assign(n, 0.0f);
    r.dv.assign(n, 0.0f);
    for (std::int64_t h = 0; h < bh; ++h) {
        const std::int64_t qo = h * seq * d, so = h * seq * seq;
        std::vector<double> ds(static_cast<std::size_t>(seq * seq));
        for (std::int64_t i = 0; i < seq; ++i) {
            std::vector<double> dp(static_cast<std::size_t>(seq));
            double dot = 0;
            for (std::int64_t j = 0; j < seq; ++j) {
                double acc = 0;
                for (std::int64_t l = 0; l < d; ++l)
                    acc += static_cast<double>(dout[qo + i * d + l]) * v[qo + j * d + l];
                dp[j] = acc;
                dot += acc * p[so + i * seq + j];
            }
            for (std::int64_t j = 0; j < seq; ++j)
                ds[i * seq + j] = p[so + i * seq + j] * (dp[j] - dot);
        }
        for (std::int64_t i = 0; i < seq; ++i)
            for (std::int64_t l = 0; l < d; ++l) {
                double dv = 0, dq = 0, dk = 0;
                for (std::int64_t j = 0; j < seq; ++j) {
                    dv += static_cast<double>(p[so + j * seq + i]) * dout[qo + j * d + l];  // (P^T.dO)[i, l]
                    dq += ds[i * seq + j] * k[qo + j * d + l];                              // (dS.K)[i, l]
                    dk += ds[j * seq + i] * q[qo + j * d + l];                              // (dS^T.Q)[i, l]
                }
                r.dv[qo + i * d + l] = static_cast<float>(dv);
                r.dq[qo + i * d + l] = static_cast<float>(alpha * dq);
                r.dk[qo + i * d + l] = static_cast<float>(alpha * dk);
            }
    }
    return r;
}

std::vector<float> layernorm(const std::vector<float>& x, const std::vector<float>& gamma,
                             const std::vector<float>& beta, std::int64_t rows, std::int64_t cols) {
    std::vector<float> y(x.size());
    for (std::int64_t r = 0; r < rows; ++r) {
        double sum = 0, sq = 0;
        for (std::int64_t c = 0; c < cols; ++c) {
            sum += x[r * cols + c];
            sq += static_cast<double>(x[r * cols + c]) * x[r * cols + c];
        }
        const double mean = sum / cols, var = std::max(sq / cols - mean * mean, 0.0);
        const double rstd = 1.0 / std::sqrt(var + 1e-5);
        for (std::int64_t c = 0; c < cols; ++c)
            y[r * cols + c] = static_cast<float>((x[r * cols + c] - mean) * rstd * gamma[c] + beta[c]);
    }
    return y;
}

std::vector<float> gelu(const std::vector<float>& x) {
    std::vector<float> y(x.size());
    for (std::size_t i = 0; i < x.size(); ++i) {
        const double v = x[i];
        y[i] =
            static_cast<float>(0.5 * v * (1.0 + std::tanh(0.7978845608028654 * (v + 0.044715 * v * v * v))));
    }
    return y;
}

double worst_error(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol) {
    if (got.size() != want.size()) return std::numeric_limits<double>::infinity();
    double scale = 0;
    for (float w : want)
        scale = std::max(scale, static_cast<double>(std::fabs(w)));
    const double tol = rtol * scale + atol;
    double worst = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
        const double e = std::fabs(static_cast<double>(got[i]) - want[i]);
        if (!std::isfinite(e)) return std::numeric_limits<double>::infinity();
        worst = std::max(worst, e / tol);
    }
    return worst;
}

}  // namespace trainsim::calibrate::reference
