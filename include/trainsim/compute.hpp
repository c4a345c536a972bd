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
// Constants come from the GpuSpec (one value per GPU type); tile shapes and their relative efficiencies are
// the same for all GPUs (kTileShapes in sim/compute/compute_model.cpp).
#pragma once

#include <string>

#include "trainsim/gpu_catalog.hpp"

namespace trainsim {

enum class KernelKind { gemm, flash_attention, memory_bound };

/// One GPU kernel's work. Shapes are per GPU (after TP division).
struct Kernel {
    KernelKind kind = KernelKind::memory_bound;
    const char* name = "";
    double flops = 0;  ///< floating-point operations (multiply-add = 2)
    double bytes = 0;  ///< bytes read + written in HBM
    // GEMM shape (kind == gemm)
    double m = 0, n = 0, k = 0, batch = 1;

    static Kernel gemm(const char* name, double m, double n, double k, double batch = 1,
                       double elem_bytes = 2);
    static Kernel flash(const char* name, double flops, double bytes);
    static Kernel memory(const char* name, double bytes);
};

class ComputeModel {
  public:
    ComputeModel(const GpuSpec& gpu, Precision precision);
    /// Duration in seconds of `k` on this GPU.
    double seconds(const Kernel& k) const;
    /// The shape factor shape(M, N, batch) above, in (0, 1].
    double gemm_shape_efficiency(double m, double n, double batch) const;
    const GpuSpec& gpu() const { return gpu_; }
    double peak_flops() const { return peak_; }

  private:
    const GpuSpec& gpu_;
    double peak_;
};

}  // namespace trainsim
