// Compute model: the duration of one GPU kernel from its FLOPs, the bytes it moves and its shape.
//
//  GEMM  [M x K] · [K x N], `batch` independent products (2·M·N·K·batch FLOPs):
//        t = max(FLOPs / (peak · e), bytes / (HBM · hbm_efficiency)) + kernel_overhead
//        e = gemm_max_efficiency · shape(M, N, batch) · K / (K + gemm_k_half)
//        shape(): the best, over the library's tile shapes, of tile_efficiency · edge · waves, where
//          edge  = M·N / (ceil(M/tm)·tm · ceil(N/tn)·tn)          (tile quantization)
//          waves = tiles / (ceil(tiles / SMs) · SMs)               (wave quantization)
//        (NVIDIA "Matrix Multiplication Background User's Guide": tile and wave quantization.)
//  flash attention: t = max(FLOPs / (peak · flash_attention_efficiency), bytes / (HBM · hbm_efficiency))
//                   + kernel_overhead
//  memory-bound (element-wise, norms, softmax, optimizer): t = bytes / (HBM · hbm_efficiency) +
//  kernel_overhead
//  offloaded optimizer work (ZeRO-Offload / ZeRO-Infinity), no kernel overhead:
//        host_copy     t = bytes / (PCIe per direction · kPcieCopyEfficiency)
//        host_compute  t = bytes / (host DRAM bandwidth per GPU · kHostStreamEfficiency)
//        nvme_io       t = bytes / NVMe bandwidth per GPU
// Constants come from the GpuSpec (one value per GPU type); tile shapes and their relative efficiencies are
// the same for all GPUs (kTileShapes in sim/compute/compute_model.cpp).
#pragma once

#include <string>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/layout.hpp"

namespace trainsim {

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

/// One GPU kernel's work. Shapes are per GPU (after TP division).
struct Kernel {
    KernelKind kind = KernelKind::memory_bound;
    const char* name = "";
    double flops = 0;  ///< floating-point operations (multiply-add = 2)
    double bytes = 0;  ///< bytes read + written in HBM
    // GEMM shape (kind == gemm)
    double m = 0, n = 0, k = 0, batch = 1;
    /// GEMM operands in FP8 (e4m3/e5m2, kind == gemm): timed against the FP8 peak. Every other kernel runs
    /// at the 16-bit peak of the layout's precision (bf16 for fp8 layouts: TransformerEngine and torchao
    /// Float8 keep attention, norms and the LM head in bf16).
    bool fp8 = false;
    /// Fused attention backend (kind == flash_attention): flash (FlashAttention-2) or cudnn.
    AttentionKernel attention = AttentionKernel::flash;

    /// `elem_bytes` 1 marks an FP8 GEMM (fp8 = true), 2 a 16-bit one.
    static Kernel gemm(const char* name, double m, double n, double k, double batch = 1,
                       double elem_bytes = 2);
    static Kernel flash(const char* name, double flops, double bytes,
                        AttentionKernel backend = AttentionKernel::flash);
    static Kernel memory(const char* name, double bytes);
    /// Offloaded work of kind host_copy, host_compute or nvme_io moving `bytes`.
    static Kernel host(KernelKind kind, const char* name, double bytes);
};

class ComputeModel {
  public:
    ComputeModel(const GpuSpec& gpu, Precision precision, HostLinks host = {});
    /// Duration in seconds of `k` on this GPU. Throws InputError for offloaded work when the host side is
    /// not described (HostLinks zero).
    double seconds(const Kernel& k) const;
    /// The shape factor shape(M, N, batch) above, in (0, 1].
    double gemm_shape_efficiency(double m, double n, double batch) const;
    const GpuSpec& gpu() const { return gpu_; }
    /// Peak FLOP/s of the layout's 16-bit precision (bf16 for fp8 layouts).
    double peak_flops() const { return peak_; }

  private:
    static double require(double bytes_per_s, const char* field);
    const GpuSpec& gpu_;
    double peak_;       ///< 16-bit peak (fp16 or bf16)
    double peak_fp8_;   ///< FP8 peak, 0 when the GPU has none
    HostLinks host_;
};

}  // namespace trainsim
