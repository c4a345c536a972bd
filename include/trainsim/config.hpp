// Input files: topology (cluster by parameters) and workload (model + training layout), read strictly: every
// quantity carries its unit in the string ("300GBps", "200Gbps", "2us", "160MB"), unknown keys are refused,
// and every error is one line naming the file, the field and the value (InputError).
//
// Topology file (the fields, types, units, defaults and ranges: topology_fields(), docs/inputs.md):
//   { "name", "description"?, "gpu", "nodes", "gpus_per_node",
//     "scale_up":  { "kind": "nvswitch", "bandwidth_per_gpu": "300GBps", "latency": "1us",
//                    "domain_gpus"?: 72 (GPUs of one NVLink domain spanning several nodes of
//                    gpus_per_node GPUs, e.g. GB200 NVL72's trays of 4; default gpus_per_node; see
//                    apply_scale_up_domain in cluster.hpp: nodes, nics_per_node, host, storage and
//                    nodes_per_leaf stay per host in the file) },
//     "scale_out": { "kind": "infiniband"|"roce", "nics_per_node", "nic_rate": "200Gbps",
//                    "pcie_bandwidth": "32GBps", "nic_latency": "2us", "switch_latency": "0.5us",
//                    "topology": "rail-optimized-fat-tree", "nodes_per_leaf", "oversubscription",
//                    "routing"?: "adaptive"|"ecmp" },
//     "host"?: { "memory_bandwidth", "nvme_bandwidth" }, "storage"?: { "read_bandwidth_per_node"?,
//     "write_bandwidth_per_node"? } }
// Workload file:
//   { "name", "description"?, "model": {...}, "layout": {...}, "measured"?: { source, step_time_s,
//     tflops_per_gpu, tflops_convention } }; the fields of "model" and "layout", their types, units, defaults
//   and ranges are declared once in model_fields() and layout_fields() (include/trainsim/schema.hpp) and
//   listed in docs/inputs.md (`trainsim schema --markdown`).
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/errors.hpp"
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

/// The text of input file `path`, read within kMaxInputFileBytes (limits.hpp); a directory, a missing or
/// unreadable file, or one over the limit (a device such as /dev/zero included) throws InputError naming it;
/// `kind` names what was expected ("a directory, not a JSON file").
std::string read_input_file(const std::string& path, const char* kind = "file");

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

/// For an InputError `e` of a loader (parse_topology, parse_workload) over JSON that `sets` (the --set
/// assignments, in order) edited, read from `file`: when its message reads "FILE: KEY = ..." (or "KEY holds",
/// "KEY is", "KEY must") for a KEY a --set gave, throws it as `--set "KEY=VALUE": KEY = ...` (the last --set
/// of that KEY: the value is its, not the file's); otherwise returns, and the caller rethrows `e`.
void blame_set(const InputError& e, const std::vector<std::string>& sets, const std::string& file);

/// parse() (a loader over JSON that `sets` edited, read from `file`), its InputError passed through
/// blame_set.
template <class Parse>
auto parse_blaming_sets(const std::vector<std::string>& sets, const std::string& file, Parse parse) {
    try {
        return parse();
    } catch (const InputError& e) {
        blame_set(e, sets, file);
        throw;
    }
}

/// The embedded default: the Megatron-LM README's GPT-3 175B run on 1024 A100-80GB (DGX A100, HDR
/// InfiniBand).
nlohmann::json default_topology_json();
nlohmann::json default_workload_json();

/// The topology file's fields (include/trainsim/schema.hpp), in the order the loader reads them; a nested
/// object's fields are named "scale_out.nic_rate". docs/inputs.md is generated from it.
const schema::Table<TopologySpec>& topology_fields();

/// docs/inputs.md: every field of the input files (topology, workload model and layout) with its type, unit,
/// default, range or choices and meaning, generated from the schemas (`trainsim schema --markdown`).
std::string inputs_markdown();

}  // namespace trainsim
