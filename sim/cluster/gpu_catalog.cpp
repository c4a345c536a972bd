#include "trainsim/gpu_catalog.hpp"

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/units.hpp"

namespace trainsim {

namespace {

// Model constants shared by a GPU generation. Meaning of each field: gpu_catalog.hpp. Sources:
//  - gemm_max_efficiency: the "maximum achievable matmul FLOPS" measured with cuBLAS on the best shapes, as
//    collected in S. Bekman, "Machine Learning Engineering", compute/accelerator (MAMF finder): A100-SXM
//    ~86%, H100-SXM ~79% of the dense datasheet peak, times 0.9 for the sustained clock of a GPU running
//    training at its power limit for minutes (A100 400 W: ~1.27 GHz of the 1.41 GHz boost the peak assumes;
//    H100 700 W likewise; NVIDIA's HPL Rpeak convention uses the power-limited clock, 1305 MHz on A100, for
//    the same reason).
//  - gemm_k_half: the main-loop length below which fixed per-tile costs (prologue, epilogue) dominate (NVIDIA
//    "Matrix Multiplication Background User's Guide", tile quantization and arithmetic intensity); an
//    estimate.
//  - flash_attention_efficiency: FlashAttention-2 paper (Dao 2023, arXiv:2307.08691, Fig. 4-6): ~70% of A100
//    peak forward, ~60% backward; on H100, cuDNN/TransformerEngine fused attention and FlashAttention-3 (Shah
//    et al. 2024, arXiv:2407.08608) reach 50-75% of the BF16 peak; we take one mid value per generation.
//  - hbm_efficiency: STREAM-like copy kernels reach ~85-90% of datasheet HBM bandwidth on A100 and H100
//  (NVIDIA
//    "GPU Performance Background User's Guide"; Jia et al. microbenchmarking reports); the PyTorch eager
//    element-wise, norm, softmax and dropout (Philox RNG) kernels of a training step reach less, ~75%.
//  - kernel_overhead_s: back-to-back dependent kernel launch on one stream costs ~3-5 us of GPU idle+ramp
//  time
//    (CUDA launch latency ~2-4 us plus SM ramp-up/tail), as measured by PyTorch profiler traces of Megatron
//    layers.
//  - nvlink_efficiency: nccl-tests all_reduce busbw for large messages on DGX A100 is ~230-235 GB/s of 300
//  GB/s
//    (NVIDIA DGX A100 user guide / nccl-tests PERFORMANCE.md); ring (non-NVLS) busbw on DGX H100 ~360 of 450
//    GB/s.
// Ampere (A100) GEMM and memory-bound efficiencies are FITTED to measured runs, reproducibly:
//   trainsim fit tests/validation/public_runs.json --gpu A100-SXM4-80GB --id-prefix
//   narayanan2021,megatron_readme
// (Levenberg-Marquardt on log step-time errors over the 11 Megatron-LM A100 runs of Narayanan et al. 2021
// Table 1 and the Megatron-LM README; the BLOOM runs, Megatron-DeepSpeed, are held out). Record with per-run
// residuals: calibration/a100-fit.json (rms log error 0.095 -> 0.024). Starting points were the sourced
// values below (0.86 x 0.9 = 0.774 and 0.75); the fit lands on 0.687 (214 TFLOP/s for large fp16 GEMMs in a
// training step) and 0.726, within the range the sources allow.
GpuSpec ampere(std::string name) {
    GpuSpec g;
    g.name = std::move(name);
    g.sm_count = 108;               // A100 whitepaper, Table 1: 108 SMs
    g.gemm_max_efficiency = 0.687;  // fitted, see above
    g.gemm_k_half = 32;
    g.flash_attention_efficiency = 0.65;
    g.cudnn_attention_efficiency = 0.65;  // FusedAttention is only TE's fallback on sm80 (no measurement)
    g.hbm_efficiency = 0.726;             // fitted, see above
    g.kernel_overhead_s = 4e-6;
    g.nvlink_efficiency = 0.78;
    return g;
}

// Hopper (H100 SXM5 80GB, 700 W) kernel constants are FITTED to measured kernel times, reproducibly:
//   trainsim profile import ../shared/calibration/h100/kernels.json
//       --out topologies/profiles/h100-sxm5-80gb.json
//   trainsim fit --profile topologies/profiles/h100-sxm5-80gb.json --out calibration/h100-fit.json
// (one H100 80GB HBM3 at 700 W, driver 580.159.04, PyTorch 2.11 / CUDA 13.0 / cuDNN 9.19, 2026-11-22;
// Levenberg-Marquardt on log kernel-time errors, docs/calibration.md). GEMM constants fitted on the 150
// `gemm_grid` shapes only; held out: the 372 bf16 GEMMs of real layers (median |error| 2.5%, catalog
// before 2.9%) and the 20 whole layers (forward+backward within 6.4%, median 2.3%; before: up to 24% too
// fast). Record with every residual: calibration/h100-fit.json. What each fitted value says:
//  - gemm_max_efficiency 0.732: large bf16 GEMMs at 0.732 x 989 = 724 TFLOP/s before K saturation (the grid's
//    16384-deep shapes reach 700-755).
//  - gemm_k_half 351: K saturation K / (K + 351): a 4096-deep GEMM at 92% of a very deep one (measured: ~640
//    against ~720 TFLOP/s); the estimate 48 held K-deep and shallow GEMMs equal.
//  - gemm_min_time_s 44 us: GEMMs of a few GFLOP take 33-45 us in the measurement whatever their FLOPs
//    (1024^3: 35 us, 61 TFLOP/s): the cost of issuing one cuBLAS GEMM from PyTorch.
//  - fp8_gemm_efficiency 0.848: an FP8 GEMM reaches 0.848 of the FP8 peak fraction a bf16 GEMM of its shape
//    reaches (torch._scaled_mm, e4m3, per-tensor scales): 1.7x its bf16 twin rather than 2x.
//  - fused attention (compute.hpp, attention_efficiency: e_max · bwd · n/(n + cta_half) · w/(w + key_half)),
//    fitted per backend on 40 of its 52 rows (causal, fwd and bwd; the llama2_* and nemo_* shapes held out:
//    median |error| cudnn 2.8%, flash 3.3%; fitted rows 3.8% / 4.2%; one efficiency per backend: 23% / 16%):
//    cudnn  e_max 0.719, backward 0.783 of forward, cta_half 2.22 CTAs per SM, key_half 385 keys
//    flash  e_max 0.381, backward 0.871 of forward, cta_half 2.00 CTAs per SM, key_half 411 keys
//    i.e. a long, wide attention reaches 711 (cuDNN) and 377 (FlashAttention-2) TFLOP/s forward; a tail of
//    about two CTAs per SM (causal tiles of unequal length) costs half at 2 CTAs per SM, 8% at 24 (a 4096
//    sequence with 8 heads); the tile's fixed cost halves the rate at ~400 keys per tile (a 4096 causal
//    sequence visits 2048 on average: 84%).
//  - hbm_efficiency 0.751: copy 88%, GeLU 87%, LayerNorm 54% of 3.35 TB/s; one value for all three.
// Tried and rejected: a saturation in M and N as well (M / (M + m_half), N / (N + n_half)): held-out
// median 5.1% instead of 2.5% (tile and wave quantization already carry the M and N dependence). H200 and
// Blackwell take these until measured (same Hopper tensor cores and software; H200 at 700 W too).
GpuSpec hopper(std::string name) {
    GpuSpec g;
    g.name = std::move(name);
    g.sm_count = 132;                       // H100 SXM5 whitepaper, Table 2: 132 SMs
    g.gemm_max_efficiency = 0.7318;         // fitted, see above
    g.gemm_k_half = 351.0;                  // fitted
    g.gemm_min_time_s = 44.4e-6;            // fitted
    g.fp8_gemm_efficiency = 0.8478;         // fitted
    g.flash_attention_efficiency = 0.3806;  // fitted
    g.flash_attention_bwd_factor = 0.8714;  // fitted
    g.flash_attention_cta_half = 2.002;     // fitted
    g.flash_attention_key_half = 411.0;     // fitted
    g.cudnn_attention_efficiency = 0.7188;  // fitted
    g.cudnn_attention_bwd_factor = 0.7833;  // fitted
    g.cudnn_attention_cta_half = 2.217;     // fitted
    g.cudnn_attention_key_half = 384.9;     // fitted
    g.hbm_efficiency = 0.7510;              // fitted
    g.kernel_overhead_s = 4e-6;
    g.nvlink_efficiency = 0.80;
    g.nvlink_sharp = true;  // DGX/HGX H100 NVSwitch gen3 (NVIDIA H100 whitepaper, "NVLink SHARP")
    return g;
}

// H100 SXM5 96GB (HBM2e), the part of Meta's Grand Teton hosts on which torchtitan's published benchmarks
// ran: torchtitan docs/performance.md: "Each H100 GPU is equipped with 96GB HBM2e with 2.4 TB/sec peak memory
// bandwidth ... We used the default 500W power limit, although tuning it up to 700W TDP can potentially
// provide further speedups"; the TorchTitan paper (arXiv:2410.06511): "non-standard ... HBM2e and limited to
// a lower TDP. The actual peak TFLOPs should be between SXM and NVL, and we don't know the exact value".
// NVIDIA publishes no datasheet for it. Its tensor-core peak at 500 W is taken on the line between NVIDIA's
// two datasheet points of the same 132-SM die (NVIDIA H100 Tensor Core GPU datasheet: H100 SXM 989.4 dense
// BF16 TFLOPS at up to 700 W, H100 NVL 835.5 (1,671 with sparsity) at 350-400 W, taken at 400 W): 835.5 +
// (989.4 - 835.5) x (500 - 400) / (700 - 400) = 886.8 TFLOPS, i.e. a sustained tensor-core clock 0.896 of the
// 700 W part's. The DVFS rule that dynamic power goes as f·V² with V roughly proportional to f (power ~ f^3)
// gives (500/700)^(1/3) = 0.894, the same to 0.2%. This is an estimate from sourced points, not a
// measurement: no kernel was timed on this part.
constexpr double kH100At500WClockFraction =
    (835.5 + (989.4 - 835.5) * (500.0 - 400.0) / (700.0 - 400.0)) / 989.4;

std::vector<GpuSpec> build_catalog() {
    std::vector<GpuSpec> c;
    // NVIDIA A100 Tensor Core GPU datasheet (2021): FP16/BF16 tensor 312 TFLOPS dense; 40GB HBM2 1,555 GB/s;
    // 80GB HBM2e 2,039 GB/s (SXM).
    {
        GpuSpec g = ampere("A100-SXM4-40GB");
        g.peak_fp16_flops = g.peak_bf16_flops = 312e12;
        g.hbm_bytes = 40.0 * kGiB;
        g.hbm_bytes_per_s = 1555e9;
        c.push_back(g);
    }
    {
        GpuSpec g = ampere("A100-SXM4-80GB");
        g.peak_fp16_flops = g.peak_bf16_flops = 312e12;
        g.hbm_bytes = 80.0 * kGiB;
        g.hbm_bytes_per_s = 2039e9;
        c.push_back(g);
    }
    // NVIDIA H100 Tensor Core GPU datasheet (SXM5): FP16/BF16 989 TFLOPS dense (1,979 with sparsity), FP8
    // 1,979 dense; 80GB HBM3 3.35 TB/s; max TDP 700 W.
    {
        GpuSpec g = hopper("H100-SXM5-80GB");
        g.peak_fp16_flops = g.peak_bf16_flops = 989.4e12;
        g.peak_fp8_flops = 1978.9e12;
        g.hbm_bytes = 80.0 * kGiB;
        g.hbm_bytes_per_s = 3.35e12;
        c.push_back(g);
    }
    // H100 SXM5 96GB HBM2e at its 500 W default power limit (see kH100At500WClockFraction): 2.4 TB/s
    // (torchtitan docs/performance.md), peaks scaled by the sustained clock at 500 W.
    {
        GpuSpec g = hopper("H100-SXM5-96GB");
        g.peak_fp16_flops = g.peak_bf16_flops = 989.4e12 * kH100At500WClockFraction;
        g.peak_fp8_flops = 1978.9e12 * kH100At500WClockFraction;
        g.hbm_bytes = 96.0 * kGiB;
        g.hbm_bytes_per_s = 2.4e12;
        c.push_back(g);
    }
    // NVIDIA H200 datasheet (SXM): 141 GB HBM3e at 4.8 TB/s; same tensor cores as H100 SXM (989 / 1,979
    // dense).
    {
        GpuSpec g = hopper("H200-SXM-141GB");
        g.peak_fp16_flops = g.peak_bf16_flops = 989.4e12;
        g.peak_fp8_flops = 1978.9e12;
        g.hbm_bytes = 143771.0 * 1024 * 1024;  // "141GB": nvidia-smi reports 143,771 MiB (140.4 GiB)
        g.hbm_bytes_per_s = 4.8e12;
        c.push_back(g);
    }
    // NVIDIA DGX B200 / HGX B200 datasheet: per GPU 2.25 PFLOPS FP16/BF16 dense, 4.5 PFLOPS FP8 dense, 180 GB
    // HBM3e (1,440 GB per 8 GPUs), 8 TB/s; 148 SMs (Blackwell architecture technical brief). Blackwell
    // constants are taken as Hopper's until measured (documented in docs/compute-model.md).
    {
        GpuSpec g = hopper("B200");
        g.sm_count = 148;
        g.peak_fp16_flops = g.peak_bf16_flops = 2250e12;
        g.peak_fp8_flops = 4500e12;
        g.hbm_bytes = 180.0 * kGiB;  // "180GB" per GPU, binary units as for the other parts
        g.hbm_bytes_per_s = 8e12;
        c.push_back(g);
    }
    // Blackwell systems of the measured-runs format (shared/validation/README.md). Model constants: as for
    // B200, Hopper's (the nearest generation with sourced values) until measured; only the datasheet figures
    // below differ. Capacities in binary units as for the other parts.
    // GB200 (the Blackwell GPU of a GB200 superchip, up to 1,200 W): NVIDIA GB200 NVL72 datasheet,
    // "Individual Blackwell GPU Specifications": FP16/BF16 5 PFLOPS and FP8 10 PFLOPS with sparsity (2.5 / 5
    // dense), 186 GB HBM3e at 8 TB/s. Same silicon as B200: 148 SMs (Blackwell architecture technical brief).
    {
        GpuSpec g = hopper("GB200");
        g.sm_count = 148;
        g.peak_fp16_flops = g.peak_bf16_flops = 2500e12;
        g.peak_fp8_flops = 5000e12;
        g.hbm_bytes = 186.0 * kGiB;
        g.hbm_bytes_per_s = 8e12;
        c.push_back(g);
    }
    // B300 (Blackwell Ultra, HGX/DGX B300): NVIDIA HGX B300 datasheet, per 8 GPUs FP16/BF16 36 PFLOPS and
    // FP8 72 PFLOPS with sparsity (2.25 / 4.5 dense per GPU, as B200); NVIDIA technical blog "Inside NVIDIA
    // Blackwell Ultra" (2025-08): 160 SMs, 288 GB HBM3e at 8 TB/s per GPU.
    {
        GpuSpec g = hopper("B300");
        g.sm_count = 160;
        g.peak_fp16_flops = g.peak_bf16_flops = 2250e12;
        g.peak_fp8_flops = 4500e12;
        g.hbm_bytes = 288.0 * kGiB;
        g.hbm_bytes_per_s = 8e12;
        c.push_back(g);
    }
    // GB300 (the Blackwell Ultra GPU of a GB300 NVL72, up to 1,400 W): NVIDIA GB300 NVL72 datasheet, per 72
    // GPUs FP16/BF16 360 PFLOPS and FP8 720 PFLOPS with sparsity (2.5 / 5 dense per GPU), up to 20.1 TB HBM3e
    // at 576 TB/s (279 GB and 8 TB/s per GPU); 160 SMs (Blackwell Ultra, as B300).
    {
        GpuSpec g = hopper("GB300");
        g.sm_count = 160;
        g.peak_fp16_flops = g.peak_bf16_flops = 2500e12;
        g.peak_fp8_flops = 5000e12;
        g.hbm_bytes = 279.0 * kGiB;
        g.hbm_bytes_per_s = 8e12;
        c.push_back(g);
    }
    return c;
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() {
    static const std::vector<GpuSpec> catalog = build_catalog();
    return catalog;
}

const GpuSpec& find_gpu(const std::string& name, const std::string& where) {
    std::string known;
    for (const auto& g : gpu_catalog()) {
        if (g.name == name) return g;
        known += (known.empty() ? "" : ", ") + g.name;
    }
    throw InputError(
        fmt::format("{} = \"{}\" is not a known GPU; known: {}", where, clip_for_message(name), known));
}

double GpuSpec::peak_flops(Precision p) const {
    switch (p) {
        case Precision::fp16:
            return peak_fp16_flops;
        case Precision::bf16:
            return peak_bf16_flops;
        case Precision::fp8:
            if (peak_fp8_flops <= 0)
                throw InputError(fmt::format("precision fp8 is not supported by GPU {}", name));
            return peak_fp8_flops;
    }
    throw InternalError("unknown precision");
}

std::string to_string(Precision p) {
    switch (p) {
        case Precision::fp16:
            return "fp16";
        case Precision::bf16:
            return "bf16";
        case Precision::fp8:
            return "fp8";
    }
    return "?";
}

}  // namespace trainsim
