// The jitter's per-kernel factors (include/trainsim/perturbation.hpp, LognormalJitter): log-normal of mean 1
// with the requested sigma (mean, variance and Kolmogorov-Smirnov distance of the log-factors over 1e5
// counter-based draws), the interpolated table within its documented accuracy of the exact inverse, and a
// pure function of the key.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numbers>
#include <vector>

#include "trainsim/perturbation.hpp"

using namespace trainsim;

namespace {

constexpr int kDraws = 100000;

/// The log-factors of kDraws draws of GPU `gpu` under `seed`, as the executor keys them.
std::vector<double> log_factors(const LognormalJitter& j, std::uint64_t seed, std::uint64_t gpu) {
    const std::uint64_t prefix = counter_prefix(seed, kJitterStream, gpu);
    std::vector<double> out;
    out.reserve(kDraws);
    for (int i = 0; i < kDraws; ++i)
        out.push_back(std::log(j.factor(counter_hash_at(prefix, static_cast<std::uint64_t>(i)))));
    return out;
}

double normal_cdf(double z) {
    return 0.5 * std::erfc(-z / std::numbers::sqrt2);
}

}  // namespace

TEST_CASE("jitter draws: log-factors are normal with mean -sigma^2/2 and variance sigma^2") {
    for (const double sigma : {0.05, 0.5, 2.0}) {
        CAPTURE(sigma);
        const LognormalJitter j(sigma);
        std::vector<double> z = log_factors(j, 7, 3);
        double sum = 0, sq = 0;
        for (double v : z) {
            sum += v;
            sq += v * v;
        }
        const double mean = sum / kDraws;
        const double var = sq / kDraws - mean * mean;
        // Standard errors over 1e5 draws: sigma·0.0032 for the mean, sigma²·0.0045 for the variance.
        CHECK(std::abs(mean + 0.5 * sigma * sigma) < 0.015 * sigma);
        CHECK(std::abs(var / (sigma * sigma) - 1) < 0.02);
        // Kolmogorov-Smirnov distance of the standardised log-factors to the standard normal: 1.63/sqrt(n)
        // = 0.0052 is the 1% critical value.
        for (double& v : z)
            v = (v + 0.5 * sigma * sigma) / sigma;
        std::sort(z.begin(), z.end());
        double ks = 0;
        for (int i = 0; i < kDraws; ++i) {
            const double f = normal_cdf(z[static_cast<std::size_t>(i)]);
            ks = std::max({ks, std::abs(f - static_cast<double>(i) / kDraws),
                           std::abs(f - static_cast<double>(i + 1) / kDraws)});
        }
        CHECK(ks < 0.0052);
    }
}

TEST_CASE("jitter draws: the factor has mean 1") {
    for (const double sigma : {0.05, 0.5}) {
        CAPTURE(sigma);
        const LognormalJitter j(sigma);
        double sum = 0;
        for (double v : log_factors(j, 1, 0))
            sum += std::exp(v);
        // Standard error: sqrt(exp(sigma²) - 1)/sqrt(n) = 0.00016 (0.05), 0.0017 (0.5).
        CHECK(std::abs(sum / kDraws - 1) < 5 * std::sqrt(std::expm1(sigma * sigma) / kDraws));
    }
}

TEST_CASE("jitter draws: the interpolated table is within its documented accuracy of the exact inverse") {
    for (const auto& row : {std::pair{0.05, 3e-5}, std::pair{0.5, 3e-4}, std::pair{2.0, 2e-3}}) {
        // Not a structured binding: CAPTURE's lambda cannot capture one under clang 14 (the sanitizer build).
        const double sigma = row.first, tolerance = row.second;
        CAPTURE(sigma);
        const LognormalJitter j(sigma);
        double worst = 0;
        for (std::uint64_t i = 0; i < 200000; ++i) {
            const std::uint64_t h = counter_hash_at(12345, i);
            worst = std::max(worst, std::abs(j.factor(h) / j.exact(h) - 1));
        }
        // Next to the exactly computed outer cells, where the quantile curves most.
        for (std::uint64_t cell : {8ULL, 9ULL, 4086ULL, 4087ULL})
            for (std::uint64_t k = 1; k < 64; ++k) {
                const std::uint64_t h = (cell << 52) | (k << 46);
                worst = std::max(worst, std::abs(j.factor(h) / j.exact(h) - 1));
            }
        MESSAGE("sigma ", sigma, ": worst relative error of the table ", worst);
        CHECK(worst < tolerance);
        CHECK(worst > 0);  // it is an interpolation, not the exact function
        // The outer cells are exact, the table's points too.
        for (std::uint64_t h : {0ULL, 1ULL << 40, ~0ULL, (4095ULL << 52) | 77, 2048ULL << 52, 100ULL << 52})
            CHECK(j.factor(h) == doctest::Approx(j.exact(h)).epsilon(1e-14));
        CHECK(j.factor(0) < j.factor(~0ULL));
    }
}

TEST_CASE("jitter draws: a pure function of (seed, GPU, kernel index)") {
    const LognormalJitter a(0.05), b(0.05);
    const std::uint64_t p = counter_prefix(7, kJitterStream, 3);
    CHECK(a.factor(counter_hash_at(p, 9)) == b.factor(counter_hash_at(p, 9)));
    CHECK(counter_hash_at(p, 9) == splitmix64(p ^ 9));
    CHECK(a.factor(counter_hash_at(p, 9)) != a.factor(counter_hash_at(p, 10)));
    CHECK(a.factor(counter_hash_at(p, 9)) !=
          a.factor(counter_hash_at(counter_prefix(8, kJitterStream, 3), 9)));
    CHECK(normal_quantile(0.5) == 0);
    CHECK(normal_quantile(0.975) == doctest::Approx(1.959963984540054).epsilon(1e-14));
    for (double u : {1e-300, 1e-12, 0.001, 0.3, 0.999})
        CHECK(normal_cdf(normal_quantile(u)) == doctest::Approx(u).epsilon(1e-12));
}
