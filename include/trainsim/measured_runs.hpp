// Reader of measured-run files, format `trainsim-measured-runs/1` (shared/validation/README.md): published or
// in-house training runs with their cluster, model, layout and measurements, plus nccl-tests style collective
// rows.
//
// The run's `cluster` block is expanded by the DGX-style generator (cluster.hpp) with these generator
// defaults for what the format does not carry: PCIe GPU<->NIC 32 GB/s (Gen4 x16, A100) or 64 GB/s (Gen5 x16,
// Hopper/Blackwell), NVSwitch hop 1 us, NIC 2 us, switch 0.5 us, 32 nodes per leaf group, non-blocking
// fat-tree. Layout fields the format does not carry take the defaults of the run's framework
// (include/trainsim/framework_defaults.hpp; docs/compute-model.md "Frameworks"), each overridable per run by
// the optional `training` keys `attention` ("flash", "cudnn", "unfused"), `fp8_recipe` ("delayed",
// "tensorwise", "rowwise", "mxfp8"), `reshard_after_forward`, `overlap_grad_reduce`, `overlap_param_gather`,
// `tp_comm_overlap`, `layers_per_stage`:
//   framework (optional `training.framework`): when absent, "torchtitan" in the run's source -> torchtitan;
//              "llm-foundry" or "composer" -> composer; "DeepSpeed" or zero_stage >= 1 -> deepspeed; else
//              megatron;
//   async_tp (optional `training.async_tp`, default false): a torchtitan run with async TP (torch.compile
//              micro-pipeline TP); it sets tp_comm_overlap for that run;
//   compile (optional `training.compile`, default false as torchtitan's job config): the blocks were
//              compiled with torch.compile; without it a torchtitan run's norms, RoPE and SwiGLU run as eager
//              ops (Layout::eager_elementwise);
//   recompute "selective" on a torchtitan run is its per-op selective checkpointing (selective_op);
//   layers_per_stage when pp does not divide layers: the embedding and the LM head count as one layer each on
//              the first and last stage (DeepSpeed partition_method "type:transformer|embedding", as BLOOM
//              ran).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/collectives.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"

namespace trainsim {

struct MeasuredRun {
    std::string id;
    std::string source;
    TopologySpec topology;
    ModelSpec model;
    Layout layout;
    double step_time_s = 0;
    std::optional<double> peak_memory_gib;
    /// Set when the run uses a feature trainsim does not simulate: names the feature. Never approximated.
    std::optional<std::string> unsupported;
};

struct CollectiveRow {
    std::string id;
    CollectiveKind op = CollectiveKind::all_reduce;
    int gpus = 0;
    int nodes = 0;
    double bytes = 0;
    double algbw_GBps = 0;
    double busbw_GBps = 0;
    TopologySpec topology;  ///< from the row's optional `cluster` block, else the DGX preset of its GPU
};

struct MeasuredRunsFile {
    std::vector<MeasuredRun> runs;
    std::vector<CollectiveRow> collectives;
};

/// Parses a measured-runs document. Throws InputError naming the file, the run id and the field.
MeasuredRunsFile parse_measured_runs(const nlohmann::json& j, const std::string& file);

/// The DGX-style topology for a run's cluster block fields (exposed for tests).
TopologySpec dgx_topology(const std::string& gpu, int gpus, int gpus_per_node, double nvlink_GBps,
                          int nics_per_node, double nic_Gbps, const std::string& scale_out_kind);

}  // namespace trainsim
