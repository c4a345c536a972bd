// Reader of measured-run files, format `trainsim-measured-runs/1` (shared/validation/README.md): published or
// in-house training runs with their cluster, model, layout and measurements, plus nccl-tests style collective
// rows.
//
// Per-row robustness: a row (run or collective) that is malformed becomes that row's `error` (one line naming
// the file, the run, the field and the value, the id cut and escaped as clip_for_message does; so is a run
// whose id an earlier run has); a run that uses what
// trainsim does not simulate (mixture of experts, an uneven split no framework rule gives) is `unsupported`
// with the reason. Only a document that is not a measured-runs file at all (not an object, wrong `format`,
// `runs` not an array) throws. Top-level keys the format does not define are ignored with one note each
// (MeasuredRunsFile::notes). `null` means "not reported" for measured.step_time_s (the run is simulated, not
// scored), measured.peak_memory_GiB, and a collective's algbw_GBps, busbw_GBps and time_us.
//
// The run's `cluster` block is expanded by the DGX-style generator (cluster.hpp) with these generator
// defaults for what the format does not carry: PCIe GPU<->NIC 32 GB/s (Gen4 x16, A100) or 64 GB/s (Gen5 x16,
// Hopper/Blackwell), NVSwitch hop 1 us, NIC 2 us, switch 0.5 us, 32 nodes per leaf group, non-blocking
// fat-tree. A job smaller than one node uses `gpus` GPUs of it (and as many NICs, at most nics_per_node).
// NVLink domains (extensions.cluster.nvlink_domain_gpus = gpus_per_node, e.g. GB200/GB300 NVL72) that the
// job's GPU count does not fill evenly are used as equal parts: the largest divisor of `gpus` not above the
// domain, in whole trays (extensions.cluster.gpus_per_tray), one NIC per GPU scaled likewise; NVIDIA's
// GB200 jobs run 16 trays (64 GPUs) per NVL72 rack (MLPerf Training v5.0/v5.1 GB200 systems: 2,496 and
// 2,560 GPUs = 39 and 40 racks x 64). The run's `notes` say so.
//
// Layout fields the format does not carry take the defaults of the run's framework
// (include/trainsim/framework_defaults.hpp; docs/compute-model.md "Frameworks"), each overridable per run by
// the optional `training` keys `attention` ("flash", "cudnn", "unfused"), `fp8_recipe` ("delayed",
// "tensorwise", "rowwise", "mxfp8", "nvfp4"), `reshard_after_forward`, `overlap_grad_reduce`,
// `overlap_param_gather`, `tp_comm_overlap`, `fp8_param_gather`, `cross_entropy_fusion`,
// `grad_reduce_in_bf16`, `apex_distributed_adam`, `layers_per_stage`:
//   framework (optional `training.framework`): when absent, "torchtitan" in the run's source -> torchtitan;
//              "llm-foundry" or "composer" -> composer; "DeepSpeed" or zero_stage >= 1 -> deepspeed; else
//              megatron;
//   Megatron-Bridge recipes (a megatron run whose source names "Megatron-Bridge"): the recipe's defaults
//              that differ from Megatron-LM's: cross_entropy_fusion (GPTModelProvider
//              cross_entropy_loss_fusion = True), grad_reduce_in_bf16 (the performance scripts set
//              grad_reduce_in_fp32 = False) and, for fp8 with delayed or current scaling or mxfp8,
//              fp8_param_gather (mixed_precision.py bf16_with_fp8_mixed,
//              bf16_with_fp8_current_scaling_mixed, bf16_with_mxfp8_mixed; for mxfp8 a 16-bit gather,
//              Layout::fp8_weights_gathered_in_fp8); with nvfp4 (bf16_with_nvfp4_mixed: no param gather),
//              tp_comm_overlap off (the Llama performance configs,
//              scripts/performance/configs/llama/llama3*_llm_pretrain.py);
//   NeMo 24.07 performance-summary rows (the source names NVIDIA/NeMo's
//              docs/source/performance/performance_summary.md and NeMo 24.07): apex_distributed_adam
//              (NeMo-Framework-Launcher 24.07 training configs: optim.name distributed_fused_adam) and, for
//              FP8 rows whose id or notes name GPT3, Llama or Nemotron-340B, grad_reduce_in_bf16 (the
//              launcher's H100 FP8 scripts examples/training/{gpt,llama}/h100/*_fp8*.sh set
//              optim.grad_sync_dtype=bf16, as conf/training/nemotron/nemotron_340b.yaml does itself);
//   Megatron-Bridge v0.6.0 recipes named by extensions.recipe_preset that run HybridEP with full-iteration
//              CUDA graphs and overlap_moe_expert_parallel_comm
//              (gpt_oss_120b_pretrain_64gpu_gb300_fp8mx_config,
//              qwen3_30b_a3b_pretrain_8gpu_gb300_fp8mx_config,
//              qwen3_235b_a22b_pretrain_256gpu_gb200_fp8mx_config,
//              deepseek_v3_pretrain_256gpu_gb200_fp8mx_config): moe_dispatcher hybridep,
//              moe_fused_grouped_mlp, moe_a2a_overlap, each unless the row states it (moe_dispatcher_backend,
//              cuda_graphs, moe_a2a_overlap);
//   NeMo 2 performance-summary rows (the source names the NeMo Framework User Guide's Performance Summary,
//              extensions.nemo_release_branch r2.2.0 or later): the performance scripts' settings, for FP8
//              fp8_param_gather (bf16_with_fp8_mixed / bf16_with_fp8_current_scaling_mixed) and
//              grad_reduce_in_bf16 (grad_reduce_in_fp32 = False; from r2.4.0 for every precision), from
//              r2.3.0 cross_entropy_fusion (cross_entropy_fusion_impl = "te"): scripts/llm/performance
//              (r2.2.0), scripts/performance/utils.py (r2.3.0), scripts/performance/helpers.py (r2.4.0);
//   precision "nvfp4" (outside the format's enum; the 2026 file): precision fp8 with fp8_recipe nvfp4;
//   async_tp (optional `training.async_tp`, default false): a torchtitan run with async TP (torch.compile
//              micro-pipeline TP); it sets tp_comm_overlap for that run;
//   compile (optional `training.compile`, default false as torchtitan's job config): the blocks were
//              compiled with torch.compile; without it a torchtitan run's norms, RoPE and SwiGLU run as eager
//              ops (Layout::eager_elementwise);
//   when a row states neither `compile` nor `async_tp`, its own `notes` are read for them: "torch.compile"
//              or "+ compile" -> compile, "asyncTP" or "async TP" -> async_tp (torchtitan's benchmark tables
//              name both per row); each use is listed in the run's notes;
//   recompute "selective" on a torchtitan run is its per-op selective checkpointing (selective_op);
//   pipeline split when pp (or pp x vpp) does not divide the layers: Megatron rows count the embedding and
//              the loss as one layer each (account_for_embedding/loss_in_pipeline_split, Megatron-Core
//              v0.11+, as NeMo / Megatron-Bridge's Llama 3.1 405B recipes set them) when that divides; other
//              frameworks with vpp = 1 put one layer fewer on the first and the last stage (DeepSpeed
//              partition_method "type:transformer|embedding", as BLOOM ran); Megatron-Bridge DeepSeek-V3 rows
//              (the source names Megatron-Bridge, extensions.table.model_label or the id DeepSeek-V3) take
//              the recipe's Layout::pipeline_layout for their pp x vpp (4, 8, 16 or 32 virtual stages,
//              set_deepseek_v3_pipeline_model_parallel_layout and the recipes' pp_layout strings, MTP layers
//              before the loss; measured_runs.cpp bridge_deepseek_v3_layout); otherwise unsupported
//              (optional keys `layers_per_stage`, `pipeline_layout`,
//              `account_for_embedding_in_pipeline_split`, `account_for_loss_in_pipeline_split` state it).
//
// The run's `extensions` object (README "Extensions used by public_runs_2026.json") is read where trainsim
// models what it says: `moe` (read into the model's MoE fields and Layout::ep / etp: num_experts, top_k,
// moe_ffn_hidden, shared_experts x shared_expert_ffn_hidden, dense_layers (+ dense_ffn_hidden -> ffn_hidden),
// moe_layer_pattern checked against them, ep, etp, load_balance "force-balanced" -> balanced and dropless,
// "token-dropping with capacity factor" -> moe_capacity_factor 1.0 (Megatron-Bridge's tokendrop recipes),
// capacity_factor; router noted; the run stays unsupported while moe_supported() is false), `attention`
// (type "MLA" with its ranks -> AttentionType::mla, qk_head_dim -> head_dim_override, simulated as
// Megatron-Core's MLASelfAttention; sliding-window keys are listed in ignored: full attention is simulated),
// `mtp_layers` (-> ModelSpec::mtp_layers), `precision_detail` (mxfp8 / nvfp4 -> Layout::fp8_recipe mxfp8 /
// nvfp4 with Megatron-Bridge's fp8_param_gather for each; current or delayed scaling ->
// Layout::fp8_recipe), `recompute` (granularity full / selective -> Layout::recompute; the selective
// modules core_attn, layernorm, mlp, moe, moe_act, shared_experts -> Layout::recompute_modules, an empty
// list -> recompute none; MLA rows also mla_up_proj -> Layout::recompute_mla_up_proj), `head_dim` /
// `attention.head_dim` (->
// head_dim_override on MoE and MLA rows; on dense rows only when equal to hidden / heads, else ignored as
// before), `megatron_fsdp` (ZeRO-3 in Megatron: framework megatron), `cluster` (NVLink domain, trays),
// `moe_a2a_overlap` (true -> Layout::moe_a2a_overlap: Megatron's combined 1F1B EP all-to-all overlap),
// `moe_dispatcher_backend` ("deepep" / "hybridep" -> Layout::moe_dispatcher), `activation` (gpt-oss's
// "clamped SwiGLU variant (quick_gelu gate, ..." on an MoE row -> ModelSpec::moe_expert_bias: its provider's
// add_bias_linear, and ModelSpec::moe_activation_clamp: its activation_func_clamp_value; the fused
// activation timed as SwiGLU), `cuda_graphs` "full_iteration" on an MoE row ->
// Layout::moe_fused_grouped_mlp (still listed in ignored: no launch cost is modelled).
// Provenance keys (`table`, `source_row`, `recipe_preset`, `recipe_match`, `mlperf`, ...) are documentation.
// Anything else that changes the run (CUDA graphs, activation offloading, partial recompute, a head_dim other
// than hidden / heads, multi-token prediction, ...) is listed in MeasuredRun::ignored and simulated without
// it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/collective_kind.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"

