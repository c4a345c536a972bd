// `trainsim fit FILE... --gpu NAME`: model constants of one GPU type fitted to the measured step times of the
// runs on that GPU (trainsim-measured-runs/1). The objective is the sum over the runs of
// log(predicted / measured step time)^2; the constants are fitted as multipliers exp(x_k) of the catalog's
// values (efficiencies kept at most 1) by Levenberg-Marquardt (Levenberg 1944, Marquardt 1963): the Jacobian
// by forward differences of step 0.02 in x, the damped normal equations (J^T J + lambda I) dx = -J^T r solved
// by LDL^T (Eigen), lambda from 1e-3, times 0.3 after a step that lowers the objective and 10 after one that
// does not (the fit stops when lambda exceeds 1e6); converged when the objective falls by less than 1e-4 of
// itself or the step is shorter than 1e-3. Each evaluation simulates every run (in parallel, parallel_map).
#pragma once

#include <string>
#include <vector>

#include "trainsim/gpu_catalog.hpp"
#include "trainsim/measured_runs.hpp"

namespace trainsim {

struct StepTimeFitOptions {
    std::vector<std::string> constants;  ///< names as gpu_constant() takes them, e.g. "hbm_efficiency"
    int max_iterations = 6;              ///< Levenberg-Marquardt steps at most
    int jobs = 1;                        ///< simulations in parallel; the result does not depend on it
};

/// One Levenberg-Marquardt step tried: the RMS of the log errors before it and at the point it proposed (the
/// step is taken when that is lower; infinity when a run's simulation there passed the simulated range, a
/// step rejected).
struct FitStep {
    double rms_log_error_before = 0, rms_log_error_after = 0;
};

/// A fitted run: its measured step time and its error (percent) with the catalog's and the fitted values.
struct FittedRun {
    std::string id;
    double measured_step_time_s = 0;
    double error_pct_before = 0, error_pct_after = 0;
};

struct StepTimeFit {
    GpuSpec catalog;  ///< the GPU as given
    GpuSpec fitted;   ///< with the fitted constants
    int iterations = 0;
    std::vector<FitStep> steps;  ///< every step tried, in order
    double rms_log_error_before = 0, rms_log_error_after = 0;
    std::vector<FittedRun> runs;
};

/// The runs of `files` a fit on GPU `gpu_name` uses: simulatable (no error, supported), with a measured step
/// time, on that GPU, and whose id starts with one of `id_prefixes` (all when empty). In the files' order;
/// the pointers point into `files`.
std::vector<const MeasuredRun*> runs_to_fit(const std::vector<MeasuredRunsFile>& files,
                                            const std::string& gpu_name,
                                            const std::vector<std::string>& id_prefixes);

/// Fits options.constants of `catalog` to `runs` (each simulated with the GPU's constants replaced,
/// TopologySpec::gpu_calibrated). Throws InputError for an unknown constant name, when no constant is given,
/// when there are fewer runs than constants ("fit: N runs on GPU; need at least M"), or naming the run whose
/// simulation throws.
StepTimeFit fit_step_time_constants(const std::vector<const MeasuredRun*>& runs, const GpuSpec& catalog,
                                    const StepTimeFitOptions& options);

}  // namespace trainsim
