// GPU constants fitted to measured step times (include/trainsim/step_time_fit.hpp).
#include "trainsim/step_time_fit.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <Eigen/Dense>

#include "trainsim/calibration.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/parallel_map.hpp"
#include "trainsim/simulate.hpp"

namespace trainsim {

namespace {

/// Step times of `runs` with `gpu` as the GPU's constants, simulated on `jobs` threads.
std::vector<double> predict(const std::vector<const MeasuredRun*>& runs, const GpuSpec& gpu, int jobs) {
    return parallel_map(runs.size(), jobs, [&](std::size_t i) {
        try {
            TopologySpec t = runs[i]->topology;
            t.gpu_calibrated = gpu;
            return simulate(t, runs[i]->model, runs[i]->layout, runs[i]->id).report.step_time_s;
        } catch (const std::exception& e) {
            throw InputError(fmt::format("run \"{}\": {}", clip_for_message(runs[i]->id), e.what()));
        }
    });
}

/// The fit's objective: the runs' log(predicted / measured) step times at log-multipliers x.
class LogStepErrors {
  public:
    LogStepErrors(const std::vector<const MeasuredRun*>& runs, const GpuSpec& catalog,
                  const StepTimeFitOptions& options)
        : runs_(runs), catalog_(catalog), options_(options) {}

    /// The catalog GPU with constant k multiplied by exp(x(k)); an efficiency is kept at most 1.
    GpuSpec gpu_at(const Eigen::VectorXd& x) const {
        GpuSpec g = catalog_;
        for (std::size_t k = 0; k < options_.constants.size(); ++k) {
            double& v = gpu_constant(g, options_.constants[k]);
            v *= std::exp(x(static_cast<Eigen::Index>(k)));
            if (options_.constants[k].find("efficiency") != std::string::npos) v = std::min(v, 1.0);
        }
        return g;
    }

    Eigen::VectorXd operator()(const Eigen::VectorXd& x) const {
        const std::vector<double> predicted = predict(runs_, gpu_at(x), options_.jobs);
        Eigen::VectorXd r(static_cast<Eigen::Index>(runs_.size()));
        for (std::size_t i = 0; i < runs_.size(); ++i)
            r(static_cast<Eigen::Index>(i)) = std::log(predicted[i] / *runs_[i]->step_time_s);
        return r;
    }

  private:
    const std::vector<const MeasuredRun*>& runs_;
    const GpuSpec& catalog_;
    const StepTimeFitOptions& options_;
};

/// residuals(x) at a point the fit tries, or nullopt when a run's simulation there is refused (a simulated
/// duration past the supported range: the trial constants, not the measured runs, are out of range; the
/// step is rejected as one that raises the error would be).
std::optional<Eigen::VectorXd> try_residuals(const LogStepErrors& residuals, const Eigen::VectorXd& x) {
    try {
        return residuals(x);
    } catch (const InputError&) {
        return std::nullopt;
    }
}

double rms(const Eigen::VectorXd& r) {
    return std::sqrt(r.squaredNorm() / static_cast<double>(r.size()));
}

/// Forward-difference Jacobian of `residuals` at x (residuals r there), step h in every coordinate.
Eigen::MatrixXd jacobian(const LogStepErrors& residuals, const Eigen::VectorXd& x, const Eigen::VectorXd& r,
                         double h) {
    Eigen::MatrixXd J(r.size(), x.size());
    for (Eigen::Index k = 0; k < x.size(); ++k) {
        Eigen::VectorXd xk = x;
        xk(k) += h;
        J.col(k) = (residuals(xk) - r) / h;
    }
    return J;
}

void check_constants(const GpuSpec& catalog, const std::vector<std::string>& names) {
    for (const auto& name : names) {
        GpuSpec probe = catalog;
        gpu_constant(probe, name);  // throws for unknown names
    }
    if (names.empty()) throw InputError("--constants: none given");
}

}  // namespace

std::vector<const MeasuredRun*> runs_to_fit(const std::vector<MeasuredRunsFile>& files,
                                            const std::string& gpu_name,
                                            const std::vector<std::string>& id_prefixes) {
    auto selected = [&](const std::string& id) {
        if (id_prefixes.empty()) return true;
        for (const auto& p : id_prefixes)
            if (id.rfind(p, 0) == 0) return true;
        return false;
    };
    std::vector<const MeasuredRun*> runs;
    for (const auto& file : files)
        for (const auto& r : file.runs)
            if (!r.error && !r.unsupported && r.step_time_s && r.topology.gpu == gpu_name && selected(r.id))
                runs.push_back(&r);
    return runs;
}

StepTimeFit fit_step_time_constants(const std::vector<const MeasuredRun*>& runs, const GpuSpec& catalog,
                                    const StepTimeFitOptions& options) {
    check_constants(catalog, options.constants);
    if (runs.size() < options.constants.size())
        throw InputError(fmt::format("fit: {} runs on {}; need at least {}", runs.size(), catalog.name,
                                     options.constants.size()));
    const LogStepErrors residuals(runs, catalog, options);
    const auto n = static_cast<Eigen::Index>(options.constants.size());
    constexpr double kInitialDamping = 1e-3, kDampingDown = 0.3, kDampingUp = 10, kMaxDamping = 1e6;
    constexpr double kDifferenceStep = 0.02, kRelativeDecrease = 1e-4, kMinStep = 1e-3;

    StepTimeFit fit;
    fit.catalog = catalog;
    Eigen::VectorXd x = Eigen::VectorXd::Zero(n);
    Eigen::VectorXd r = residuals(x);
    const Eigen::VectorXd r0 = r;
    double lambda = kInitialDamping;
    int iterations = 0;
    for (; iterations < options.max_iterations; ++iterations) {
        Eigen::MatrixXd J;
        try {
            J = jacobian(residuals, x, r, kDifferenceStep);
        } catch (const InputError&) {
            break;  // a difference step passes the simulated range: the fit stops at x
        }
        const Eigen::MatrixXd A = J.transpose() * J + lambda * Eigen::MatrixXd::Identity(n, n);
        const Eigen::VectorXd step = A.ldlt().solve(-J.transpose() * r);
        const Eigen::VectorXd x_next = x + step;
        const std::optional<Eigen::VectorXd> r_next = try_residuals(residuals, x_next);
        fit.steps.push_back({rms(r), r_next ? rms(*r_next) : std::numeric_limits<double>::infinity()});
        if (r_next && r_next->squaredNorm() < r.squaredNorm()) {
            const bool converged =
                r.squaredNorm() - r_next->squaredNorm() < kRelativeDecrease * r.squaredNorm() ||
                step.norm() < kMinStep;
            x = x_next;
            r = *r_next;
            lambda *= kDampingDown;
            if (converged) {
                ++iterations;
                break;
            }
        } else {
            lambda *= kDampingUp;
            if (lambda > kMaxDamping) break;
        }
    }
    fit.fitted = residuals.gpu_at(x);
    fit.iterations = iterations;
    fit.rms_log_error_before = rms(r0);
    fit.rms_log_error_after = rms(r);
    for (std::size_t i = 0; i < runs.size(); ++i) {
        const auto k = static_cast<Eigen::Index>(i);
        fit.runs.push_back({runs[i]->id, *runs[i]->step_time_s, 100.0 * (std::exp(r0(k)) - 1.0),
                            100.0 * (std::exp(r(k)) - 1.0)});
    }
    return fit;
}

}  // namespace trainsim
