// The statistics of a validation and its gate (include/trainsim/validation.hpp).
#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "trainsim/validation.hpp"

namespace trainsim {

void ErrorStats::add(double error_pct, double tolerance_pct) {
    const double abs_pct = std::fabs(error_pct);
    sum_abs_pct += abs_pct;
    max_abs_pct = std::max(max_abs_pct, abs_pct);
    ++count;
    if (abs_pct <= tolerance_pct) ++within;
}

const char* to_string(RunStatus s) {
    switch (s) {
        case RunStatus::ok:
            return "ok";
        case RunStatus::oom:
            return "oom";
        case RunStatus::unsupported:
            return "unsupported";
        case RunStatus::error:
            return "error";
    }
    return "?";
}

ValidationSummary summarize_validation(const std::vector<FileValidation>& files, double tolerance_pct) {
    ValidationSummary s;
    for (const FileValidation& file : files) {
        for (const RunValidation& run : file.runs) {
            ++s.runs;
            if (run.status == RunStatus::error) {
                ++s.errors;
                continue;
            }
            if (run.status == RunStatus::unsupported) {
                ++s.unsupported;
                continue;
            }
            ++s.simulated;
            if (!run.measured_step_s) ++s.not_scored;
            if (run.scored && run.step_error_pct) s.step_time.add(*run.step_error_pct, tolerance_pct);
            if (run.peak_error_pct) s.peak_memory.add(*run.peak_error_pct, tolerance_pct);
            if (run.status == RunStatus::oom) ++s.oom;
        }
        for (const CollectiveValidation& c : file.collectives) {
            if (c.error)
                ++s.collective_errors;
            else if (c.error_pct)
                s.collectives_busbw.add(*c.error_pct, tolerance_pct);
        }
    }
    return s;
}

GateVerdict evaluate_gate(const ValidationSummary& s, const ValidationGate& gate) {
    GateVerdict v;
    const double mape = s.step_time.mape_pct();
    if (gate.max_mape_pct >= 0 && mape > gate.max_mape_pct) {
        v.pass = false;
        v.mape_message =
            fmt::format("step-time MAPE {:.2f}% exceeds --max-mape {:.2f}%", mape, gate.max_mape_pct);
        return v;
    }
    const bool all_within =
        s.step_time.within == s.step_time.count && s.peak_memory.within == s.peak_memory.count;
    v.pass = all_within && s.oom <= gate.max_oom && s.errors == 0 && s.collective_errors == 0;
    return v;
}

}  // namespace trainsim
