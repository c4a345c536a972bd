// The compute model's use of a hardware profile: measured kernel times by shape (rules: compute.hpp).
#include <algorithm>
#include <cmath>
#include <limits>

#include <fmt/format.h>

#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/profile.hpp"

namespace trainsim {

namespace {
/// At most this many measured shapes are interpolated over.
constexpr std::size_t kNeighbours = 8;
/// A measured GEMM shape takes part when each of m, n, k is within this factor of the kernel's.
constexpr double kHullFactor = 2.0;

struct GemmPoint {
    double lm, ln, lk;  ///< log2 of m, n, k
    double m, n, k, batch;
    double time_s;
    bool fp8;
};
struct AttentionPoint {
    AttentionKernel backend;
    bool backward;
    double log_flops, log_bytes, flops, time_s;
};
struct MemoryPoint {
    std::string kernel;
    double bytes, time_s;
};

bool is_norm(const std::string& name) {
    auto ends = [&](const char* suffix) {
        const std::string s(suffix);
        return name.size() >= s.size() && name.compare(name.size() - s.size(), s.size(), s) == 0;
    };
    return ends("_norm") || ends("_norm_bwd");
}
bool is_activation(const std::string& name) {
    return name.rfind("gelu", 0) == 0 || name.rfind("swiglu", 0) == 0;
}
}  // namespace

struct ComputeModel::Tables {
    std::vector<GemmPoint> gemm;  ///< rows of the 16-bit type of the layout, and fp8 rows
    std::vector<AttentionPoint> attention;
    std::vector<MemoryPoint> memory;
};

ComputeModel::ComputeModel(const GpuSpec& gpu, Precision precision, HostLinks host,
                           std::shared_ptr<const Profile> profile, Fp8Recipe recipe)
    : gpu_(gpu),
      peak_(gpu.peak_flops(precision == Precision::fp16 ? Precision::fp16 : Precision::bf16)),
      peak_fp8_(gpu.peak_fp8_flops),
      peak_fp4_(gpu.peak_fp4_flops),
      recipe_(recipe),
      host_(host),
      profile_(std::move(profile)),
      fp16_(precision == Precision::fp16) {
    if (precision == Precision::fp8 && !(peak_fp8_ > 0))
        throw InputError(fmt::format(
            "layout.precision = \"fp8\" is not supported by GPU {}: it has no FP8 tensor cores", gpu.name));
    if (precision == Precision::fp8 && block_scaled(recipe) && !gpu.block_scaled_mma)
        throw InputError(
            fmt::format("layout.fp8_recipe = \"{}\" needs block-scaled tensor cores (Blackwell, "
                        "sm100 or newer): GPU {} has none",
                        to_string(recipe), gpu.name));
    if (precision == Precision::fp8 && recipe == Fp8Recipe::nvfp4 && !(gpu.peak_fp4_flops > 0))
        throw InputError(
            fmt::format("layout.fp8_recipe = \"nvfp4\" needs FP4 tensor cores: GPU {} has none", gpu.name));
    if (!profile_) return;
    if (profile_->gpu != gpu.name)
        throw InputError(fmt::format("profile {} describes GPU {}, but the cluster's GPU is {}",
                                     profile_->file, profile_->gpu, gpu.name));
    tables_ = std::make_unique<Tables>();
    const GemmDtype sixteen = fp16_ ? GemmDtype::fp16 : GemmDtype::bf16;
    for (const auto& g : profile_->gemm) {
        if (g.dtype != sixteen && g.dtype != GemmDtype::fp8) continue;
        tables_->gemm.push_back({std::log2(g.m), std::log2(g.n), std::log2(g.k), g.m, g.n, g.k, g.batch,
                                 g.timing.time_s, g.dtype == GemmDtype::fp8});
    }
    for (const auto& a : profile_->attention) {
        if (a.backend == AttentionKernel::unfused) continue;  // trainsim's unfused attention is GEMMs
        const auto w =
            attention_flops_bytes(a.batch, a.heads, a.kv_heads, a.seq, a.head_dim, a.causal, a.backward);
        tables_->attention.push_back(
            {a.backend, a.backward, std::log(w.flops), std::log(w.bytes), w.flops, a.timing.time_s});
    }
    for (const auto& m : profile_->memory_bound)
        tables_->memory.push_back({m.kernel, m.bytes, m.timing.time_s});
}

ComputeModel::~ComputeModel() = default;

namespace {

/// A GEMM's time from the profile: the geometric mean of the measured times of its exact shape, else the
/// analytic time scaled by the inverse-square-distance-weighted log ratio of measured to analytic time of at
/// most kNeighbours measured shapes within kHullFactor of it (in log2 of m, n, k). False: none near.
bool gemm_seconds(const std::vector<GemmPoint>& rows, const Kernel& k, const ComputeModel& model,
                  double& seconds) {
    // Exact shape: geometric mean of the measured times.
    double log_sum = 0;
    int exact = 0;
    for (const auto& p : rows)
        if (p.fp8 == k.fp8 && p.batch == k.batch && p.m == k.m && p.n == k.n && p.k == k.k) {
            log_sum += std::log(p.time_s);
            ++exact;
        }
    if (exact > 0) {
        seconds = std::exp(log_sum / exact);
        return true;
    }
    const double lm = std::log2(k.m), ln = std::log2(k.n), lk = std::log2(k.k);
    const double hull = std::log2(kHullFactor);
    std::vector<std::pair<double, const GemmPoint*>> near;
    for (const auto& p : rows) {
        if (p.fp8 != k.fp8 || p.batch != k.batch) continue;
        const double dm = p.lm - lm, dn = p.ln - ln, dk = p.lk - lk;
        if (std::fabs(dm) > hull || std::fabs(dn) > hull || std::fabs(dk) > hull) continue;
        near.emplace_back(dm * dm + dn * dn + dk * dk, &p);
    }
    if (near.empty()) return false;
    std::sort(near.begin(), near.end(), [](const auto& a, const auto& b) {
        return a.first < b.first || (a.first == b.first && a.second < b.second);
    });
    if (near.size() > kNeighbours) near.resize(kNeighbours);
    double wsum = 0, csum = 0;
    for (const auto& [d2, p] : near) {
        const Kernel at = Kernel::gemm("", p->m, p->n, p->k, p->batch, k.fp8 ? 1 : 2);
        const double w = 1.0 / d2;
        csum += w * std::log(p->time_s / model.analytic_seconds(at));
        wsum += w;
    }
    seconds = model.analytic_seconds(k) * std::exp(csum / wsum);
    return true;
}

/// A fused attention kernel's time from the nearest measured one of its backend and direction (in log
/// FLOPs and log bytes), scaled by FLOPs. False: none measured.
bool attention_seconds(const std::vector<AttentionPoint>& rows, const Kernel& k, double& seconds) {
    const AttentionPoint* best = nullptr;
    double best_d = std::numeric_limits<double>::infinity();
    const bool backward = std::string_view(k.name).find("bwd") != std::string_view::npos;
    const double lf = std::log(k.flops), lb = std::log(std::max(k.bytes, 1.0));
    for (const auto& p : rows) {
        if (p.backend != k.attention || p.backward != backward) continue;
        const double d = (p.log_flops - lf) * (p.log_flops - lf) + (p.log_bytes - lb) * (p.log_bytes - lb);
        if (d < best_d) best_d = d, best = &p;
    }
    if (!best || !(k.flops > 0)) return false;
    seconds = best->time_s * k.flops / best->flops;
    return true;
}

/// A memory-bound kernel's time from the measured row nearest in bytes of the same kernel, else of its
/// class (norms, activations), else a copy; scaled by bytes, plus the launch overhead `overhead_s`.
bool memory_bound_seconds(const std::vector<MemoryPoint>& rows, const Kernel& k, double overhead_s,
                          double& seconds) {
    if (!(k.bytes > 0)) return false;
    const std::string name = k.name;
    auto pick = [&](auto&& in_class) -> const MemoryPoint* {
        const MemoryPoint* best = nullptr;
        double best_d = std::numeric_limits<double>::infinity();
        for (const auto& p : rows) {
            if (!in_class(p.kernel)) continue;
            const double d = std::fabs(std::log(p.bytes / k.bytes));
            if (d < best_d) best_d = d, best = &p;
        }
        return best;
    };
    const MemoryPoint* row = pick([&](const std::string& r) { return r == name; });
    if (!row && is_norm(name))
        row = pick([](const std::string& r) { return r == "layernorm" || r == "rmsnorm"; });
    if (!row && is_activation(name)) {
        const bool swiglu = name.rfind("swiglu", 0) == 0;
        row = pick([&](const std::string& r) { return r == (swiglu ? "swiglu" : "gelu"); });
        if (!row) row = pick([](const std::string& r) { return r == "gelu" || r == "swiglu"; });
    }
    if (!row) row = pick([](const std::string& r) { return r == "copy"; });
    if (!row) return false;
    seconds = k.bytes * row->time_s / row->bytes + overhead_s;
    return true;
}

}  // namespace

bool ComputeModel::profile_cost(const Kernel& k, double& seconds) const {
    const Tables& t = *tables_;
    switch (k.kind) {
        case KernelKind::gemm:
            // A profile's fp8 rows are per-tensor-scaled GEMMs: MXFP8 and NVFP4 GEMMs are analytic.
            if (k.fp8 && block_scaled(recipe_)) return false;
            return gemm_seconds(t.gemm, k, *this, seconds);
        case KernelKind::flash_attention:
            return attention_seconds(t.attention, k, seconds);
        case KernelKind::memory_bound:
            return memory_bound_seconds(t.memory, k, gpu_.kernel_overhead_s, seconds);
        default:
            return false;
    }
}

}  // namespace trainsim
