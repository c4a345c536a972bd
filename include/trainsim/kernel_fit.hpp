// Fitting the analytic kernel model's per-GPU constants to a hardware profile (`trainsim fit --profile`).
//
// Stages, each a Levenberg-Marquardt least-squares fit of log(predicted / measured) time over the rows named,
// the parameters in log space (Eigen; finite-difference Jacobian):
//   1. GEMM (16-bit rows whose label starts with `fit_prefix`; the other 16-bit rows are held out):
//      gemm_max_efficiency, gemm_k_half, gemm_min_time_s (compute.hpp has the formula: tile and wave
//      quantization from the tile table, saturation in K, the floor)
//   2. fp8_gemm_efficiency over the fp8 rows, stage 1's constants kept
//   3. per backend (cudnn, flash) over its attention rows, fwd and bwd, except those held out:
//      <backend>_attention_efficiency, _bwd_factor, _cta_half, _key_half (compute.hpp, attention_efficiency)
//   4. hbm_efficiency over the memory-bound rows
// kernel_overhead_s and the tile table are kept. The profile's `layers` rows are never fitted: they are the
// held-out test (forward+backward of each layer, timed by the fitted analytic model).
#pragma once

#include <string>
#include <vector>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/profile.hpp"

namespace trainsim {

struct KernelFitOptions {
    std::string fit_prefix = "grid";  ///< GEMM rows fitted: label starts with this (empty: every 16-bit row)
    /// Attention rows held out of stage 3 (label starts with one of these): reported as
    /// "attention held out"; the remaining rows of each backend are fitted.
    std::vector<std::string> attention_held_out = {"llama2_", "nemo_"};
    int max_iterations = 100;  ///< per stage
};

/// One row's time against the model's.
struct FitResidual {
    std::string group;  ///< "gemm fitted", "gemm held out", "gemm fp8", "attention cudnn", "attention flash",
                        ///< "attention cudnn held out", "attention flash held out",
                        ///< "memory", "layer fwd+bwd"
    std::string label;
    double measured_s = 0, predicted_before_s = 0, predicted_after_s = 0;
    double error_pct() const { return 100.0 * (predicted_after_s - measured_s) / measured_s; }
    double error_before_pct() const { return 100.0 * (predicted_before_s - measured_s) / measured_s; }
};

struct KernelFit {
    GpuSpec before, after;
    std::vector<std::string> constants;  ///< the constants fitted, in stage order
    std::vector<FitResidual> residuals;
    int iterations = 0;  ///< Levenberg-Marquardt steps over all stages
};

/// Fits `start`'s kernel constants to `profile` (GPU types must agree: InputError naming both otherwise).
/// Throws InputError when a stage has fewer rows than parameters (naming the rows missing).
KernelFit fit_kernel_model(const Profile& profile, const GpuSpec& start,
                           const KernelFitOptions& options = {});

/// Median of |error_pct| over the residuals of `group` (0 when none).
double median_abs_error_pct(const std::vector<FitResidual>& r, const std::string& group, bool after = true);

}  // namespace trainsim
