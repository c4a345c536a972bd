// GPU catalog: datasheet figures and the named model constants of each GPU type.
//
// Datasheet figures (peak dense tensor-core FLOP/s per precision, HBM capacity and bandwidth, scale-up
// bandwidth, power, SM count) cite their datasheet in gpu_catalog.cpp next to each value and in the entry's
// `source` (a unit test refuses an entry without one). Model constants (efficiencies, overheads) have exactly
// one value per GPU type, never per case; their meaning and source are documented on the fields below and in
// docs/compute-model.md. An entry whose constants were neither fitted to measurements of that GPU type nor
// checked by validation rows is marked uncalibrated (`calibrated` false): it takes the constants of a
// calibrated part, named in `constants_from`, and the run report says so.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace trainsim {

enum class Precision { fp16, bf16, fp8 };

struct GpuSpec {
    std::string name;            ///< catalog key, e.g. "A100-SXM4-80GB"
    double peak_fp16_flops = 0;  ///< dense FP16 tensor-core FLOP/s (datasheet, no sparsity)
    double peak_bf16_flops = 0;  ///< dense BF16 tensor-core FLOP/s (datasheet, no sparsity)
    double peak_fp8_flops = 0;   ///< dense FP8 tensor-core FLOP/s; 0 when the GPU has no FP8 tensor cores
    /// Dense FP4 tensor-core FLOP/s (NVFP4 / MXFP4, datasheet, no sparsity); 0 when the GPU has none. The
    /// rate of the GEMMs of the nvfp4 recipe (Fp8Recipe::nvfp4, compute.hpp).
    double peak_fp4_flops = 0;
    /// The tensor cores multiply block-scaled operands natively (Blackwell sm100/sm103: tcgen05.mma
    /// kind::mxf8f6f4 and kind::mxf4nvf4 with .block_scale, the per-block scales applied inside the MMA;
    /// PTX ISA 8.7, "tcgen05.mma" block scaling; CUDA C++ Programming Guide / cuBLAS "Block scaling
    /// factors layout"). Needed by the mxfp8 and nvfp4 recipes (TransformerEngine MXFP8BlockScaling and
    /// NVFP4BlockScaling: "Requires SM100 (Blackwell) or later", docs/features/low_precision_training/).
    /// False on Ampere, Hopper and CDNA 3.
    bool block_scaled_mma = false;
    /// FP8 tensor-core GEMMs take their operands in any layout (Blackwell sm100/sm103: not only the TN layout
    /// Hopper's FP8 GEMMs need), so TransformerEngine keeps no transposed copy of a per-tensor-scaled FP8
    /// tensor: its quantizers allocate the transpose only when `columnwise_usage &&
    /// !nvte_is_non_tn_fp8_gemm_supported()` (transformer_engine/pytorch/csrc/quantizer.cpp, TE >= 2.1;
    /// transformer_engine/common/transformer_engine.cpp: compute capability 10.x and >= 13.0), and the
    /// column-wise use reads the row-wise data. Kernel::fp8_transpose_bytes are then not moved, and the
    /// cached FP8 weight is 1 B, not 1 + 1 (sim/memory/static_piles.cpp). False on Ampere, Hopper and CDNA 3.
    bool fp8_gemm_any_layout = false;
    double hbm_bytes = 0;        ///< HBM capacity, bytes
    double hbm_bytes_per_s = 0;  ///< HBM bandwidth, bytes/s
    int sm_count = 0;  ///< streaming multiprocessors (AMD: compute units) for GEMM wave quantization
    /// Scale-up bandwidth of one GPU to its peers, bytes/s per direction (datasheet: NVLink, or AMD Infinity
    /// Fabric summed over the GPU's links). Catalog data: the topology file states the rate it simulates.
    double scale_up_bytes_per_s = 0;
    double tdp_w = 0;  ///< maximum thermal design power (AMD: total board power), W (datasheet)
    /// GPU <-> host memory over a chip-to-chip link, bytes/s per direction (datasheet): the Grace superchips'
    /// NVLink-C2C. 0: the host is reached over the node's PCIe (topology scale_out.pcie_bandwidth). Host
    /// copies (offloaded optimizer state, offloaded activations) run at this rate x kPcieCopyEfficiency.
    double host_link_bytes_per_s = 0;
    /// The documents the datasheet figures above are read from (name and URL); never empty.
    std::string source;
    /// True when the model constants below were fitted to measurements of this GPU type or are checked by
    /// validation rows of it in CI (tests/validation/); false: uncalibrated, the constants are those of the
    /// calibrated part named in `constants_from`, not tuned for this one.
    bool calibrated = false;
    /// Where the model constants come from: the fit record of a calibrated part, or the catalog name of the
    /// calibrated part whose constants an uncalibrated one reuses.
    std::string constants_from;
    /// An uncalibrated part's constants that were fitted to published step times of this GPU type rather
    /// than reused from `constants_from`, and the record of the fit (calibration/*.json: the command, the
    /// runs fitted and the per-run errors before and after), e.g. "fp8_gemm_efficiency fitted to 6 published
    /// B200 step times (calibration/b200-fit.json)". Empty: none. The run report's uncalibrated note names
    /// them.
    std::string fitted;

