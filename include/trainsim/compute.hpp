// Compute model: the duration of one GPU kernel from its FLOPs, the bytes it moves and its shape.
//
//  GEMM  [M x K] · [K x N], `batch` independent products (2·M·N·K·batch FLOPs):
//        t = max(max(FLOPs / (peak · e), bytes / (HBM · hbm_efficiency)) + kernel_overhead, gemm_min_time_s)
//        peak: the 16-bit peak, or for the low-precision GEMMs of an fp8 layout (Kernel::fp8) by the layout's
//          recipe (Fp8Recipe, layout.hpp):
//            delayed, tensorwise, rowwise, mxfp8   FP8 peak · fp8_gemm_efficiency
//            nvfp4                                 FP4 peak · fp4_gemm_efficiency
//          MXFP8 and NVFP4 run on block-scaled tensor cores (Blackwell tcgen05.mma kind::mxf8f6f4 /
//          kind::mxf4nvf4 with .block_scale: the per-block scales are applied inside the MMA, so the rate
//          is the format's dense peak; PTX ISA 8.7 "tcgen05.mma"; TransformerEngine
//          docs/features/low_precision_training/mxfp8/mxfp8.rst and nvfp4/nvfp4.rst: "native hardware
//          acceleration on Blackwell", SM 10.0 / 10.3 only); a GPU without them (GpuSpec::block_scaled_mma,
//          e.g. Hopper) refuses the recipe.
//        bytes (block-scaled recipes): both operands at gemm_operand_bytes(recipe) per element (data and
//          block scales), the output in bf16 (2 B): (M·K + K·N)·operand + 2·M·N per product. Other
//          GEMMs: Kernel::gemm's elem_bytes for operands and output alike.
//        e = gemm_max_efficiency · shape(M, N, batch) · K / (K + gemm_k_half) · S' / SMs, S' = SMs minus
//            the SMs held by overlapped communication kernels (Kernel::sms_reserved; shape() over S')
//        shape(): the best, over the library's tile shapes, of tile_efficiency · edge · waves, where
//          edge  = M·N / (ceil(M/tm)·tm · ceil(N/tn)·tn)          (tile quantization)
//          waves = tiles / (ceil(tiles / S') · S')                 (wave quantization)
//        (NVIDIA "Matrix Multiplication Background User's Guide": tile and wave quantization.)
//  fused attention: t = max(FLOPs / (peak · eff), bytes / (HBM · hbm_efficiency)) + kernel_overhead,
//        eff = attention_efficiency(backend, shape) = e_max · (backward ? bwd_factor : 1)
//              · n / (n + cta_half) · w / (w + key_half)    (constants of the backend, gpu_catalog.hpp)
//        n = batch·heads · ceil(L / 128) / SMs: CTAs per SM, one CTA per 128-row tile of queries (forward,
//            L = q length) or of keys (backward, L = kv length), FlashAttention-2's and cuDNN's grids on
//            sm80/sm90 (Dao 2023, arXiv:2307.08691, Sec. 3.2 "parallelism"). The causal tiles are unequal
//            (tile i visits i+1 key tiles), so the SMs idle while the longest finish: a tail of about one
//            CTA per SM, hence the saturation in n rather than a hard wave count.
//        w = keys each tile visits on average · head_dim / 128 (causal: kv length / 2, which holds for
//            context parallelism's load-balanced chunks too: each rank's s/cp queries meet s/2 keys on
//            average): the per-tile fixed cost (Q load, softmax rescale, O write) amortised over the key
//            loop, whose work per key grows with head_dim. A sliding window: FusedAttentionShape::window_keys
//            in place of kv length / 2.
//  memory-bound (element-wise, norms, softmax, optimizer): t = bytes / (HBM · hbm_efficiency) +
//  kernel_overhead
//  offloaded optimizer work (ZeRO-Offload / ZeRO-Infinity), no kernel overhead:
//        host_copy     t = bytes / (PCIe per direction · kPcieCopyEfficiency)
//        host_compute  t = bytes / (host DRAM bandwidth per GPU · kHostStreamEfficiency)
//        nvme_io       t = bytes / NVMe bandwidth per GPU
// Constants come from the GpuSpec (one value per GPU type); tile shapes and their relative efficiencies are
// the same for all GPUs (kTileShapes in sim/compute/compute_model.cpp).
//
// With a hardware profile (trainsim-profile/1, profile.hpp) the measured times replace the formulas where the
// profile measured something close enough (docs/calibration.md, "Interpolation"):
//  GEMM       rows of the same dtype (fp8 for FP8 GEMMs, else the layout's 16-bit type) and batch. The same
//             (m, n, k): the geometric mean of their times. Otherwise the rows whose m, n and k are each
//             within a factor 2 of the kernel's (the "measured hull"), at most 8, nearest first in (log2 m,
//             log2 n, log2 k): t = t_analytic · exp(sum w_i·log(t_i / t_analytic,i) / sum w_i), w_i = 1 /
//             distance_i² (the analytic model's shape dependence, corrected by the measured ratio
//             interpolated in log space). No such row: the analytic model.
//  attention  (cudnn, flash) rows of the same backend and pass; each row's FLOPs and bytes by the program
//             builder's formulas (attention_flops_bytes); the row nearest in (log FLOPs, log bytes), scaled
//             by the FLOP ratio: t = t_row · FLOPs / FLOPs_row (the row's achieved FLOP/s). The pass is
//             read from the kernel's name (the builder's "..._bwd").
//  memory-bound  bandwidth = bytes / time of the profile row nearest in bytes among those of the kernel's
//             class: a row named like the kernel; else norms (*_norm, *_norm_bwd) take layernorm/rmsnorm
//             rows, activations (gelu*, swiglu*) gelu/swiglu rows, everything else copy rows; t = bytes /
//             bandwidth + kernel_overhead_s (a bulk measurement holds no per-kernel cost).
// Measured kernel times are taken as they are (no kernel_overhead_s added: the timing holds the kernel's own
// ramp and tail). Host-side kernels are always analytic.
// Host-bound issue: a kernel with Kernel::host_issue_s > 0 takes t = max(t, host_issue_s), modelled or
// measured (the host thread issuing it is the bottleneck, e.g. a Python loop per partition).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"

