// ComputeModel against rooflines computed by hand (include/trainsim/compute.hpp's formulas) on a made-up GPU
// whose constants are round numbers, so every expected time below is written out from the formula.
#include <doctest/doctest.h>

#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/gpu_catalog.hpp"

using namespace trainsim;

namespace {

/// 100 TFLOP/s bf16 and fp16, 200 TFLOP/s fp8, 1 TB/s HBM at 50 %, 128 SMs, 2 us per kernel.
GpuSpec round_gpu() {
    GpuSpec g;
    g.name = "round-test-gpu";
    g.peak_fp16_flops = 100e12;
    g.peak_bf16_flops = 100e12;
    g.peak_fp8_flops = 200e12;
    g.hbm_bytes = 80e9;
    g.hbm_bytes_per_s = 1e12;
    g.sm_count = 128;
    g.gemm_max_efficiency = 0.8;
    g.gemm_k_half = 1024;
    g.fp8_gemm_efficiency = 0.75;
    g.gemm_min_time_s = 5e-6;
    g.flash_attention_efficiency = 0.5;
    g.flash_attention_bwd_factor = 0.8;
    g.flash_attention_cta_half = 1;
    g.flash_attention_key_half = 2;
    g.hbm_efficiency = 0.5;
    g.kernel_overhead_s = 2e-6;
    return g;
}

constexpr double kMemBw = 1e12 * 0.5;  // HBM · hbm_efficiency, bytes/s
constexpr double kOverhead = 2e-6;

}  // namespace

TEST_CASE("compute model: a large square GEMM is compute-bound at max efficiency · K / (K + k_half)") {
    const GpuSpec gpu = round_gpu();
    const ComputeModel cm(gpu, Precision::bf16);
    // 4096³: 256x128 tiles -> 16 x 32 = 512 tiles, exactly 4 waves on 128 SMs, no edge: shape factor 1.
    CHECK(cm.gemm_shape_efficiency(4096, 4096, 1) == 1.0);
    const Kernel k = Kernel::gemm("fc1", 4096, 4096, 4096);
    CHECK(k.flops == 2.0 * 4096 * 4096 * 4096);
    CHECK(k.bytes == 2.0 * 3 * 4096 * 4096);
    // e = 0.8 · 1 · 4096 / (4096 + 1024) = 0.64; compute 2·4096³ / (100e12 · 0.64) = 2.147 ms against
    // memory 100.7 MB / 0.5 TB/s = 0.201 ms.
    const double e = 0.8 * 4096.0 / (4096.0 + 1024.0);
    const double expected = 2.0 * 4096 * 4096 * 4096 / (100e12 * e) + kOverhead;
    CHECK(cm.seconds(k) == doctest::Approx(expected).epsilon(1e-12));
    CHECK(cm.seconds(k) == doctest::Approx(2.14950e-3).epsilon(1e-4));
    // FP8 operands: against the FP8 peak · fp8_gemm_efficiency = 150 TFLOP/s; 1-byte operands.
    const ComputeModel cm8(gpu, Precision::fp8);
    const Kernel k8 = Kernel::gemm("fc1", 4096, 4096, 4096, 1, 1);
    CHECK(k8.fp8);
    CHECK(cm8.seconds(k8) == doctest::Approx(2.0 * 4096 * 4096 * 4096 / (150e12 * e) + kOverhead));
    // The 16-bit GEMMs of an fp8 layout stay at the bf16 peak.
    CHECK(cm8.seconds(k) == doctest::Approx(expected).epsilon(1e-12));
}

TEST_CASE("compute model: a thin-K GEMM is memory-bound") {
    GpuSpec gpu = round_gpu();
    gpu.gemm_k_half = 0;  // no K prologue cost: e = 0.8 · shape
    const ComputeModel cm(gpu, Precision::bf16);
    // 8192 x 8192 x 64: 256x128 tiles -> 32 x 64 = 2048 tiles, 16 full waves: shape 1, e = 0.8.
    // compute 2·8192²·64 / 80e12 = 0.107 ms; memory 2·(8192·64 + 64·8192 + 8192²) B = 136.3 MB at
    // 0.5 TB/s = 0.273 ms.
    const Kernel k = Kernel::gemm("wgrad", 8192, 8192, 64);
    const double bytes = 2.0 * (8192.0 * 64 + 64.0 * 8192 + 8192.0 * 8192);
    CHECK(k.bytes == bytes);
    CHECK(cm.seconds(k) == doctest::Approx(bytes / kMemBw + kOverhead).epsilon(1e-12));
    CHECK(cm.seconds(k) == doctest::Approx(0.274630e-3).epsilon(1e-4));
}

