// Measured figures of a published run, printed beside the prediction: read from a workload file's
// "measured" object (config.hpp) and written by the report (report.hpp). A leaf header, so that the workload
// loader does not depend on the report.
#pragma once

#include <string>

namespace trainsim {

/// Measured figures printed beside the prediction (the embedded default's published run).
struct Measured {
    std::string source;
    double step_time_s = 0;     ///< seconds per optimizer step, as published
    double tflops_per_gpu = 0;  ///< as the source counts it
    std::string tflops_convention;
};

}  // namespace trainsim
