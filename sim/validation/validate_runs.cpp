// Measured runs simulated and compared (include/trainsim/validation.hpp).
#include <algorithm>
#include <cstdint>
#include <mutex>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "trainsim/collectives.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/parallel_map.hpp"
#include "trainsim/process_group.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/units.hpp"
#include "trainsim/validation.hpp"

namespace trainsim {

namespace {

/// What a run's simulation gave: the predicted figures, or the InputError it threw.
struct RunPrediction {
    std::optional<std::string> input_error;
    double step_s = 0;
    double peak_gib = 0;
    std::optional<std::string> oom_message;  ///< set when predicted out of memory
    std::string gpu_uncalibrated;            ///< Report::gpu_uncalibrated
    PredictedBreakdown breakdown;
};

std::vector<double> breakdown_values(const PredictedBreakdown& b) {
    return {b.compute_s,    b.bubble_s,     b.tp_exposed_s, b.ep_exposed_s,
            b.pp_exposed_s, b.dp_exposed_s, b.idle_s,       b.mfu};
}

PredictedBreakdown breakdown_of(const std::vector<double>& v) {
    PredictedBreakdown b;
    std::size_t i = 0;
    for (double* x : {&b.compute_s, &b.bubble_s, &b.tp_exposed_s, &b.ep_exposed_s, &b.pp_exposed_s,
                      &b.dp_exposed_s, &b.idle_s, &b.mfu})
        *x = v.at(i++);
    return b;
}

std::string to_bytes(const nlohmann::json& j) {
    const std::vector<std::uint8_t> cbor = nlohmann::json::to_cbor(j);
    return std::string(cbor.begin(), cbor.end());
}

nlohmann::json from_cbor(const std::string& bytes) {
    return nlohmann::json::from_cbor(std::vector<std::uint8_t>(bytes.begin(), bytes.end()));
}

/// A prediction as bytes (CBOR: doubles exact), for spreading the runs over processes.
std::string encode_prediction(const RunPrediction& p) {
    const auto optional = [](const std::optional<std::string>& s) {
        return s ? nlohmann::json(*s) : nlohmann::json();
    };
    return to_bytes({optional(p.input_error), p.step_s, p.peak_gib, optional(p.oom_message),
                     p.gpu_uncalibrated, breakdown_values(p.breakdown)});
}

RunPrediction decode_prediction(const std::string& bytes) {
    const nlohmann::json a = from_cbor(bytes);
    RunPrediction p;
    if (!a.at(0).is_null()) p.input_error = a.at(0).get<std::string>();
    a.at(1).get_to(p.step_s);
    a.at(2).get_to(p.peak_gib);
    if (!a.at(3).is_null()) p.oom_message = a.at(3).get<std::string>();
    a.at(4).get_to(p.gpu_uncalibrated);
    p.breakdown = breakdown_of(a.at(5).get<std::vector<double>>());
    return p;
}

/// The predicted figure compared with a run's measured `peak_memory_GiB`: the busiest GPU's peak as the
/// run's framework reports it (torchtitan: max reserved; include/trainsim/memory.hpp reported_peak_bytes),
/// in GiB. The one place to switch to another figure.
RunPrediction predict_run(const MeasuredRun& run) {
    RunPrediction p;
    try {
        const SimulationResult res = simulate(run.topology, run.model, run.layout, run.id);
        p.step_s = res.report.step_time_s;
        p.peak_gib = reported_peak_bytes(res.report.memory, run.layout.framework) / kGiB;
        if (!res.report.memory.fits()) p.oom_message = res.report.memory.oom_message();
        p.gpu_uncalibrated = res.report.gpu_uncalibrated;
        const Report& r = res.report;
        p.breakdown = {r.compute_s,    r.bubble_s,     r.tp_exposed_s, r.ep_exposed_s,
                       r.pp_exposed_s, r.dp_exposed_s, r.idle_s,       r.mfu};
    } catch (const InputError& e) {
        p.input_error = e.what();
    }
    return p;
}

RunValidation compare_run(const MeasuredRun& run, const RunPrediction* predicted);

/// A run's simulated inputs without their names (a run's model is named after its id; names are only
/// printed, never simulated).
struct UnnamedInputs {
    TopologySpec topology;
    ModelSpec model;
    Layout layout;
    friend bool operator==(const UnnamedInputs&, const UnnamedInputs&) = default;
};

UnnamedInputs unnamed_inputs(const MeasuredRun& run) {
    UnnamedInputs in{run.topology, run.model, run.layout};
    in.topology.name = in.model.name = "";
    return in;
}

/// The predictions of the runs to simulate and the hand-over of the compared runs to options.on_run in
/// output order, each as soon as it and every run before it are ready.
class RunPredictions {
  public:
    /// `rows`: the selected runs in output order; rows[i] is simulated when simulated[i].
    RunPredictions(std::vector<const MeasuredRun*> rows, std::vector<char> simulated,
                   const ValidationOptions& options)
        : rows_(std::move(rows)),
          simulated_(std::move(simulated)),
          options_(options),
          ready_(rows_.size(), nullptr) {
        // Runs whose inputs are equal but for their names are one simulation: published tables repeat a
        // layout across software versions (Megatron-Bridge's 26.02 and 26.04.01 rows of one model and
        // system), and such runs get the same prediction.
        same_as_.resize(rows_.size());
        std::vector<UnnamedInputs> inputs;  // by distinct run
        for (std::size_t i = 0; i < rows_.size(); ++i) {
            same_as_[i] = i;
            if (!simulated_[i]) continue;
            UnnamedInputs in = unnamed_inputs(*rows_[i]);
            for (std::size_t k = 0; k < distinct_.size(); ++k)
                if (inputs[k] == in) {
                    same_as_[i] = distinct_[k];
                    break;
                }
            if (same_as_[i] == i) {
                distinct_.push_back(i);
                inputs.push_back(std::move(in));
            }
        }
        order_costliest_first();
    }

