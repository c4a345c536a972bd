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
    g.constants_from = "A100-SXM4-80GB";  // the fitted part; its own entry says so
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
    g.constants_from = "H100-SXM5-80GB";  // the fitted part; its own entry says so
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

// Datasheets the entries cite (peak figures are dense: a datasheet's "with sparsity" figure halved).
constexpr const char* kA100Datasheet =
    "NVIDIA A100 Tensor Core GPU datasheet (2021), "
    "https://www.nvidia.com/content/dam/en-zz/Solutions/Data-Center/a100/pdf/"
    "nvidia-a100-datasheet-us-nvidia-1758950-r4-web.pdf";
constexpr const char* kH100Datasheet =
    "NVIDIA H100 Tensor Core GPU datasheet, https://resources.nvidia.com/en-us-tensor-core/"
    "nvidia-tensor-core-gpu-datasheet";

// An uncalibrated part of `family`'s constants (ampere() or hopper(), whose constants_from names the
// calibrated part): they are reused as they are, documented, not tuned. The caller sets the datasheet
// figures.
GpuSpec uncalibrated(GpuSpec family) {
    family.calibrated = false;
    return family;
}

std::vector<GpuSpec> build_catalog() {
    std::vector<GpuSpec> c;
    // NVIDIA A100 Tensor Core GPU datasheet (2021): FP16/BF16 tensor 312 TFLOPS dense; 40GB HBM2 1,555 GB/s;
    // 80GB HBM2e 2,039 GB/s (SXM); NVLink 600 GB/s (300 per direction); max TDP 400 W.
    {
        // Same silicon and clocks as the 80GB part, HBM2 instead of HBM2e; no validation row of its own.
        GpuSpec g = uncalibrated(ampere("A100-SXM4-40GB"));
        g.peak_fp16_flops = g.peak_bf16_flops = 312e12;
        g.hbm_bytes = 40.0 * kGiB;
        g.hbm_bytes_per_s = 1555e9;
        g.scale_up_bytes_per_s = 300e9;
        g.tdp_w = 400;
        g.source = kA100Datasheet;
        c.push_back(g);
    }
    {
        GpuSpec g = ampere("A100-SXM4-80GB");
        g.peak_fp16_flops = g.peak_bf16_flops = 312e12;
        g.hbm_bytes = 80.0 * kGiB;
        g.hbm_bytes_per_s = 2039e9;
        g.scale_up_bytes_per_s = 300e9;
        g.tdp_w = 400;
        g.source = kA100Datasheet;
        g.calibrated = true;
        g.constants_from = "fitted: calibration/a100-fit.json (11 Megatron-LM runs on A100 80GB)";
        c.push_back(g);
    }
    // NVIDIA H100 Tensor Core GPU datasheet (SXM5): FP16/BF16 989 TFLOPS dense (1,979 with sparsity), FP8
    // 1,979 dense; 80GB HBM3 3.35 TB/s; NVLink 900 GB/s (450 per direction); max TDP 700 W. No FP4.
    {
        GpuSpec g = hopper("H100-SXM5-80GB");
        g.peak_fp16_flops = g.peak_bf16_flops = 989.4e12;
        g.peak_fp8_flops = 1978.9e12;
        g.hbm_bytes = 80.0 * kGiB;
        g.hbm_bytes_per_s = 3.35e12;
        g.scale_up_bytes_per_s = 450e9;
        g.tdp_w = 700;
        g.source = kH100Datasheet;
        g.calibrated = true;
        g.constants_from = "fitted: calibration/h100-fit.json (kernel times of one H100 SXM5 80GB)";
        c.push_back(g);
    }
    // H100 SXM5 96GB HBM2e at its 500 W default power limit (see kH100At500WClockFraction): 2.4 TB/s
    // (torchtitan docs/performance.md), peaks scaled by the sustained clock at 500 W. Calibrated: H100's
    // fitted constants, but for the two tensor-core ones, FITTED to this part's 8 published step times
    // (torchtitan 2024-12 and 2025 rows of tests/validation/public_runs.json), reproducibly:
    //   trainsim fit tests/validation/public_runs.json --gpu H100-SXM5-96GB
    //   --constants gemm_max_efficiency,flash_attention_efficiency --out calibration/h100-96gb-fit.json
    // rms log error 0.122 -> 0.075 (refitted 2026-11-29 when the 2024-08 405B rows took torchtitan's compiled
    // llama3_405b.toml; first fit 0.120 -> 0.082 at 0.645 / 0.337). They land at 0.84 and 0.94 of the 80 GB
    // part's kernel-fitted values (0.617 / 0.732, 0.359 / 0.381): slower than the 700 W part, as a sustained
    // clock at 500 W would make them (the datasheet line above says 0.896; the torchtitan paper: "the actual
    // peak TFLOPs should be between SXM and NVL, and we don't know the exact value"), or as anything else
    // these runs pay per FLOP that no term models (PyTorch 2.6's kernels, not the 2.11 ones measured). Held
    // out: the 8 other rows of the same benchmark file
    // (tests/validation/torchtitan_h100_202412_heldout.json): MAPE 17.5% -> 9.7%, its CP 4 and CP 8 rows
    // about -27% / -32%; its Tables 5 and 6 (torchtitan_h100_202412_405b_heldout.json) 16.4% -> 8.4%
    // (calibration/README.md).
    {
        GpuSpec g = hopper("H100-SXM5-96GB");
        g.gemm_max_efficiency = 0.6172;         // fitted, see above
        g.flash_attention_efficiency = 0.3586;  // fitted
        g.peak_fp16_flops = g.peak_bf16_flops = 989.4e12 * kH100At500WClockFraction;
        g.peak_fp8_flops = 1978.9e12 * kH100At500WClockFraction;
        g.hbm_bytes = 96.0 * kGiB;
        g.hbm_bytes_per_s = 2.4e12;
        g.scale_up_bytes_per_s = 450e9;
        g.tdp_w = 500;
        g.source = std::string(
                       "torchtitan docs/performance.md (96GB HBM2e, 2.4 TB/s, 500 W power limit); "
                       "TorchTitan paper arXiv:2410.06511; ") +
                   kH100Datasheet + " (H100 SXM and NVL peaks)";
        g.calibrated = true;
        g.constants_from =
            "H100-SXM5-80GB's fitted constants at the 500 W peak, gemm_max_efficiency and "
            "flash_attention_efficiency fitted to its 8 torchtitan runs of tests/validation/public_runs.json "
            "(calibration/h100-96gb-fit.json)";
        c.push_back(g);
    }
    // NVIDIA H200 datasheet (SXM): 141 GB HBM3e at 4.8 TB/s; same tensor cores as H100 SXM (989 / 1,979
    // dense); NVLink 900 GB/s; max TDP up to 700 W. Uncalibrated: H100-SXM5-80GB's constants (same GH100
    // die, clocks and power).
    {
        GpuSpec g = uncalibrated(hopper("H200-SXM-141GB"));
        g.peak_fp16_flops = g.peak_bf16_flops = 989.4e12;
        g.peak_fp8_flops = 1978.9e12;
        g.hbm_bytes = 143771.0 * 1024 * 1024;  // "141GB": nvidia-smi reports 143,771 MiB (140.4 GiB)
        g.hbm_bytes_per_s = 4.8e12;
        g.scale_up_bytes_per_s = 450e9;
        g.tdp_w = 700;
        g.source = "NVIDIA H200 Tensor Core GPU datasheet, https://www.nvidia.com/en-us/data-center/h200/";
        c.push_back(g);
    }
    // NVIDIA H800 SXM5 (the export variant of H100 SXM5): NVIDIA H800 Tensor Core GPU datasheet: FP16/BF16
    // 1,979 and FP8 3,958 TFLOPS with sparsity (989 / 1,979 dense, as H100 SXM), 80GB HBM3 at 3.35 TB/s,
    // NVLink 400 GB/s (200 per direction), max TDP up to 700 W; DeepSeek-V3 technical report
    // (arXiv:2412.19437, Sec. 3.2.2) trains on H800 nodes with NVLink and NVSwitch within a node.
    // Uncalibrated: H100-SXM5-80GB's constants (same die, clocks and power; only NVLink and FP64 differ).
    {
        GpuSpec g = uncalibrated(hopper("H800-SXM5-80GB"));
        g.peak_fp16_flops = g.peak_bf16_flops = 989.4e12;
        g.peak_fp8_flops = 1978.9e12;
        g.hbm_bytes = 80.0 * kGiB;
        g.hbm_bytes_per_s = 3.35e12;
        g.scale_up_bytes_per_s = 200e9;
        g.tdp_w = 700;
        g.source =
            "NVIDIA H800 Tensor Core GPU datasheet (SXM); DeepSeek-V3 technical report arXiv:2412.19437 "
            "Sec. 3.2.2 (H800 nodes, NVLink within a node)";
        c.push_back(g);
    }
    // NVIDIA H100 PCIe (the 114-SM GH100 PCIe card; NVIDIA H100 Tensor Core GPU datasheet, "H100 PCIe"
    // column): FP16/BF16 1,513 and FP8 3,026 TFLOPS with sparsity (756 / 1,513 dense), 80 GB HBM2e at 2 TB/s,
    // PCIe Gen5 128 GB/s (64 per direction; its optional 2-way NVLink bridge is not modelled), 300-350 W. For
    // PCIe-only nodes (topology scale_up.kind "pcie"). Uncalibrated: H100-SXM5-80GB's constants.
    {
        GpuSpec g = uncalibrated(hopper("H100-PCIe-80GB"));
        g.sm_count = 114;
        g.nvlink_sharp = false;  // no NVSwitch
        g.peak_fp16_flops = g.peak_bf16_flops = 756.5e12;
        g.peak_fp8_flops = 1513e12;
        g.hbm_bytes = 80.0 * kGiB;
        g.hbm_bytes_per_s = 2.0e12;
        g.scale_up_bytes_per_s = 64e9;
        g.tdp_w = 350;
        g.source = kH100Datasheet;
        c.push_back(g);
    }
    // NVIDIA DGX B200 / HGX B200 datasheet: per GPU 2.25 PFLOPS FP16/BF16 dense, 4.5 PFLOPS FP8 dense (HGX
    // B200: 36 / 72 PFLOPS with sparsity per 8 GPUs), FP4 144 PFLOPS with sparsity per 8 GPUs (9 dense per
    // GPU), 180 GB HBM3e (1,440 GB per 8 GPUs), 8 TB/s (DGX B200: 64 TB/s per 8); NVLink5 1.8 TB/s (900 per
    // direction); configurable up to 1,000 W; 148 SMs (Blackwell architecture technical brief).
    // Uncalibrated: Blackwell takes H100-SXM5-80GB's constants until measured (the nearest generation with
    // fitted values, same CUDA software; documented in docs/compute-model.md).
    {
        GpuSpec g = uncalibrated(hopper("B200"));
        g.block_scaled_mma = true;     // sm100/sm103 tcgen05 block-scaled MMA (gpu_catalog.hpp)
        g.fp8_gemm_any_layout = true;  // sm100/sm103: TE keeps no FP8 transposes (gpu_catalog.hpp)
        // FITTED to the 6 published dense B200 step times (Megatron-Bridge 25.09/25.11, NeMo 25.02, MLPerf
        // v4.1; all FP8), reproducibly:
        //   trainsim fit tests/validation/public_runs_2026_b200_dense.json --gpu B200
        //   --constants fp8_gemm_efficiency --out calibration/b200-fit.json
        // rms log error 0.137 -> 0.107, MAPE 11.6% -> 8.9% (bias +1.3% after); the B200 MoE rows are held
        // out (calibration/README.md). The other constants stay Hopper's; FP4 (no NVFP4 B200 row) takes the
        // fitted FP8 value, as gpu_catalog.hpp says of unmeasured FP4.
        g.fp8_gemm_efficiency = 0.732;  // fitted, see above
        g.fp4_gemm_efficiency = g.fp8_gemm_efficiency;
        g.fitted = "fp8_gemm_efficiency fitted to 6 published B200 step times (calibration/b200-fit.json)";
        g.sm_count = 148;
        g.peak_fp16_flops = g.peak_bf16_flops = 2250e12;
        g.peak_fp8_flops = 4500e12;
        g.peak_fp4_flops = 9000e12;
        g.hbm_bytes = 180.0 * kGiB;  // "180GB" per GPU, binary units as for the other parts
        g.hbm_bytes_per_s = 8e12;
        g.scale_up_bytes_per_s = 900e9;
        g.tdp_w = 1000;
        g.source =
            "NVIDIA DGX B200 datasheet, https://www.nvidia.com/en-us/data-center/dgx-b200/; NVIDIA HGX "
            "platform specifications (HGX B200), https://www.nvidia.com/en-us/data-center/hgx/; NVIDIA "
            "Blackwell architecture technical brief";
        c.push_back(g);
    }
    // Blackwell systems of the measured-runs format (shared/validation/README.md). Model constants: as for
    // B200, Hopper's (the nearest generation with sourced values) until measured; only the datasheet figures
    // below differ. Capacities in binary units as for the other parts.
    // GB200 (the Blackwell GPU of a GB200 superchip, up to 1,200 W): NVIDIA GB200 NVL72 datasheet,
    // "Individual Blackwell GPU Specifications": FP16/BF16 5 PFLOPS, FP8 10 PFLOPS and FP4 20 PFLOPS with
    // sparsity (2.5 / 5 / 10 dense), 186 GB HBM3e at 8 TB/s, NVLink5 1.8 TB/s. Same silicon as B200: 148 SMs
    // (Blackwell architecture technical brief).
    {
        GpuSpec g = uncalibrated(hopper("GB200"));
        g.block_scaled_mma = true;     // sm100/sm103 tcgen05 block-scaled MMA (gpu_catalog.hpp)
        g.fp8_gemm_any_layout = true;  // sm100/sm103: TE keeps no FP8 transposes (gpu_catalog.hpp)
        // FITTED to 18 published dense GB200 step times (Megatron-Bridge 25.09-26.06, NeMo 25.04/25.07,
        // MLPerf v5.1; FP8 per-tensor, MXFP8 and NVFP4), reproducibly:
        //   trainsim fit tests/validation/public_runs_2026_gb200_dense.json --gpu GB200
        //   --constants fp8_gemm_efficiency,fp4_gemm_efficiency --out calibration/gb200-fit.json
        // rms log error 0.178 -> 0.079, MAPE 14.4% -> 7.2% (bias +0.4% after); the GB200 MoE rows are
        // held out (calibration/README.md). The other constants stay Hopper's. The fit lands at 0.705 x
        // 0.7318 = 52% of the 5 PFLOP/s FP8 peak and 0.544 x 0.7318 = 40% of the 10 PFLOP/s FP4 peak for
        // large GEMMs in a training step: what the block-scaling casts and transposes, the Hadamard
        // transforms of the NVFP4 recipe and the clocks under the superchip's power draw leave, none of them
        // modelled apart.
        g.fp8_gemm_efficiency = 0.705;  // fitted, see above
        g.fp4_gemm_efficiency = 0.544;  // fitted, see above
        g.fitted =
            "fp8_gemm_efficiency and fp4_gemm_efficiency fitted to 18 published GB200 step times "
            "(calibration/gb200-fit.json)";
        g.sm_count = 148;
        g.peak_fp16_flops = g.peak_bf16_flops = 2500e12;
        g.peak_fp8_flops = 5000e12;
        g.peak_fp4_flops = 10000e12;
        g.hbm_bytes = 186.0 * kGiB;
        g.hbm_bytes_per_s = 8e12;
        g.scale_up_bytes_per_s = 900e9;
        g.tdp_w = 1200;
        // NVLink-C2C between the superchip's Grace CPU and its two GPUs: 900 GB/s bidirectional (GB200 NVL72
        // datasheet), read as shared by the two GPUs: 225 GB/s per GPU and direction (the lower reading).
        g.host_link_bytes_per_s = 225e9;
        g.source =
            "NVIDIA GB200 NVL72 datasheet (individual Blackwell GPU specifications), "
            "https://www.nvidia.com/en-us/data-center/gb200-nvl72/";
        c.push_back(g);
    }
    // B300 (Blackwell Ultra, HGX/DGX B300): NVIDIA HGX B300 datasheet, per 8 GPUs FP16/BF16 36 PFLOPS and
    // FP8 72 PFLOPS with sparsity (2.25 / 4.5 dense per GPU, as B200), FP4 144 PFLOPS with sparsity and 108
    // without (13.5 dense per GPU), NVLink5 1.8 TB/s per GPU; NVIDIA technical blog "Inside NVIDIA Blackwell
    // Ultra" (2025-08): 160 SMs, 288 GB HBM3e at 8 TB/s per GPU, 1,100 W (HGX B300).
    {
        GpuSpec g = uncalibrated(hopper("B300"));
        g.block_scaled_mma = true;     // sm100/sm103 tcgen05 block-scaled MMA (gpu_catalog.hpp)
        g.fp8_gemm_any_layout = true;  // sm100/sm103: TE keeps no FP8 transposes (gpu_catalog.hpp)
        g.fp4_gemm_efficiency = g.fp8_gemm_efficiency;  // uncalibrated, see gpu_catalog.hpp
        g.sm_count = 160;
        g.peak_fp16_flops = g.peak_bf16_flops = 2250e12;
        g.peak_fp8_flops = 4500e12;
        g.peak_fp4_flops = 13500e12;
        g.hbm_bytes = 288.0 * kGiB;
        g.hbm_bytes_per_s = 8e12;
        g.scale_up_bytes_per_s = 900e9;
        g.tdp_w = 1100;
        g.source =
            "NVIDIA HGX platform specifications (HGX B300), https://www.nvidia.com/en-us/data-center/hgx/; "
            "NVIDIA technical blog \"Inside NVIDIA Blackwell Ultra: The Chip Powering the AI Factory Era\" "
            "(2025), https://developer.nvidia.com/blog/inside-nvidia-blackwell-ultra-the-chip-powering-the-"
            "ai-factory-era/";
        c.push_back(g);
    }
    // GB300 (the Blackwell Ultra GPU of a GB300 NVL72, up to 1,400 W): NVIDIA GB300 NVL72 datasheet, per 72
    // GPUs FP16/BF16 360 PFLOPS and FP8 720 PFLOPS with sparsity (2.5 / 5 dense per GPU), FP4 1,440 PFLOPS
    // with sparsity and 1,080 without (15 dense per GPU), up to 20.1 TB HBM3e at 576 TB/s (279 GB and 8 TB/s
    // per GPU), NVLink 130 TB/s (1.8 TB/s per GPU); 160 SMs (Blackwell Ultra, as B300).
    {
        GpuSpec g = uncalibrated(hopper("GB300"));
        g.block_scaled_mma = true;     // sm100/sm103 tcgen05 block-scaled MMA (gpu_catalog.hpp)
        g.fp8_gemm_any_layout = true;  // sm100/sm103: TE keeps no FP8 transposes (gpu_catalog.hpp)
        // FITTED to the 13 published dense GB300 step times (Megatron-Bridge 25.11-26.04, MLPerf v5.1; FP8
        // per-tensor, MXFP8 and NVFP4), as GB200's, reproducibly (catalog first at Hopper's 0.848 for both):
        //   trainsim fit tests/validation/public_runs_2026_gb300_dense.json --gpu GB300
        //   --constants fp8_gemm_efficiency,fp4_gemm_efficiency --out calibration/gb300-fit.json
        // rms log error 0.081 -> 0.063, MAPE 6.1% -> 4.6% (bias -0.9% after); the GB300 MoE rows are held
        // out (calibration/README.md). FP8 stays within 2% of Hopper's value (0.834 x 0.7318 = 61% of the
        // 5 PFLOP/s FP8 peak); NVFP4 lands at 0.625 x 0.7318 = 46% of the 15 PFLOP/s FP4 peak, the two NVFP4
        // rows having been 12% too fast with FP4 at FP8's fraction. The other constants stay Hopper's.
        g.fp8_gemm_efficiency = 0.834;  // fitted, see above
        g.fp4_gemm_efficiency = 0.625;  // fitted, see above
        g.fitted =
            "fp8_gemm_efficiency and fp4_gemm_efficiency fitted to 13 published GB300 step times "
            "(calibration/gb300-fit.json)";
        g.sm_count = 160;
        g.peak_fp16_flops = g.peak_bf16_flops = 2500e12;
        g.peak_fp8_flops = 5000e12;
        g.peak_fp4_flops = 15000e12;
        g.hbm_bytes = 279.0 * kGiB;
        g.hbm_bytes_per_s = 8e12;
        g.scale_up_bytes_per_s = 900e9;
        g.tdp_w = 1400;
        // NVLink-C2C to the Grace CPU as on GB200 (GB300 NVL72 datasheet: 900 GB/s bidirectional per
        // superchip of one Grace and two GPUs): 225 GB/s per GPU and direction.
        g.host_link_bytes_per_s = 225e9;
        g.source =
            "NVIDIA GB300 NVL72 datasheet, https://www.nvidia.com/en-us/data-center/gb300-nvl72/; NVIDIA "
            "technical blog \"Inside NVIDIA Blackwell Ultra\" (2025; SMs, 1,400 W)";
        c.push_back(g);
    }
    // AMD Instinct (CDNA 3), OAM modules joined point to point by AMD Infinity Fabric: 7 links per GPU, 128
    // GB/s peak bidirectional each (64 per direction), 448 GB/s per direction to its 7 peers in an 8-GPU
    // platform. 304 compute units (sm_count: the units GEMM tiles are spread over). No FP4. Uncalibrated,
    // with no calibrated AMD part: H100-SXM5-80GB's constants (the contemporary part whose constants are
    // fitted; ROCm's hipBLASLt and CK kernels were not measured), and no NVLink SHARP (no switch).
    // MI300X: AMD Instinct MI300X data sheet: FP16/BF16 1,307.4 TFLOPS and FP8 2,614.9 TFLOPS peak dense
    // (2,614.9 / 5,229.8 with sparsity), 192 GB HBM3 at 5.3 TB/s, 750 W total board power.
    {
        GpuSpec g = uncalibrated(hopper("MI300X"));
        g.sm_count = 304;
        g.nvlink_sharp = false;
        g.peak_fp16_flops = g.peak_bf16_flops = 1307.4e12;
        g.peak_fp8_flops = 2614.9e12;
        g.hbm_bytes = 192.0 * kGiB;
        g.hbm_bytes_per_s = 5.3e12;
        g.scale_up_bytes_per_s = 7 * 64e9;
        g.tdp_w = 750;
        g.source =
            "AMD Instinct MI300X accelerator data sheet, https://www.amd.com/content/dam/amd/en/documents/"
            "instinct-tech-docs/data-sheets/amd-instinct-mi300x-data-sheet.pdf; ROCm documentation \"AMD "
            "Instinct MI300 series microarchitecture\", https://rocm.docs.amd.com/en/docs-6.2.2/conceptual/"
            "gpu-arch/mi300.html";
        c.push_back(g);
    }
    // MI325X: AMD Instinct MI325X data sheet: the MI300X's compute (1,307.4 / 2,614.9 TFLOPS dense
    // FP16/BF16 / FP8), 256 GB HBM3E at 6 TB/s, the same 7 Infinity Fabric links, 1,000 W total board power.
    {
        GpuSpec g = uncalibrated(hopper("MI325X"));
        g.sm_count = 304;
        g.nvlink_sharp = false;
        g.peak_fp16_flops = g.peak_bf16_flops = 1307.4e12;
        g.peak_fp8_flops = 2614.9e12;
        g.hbm_bytes = 256.0 * kGiB;
        g.hbm_bytes_per_s = 6e12;
        g.scale_up_bytes_per_s = 7 * 64e9;
        g.tdp_w = 1000;
        g.source =
            "AMD Instinct MI325X accelerator data sheet, https://www.amd.com/content/dam/amd/en/"
            "documents/instinct-tech-docs/product-briefs/instinct-mi325x-datasheet.pdf";
        c.push_back(g);
    }
    return c;
}