namespace trainsim {

struct Profile;

enum class KernelKind { gemm, flash_attention, memory_bound, host_copy, host_compute, nvme_io };

/// Fraction of the PCIe per-direction rate a pinned-memory cudaMemcpy reaches (CUDA samples' bandwidthTest
/// on x16 links: about 25 of 32 GB/s on Gen4, 50 of 64 GB/s on Gen5).
inline constexpr double kPcieCopyEfficiency = 0.8;
/// Fraction of the host's DRAM bandwidth a vectorized CPU optimizer loop streams at (DeepSpeed CPU-Adam is an
/// AVX loop over fp32 master weights, moments and gradients: memory-bound; STREAM triad reaches 70-80 % of
/// the DRAM peak on two-socket servers, and the loop also converts to fp16 and shares the sockets with the
/// data loader; 0.5 is an assumption, not a measurement: calibrate it when offload matters).
inline constexpr double kHostStreamEfficiency = 0.5;

/// The host side of one GPU, for offloaded optimizer work. Zero: not described (offload is then refused).
struct HostLinks {
    double pcie_bytes_per_s = 0;         ///< GPU <-> host, per direction
    double host_memory_bytes_per_s = 0;  ///< host DRAM bandwidth per GPU (the node's / GPUs per node)
    double nvme_bytes_per_s = 0;         ///< NVMe bandwidth per GPU (the node's / GPUs per node)
};

/// The shape of one fused attention kernel on one GPU (after TP division; with context parallelism the
/// rank's queries against the whole sequence's keys).
struct FusedAttentionShape {
    double batch_heads = 0;  ///< micro-batch · query heads on this GPU
    double q_len = 0;        ///< queries per sequence (s / cp)
    double kv_len = 0;       ///< keys per sequence (s)
    double head_dim = 0;     ///< d
    bool causal = true;      ///< causal mask (the kernel skips the masked tiles)
    bool backward = false;   ///< the backward kernel (names ending in _bwd)
    /// Sliding window (ModelSpec::sliding_window): keys each query visits (window_key_span in
    /// include/trainsim/program.hpp) in place of the causal kv_len / 2 in the CTA work w; 0: no window. The
    /// grid is unchanged (a CTA per 128 queries forward, per 128 keys backward).
    double window_keys = 0;
};

/// A FlashAttention-1-class kernel's rate relative to FlashAttention-2's on the same shape and GPU
/// (AttentionKernel::flash1): Dao 2023, "FlashAttention-2" (arXiv:2307.08691), abstract and Sec. 4.1
/// (Fig. 4-6, A100): FlashAttention-2 is "around 2x" faster than FlashAttention; llm-foundry's Triton port
/// (llmfoundry/models/layers/flash_attn_triton.py, from flash-attn eff9fe6): "Overall Triton forward +
/// backward is slightly slower than CUDA forward + backward" (FlashAttention-1's CUDA kernels). One value for
/// forward and backward and every GPU (no FlashAttention-1 kernel was measured).
inline constexpr double kFlashAttention1RelativeSpeed = 0.5;

/// Fraction of the 16-bit peak that fused attention of `backend` reaches on `shape` (the formula in the
/// header comment; constants from `gpu`; `flash1` at kFlashAttention1RelativeSpeed of `flash`). Throws
/// InternalError when the shape is not given (a size <= 0) or the backend is unfused.
double attention_efficiency(const GpuSpec& gpu, AttentionKernel backend, const FusedAttentionShape& shape);

/// One GPU kernel's work. Shapes are per GPU (after TP division).
struct Kernel {
    KernelKind kind = KernelKind::memory_bound;
    const char* name = "";
    double flops = 0;  ///< floating-point operations (multiply-add = 2)
    double bytes = 0;  ///< bytes read + written in HBM
    // GEMM shape (kind == gemm)
    double m = 0, n = 0, k = 0, batch = 1;
    /// GEMM operands in the layout's low-precision format (kind == gemm): FP8 (e4m3/e5m2), or MXFP8 / NVFP4
    /// by the recipe the ComputeModel was built with; timed against that format's peak. Every other
    /// kernel runs at the 16-bit peak of the layout's precision (bf16 for fp8 layouts: TransformerEngine
    /// and torchao Float8 keep attention, norms and the LM head in bf16).
    bool fp8 = false;
    /// Of `bytes` (kind == memory_bound), those that write, or read and write, the transposed copy of an FP8
    /// tensor that Hopper's TN-only FP8 GEMMs need (TransformerEngine's per-tensor recipes: cast_transpose,
    /// the wgrad transpose of a norm-fused FP8 input, the per-step transpose of FP8-gathered weights). On a
    /// GPU with GpuSpec::fp8_gemm_any_layout they are not moved; a kernel made only of them is not run.
    double fp8_transpose_bytes = 0;
    /// SMs held by communication kernels running beside this GEMM (kind == gemm; TE userbuffers' pipelined
    /// reduce-scatter overlap, sim/program/layer_ops.cpp): the GEMM's tiles run on sm_count - sms_reserved
    /// SMs (the wave quantization of shape() over those SMs, the peak scaled by their share); a profile's
    /// measured time is scaled by sm_count / (sm_count - sms_reserved). 0: the whole GPU.
    double sms_reserved = 0;
    /// The host thread's time to issue this kernel (s), when the framework's host work between kernels is
    /// longer than the kernel: back to back on an idle GPU, such a kernel cannot finish sooner than the host
    /// issues the next, so cost() is at least this. 0: the GPU side only. Set for DeepSpeed 2021 ZeRO-3's
    /// per-partition copies (kDs3ListAllGatherHostPerPartitionS, layout.hpp).
    double host_issue_s = 0;
    /// Fused attention backend (kind == flash_attention): flash (FlashAttention-2) or cudnn.
    AttentionKernel attention = AttentionKernel::flash;
    /// Fused attention's shape (kind == flash_attention; required by the analytic model).
    FusedAttentionShape attention_shape;