TEST_CASE("compute model: a host-bound kernel takes the host's issue time") {
    const GpuSpec gpu = round_gpu();  // ComputeModel keeps a reference
    const ComputeModel cm(gpu, Precision::bf16);
    // 1 MB copy: 1e6 / 0.5e12 = 2 us + 2 us overhead = 4 us on the GPU.
    Kernel k = Kernel::memory("copy", 1e6);
    CHECK(cm.seconds(k) == doctest::Approx(4e-6).epsilon(1e-12));
    k.host_issue_s = 31e-6;  // the host issues it no faster
    CHECK(cm.seconds(k) == doctest::Approx(31e-6).epsilon(1e-12));
    k.host_issue_s = 1e-6;  // shorter than the GPU side: no effect
    CHECK(cm.seconds(k) == doctest::Approx(4e-6).epsilon(1e-12));
}

TEST_CASE("compute model: wave quantization and the GEMM floor") {
    GpuSpec gpu = round_gpu();
    gpu.sm_count = 100;
    const ComputeModel cm(gpu, Precision::bf16);
    // 4096 x 4096 on 100 SMs, per tile shape (edge 1 everywhere):
    //   256x128: 512 tiles / (6 waves · 100)    = 0.8533 · 1.00
    //   128x128: 1024 tiles / (11 · 100)        = 0.9309 · 0.95 = 0.8844   <- best
    //   128x64:  2048 tiles / (21 · 100)        = 0.9752 · 0.85 = 0.8290
    //   64x64:   4096 tiles / (41 · 100)        = 0.9990 · 0.70 = 0.6993
    CHECK(cm.gemm_shape_efficiency(4096, 4096, 1) == doctest::Approx(1024.0 / 1100.0 * 0.95).epsilon(1e-12));
    // Tile quantization: 100 x 100 in one 128x128 tile (edge 10000 / 16384), 1 tile on 100 SMs (waves
    // 0.01); the 64x64 tiles do better: 4 tiles, edge 10000 / 16384, waves 0.04, · 0.70.
    CHECK(cm.gemm_shape_efficiency(100, 100, 1) ==
          doctest::Approx(0.70 * 10000.0 / 16384.0 * 0.04).epsilon(1e-12));
    // 64³: one 64x64 tile (edge 1, waves 0.01, · 0.70) beats 128x64 (edge 0.5 · 0.85): shape 0.007;
    // e = 0.8 · 0.007 · 64 / (64 + 1024); 2·64³ FLOPs take 15.9 us + 2 us, above the 5 us floor.
    CHECK(cm.gemm_shape_efficiency(64, 64, 1) == doctest::Approx(0.007).epsilon(1e-12));
    const double tiny_e = 0.8 * 0.007 * 64.0 / (64.0 + 1024.0);
    const Kernel tiny = Kernel::gemm("tiny", 64, 64, 64);
    CHECK(cm.seconds(tiny) ==
          doctest::Approx(2.0 * 64 * 64 * 64 / (100e12 * tiny_e) + kOverhead).epsilon(1e-12));
    // With a 20 us floor (gemm_min_time_s) the same GEMM takes the floor.
    gpu.gemm_min_time_s = 20e-6;
    const ComputeModel floored(gpu, Precision::bf16);
    CHECK(floored.seconds(tiny) == 20e-6);
}

TEST_CASE("compute model: a GEMM beside communication kernels holding SMs runs on the rest") {
    const GpuSpec gpu = round_gpu();
    const ComputeModel cm(gpu, Precision::bf16);
    // 4096³ with 16 of the 128 SMs held (TE userbuffers' pipelined reduce-scatter): 112 SMs. Per tile shape:
    //   256x128: 512 tiles / (5 waves · 112)  = 0.9143 · 1.00            <- best
    //   128x128: 1024 tiles / (10 · 112)      = 0.9143 · 0.95 = 0.8686
    // e = 0.8 · 0.9143 · (112 / 128) · 4096 / (4096 + 1024).
    CHECK(cm.gemm_shape_efficiency(4096, 4096, 1, 16) == doctest::Approx(512.0 / 560.0).epsilon(1e-12));
    Kernel k = Kernel::gemm("proj", 4096, 4096, 4096);
    k.sms_reserved = 16;
    const double e = 0.8 * (512.0 / 560.0) * (112.0 / 128.0) * 4096.0 / (4096.0 + 1024.0);
    CHECK(cm.seconds(k) ==
          doctest::Approx(2.0 * 4096 * 4096 * 4096 / (100e12 * e) + kOverhead).epsilon(1e-12));
    // More SMs reserved than the GPU has: one SM left, never a division by zero.
    k.sms_reserved = 1000;
    CHECK(cm.seconds(k) > 100 * cm.seconds(Kernel::gemm("proj", 4096, 4096, 4096)));
}

