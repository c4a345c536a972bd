#include "trainsim/kernel_fit.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <Eigen/Dense>

#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/layer_time.hpp"

namespace trainsim {

namespace {

using Residuals = std::function<Eigen::VectorXd(const Eigen::VectorXd&)>;

/// Levenberg-Marquardt on r(x) (finite-difference Jacobian, Marquardt damping); returns the steps taken.
int levenberg_marquardt(const Residuals& f, Eigen::VectorXd& x, int max_iterations) {
    const Eigen::Index n = x.size();
    Eigen::VectorXd r = f(x);
    double lambda = 1e-3;
    const double h = 1e-5;
    int it = 0;
    for (; it < max_iterations; ++it) {
        Eigen::MatrixXd J(r.size(), n);
        for (Eigen::Index k = 0; k < n; ++k) {
            Eigen::VectorXd xk = x;
            xk(k) += h;
            J.col(k) = (f(xk) - r) / h;
        }
        const Eigen::MatrixXd JtJ = J.transpose() * J;
        const Eigen::VectorXd g = J.transpose() * r;
        bool improved = false;
        while (lambda < 1e10) {
            Eigen::MatrixXd A = JtJ;
            A.diagonal() += lambda * (JtJ.diagonal().array() + 1e-12).matrix();
            const Eigen::VectorXd step = A.ldlt().solve(-g);
            const Eigen::VectorXd xn = x + step;
            const Eigen::VectorXd rn = f(xn);
            if (std::isfinite(rn.squaredNorm()) && rn.squaredNorm() < r.squaredNorm()) {
                const bool converged =
                    r.squaredNorm() - rn.squaredNorm() < 1e-12 * (1 + r.squaredNorm()) || step.norm() < 1e-10;
                x = xn;
                r = rn;
                lambda = std::max(lambda * 0.3, 1e-12);
                improved = true;
                if (converged) return it + 1;
                break;
            }
            lambda *= 10;
        }
        if (!improved) break;
    }
    return it;
}

struct Row {
    Kernel kernel;
    double measured_s;
    bool fp8;
    FitResidual* out;
};

/// Where a constant whose value is neutral (0) starts: a minimum GEMM time of 10 us, a tail at 1 CTA per SM,
/// a tile fixed cost worth 500 keys; a factor at 1.
double neutral_start(const std::string& p) {
    if (p == "gemm_min_time_s") return 10e-6;
    if (p.size() > 8 && p.compare(p.size() - 8, 8, "cta_half") == 0) return 1.0;
    if (p.size() > 8 && p.compare(p.size() - 8, 8, "key_half") == 0) return 500.0;
    return 1.0;
}

double predict(const GpuSpec& g, const Row& row) {
    const ComputeModel cm(g, row.fp8 ? Precision::fp8 : Precision::bf16);
    return cm.analytic_seconds(row.kernel);
}

}  // namespace

double median_abs_error_pct(const std::vector<FitResidual>& r, const std::string& group, bool after) {
    std::vector<double> e;
    for (const auto& x : r)
        if (x.group == group) e.push_back(std::fabs(after ? x.error_pct() : x.error_before_pct()));
    if (e.empty()) return 0;
    std::sort(e.begin(), e.end());
    const std::size_t n = e.size();
    return n % 2 ? e[n / 2] : 0.5 * (e[n / 2 - 1] + e[n / 2]);
}

namespace {

/// The profile's kernels as fit rows, each with its residual slot in fit.residuals.
struct FitRows {
    std::vector<Row> gemm_fit, gemm_held, gemm_fp8, att_cudnn, att_flash, att_held, memory;
    std::vector<std::vector<Row>*> all() {
        return {&gemm_fit, &gemm_held, &gemm_fp8, &att_cudnn, &att_flash, &att_held, &memory};
    }
};

FitRows fit_rows(const Profile& profile, const KernelFitOptions& options, KernelFit& fit) {
    fit.residuals.reserve(profile.gemm.size() + profile.attention.size() + profile.memory_bound.size() +
                          profile.layers.size());
    auto add = [&](const std::string& group, const std::string& label, double t) {
        fit.residuals.push_back({group, label, t, 0, 0});
        return &fit.residuals.back();
    };
    FitRows rows;
    for (const auto& r : profile.gemm) {
        const bool fp8 = r.dtype == GemmDtype::fp8;
        if (r.dtype == GemmDtype::fp16) continue;  // bf16 and fp16 share the 16-bit peak; the fit uses bf16
        Row row{Kernel::gemm("gemm", r.m, r.n, r.k, r.batch, fp8 ? 1 : 2), r.timing.time_s, fp8, nullptr};
        const bool fitted = !fp8 && r.timing.label.rfind(options.fit_prefix, 0) == 0;
        row.out = add(fp8      ? "gemm fp8"
                      : fitted ? "gemm fitted"
                               : "gemm held out",
                      r.timing.label, r.timing.time_s);
        (fp8 ? rows.gemm_fp8 : fitted ? rows.gemm_fit : rows.gemm_held).push_back(row);
    }
    for (const auto& a : profile.attention) {
        if (a.backend == AttentionKernel::unfused) continue;
        const auto w =
            attention_flops_bytes(a.batch, a.heads, a.kv_heads, a.seq, a.head_dim, a.causal, a.backward);
        const FusedAttentionShape shape{a.batch * a.heads, a.seq, a.seq, a.head_dim, a.causal, a.backward};
        Row row{Kernel::flash(a.backward ? "flash_attention_bwd" : "flash_attention_fwd", w.flops, w.bytes,
                              a.backend, shape),
                a.timing.time_s, false, nullptr};
        const bool cudnn = a.backend == AttentionKernel::cudnn;
        const bool held = std::any_of(options.attention_held_out.begin(), options.attention_held_out.end(),
                                      [&](const std::string& p) { return a.timing.label.rfind(p, 0) == 0; });
        row.out = add(fmt::format("attention {}{}", cudnn ? "cudnn" : "flash", held ? " held out" : ""),
                      fmt::format("{} {}", a.timing.label, a.backward ? "bwd" : "fwd"), a.timing.time_s);
        (held ? rows.att_held : cudnn ? rows.att_cudnn : rows.att_flash).push_back(row);
    }
    for (const auto& m : profile.memory_bound) {
        Row row{Kernel::memory("memory", m.bytes), m.timing.time_s, false, nullptr};
        row.out = add("memory", fmt::format("{} {}", m.kernel, m.timing.label), m.timing.time_s);
        rows.memory.push_back(row);
    }
    return rows;
}

/// The GpuSpec member a fitted constant names.
double& constant_ref(GpuSpec& s, const std::string& p) {
    if (p == "gemm_max_efficiency") return s.gemm_max_efficiency;
    if (p == "gemm_k_half") return s.gemm_k_half;
    if (p == "gemm_min_time_s") return s.gemm_min_time_s;
    if (p == "fp8_gemm_efficiency") return s.fp8_gemm_efficiency;
    if (p == "cudnn_attention_efficiency") return s.cudnn_attention_efficiency;
    if (p == "cudnn_attention_bwd_factor") return s.cudnn_attention_bwd_factor;
    if (p == "cudnn_attention_cta_half") return s.cudnn_attention_cta_half;
    if (p == "cudnn_attention_key_half") return s.cudnn_attention_key_half;
    if (p == "flash_attention_efficiency") return s.flash_attention_efficiency;
    if (p == "flash_attention_bwd_factor") return s.flash_attention_bwd_factor;
    if (p == "flash_attention_cta_half") return s.flash_attention_cta_half;
    if (p == "flash_attention_key_half") return s.flash_attention_key_half;
    if (p == "hbm_efficiency") return s.hbm_efficiency;
    throw InternalError("kernel fit: unknown constant " + p);
}

/// One stage: the constants `params` of `g` fitted in log space over `rows`.
void fit_stage(const Profile& profile, const KernelFitOptions& options, const std::vector<Row>& rows,
               const std::vector<std::string>& params, const char* what, GpuSpec& g, KernelFit& fit) {
    if (rows.size() < params.size())
        throw InputError(fmt::format("{}: {} {} rows; fitting {} needs at least {}", profile.file,
                                     rows.size(), what, fmt::join(params, ", "), params.size()));
    Eigen::VectorXd x(static_cast<Eigen::Index>(params.size()));
    for (std::size_t i = 0; i < params.size(); ++i) {
        double v = constant_ref(g, params[i]);
        if (!(v > 0)) v = neutral_start(params[i]);  // a start for a neutral 0
        x(static_cast<Eigen::Index>(i)) = std::log(v);
    }
    auto with = [&](const Eigen::VectorXd& p) {
        GpuSpec s = g;
        for (std::size_t i = 0; i < params.size(); ++i)
            constant_ref(s, params[i]) = std::exp(p(static_cast<Eigen::Index>(i)));
        return s;
    };
    auto residuals = [&](const Eigen::VectorXd& p) {
        const GpuSpec s = with(p);
        Eigen::VectorXd r(static_cast<Eigen::Index>(rows.size()));
        for (std::size_t i = 0; i < rows.size(); ++i)
            r(static_cast<Eigen::Index>(i)) = std::log(predict(s, rows[i]) / rows[i].measured_s);
        return r;
    };
    fit.iterations += levenberg_marquardt(residuals, x, options.max_iterations);
    g = with(x);
    for (const auto& p : params)
        fit.constants.push_back(p);
}

/// Held-out test: whole layers timed by the analytic model before and after the fit.
void layer_residuals(const Profile& profile, const GpuSpec& after_spec, KernelFit& fit) {
    for (const auto& l : profile.layers) {
        const ModelSpec m = layer_model(l);
        const Layout lay = layer_layout(l);
        const ComputeModel before(fit.before, Precision::bf16), after(after_spec, Precision::bf16);
        const auto tb = layer_compute_time(m, lay, before), ta = layer_compute_time(m, lay, after);
        fit.residuals.push_back({"layer fwd+bwd",
                                 fmt::format("{} {}", l.label, to_string(l.attention_backend)), l.fwd_bwd_s,
                                 tb.forward_s + tb.backward_s, ta.forward_s + ta.backward_s});
    }
}

}  // namespace

KernelFit fit_kernel_model(const Profile& profile, const GpuSpec& start, const KernelFitOptions& options) {
    if (profile.gpu != start.name)
        throw InputError(fmt::format("profile {} describes GPU {}, the fit is for GPU {}", profile.file,
                                     profile.gpu, start.name));
    KernelFit fit;
    fit.before = start;
    GpuSpec g = start;
    FitRows rows = fit_rows(profile, options, fit);
    for (auto* set : rows.all())
        for (auto& row : *set)
            row.out->predicted_before_s = predict(g, row);
    fit_stage(profile, options, rows.gemm_fit, {"gemm_max_efficiency", "gemm_k_half", "gemm_min_time_s"},
              "fitted 16-bit GEMM", g, fit);
    if (!rows.gemm_fp8.empty())
        fit_stage(profile, options, rows.gemm_fp8, {"fp8_gemm_efficiency"}, "fp8 GEMM", g, fit);
    for (const char* b : {"cudnn", "flash"}) {
        const auto& set = std::string(b) == "cudnn" ? rows.att_cudnn : rows.att_flash;
        if (set.empty()) continue;
        std::vector<std::string> params;
        for (const char* c : {"efficiency", "bwd_factor", "cta_half", "key_half"})
            params.push_back(fmt::format("{}_attention_{}", b, c));
        fit_stage(profile, options, set, params,
                  std::string(b) == "cudnn" ? "fitted cudnn attention" : "fitted flash attention", g, fit);
    }
    if (!rows.memory.empty())
        fit_stage(profile, options, rows.memory, {"hbm_efficiency"}, "memory-bound", g, fit);
    fit.after = g;
    for (auto* set : rows.all())
        for (auto& row : *set)
            row.out->predicted_after_s = predict(g, row);
    layer_residuals(profile, g, fit);
    return fit;
}

}  // namespace trainsim