    /// `elem_bytes` 1 marks an FP8 GEMM (fp8 = true), 2 a 16-bit one.
    static Kernel gemm(const char* name, double m, double n, double k, double batch = 1,
                       double elem_bytes = 2);
    static Kernel flash(const char* name, double flops, double bytes, AttentionKernel backend,
                        const FusedAttentionShape& shape);
    static Kernel memory(const char* name, double bytes);
    /// Offloaded work of kind host_copy, host_compute or nvme_io moving `bytes`.
    static Kernel host(KernelKind kind, const char* name, double bytes);
};

/// FLOPs and HBM bytes of one fused attention kernel as the program builder counts them
/// (sim/program/layer_ops.cpp): forward 0.5·4·b·h·s²·d FLOPs when causal (4·b·h·s²·d when not), bytes
/// E·b·s·(2h + 2g)·d with E = 2 (Q, O, K, V); backward 2.5x the FLOPs and 2x the bytes.
struct AttentionWork {
    double flops = 0, bytes = 0;
};
AttentionWork attention_flops_bytes(double batch, double heads, double kv_heads, double seq, double head_dim,
                                    bool causal, bool backward);

/// Bytes per element of a GEMM operand quantized by `recipe` (block scales included): mxfp8 1 + 1/32 (E4M3
/// data, one E8M0 scale per 32 elements), nvfp4 0.5 + 1/16 (E2M1 data, one E4M3 scale per 16 elements; the
/// per-tensor fp32 scale is negligible), the per-tensor and per-row FP8 recipes 1 (their scales are one per
/// tensor or row). TransformerEngine mxfp8.rst / nvfp4.rst "Data Format".
double gemm_operand_bytes(Fp8Recipe recipe);

/// A kernel's duration and where it came from.
struct KernelCost {
    double seconds = 0;
    bool from_profile = false;
};

class ComputeModel {
  public:
    /// `profile` (may be null): measured kernel times of this GPU type. `recipe`: the layout's fp8_recipe,
    /// which sets the rate and operand bytes of the Kernel::fp8 GEMMs (header comment). Throws
    /// InputError naming both when the profile describes another GPU than `gpu`, and, for an fp8
    /// layout, naming the recipe and the GPU when the GPU lacks what the recipe needs (FP8 tensor cores;
    /// block-scaled tensor cores for mxfp8 and nvfp4; FP4 for nvfp4).
    ComputeModel(const GpuSpec& gpu, Precision precision, HostLinks host = {},
                 std::shared_ptr<const Profile> profile = nullptr, Fp8Recipe recipe = Fp8Recipe::delayed);
    ~ComputeModel();
    ComputeModel(const ComputeModel&) = delete;
    ComputeModel& operator=(const ComputeModel&) = delete;
    /// Duration in seconds of `k` on this GPU. Throws InputError for offloaded work when the host side is
    /// not described (HostLinks zero).
    double seconds(const Kernel& k) const { return cost(k).seconds; }
    /// Duration and whether the profile gave it (see the header comment).
    KernelCost cost(const Kernel& k) const;
    /// Duration by the analytic model alone (the profile ignored).
    double analytic_seconds(const Kernel& k) const;
    const Profile* profile() const { return profile_.get(); }
    /// The shape factor shape(M, N, batch) above, in (0, 1].
    double gemm_shape_efficiency(double m, double n, double batch, double sms_reserved = 0) const;
    const GpuSpec& gpu() const { return gpu_; }
    /// Peak FLOP/s of the layout's 16-bit precision (bf16 for fp8 layouts).
    double peak_flops() const { return peak_; }

  private:
    static double require(double bytes_per_s, const char* field);
    /// cost() without the host-issue floor (Kernel::host_issue_s).
    KernelCost device_cost(const Kernel& k) const;
    /// SMs a GEMM runs on: sm_count - sms_reserved (at least 1).
    double sm_share(const Kernel& k) const;
    const GpuSpec& gpu_;
    double peak_;       ///< 16-bit peak (fp16 or bf16)
    double peak_fp8_;   ///< FP8 peak, 0 when the GPU has none
    double peak_fp4_;   ///< FP4 peak, 0 when the GPU has none
    Fp8Recipe recipe_;  ///< the layout's recipe for the Kernel::fp8 GEMMs
    HostLinks host_;
    std::shared_ptr<const Profile> profile_;
    struct Tables;  ///< the profile's rows indexed for lookups (sim/compute/profile_lookup.cpp)
    std::unique_ptr<Tables> tables_;
    bool fp16_;
    bool profile_cost(const Kernel& k, double& seconds) const;
};

}  // namespace trainsim