    std::size_t simulations() const { return distinct_.size(); }

    /// Simulates each distinct run once (a duplicate whose simulation refused its input again under its own
    /// id, so that its error names it) and returns every row's prediction (empty for a row not simulated).
    std::vector<RunPrediction> run() {
        own_.resize(rows_.size());
        const bool spread = options_.processes && options_.processes->size() > 1;
        const std::vector<RunPrediction> computed = spread_map(
            distinct_.size(), options_.jobs, options_.processes,
            [&](std::size_t k) {
                RunPrediction p = predict_run(*rows_[distinct_[k]]);
                if (!spread) publish(distinct_[k], p);
                return p;
            },
            encode_prediction,
            [](const std::string& bytes, std::size_t) { return decode_prediction(bytes); });
        if (spread)  // the other processes' predictions arrive at the end
            for (std::size_t k = 0; k < distinct_.size(); ++k)
                publish(distinct_[k], computed[k]);
        if (distinct_.empty()) {  // no row simulated (every one malformed or unsupported): no publish ran
            const std::scoped_lock lock(mutex_);
            hand_over();
        }
        std::vector<RunPrediction> out(rows_.size());
        for (std::size_t i = 0; i < rows_.size(); ++i)
            if (simulated_[i]) out[i] = *ready_[i];
        return out;
    }

  private:
    /// The order the distinct runs are handed to the threads: the jobs - 1 with the most GPUs first (the
    /// simulation's work grows with the ranks: the 10,752-GPU MLPerf row takes a quarter of the 2026 file's
    /// CPU time), then the rest in output order, so that one thread streams the table from its top while
    /// the others take the costliest. The results do not depend on it.
    void order_costliest_first() {
        const auto first =
            std::min<std::size_t>(distinct_.size(), static_cast<std::size_t>(std::max(options_.jobs, 1) - 1));
        std::vector<std::size_t> order = distinct_;
        std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
            return rows_[a]->topology.gpus() > rows_[b]->topology.gpus();
        });
        order.resize(first);
        for (std::size_t d : distinct_)
            if (std::find(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(first), d) ==
                order.begin() + static_cast<std::ptrdiff_t>(first))
                order.push_back(d);
        distinct_ = std::move(order);
    }

