// Validation against measured runs (`trainsim validate`): every run of measured-run files
// (trainsim-measured-runs/1, include/trainsim/measured_runs.hpp) simulated and compared with what was
// measured, the statistics over the runs, and the regression gate. The CLI parses the options and formats
// the result (text table or JSON); everything it prints is computed here.
//
// Errors: error_pct = 100 * (predicted - measured) / measured, per run and metric. A run's status: ok
// (simulated), oom (predicted out of memory: counted apart, its step time not scored), unsupported (a
// feature trainsim does not simulate, named by the loader), error (a malformed row, or a simulation that
// threw InputError: the message). A run whose measured step time is null is simulated, not scored.
// Collective rows (nccl-tests style) are simulated alone on an idle cluster and compared in bus bandwidth
// (GB/s; busbw = algbw x busbw_factor, nccl-tests PERFORMANCE.md).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "trainsim/calibration.hpp"
#include "trainsim/collective_kind.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/profile.hpp"

namespace trainsim {

class ProcessGroup;

/// Absolute percentage errors of one metric over the scored rows: their mean (MAPE), their largest, and how
/// many are within a tolerance.
struct ErrorStats {
    double sum_abs_pct = 0;  ///< sum of |error_pct|
    double max_abs_pct = 0;  ///< largest |error_pct| (0 when none)
    int count = 0;           ///< rows added
    int within = 0;          ///< rows with |error_pct| <= the tolerance
    /// Adds one row's error (percent) against `tolerance_pct`.
    void add(double error_pct, double tolerance_pct);
    /// Mean absolute percentage error; 0 when no row was added.
    double mape_pct() const { return count ? sum_abs_pct / count : 0.0; }
};

enum class RunStatus { ok, oom, unsupported, error };
const char* to_string(RunStatus s);

/// Where a run's predicted step goes: the Report's mean over the GPUs (include/trainsim/report.hpp), seconds
/// per step, and its MFU. The parts add up to the step time (exposed EP all-to-all is part of TP).
struct PredictedBreakdown {
    double compute_s = 0, bubble_s = 0, tp_exposed_s = 0, ep_exposed_s = 0, pp_exposed_s = 0,
           dp_exposed_s = 0, idle_s = 0;
    double mfu = 0;  ///< model FLOPs per second over the GPUs' dense 16-bit peak, 0 .. 1
};

/// One measured run, simulated (or not) and compared. The measured figures are copied from the row; the
/// predicted ones are set when the run was simulated (status ok or oom).
struct RunValidation {
    std::string id;
    RunStatus status = RunStatus::ok;
    /// unsupported: the feature; error: the message; oom: the memory model's out-of-memory message.
    std::string reason;
    std::optional<double> measured_step_s, predicted_step_s;
    /// Set when the step time was measured and the run simulated (also for an oom run, whose error is shown
    /// but not scored).
    std::optional<double> step_error_pct;
    std::optional<double> measured_peak_gib, predicted_peak_gib;  ///< the busiest GPU's peak, GiB
    std::optional<double> peak_error_pct;  ///< set when the peak was measured and the run simulated
    /// The step time counts in the statistics: simulated, measured, and not predicted out of memory.
    bool scored = false;
    /// The loader accepted the row (neither malformed nor unsupported), so it was simulated: status ok, oom,
    /// or error when the simulation threw InputError.
    bool simulatable = false;
    std::vector<std::string>
        ignored;                     ///< the row's extensions trainsim does not model (MeasuredRun::ignored)
    std::vector<std::string> notes;  ///< the loader's assumptions for the row (MeasuredRun::notes)
    /// Set when the run was simulated on a GPU whose constants are uncalibrated (Report::gpu_uncalibrated).
    std::string gpu_uncalibrated;
    /// Set with predicted_step_s: where the predicted step goes.
    std::optional<PredictedBreakdown> predicted_breakdown;
};

/// One collective row simulated and compared in bus bandwidth.
struct CollectiveValidation {
    std::string id;
    CollectiveKind op = CollectiveKind::all_reduce;
    int gpus = 0;
    double bytes = 0;
    std::optional<std::string> error;  ///< the row is malformed (then nothing below is set)
    double predicted_busbw_GBps = 0, predicted_algbw_GBps = 0;
    std::optional<double> measured_busbw_GBps;  ///< nullopt: no bandwidth or time reported (not scored)
    std::optional<double> error_pct;            ///< set with measured_busbw_GBps
};

/// The rows of one measured-runs file selected by ValidationOptions::only, in the file's order.
struct FileValidation {
    std::vector<std::string> notes;  ///< the file's own notes (MeasuredRunsFile::notes)
    std::vector<RunValidation> runs;
    std::vector<CollectiveValidation> collectives;
};

struct ValidationSummary {
    int runs = 0, simulated = 0, not_scored = 0, oom = 0, unsupported = 0, errors = 0, collective_errors = 0;
    ErrorStats step_time;    ///< scored runs' step time (count = the scored runs)
    ErrorStats peak_memory;  ///< simulated runs with a measured peak, oom runs included
    ErrorStats collectives_busbw;
    int scored() const { return step_time.count; }
};

struct ValidationResult {
    std::vector<FileValidation> files;
    ValidationSummary summary;
    /// Simulations run: the simulated runs less those whose inputs equal an earlier run's (the same
    /// topology, model and layout but for their names: one simulation serves them all).
    std::size_t simulations = 0;
};

struct ValidationOptions {
    double tolerance_pct = 10.0;             ///< |error_pct| counted as within (ErrorStats::within)
    std::set<std::string> only;              ///< ids of the runs and collectives to validate; empty: all
    std::optional<Calibration> calibration;  ///< applied over the catalog to every row's GPU
    /// Measured kernel times for the runs on the profile's GPU type; profile_file names it in errors.
    std::shared_ptr<const Profile> profile;
    std::string profile_file;
    int jobs = 1;  ///< simulations in parallel (parallel_map); the result does not depend on it
    /// Processes that share the runs (MPI ranks, process_group.hpp spread_map); every process gets the whole
    /// result, the same as one process's. Null: this process alone.
    ProcessGroup* processes = nullptr;
    /// Called once, before any simulation, with the ids of the selected runs in output order (the files'
    /// order). Null: not called.
    std::function<void(const std::vector<std::string>&)> on_ids;
    /// Called once per selected run, in output order, as soon as that run and every run before it are
    /// compared (what validate_runs returns for it), so that a caller can print the table as it fills; from
    /// the worker threads, one call at a time. Under processes, the calls come after every simulation.
    std::function<void(const RunValidation&)> on_run;
};

/// Simulates and compares the selected rows of `files` (already parsed; the calibration and the profile are
/// applied to copies). Throws InputError when an id of `only` names no row, or when the profile's GPU runs
/// no row; a run whose simulation throws InputError is that run's error, any other exception propagates.
ValidationResult validate_runs(const std::vector<MeasuredRunsFile>& files, const ValidationOptions& options);

/// The summary of validated rows: counts by status and the statistics of the scored errors (what
/// validate_runs computes, exposed for tests).
ValidationSummary summarize_validation(const std::vector<FileValidation>& files, double tolerance_pct);

/// The regression gate of `trainsim validate`: fails when the step-time MAPE exceeds max_mape_pct (when >=
/// 0), when a scored step time or a peak memory is outside the tolerance, when more than max_oom runs are
/// predicted out of memory, or when a row is an error.
struct ValidationGate {
    double max_mape_pct = -1;  ///< < 0: not checked
    int max_oom = 0;
};
struct GateVerdict {
    bool pass = true;
    /// Set when the MAPE check failed: "step-time MAPE A% exceeds --max-mape B%".
    std::optional<std::string> mape_message;
};
GateVerdict evaluate_gate(const ValidationSummary& summary, const ValidationGate& gate);

}  // namespace trainsim