namespace trainsim {

struct MeasuredRun {
    std::string id;  ///< the row's id, or "runs[i]" when the row has none
    std::string source;
    TopologySpec topology;
    ModelSpec model;
    Layout layout;
    /// Measured seconds per optimizer step; nullopt when not reported (null): simulated, not scored.
    std::optional<double> step_time_s;
    std::optional<double> peak_memory_gib;  ///< busiest GPU's peak, GiB; nullopt when not reported
    /// Set when the run uses a feature trainsim does not simulate: names the feature. Never approximated.
    std::optional<std::string> unsupported;
    /// Set when the row is malformed: one line naming the file, the run, the field and the value. The other
    /// fields are then partial and must not be simulated.
    std::optional<std::string> error;
    /// What the row's `extensions` say that trainsim does not model, one entry each, e.g.
    /// "extensions.cuda_graphs = \"local\""; the run is simulated without it.
    std::vector<std::string> ignored;
    /// Assumptions the loader made for this run (NVLink domain partition, pipeline split chosen), one line
    /// each.
    std::vector<std::string> notes;
};

struct CollectiveRow {
    std::string id;  ///< the row's id, or "collectives[i]" when the row has none
    CollectiveKind op = CollectiveKind::all_reduce;
    int gpus = 0;
    int nodes = 0;
    double bytes = 0;
    std::optional<double> algbw_GBps;  ///< nullopt: not reported
    std::optional<double> busbw_GBps;  ///< nullopt: not reported
    std::optional<double> time_us;     ///< nullopt: not reported
    /// From the row's optional `cluster` block, else the DGX-style preset of the row's optional `gpu` (a
    /// catalog name), else of the GPU its `hardware` text names.
    TopologySpec topology;
    std::optional<std::string> error;  ///< set when the row is malformed (one line, as MeasuredRun::error)

