// Input files: topology (cluster by parameters) and workload (model + training layout), read strictly: every
// quantity carries its unit in the string ("300GBps", "200Gbps", "2us", "160MB"), unknown keys are refused,
// and every error is one line naming the file, the field and the value (InputError).
//
// Topology file:
//   { "name", "description"?, "gpu", "nodes", "gpus_per_node",
//     "scale_up":  { "kind": "nvswitch", "bandwidth_per_gpu": "300GBps", "latency": "1us",
//                    "domain_gpus"?: 72 (GPUs of one NVLink domain spanning several nodes of
//                    gpus_per_node GPUs, e.g. GB200 NVL72's trays of 4; default gpus_per_node; see
//                    apply_scale_up_domain in cluster.hpp: nodes, nics_per_node, host, storage and
//                    nodes_per_leaf stay per host in the file) },
//     "scale_out": { "kind": "infiniband"|"roce", "nics_per_node", "nic_rate": "200Gbps",
//                    "pcie_bandwidth": "32GBps", "nic_latency": "2us", "switch_latency": "0.5us",
//                    "topology": "rail-optimized-fat-tree", "nodes_per_leaf", "oversubscription",
//                    "routing"?: "adaptive"|"ecmp" (default: adaptive for infiniband, ecmp for roce) },
//     "host"?: { "memory_bandwidth": "614.4GBps", "nvme_bandwidth": "25GBps" },   (per node; for offload)
//     "storage"?: { "read_bandwidth_per_node"?: "1GBps", "write_bandwidth_per_node"?: "1GBps" } }
//                  (shared storage for checkpoints, `trainsim goodput`; 1 MB/s .. 1 PB/s; default
//                  kDefaultStorageBandwidthPerNode)
// Workload file:
//   { "name", "description"?, "model": { layers, hidden, heads, kv_heads, ffn_hidden, vocab, seq_len,
//     mlp: "gelu"|"swiglu", tied_embeddings, dropout? }, "layout": { tp, pp, dp, cp?, vpp?, micro_batch,
//     global_batch, schedule?: "1f1b"|"gpipe", sequence_parallel?, recompute?: "none"|"selective"|"full",
//     precision?: "bf16"|"fp16"|"fp8", distributed_optimizer?, zero_stage?, dp_bucket_size?: "160MB",
//     overlap_grad_reduce?, overlap_param_gather?, tp_comm_overlap?, attention?: "flash"|"cudnn"|"unfused",
//     fp8_recipe?, fp8_param_gather?, cross_entropy_fusion?, grad_reduce_in_bf16? (Megatron-LM's flags,
//     see Layout),
//     layers_per_stage?: [..] | null (even split), account_for_embedding_in_pipeline_split?,
//     account_for_loss_in_pipeline_split? (Megatron-LM's, see Layout),
//     optimizer?: "adam"|"adam_8bit"|"sgd_momentum"|"sgd",
//     offload_optimizer?: "none"|"cpu"|"nvme", adapter?: "none"|"lora"|"qlora", lora_rank?,
//     lora_targets?: ["qkv","proj","fc1","fc2"], checkpoint_save?: "sharded"|"rank0",
//     framework?: "megatron"|"deepspeed"|"torchtitan"|"composer"|"pytorch" }, "measured"?: { source,
//     step_time_s, tflops_per_gpu, tflops_convention } }
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured.hpp"
#include "trainsim/model.hpp"

namespace trainsim {

struct Workload {
    std::string name;
    ModelSpec model;
    Layout layout;
    std::optional<Measured> measured;
};

/// Largest input file read (bytes): the shipped inputs are below 1 MB.
inline constexpr std::size_t kMaxInputFileBytes = 64u << 20;
/// Deepest nesting of arrays and objects accepted in an input document (the formats need 5 levels).
inline constexpr int kMaxJsonDepth = 64;

/// Reads and parses a JSON file. Throws InputError naming the file when it is missing, a directory or another
/// non-file, larger than kMaxInputFileBytes, not valid JSON, or nested deeper than kMaxJsonDepth.
nlohmann::json read_json_file(const std::string& path);

/// Parses JSON `text` read from `name` (as read_json_file does after reading it). Throws InputError.
nlohmann::json parse_json_text(std::string_view text, const std::string& name);

TopologySpec parse_topology(const nlohmann::json& j, const std::string& file);
Workload parse_workload(const nlohmann::json& j, const std::string& file);
/// Parses the "model" object (also used by the measured-runs reader). `path` prefixes field names.
ModelSpec parse_model(const nlohmann::json& j, const std::string& file, const std::string& path);

/// Applies a `--set key=value` override: keys start with "topology." (the topology document) or name a field
/// of the workload document ("layout.tp=4", "model.layers=48"). The value is parsed as JSON when it is valid
/// JSON, else taken as a string. Throws InputError for a malformed assignment or a path through a non-object.
void apply_override(nlohmann::json& topology, nlohmann::json& workload, const std::string& assignment);

/// The embedded default: the Megatron-LM README's GPT-3 175B run on 1024 A100-80GB (DGX A100, HDR
/// InfiniBand).
nlohmann::json default_topology_json();
nlohmann::json default_workload_json();

}  // namespace trainsim