    /// Records the prediction of distinct run d for d and its duplicates, then hands over the rows now
    /// ready in order. Called from the worker threads.
    void publish(std::size_t d, const RunPrediction& p) {
        std::vector<std::pair<std::size_t, RunPrediction>> own;  // duplicates' own error predictions
        if (p.input_error)
            for (std::size_t i = d + 1; i < rows_.size(); ++i)
                if (same_as_[i] == d) own.emplace_back(i, predict_run(*rows_[i]));
        const std::scoped_lock lock(mutex_);
        own_[d] = p;
        for (auto& [i, q] : own)
            own_[i] = std::move(q);
        for (std::size_t i = d; i < rows_.size(); ++i)
            if (simulated_[i] && same_as_[i] == d) ready_[i] = own_[i] ? &*own_[i] : &*own_[d];
        hand_over();
    }

    /// Hands the rows now ready over to options.on_run, in order (a row not simulated is ready at once).
    /// Called with mutex_ held.
    void hand_over() {
        while (next_ < rows_.size() && (!simulated_[next_] || ready_[next_])) {
            if (options_.on_run) options_.on_run(compare_run(*rows_[next_], ready_[next_]));
            ++next_;
        }
    }

    std::vector<const MeasuredRun*> rows_;
    std::vector<char> simulated_;
    const ValidationOptions& options_;
    std::vector<std::size_t> same_as_;   ///< the first row with the same inputs
    std::vector<std::size_t> distinct_;  ///< the rows simulated, in the order handed out
    std::mutex mutex_;
    std::vector<std::optional<RunPrediction>> own_;  ///< by row: its own prediction, where computed
    std::vector<const RunPrediction*> ready_;        ///< by row: its prediction, once known
    std::size_t next_ = 0;                           ///< the first row not yet handed to on_run
};

/// Simulated time of one collective row on an otherwise idle cluster, seconds.
double simulate_collective(const CollectiveRow& row) {
    std::vector<int> ranks;
    for (int i = 0; i < row.gpus; ++i)
        ranks.push_back(i);
    return isolated_collective_seconds(Cluster(row.topology), row.op, ranks, row.bytes);
}

double error_pct(double predicted, double measured) {
    return 100.0 * (predicted - measured) / measured;
}

/// The row of a run: its measured figures and the loader's verdict; the prediction, when it was simulated.
RunValidation compare_run(const MeasuredRun& run, const RunPrediction* predicted) {
    RunValidation v;
    v.id = run.id;
    v.measured_step_s = run.step_time_s;
    v.measured_peak_gib = run.peak_memory_gib;
    v.ignored = run.ignored;
    v.notes = run.notes;
    v.simulatable = !run.error && !run.unsupported;
    if (run.error || (predicted && predicted->input_error)) {
        v.status = RunStatus::error;
        v.reason = run.error ? *run.error : *predicted->input_error;
        return v;
    }
    if (run.unsupported) {
        v.status = RunStatus::unsupported;
        v.reason = *run.unsupported;
        return v;
    }
    const bool oom = predicted->oom_message.has_value();
    v.status = oom ? RunStatus::oom : RunStatus::ok;
    v.reason = oom ? *predicted->oom_message : "";
    v.predicted_step_s = predicted->step_s;
    v.gpu_uncalibrated = predicted->gpu_uncalibrated;
    v.predicted_breakdown = predicted->breakdown;
    v.predicted_peak_gib = predicted->peak_gib;
    if (run.step_time_s) v.step_error_pct = error_pct(predicted->step_s, *run.step_time_s);
    if (run.peak_memory_gib) v.peak_error_pct = error_pct(predicted->peak_gib, *run.peak_memory_gib);
    v.scored = !oom && run.step_time_s.has_value();
    return v;
}

CollectiveValidation compare_collective(const CollectiveRow& row, std::optional<double> seconds) {
    CollectiveValidation v;
    v.id = row.id;
    v.op = row.op;
    v.gpus = row.gpus;
    v.bytes = row.bytes;
    v.error = row.error;
    if (row.error) return v;
    v.predicted_algbw_GBps = row.bytes / *seconds / 1e9;
    v.predicted_busbw_GBps = v.predicted_algbw_GBps * busbw_factor(row.op, row.gpus);
    v.measured_busbw_GBps = row.measured_busbw_GBps();
    if (v.measured_busbw_GBps) v.error_pct = error_pct(v.predicted_busbw_GBps, *v.measured_busbw_GBps);
    return v;
}