    /// The measured bus bandwidth, GB/s: busbw_GBps, else algbw_GBps x busbw_factor(op, gpus) (nccl-tests
    /// PERFORMANCE.md), else bytes / time_us likewise; nullopt when none is reported.
    std::optional<double> measured_busbw_GBps() const;
};

struct MeasuredRunsFile {
    std::vector<MeasuredRun> runs;
    std::vector<CollectiveRow> collectives;
    /// File-level notes, e.g. a top-level key the format does not define (ignored), one line each.
    std::vector<std::string> notes;
};

/// Whether the executor simulates mixture-of-experts rows (EP all-to-all, grouped expert GEMMs, expert-DP
/// reduction): true since the executor's MoE work (sim/program/moe_ops.cpp). While false the MoE fields are
/// read but the row stays `unsupported` (no figure from a half-modelled MoE run). MLA rows stay unsupported
/// either way until the program builds the MLA projections.
bool moe_supported();

/// Parses a measured-runs document. A malformed row is kept with its `error` set (see above); throws
/// InputError naming the file and the field only when the document itself is not a measured-runs file (or
/// holds more than limits::kMaxMeasuredRows runs or collectives).
MeasuredRunsFile parse_measured_runs(const nlohmann::json& j, const std::string& file);

/// The DGX-style topology (per-GPU NVLink rate, NICs per node and their rate) of the system a collective row
/// names in `hardware`, e.g. "DGX H100, 8x H100 80GB HBM3" (the first catalog GPU named in it), or of the
/// catalog GPU `hardware` is. Throws InputError naming `where` when it names none.
TopologySpec dgx_preset_topology(const std::string& hardware, int gpus, int gpus_per_node,
                                 const std::string& where);

/// The DGX-style topology for a run's cluster block fields (exposed for tests).
TopologySpec dgx_topology(const std::string& gpu, int gpus, int gpus_per_node, double nvlink_GBps,
                          int nics_per_node, double nic_Gbps, const std::string& scale_out_kind);

}  // namespace trainsim