    // ---- model constants (one value per GPU type) ----
    /// Fraction of the datasheet peak that cuBLAS/cuBLASLt reaches on large, well-shaped GEMMs (M, N, K >=
    /// 4096), at sustained clocks under training power draw. Multiplied by the shape factors of the compute
    /// model.
    double gemm_max_efficiency = 0;
    /// K at which the per-tile prologue/epilogue halves efficiency: factor K / (K + gemm_k_half).
    double gemm_k_half = 0;
    /// Fraction of the FP8 peak an FP8 GEMM reaches relative to what a 16-bit GEMM of the same shape reaches
    /// of the 16-bit peak (e4m3 x e4m3 -> bf16 with per-tensor scales; 1 = twice as fast as bf16 on a GPU
    /// whose FP8 peak is twice the bf16 peak). GPUs without FP8: 1 (unused).
    double fp8_gemm_efficiency = 1;
    /// Fraction of the FP4 peak an NVFP4 GEMM (E2M1 operands, E4M3 scales per 16 elements) reaches relative
    /// to what a 16-bit GEMM of the same shape reaches of the 16-bit peak, as fp8_gemm_efficiency is for
    /// FP8. GPUs without FP4: 1 (unused). No FP4 GEMM has been measured: every entry that has FP4 is
    /// uncalibrated and takes its fp8_gemm_efficiency (the measured ratio of the next narrower format's
    /// GEMM to its bf16 twin; docs/compute-model.md, "Block-scaled recipes").
    double fp4_gemm_efficiency = 1;
    /// Shortest time of any GEMM kernel, seconds: small GEMMs issued from the framework take this long
    /// whatever their FLOPs (host-side dispatch and the kernel's fixed cost). 0: no floor.
    double gemm_min_time_s = 0;
    /// Fused attention (compute.hpp, attention_efficiency()): the fraction of the 16-bit peak reached is
    ///   e = <backend>_attention_efficiency · (backward ? <backend>_attention_bwd_factor : 1)
    ///       · n / (n + <backend>_attention_cta_half) · w / (w + <backend>_attention_key_half)
    /// n: thread blocks (CTAs, one per 128-row tile of queries, forward, or of keys, backward, per
    /// batch·head) per SM; w: keys each tile visits on average (causal: half the key length) · head_dim /
    /// 128. Backends: flash (FlashAttention-2) and cudnn (TransformerEngine's FusedAttention, chosen over
    /// flash-attn on sm90+). Neutral values (bwd_factor 1, cta_half 0, key_half 0) make e the efficiency
    /// alone, whatever the shape.
    /// Fraction of the 16-bit peak FlashAttention-2 reaches forward on a large, long attention (no tail,
    /// keys saturated).
    double flash_attention_efficiency = 0;
    /// Backward's fraction relative to forward (FlashAttention-2's backward: 5 matmuls, dQ accumulated
    /// atomically). 1: the same.
    double flash_attention_bwd_factor = 1;
    /// CTAs per SM at which the last-wave tail halves the efficiency (the causal tiles are unequal: the
    /// SMs idle while the longest ones finish). 0: no tail.
    double flash_attention_cta_half = 0;
    /// Keys per tile (at head_dim 128) at which the tile's fixed cost (Q load, softmax rescale, output
    /// write) halves the efficiency. 0: no fixed cost.
    double flash_attention_key_half = 0;
    /// cuDNN fused attention's counterparts of the four constants above.
    double cudnn_attention_efficiency = 0;
    double cudnn_attention_bwd_factor = 1;  ///< see flash_attention_bwd_factor
    double cudnn_attention_cta_half = 0;    ///< see flash_attention_cta_half
    double cudnn_attention_key_half = 0;    ///< see flash_attention_key_half
    /// Fraction of HBM bandwidth reached by streaming element-wise, norm and softmax kernels.
    double hbm_efficiency = 0;
    /// Fixed cost per kernel on the GPU stream: launch latency, ramp-up and tail of one kernel, seconds.
    double kernel_overhead_s = 0;
    /// Fraction of the per-direction NVLink rate that NCCL's ring kernels reach (large messages, nccl-tests).
    double nvlink_efficiency = 0;
    /// The node's NVSwitches reduce in the switch (NVLink SHARP, third-generation NVSwitch: Hopper and
    /// newer), so NCCL can run its NVLS all-reduce inside a node.
    bool nvlink_sharp = false;

    /// Peak dense FLOP/s for GEMMs in the given precision. Throws InputError if the GPU lacks it (fp8 on
    /// A100).
    double peak_flops(Precision p) const;

    /// Every field equal (validate simulates runs with equal inputs once).
    friend bool operator==(const GpuSpec&, const GpuSpec&) = default;
};

/// Looks up a GPU by catalog name or alias (gpu_aliases()). Throws InputError naming `where` and listing the
/// known names when not found.
const GpuSpec& find_gpu(const std::string& name, const std::string& where);

/// Other names a GPU is known by: {alias, catalog name}, in a stable order (e.g. "H200" for
/// "H200-SXM-141GB"). No alias equals a catalog name.
const std::vector<std::pair<std::string, std::string>>& gpu_aliases();

/// One line for a report on a GPU whose constants are uncalibrated ("GPU B200 is uncalibrated: ..."); empty
/// for a calibrated one.
std::string uncalibrated_note(const GpuSpec& g);

/// Every GPU in the catalog, in a stable order.
const std::vector<GpuSpec>& gpu_catalog();

std::string to_string(Precision p);

}  // namespace trainsim