/// The files with the calibration applied over the catalog and the profile attached to the runs on its GPU
/// (every row, selected or not). Throws InputError when the profile's GPU runs no row.
std::vector<MeasuredRunsFile> prepared(std::vector<MeasuredRunsFile> files,
                                       const ValidationOptions& options) {
    int profiled = 0;
    for (MeasuredRunsFile& file : files) {
        if (options.calibration) {
            for (auto& run : file.runs)
                if (!run.error) apply_calibration(*options.calibration, run.topology);
            for (auto& c : file.collectives)
                if (!c.error) apply_calibration(*options.calibration, c.topology);
        }
        if (options.profile)
            for (auto& run : file.runs)
                if (!run.error && run.topology.gpu == options.profile->gpu)
                    run.topology.profile = options.profile, ++profiled;
    }
    if (options.profile && profiled == 0)
        throw InputError(fmt::format("{}: the profile describes GPU {}, and no run of the files is on it",
                                     options.profile_file, options.profile->gpu));
    return files;
}

void check_only_ids(const std::vector<MeasuredRunsFile>& files, const std::set<std::string>& only) {
    std::set<std::string> seen;
    for (const auto& file : files) {
        for (const auto& run : file.runs)
            seen.insert(run.id);
        for (const auto& c : file.collectives)
            seen.insert(c.id);
    }
    for (const auto& id : only)
        if (!seen.count(id))
            throw InputError(
                fmt::format("--only: no run or collective with id \"{}\"", clip_for_message(id)));
}

}  // namespace

ValidationResult validate_runs(const std::vector<MeasuredRunsFile>& input, const ValidationOptions& options) {
    check_only_ids(input, options.only);
    const std::vector<MeasuredRunsFile> files = prepared(input, options);
    auto selected = [&](const std::string& id) { return options.only.empty() || options.only.count(id) > 0; };
    // The simulations, each independent, in parallel; everything after is in the files' order.
    std::vector<const MeasuredRun*> rows;
    std::vector<char> simulated;
    std::vector<std::string> ids;
    std::vector<const CollectiveRow*> collectives_to_simulate;
    for (const auto& file : files) {
        for (const auto& run : file.runs)
            if (selected(run.id)) {
                rows.push_back(&run);
                simulated.push_back(!run.error && !run.unsupported);
                ids.push_back(run.id);
            }
        for (const auto& c : file.collectives)
            if (selected(c.id) && !c.error) collectives_to_simulate.push_back(&c);
    }
    if (options.on_ids) options.on_ids(ids);
    RunPredictions runs(rows, simulated, options);
    const std::vector<RunPrediction> predictions = runs.run();
    const std::vector<double> collective_s = spread_map(
        collectives_to_simulate.size(), options.jobs, options.processes,
        [&](std::size_t i) { return simulate_collective(*collectives_to_simulate[i]); },
        [](double s) { return to_bytes(nlohmann::json(s)); },
        [](const std::string& bytes, std::size_t) { return from_cbor(bytes).get<double>(); });

    ValidationResult result;
    std::size_t next_row = 0, next_collective = 0;
    for (const auto& file : files) {
        FileValidation& out = result.files.emplace_back();
        out.notes = file.notes;
        for (const auto& run : file.runs) {
            if (!selected(run.id)) continue;
            const std::size_t i = next_row++;
            out.runs.push_back(compare_run(run, simulated[i] ? &predictions[i] : nullptr));
        }
        for (const auto& c : file.collectives) {
            if (!selected(c.id)) continue;
            out.collectives.push_back(compare_collective(
                c, c.error ? std::nullopt : std::optional<double>(collective_s[next_collective++])));
        }
    }
    result.summary = summarize_validation(result.files, options.tolerance_pct);
    result.simulations = runs.simulations();
    return result;
}

}  // namespace trainsim