// Aliases of catalog names: short names in common use that name one part. Not "A100" or "H100": each names
// two parts of different memory (and, for H100, of different power and peak).
std::vector<std::pair<std::string, std::string>> build_aliases() {
    return {{"H200", "H200-SXM-141GB"}, {"H200-SXM", "H200-SXM-141GB"}, {"H200-SXM5-141GB", "H200-SXM-141GB"},
            {"H800", "H800-SXM5-80GB"}, {"H800-SXM", "H800-SXM5-80GB"}, {"MI300X-192GB", "MI300X"},
            {"MI325X-256GB", "MI325X"}};
}

}  // namespace

const std::vector<GpuSpec>& gpu_catalog() {
    static const std::vector<GpuSpec> catalog = build_catalog();
    return catalog;
}

const std::vector<std::pair<std::string, std::string>>& gpu_aliases() {
    static const std::vector<std::pair<std::string, std::string>> aliases = build_aliases();
    return aliases;
}

const GpuSpec& find_gpu(const std::string& name, const std::string& where) {
    std::string known;
    for (const auto& g : gpu_catalog()) {
        if (g.name == name) return g;
        known += (known.empty() ? "" : ", ") + g.name;
    }
    for (const auto& [alias, canonical] : gpu_aliases())
        if (alias == name) return find_gpu(canonical, where);
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

std::string uncalibrated_note(const GpuSpec& g) {
    if (g.calibrated) return "";
    if (g.fitted.empty())
        return fmt::format(
            "GPU {} is uncalibrated: its model constants (efficiencies, overheads) are {}'s, not measured on "
            "it",
            g.name, g.constants_from);
    return fmt::format(
        "GPU {} is uncalibrated: {}; its other model constants (efficiencies, overheads) are {}'s, not "
        "measured on it",
        g.name, g.fitted, g.constants_from);
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