TEST_CASE("compute model: fused attention at its shape-dependent efficiency") {
    const GpuSpec gpu = round_gpu();
    const ComputeModel cm(gpu, Precision::bf16);
    // b·h = 32, s = 4096, d = 128, causal. Forward: 32 · ceil(4096 / 128) = 1024 CTAs, 8 per SM: fill 8 / 9;
    // keys per tile 0.5 · 4096 · 128 / 128 = 2048: saturation 2048 / 2050; eff = 0.5 · 8/9 · 2048/2050.
    FusedAttentionShape s;
    s.batch_heads = 32;
    s.q_len = 4096;
    s.kv_len = 4096;
    s.head_dim = 128;
    s.causal = true;
    const double eff = 0.5 * (8.0 / 9.0) * (2048.0 / 2050.0);
    CHECK(attention_efficiency(gpu, AttentionKernel::flash, s) == doctest::Approx(eff).epsilon(1e-12));
    const AttentionWork w = attention_flops_bytes(1, 32, 32, 4096, 128, true, false);
    CHECK(w.flops == 0.5 * 4 * 32 * 4096.0 * 4096 * 128);
    CHECK(w.bytes == 2.0 * 4096 * (2 * 32 + 2 * 32) * 128);
    // compute 68.7 GFLOP / (100e12 · 0.4440) = 1.548 ms against memory 134 MB / 0.5 TB/s = 0.268 ms.
    const Kernel fwd = Kernel::flash("attn", w.flops, w.bytes, AttentionKernel::flash, s);
    CHECK(cm.seconds(fwd) == doctest::Approx(w.flops / (100e12 * eff) + kOverhead).epsilon(1e-12));
    // Backward: 2.5x the FLOPs and 2x the bytes, at eff · bwd_factor 0.8 (CTAs over keys: the same count).
    s.backward = true;
    const AttentionWork wb = attention_flops_bytes(1, 32, 32, 4096, 128, true, true);
    CHECK(wb.flops == 2.5 * w.flops);
    CHECK(wb.bytes == 2.0 * w.bytes);
    const Kernel bwd = Kernel::flash("attn_bwd", wb.flops, wb.bytes, AttentionKernel::flash, s);
    CHECK(cm.seconds(bwd) == doctest::Approx(wb.flops / (100e12 * eff * 0.8) + kOverhead).epsilon(1e-12));
    // A short sequence with few heads: 2 CTAs on 128 SMs, fill (2/128) / (2/128 + 1); keys per tile 64:
    // saturation 64 / 66.
    FusedAttentionShape small = s;
    small.backward = false;
    small.batch_heads = 1;
    small.q_len = small.kv_len = 256;
    const double per_sm = 2.0 / 128.0;
    CHECK(attention_efficiency(gpu, AttentionKernel::flash, small) ==
          doctest::Approx(0.5 * per_sm / (per_sm + 1) * (128.0 / 130.0)).epsilon(1e-12));
    CHECK_THROWS_AS(attention_efficiency(gpu, AttentionKernel::unfused, s), InternalError);
}

TEST_CASE("compute model: element-wise kernels stream at the HBM efficiency; host work at its links") {
    const GpuSpec gpu = round_gpu();
    HostLinks host;
    host.pcie_bytes_per_s = 32e9;
    host.host_memory_bytes_per_s = 100e9;
    host.nvme_bytes_per_s = 4e9;
    const ComputeModel cm(gpu, Precision::bf16, host);
    // 1 GB read + written at 1 TB/s · 0.5: 2 ms, plus the 2 us kernel overhead.
    CHECK(cm.seconds(Kernel::memory("gelu", 1e9)) == doctest::Approx(2.002e-3).epsilon(1e-12));
    CHECK(cm.seconds(Kernel::host(KernelKind::host_copy, "d2h", 1e9)) ==
          doctest::Approx(1e9 / (32e9 * kPcieCopyEfficiency)).epsilon(1e-12));
    CHECK(cm.seconds(Kernel::host(KernelKind::host_compute, "cpu_adam", 1e9)) ==
          doctest::Approx(1e9 / (100e9 * kHostStreamEfficiency)).epsilon(1e-12));
    CHECK(cm.seconds(Kernel::host(KernelKind::nvme_io, "swap", 1e9)) == doctest::Approx(0.25).epsilon(1e-12));
    // Without the host side described, offloaded work is refused.
    const ComputeModel bare(gpu, Precision::bf16);
    CHECK_THROWS_AS(bare.seconds(Kernel::host(KernelKind::host_copy, "d2h", 1e9)), InputError);
}

