#include <algorithm>
#include <array>
#include <cmath>

#include "trainsim/compute.hpp"

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim {

namespace {
struct TileShape {
    double m, n;
    double
        efficiency;  ///< relative to the largest tile: smaller tiles reuse operands less (more SMEM traffic)
};
// Tile shapes cuBLAS/CUTLASS choose among for large half-precision GEMMs on sm80/sm90 (CUTLASS profiler's
// default kernels), with the relative efficiency of each measured on square GEMMs in CUTLASS's published
// profiles.
constexpr std::array<TileShape, 4> kTileShapes = {{
    {256, 128, 1.00},
    {128, 128, 0.95},
    {128, 64, 0.85},
    {64, 64, 0.70},
}};
/// Rows of queries (forward) or keys (backward) per CTA of FlashAttention-2 and cuDNN fused attention at
/// head_dim 64-256 on sm80/sm90 (flash-attn's kBlockM = 128 forward; cuDNN's fprop/bprop 128-row tiles).
constexpr double kAttentionTile = 128;
}  // namespace

Kernel Kernel::gemm(const char* name, double m, double n, double k, double batch, double elem_bytes) {
    Kernel g;
    g.kind = KernelKind::gemm;
    g.name = name;
    g.m = m;
    g.n = n;
    g.k = k;
    g.batch = batch;
    g.flops = 2.0 * m * n * k * batch;
    g.bytes = elem_bytes * (m * k + k * n + m * n) * batch;
    g.fp8 = elem_bytes == 1;
    return g;
}

Kernel Kernel::flash(const char* name, double flops, double bytes, AttentionKernel backend,
                     const FusedAttentionShape& shape) {
    Kernel g;
    g.attention = backend;
    g.attention_shape = shape;
    g.kind = KernelKind::flash_attention;
    g.name = name;
    g.flops = flops;
    g.bytes = bytes;
    return g;
}

Kernel Kernel::memory(const char* name, double bytes) {
    Kernel g;
    g.kind = KernelKind::memory_bound;
    g.name = name;
    g.bytes = bytes;
    return g;
}

Kernel Kernel::host(KernelKind kind, const char* name, double bytes) {
    Kernel g;
    g.kind = kind;
    g.name = name;
    g.bytes = bytes;
    return g;
}

AttentionWork attention_flops_bytes(double batch, double heads, double kv_heads, double seq, double head_dim,
                                    bool causal, bool backward) {
    const double E = 2;
    AttentionWork w;
    w.flops = (causal ? 0.5 : 1.0) * 4.0 * batch * heads * seq * seq * head_dim * (backward ? 2.5 : 1.0);
    w.bytes = E * batch * seq * (2 * heads + 2 * kv_heads) * head_dim * (backward ? 2.0 : 1.0);
    return w;
}

double attention_efficiency(const GpuSpec& gpu, AttentionKernel backend, const FusedAttentionShape& s) {
    if (!(s.batch_heads > 0 && s.q_len > 0 && s.kv_len > 0 && s.head_dim > 0))
        throw InternalError(
            fmt::format("fused attention without its shape (batch·heads {}, q {}, kv {}, d {})",
                        s.batch_heads, s.q_len, s.kv_len, s.head_dim));
    if (backend == AttentionKernel::unfused) throw InternalError("attention_efficiency of unfused attention");
    const bool cudnn = backend == AttentionKernel::cudnn;
    const double e_max = cudnn ? gpu.cudnn_attention_efficiency : gpu.flash_attention_efficiency;
    const double bwd = cudnn ? gpu.cudnn_attention_bwd_factor : gpu.flash_attention_bwd_factor;
    const double cta_half = cudnn ? gpu.cudnn_attention_cta_half : gpu.flash_attention_cta_half;
    const double key_half = cudnn ? gpu.cudnn_attention_key_half : gpu.flash_attention_key_half;
    const double ctas = s.batch_heads * std::ceil((s.backward ? s.kv_len : s.q_len) / kAttentionTile);
    const double per_sm = ctas / gpu.sm_count;
    const double fill = cta_half > 0 ? per_sm / (per_sm + cta_half) : 1.0;
    const double keys = s.window_keys > 0 ? s.window_keys : (s.causal ? 0.5 : 1.0) * s.kv_len;
    const double work = keys * s.head_dim / 128.0;
    const double sat = key_half > 0 ? work / (work + key_half) : 1.0;
    const double generation = backend == AttentionKernel::flash1 ? kFlashAttention1RelativeSpeed : 1.0;
    return generation * e_max * (s.backward ? bwd : 1.0) * fill * sat;
}

double gemm_operand_bytes(Fp8Recipe recipe) {
    switch (recipe) {
        case Fp8Recipe::mxfp8:
            return 1.0 + 1.0 / 32.0;
        case Fp8Recipe::nvfp4:
            return 0.5 + 1.0 / 16.0;
        case Fp8Recipe::delayed:
        case Fp8Recipe::tensorwise:
        case Fp8Recipe::rowwise:
            return 1.0;
    }
    return 1.0;
}

double ComputeModel::gemm_shape_efficiency(double m, double n, double batch, double sms_reserved) const {
    double best = 0;
    const double sms = std::max(1.0, gpu_.sm_count - sms_reserved);
    for (const auto& t : kTileShapes) {
        const double tm = std::ceil(m / t.m), tn = std::ceil(n / t.n);
        const double edge = (m * n) / (tm * t.m * tn * t.n);
        const double tiles = tm * tn * batch;
        const double waves = tiles / (std::ceil(tiles / sms) * sms);
        best = std::max(best, t.efficiency * edge * waves);
    }
    return best;
}

double ComputeModel::sm_share(const Kernel& k) const {
    return std::max(1.0, gpu_.sm_count - std::max(0.0, k.sms_reserved));
}

double ComputeModel::require(double bytes_per_s, const char* field) {
    if (bytes_per_s <= 0)
        throw InputError(
            fmt::format("topology.{} is not given: offloading the optimizer needs the host "
                        "side of the node described",
                        field));
    return bytes_per_s;
}

KernelCost ComputeModel::cost(const Kernel& k) const {
    KernelCost c = device_cost(k);
    c.seconds = std::max(c.seconds, k.host_issue_s);
    return c;
}

KernelCost ComputeModel::device_cost(const Kernel& k) const {
    if (gpu_.fp8_gemm_any_layout && k.fp8_transpose_bytes > 0) {
        // No FP8 transpose on this GPU (GpuSpec::fp8_gemm_any_layout): the kernel without those bytes, or
        // no kernel at all.
        Kernel rest = k;
        rest.bytes -= k.fp8_transpose_bytes;
        rest.fp8_transpose_bytes = 0;
        if (!(rest.bytes > 0)) return KernelCost{};
        return device_cost(rest);
    }
    KernelCost c;
    if (profile_ && profile_cost(k, c.seconds)) {
        c.from_profile = true;
        if (k.kind == KernelKind::gemm && k.sms_reserved > 0) c.seconds *= gpu_.sm_count / sm_share(k);
        return c;
    }
    c.seconds = analytic_seconds(k);
    return c;
}

double ComputeModel::analytic_seconds(const Kernel& k) const {
    const double mem_bw = gpu_.hbm_bytes_per_s * gpu_.hbm_efficiency;
    const double mem_t = k.bytes / mem_bw;
    switch (k.kind) {
        case KernelKind::gemm: {
            const double e = gpu_.gemm_max_efficiency *
                             gemm_shape_efficiency(k.m, k.n, k.batch, k.sms_reserved) * sm_share(k) /
                             gpu_.sm_count * k.k / (k.k + gpu_.gemm_k_half);
            const bool fp4 = k.fp8 && recipe_ == Fp8Recipe::nvfp4;
            const double peak = !k.fp8 ? peak_
                                : fp4  ? peak_fp4_ * gpu_.fp4_gemm_efficiency
                                       : peak_fp8_ * gpu_.fp8_gemm_efficiency;
            if (!(peak > 0))
                throw InputError(
                    fmt::format("precision {} is not supported by GPU {}", fp4 ? "nvfp4" : "fp8", gpu_.name));
            // Block-scaled operands carry their scales; the output is bf16 (header comment).
            const double t_mem =
                k.fp8 && block_scaled(recipe_)
                    ? ((k.m * k.k + k.k * k.n) * gemm_operand_bytes(recipe_) + 2.0 * k.m * k.n) * k.batch /
                          mem_bw
                    : mem_t;
            return std::max(std::max(k.flops / (peak * e), t_mem) + gpu_.kernel_overhead_s,
                            gpu_.gemm_min_time_s);
        }
        case KernelKind::flash_attention: {
            // FP8 attention (Kernel::fp8, Layout::fp8_attention): the matmuls at the FP8 rate, scaled as an
            // FP8 GEMM's is against its 16-bit twin (fp8_gemm_efficiency), the shape factors unchanged.
            // FlashAttention-3 (Shah et al. 2024, arXiv:2407.08608, abstract): FP8 forward ~1.2 PFLOP/s
            // against 740 TFLOP/s in BF16 on H100, 1.6x; 2 x 0.848 = 1.7x here on H100.
            const double eff = attention_efficiency(gpu_, k.attention, k.attention_shape);
            const double peak = k.fp8 ? peak_fp8_ * gpu_.fp8_gemm_efficiency : peak_;
            if (!(peak > 0))
                throw InputError(fmt::format("FP8 attention is not supported by GPU {}", gpu_.name));
            return std::max(k.flops / (peak * eff), mem_t) + gpu_.kernel_overhead_s;
        }
        case KernelKind::memory_bound:
            return mem_t + gpu_.kernel_overhead_s;
        case KernelKind::host_copy:
            return k.bytes /
                   (require(host_.pcie_bytes_per_s, "scale_out.pcie_bandwidth") * kPcieCopyEfficiency);
        case KernelKind::host_compute:
            return k.bytes /
                   (require(host_.host_memory_bytes_per_s, "host.memory_bandwidth") * kHostStreamEfficiency);
        case KernelKind::nvme_io:
            return k.bytes / require(host_.nvme_bytes_per_s, "host.nvme_bandwidth");
    }
    return 0;
}

}  // namespace trainsim
