// Calibration files: model constants of GPU types measured on real hardware (the calibration tool) or fitted
// to measured runs (`trainsim fit`), applied over the catalog's values.
//
// Format `trainsim-calibration/1`:
//   { "format": "trainsim-calibration/1", "source": "how the values were obtained",
//     "gpus": { "<catalog name>": { "<constant>": value, ... } }, "fit"?: { ...report of the fit... } }
// Constants that may be set: gemm_max_efficiency, gemm_k_half, fp8_gemm_efficiency, gemm_min_time_s,
// flash_attention_efficiency, cudnn_attention_efficiency, hbm_efficiency, kernel_overhead_s,
// nvlink_efficiency (their meaning: gpu_catalog.hpp). Unknown GPUs or constants are refused.
#pragma once

#include <map>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/gpu_catalog.hpp"

namespace trainsim {

struct Calibration {
    std::string source;
    std::map<std::string, std::map<std::string, double>> gpus;  ///< GPU name -> constant -> value
};

/// Names of the constants a calibration may set.
const std::vector<std::string>& calibratable_constants();

/// Reads a calibration document; throws InputError naming the file and field.
Calibration parse_calibration(const nlohmann::json& j, const std::string& file);
nlohmann::json to_json(const Calibration& c);

/// Returns `gpu` with the calibration's constants for it applied (unchanged if the calibration has none).
GpuSpec apply_calibration(const Calibration& c, const GpuSpec& gpu);
/// Sets topology.gpu_calibrated when the calibration has constants for its GPU.
void apply_calibration(const Calibration& c, TopologySpec& topology);
/// Refuses (InputError naming `file`, the GPUs it has constants for, `gpu` and `cluster_label`) a calibration
/// with no constants for `gpu`, the GPU of the one cluster a command simulates (run, memory, goodput, sweep):
/// applied to it, it would change nothing, as a profile of another GPU would not (load_profile refuses that).
/// `validate` applies one calibration to runs on several GPUs and does not call it.
void check_calibration_gpu(const Calibration& c, const std::string& file, const std::string& gpu,
                           const std::string& cluster_label);

/// Reads or writes one named constant of a GpuSpec. Throws InputError for an unknown name.
double& gpu_constant(GpuSpec& gpu, const std::string& name);

}  // namespace trainsim