TEST_CASE("compute model: FP8 transposes are not moved where FP8 GEMMs take any operand layout") {
    GpuSpec gpu = round_gpu();
    Kernel cast = Kernel::memory("fp8_cast_input", 3e9);  // read 2 B, write 1 B and its 1-B transpose
    cast.fp8_transpose_bytes = 1e9;
    Kernel transpose = Kernel::memory("fp8_transpose_input", 2e9);  // read 1 B, write 1 B: a transpose only
    transpose.fp8_transpose_bytes = 2e9;
    const ComputeModel hopper(gpu, Precision::fp8);
    CHECK(hopper.seconds(cast) == doctest::Approx(3e9 / kMemBw + kOverhead).epsilon(1e-12));
    CHECK(hopper.seconds(transpose) == doctest::Approx(2e9 / kMemBw + kOverhead).epsilon(1e-12));
    gpu.fp8_gemm_any_layout = true;
    const ComputeModel blackwell(gpu, Precision::fp8);
    CHECK(blackwell.seconds(cast) == doctest::Approx(2e9 / kMemBw + kOverhead).epsilon(1e-12));
    CHECK(blackwell.seconds(transpose) == 0.0);  // not launched at all
    CHECK(blackwell.seconds(Kernel::memory("gelu", 1e9)) ==
          doctest::Approx(1e9 / kMemBw + kOverhead).epsilon(1e-12));
}

TEST_CASE("compute model: MXFP8 and NVFP4 GEMMs at the FP8 and FP4 rates with block-scaled operand bytes") {
    GpuSpec gpu = round_gpu();
    gpu.peak_fp4_flops = 400e12;
    gpu.fp4_gemm_efficiency = 0.5;
    gpu.block_scaled_mma = true;
    const double e = 0.8 * 4096.0 / (4096.0 + 1024.0);  // shape factor 1 (first test case)
    const Kernel k8 = Kernel::gemm("fc1", 4096, 4096, 4096, 1, 1);
    // MXFP8: FP8 peak · fp8_gemm_efficiency = 150 TFLOP/s, compute-bound as the per-tensor FP8 GEMM.
    const ComputeModel mx(gpu, Precision::fp8, {}, nullptr, Fp8Recipe::mxfp8);
    CHECK(mx.seconds(k8) == doctest::Approx(2.0 * 4096 * 4096 * 4096 / (150e12 * e) + kOverhead));
    // NVFP4: FP4 peak · fp4_gemm_efficiency = 200 TFLOP/s.
    const ComputeModel fp4(gpu, Precision::fp8, {}, nullptr, Fp8Recipe::nvfp4);
    CHECK(fp4.seconds(k8) == doctest::Approx(2.0 * 4096 * 4096 * 4096 / (200e12 * e) + kOverhead));
    // The 16-bit GEMMs of a block-scaled layout stay at the bf16 peak.
    const Kernel k16 = Kernel::gemm("lm_head", 4096, 4096, 4096);
    CHECK(fp4.seconds(k16) == doctest::Approx(2.0 * 4096 * 4096 * 4096 / (100e12 * e) + kOverhead));
    CHECK(gemm_operand_bytes(Fp8Recipe::mxfp8) == 1.0 + 1.0 / 32);
    CHECK(gemm_operand_bytes(Fp8Recipe::nvfp4) == 0.5 + 1.0 / 16);
    CHECK(gemm_operand_bytes(Fp8Recipe::delayed) == 1.0);
    // Memory-bound (K = 64, k_half 0, shape 1, e = 0.8): operands with their scales, output bf16.
    gpu.gemm_k_half = 0;
    const ComputeModel mx0(gpu, Precision::fp8, {}, nullptr, Fp8Recipe::mxfp8);
    const ComputeModel fp40(gpu, Precision::fp8, {}, nullptr, Fp8Recipe::nvfp4);
    const Kernel thin = Kernel::gemm("wgrad", 8192, 8192, 64, 1, 1);
    // MXFP8: (8192·64 + 64·8192)·(33/32) + 2·8192² = 135.3 MB at 0.5 TB/s = 0.2726 ms (compute 0.0716 ms).
    const double mx_bytes = (2.0 * 8192 * 64) * (33.0 / 32) + 2.0 * 8192 * 8192;
    CHECK(mx0.seconds(thin) == doctest::Approx(mx_bytes / kMemBw + kOverhead).epsilon(1e-12));
    CHECK(mx0.seconds(thin) == doctest::Approx(0.272598e-3).epsilon(1e-4));
    // NVFP4: (8192·64 + 64·8192)·(9/16) + 2·8192² = 134.8 MB.
    const double fp4_bytes = (2.0 * 8192 * 64) * (9.0 / 16) + 2.0 * 8192 * 8192;
    CHECK(fp40.seconds(thin) == doctest::Approx(fp4_bytes / kMemBw + kOverhead).epsilon(1e-12));
}

TEST_CASE("compute model: a quantization pass is a memory-bound kernel over its bytes") {
    const GpuSpec gpu = round_gpu();
    const ComputeModel cm(gpu, Precision::fp8, {}, nullptr, Fp8Recipe::delayed);
    // An MXFP8 cast of a 4096 x 8192 bf16 activation into row- and column-wise copies with E8M0 scales:
    // read 2 B, write 1 + 1 + 2/32 B per element (sim/program/layer_ops.cpp): 136.3 MB at 0.5 TB/s.
    const double n = 4096.0 * 8192;
    const double mx = n * (2 + 2 + 2.0 / 32);
    CHECK(cm.seconds(Kernel::memory("fp8_cast_input", mx)) == doctest::Approx(mx / kMemBw + kOverhead));
    CHECK(cm.seconds(Kernel::memory("fp8_cast_input", mx)) == doctest::Approx(0.274630e-3).epsilon(1e-4));
    // NVFP4: amax pass (read 2) + quantize (read 2, write 0.5 + 0.5 + 2/16): 5.125 B per element.
    const double fp4 = n * (2 * 2 + 1 + 2.0 / 16);
    CHECK(cm.seconds(Kernel::memory("fp8_cast_input", fp4)) == doctest::Approx(fp4 / kMemBw + kOverhead));
    CHECK(cm.seconds(Kernel::memory("fp8_cast_input", fp4)) == doctest::Approx(0.345933e-3).epsilon(1e-4));
}

TEST_CASE("compute model: block-scaled recipes refused on a GPU without block-scaled tensor cores") {
    const GpuSpec hopper_like = round_gpu();  // FP8, no block_scaled_mma, no FP4
    CHECK_THROWS_WITH_AS(ComputeModel(hopper_like, Precision::fp8, {}, nullptr, Fp8Recipe::mxfp8),
                         "layout.fp8_recipe = \"mxfp8\" needs block-scaled tensor cores (Blackwell, sm100 or "
                         "newer): GPU round-test-gpu has none",
                         InputError);
    CHECK_THROWS_AS(ComputeModel(hopper_like, Precision::fp8, {}, nullptr, Fp8Recipe::nvfp4), InputError);
    GpuSpec no_fp4 = round_gpu();
    no_fp4.block_scaled_mma = true;
    CHECK_THROWS_WITH_AS(ComputeModel(no_fp4, Precision::fp8, {}, nullptr, Fp8Recipe::nvfp4),
                         "layout.fp8_recipe = \"nvfp4\" needs FP4 tensor cores: GPU round-test-gpu has none",
                         InputError);
    // The recipe of a bf16 layout is not used, and the catalog's Hopper refuses while its Blackwell accepts.
    CHECK_NOTHROW(ComputeModel(hopper_like, Precision::bf16, {}, nullptr, Fp8Recipe::mxfp8));
    CHECK_THROWS_AS(
        ComputeModel(find_gpu("H100-SXM5-80GB", "test"), Precision::fp8, {}, nullptr, Fp8Recipe::mxfp8),
        InputError);
    CHECK_NOTHROW(ComputeModel(find_gpu("GB200", "test"), Precision::fp8, {}, nullptr, Fp8Recipe::nvfp4));
}
