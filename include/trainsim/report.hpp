// Results of one simulated iteration and their writers (text table, JSON, Chrome trace).
//
// Definitions (docs/metrics.md has the derivations):
//   tokens/s          = global_batch · seq_len / step_time
//   tokens/s per GPU  = tokens/s / GPUs;  tokens/day = tokens/s · 86,400
//   time to train     = ⌈tokens / (global_batch · seq_len)⌉ steps · step_time (no failures: trainsim goodput)
//   model TFLOP/s/GPU = model FLOPs (ModelSpec::model_flops, no recomputation) / step_time / GPUs
//   MFU               = model TFLOP/s per GPU / peak (Korthikanti et al. 2022, arXiv:2205.05198, Sec. 6.3)
//   HFU               = hardware FLOPs executed (recomputation included) / step_time / GPUs / peak
//   bubble            = mean over ranks of the pipeline waits measured on the simulated timeline (a P2P
//   transfer
//                       whose peer was not ready, and the drain after a stage's last pass);
//                       bubble ratio = bubble / (step - bubble), comparable to the closed form
//                       (p-1)/m (1F1B, GPipe) or (p-1)/(m·v) (interleaved) of Narayanan et al. 2021.
//   exposed comm      = mean over ranks of the main stream's waits on TP, PP (in-flight messages), DP
//   collectives.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/executor_observer.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

struct StageTimes {
    int stage = 0;
    double compute_s = 0, tp_exposed_s = 0, pp_exposed_s = 0, bubble_s = 0, dp_exposed_s = 0, idle_s = 0;
    /// Parts of tp_exposed_s: waiting for CP collectives and for EP all-to-alls (RankTimes); drawn by the
    /// HTML page (html_report.hpp), not printed in the text or JSON reports.
    double cp_exposed_s = 0, ep_exposed_s = 0;
};

/// Kernel costs of one kind that came from a hardware profile (--profile) or from the analytic model, over
/// one iteration of one GPU of each pipeline stage (the kernels of every compute op, recomputation included).
struct ProfileUse {
    std::string kind;  ///< gemm, attention, memory_bound, host
    long long from_profile = 0, analytic = 0;
    double profile_s = 0, analytic_s = 0;  ///< their summed durations
};

struct Report {
    std::string topology_name, workload_name, gpu_name;
    /// uncalibrated_note() of the GPU (gpu_catalog.hpp): empty when its model constants are calibrated; the
    /// text report prints it under the cluster line, the JSON report as "gpu_uncalibrated" (absent if empty).
    std::string gpu_uncalibrated;
    int gpus = 0;
    ModelSpec model;
    Layout layout;
    double step_time_s = 0;
    double tokens_per_s = 0;
    double tokens_per_s_per_gpu = 0;  ///< tokens_per_s / gpus
    double tokens_per_day = 0;        ///< tokens_per_s x 86,400 s
    double model_flops = 0;           ///< per iteration, whole cluster
    double hardware_flops = 0;        ///< per iteration, whole cluster (recomputation included)
    double model_tflops_per_gpu = 0;
    double hardware_tflops_per_gpu = 0;
    double mfu = 0, hfu = 0;
    double peak_flops = 0;
    double bubble_s = 0, bubble_ratio = 0, bubble_closed_form = 0;
    double compute_s = 0, tp_exposed_s = 0, pp_exposed_s = 0, dp_exposed_s = 0, idle_s = 0;
    /// Of tp_exposed_s: waiting for the EP all-to-alls (MoE token dispatch and combine; RankTimes).
    /// Reported (text, and JSON "breakdown_s.ep_exposed") when above 0 (a layout with EP all-to-alls).
    double ep_exposed_s = 0;
    std::vector<StageTimes> stages;
    MemoryReport memory;  ///< per stage and phase; memory.fits() false: the layout runs out of memory
    double gpu_memory_bytes = 0;
    std::uint64_t events = 0, flows = 0;
    std::string profile_file;             ///< the profile used (--profile), empty without one
    std::vector<ProfileUse> profile_use;  ///< per kernel kind, with a profile
};

/// Builds the report of one simulated iteration, memory included (simulate_memory, with the stage leaders'
/// compute end times `compute_end_s` when given (ComputeEndTimes::seconds, memory.hpp); `memory_timeline`
/// keeps every memory sample).
Report make_report(const Cluster& cluster, const ModelSpec& m, const Layout& l, const Program& p,
                   const ExecutionResult& r, const std::string& topology_name,
                   const std::string& workload_name,
                   const std::vector<std::vector<double>>* compute_end_s = nullptr,
                   bool memory_timeline = false);

/// Time to train a number of tokens at a report's step time, with no failures, restarts or checkpoints
/// (`trainsim goodput` models those): steps = ⌈tokens / tokens_per_step⌉ (whole iterations, as Megatron-LM's
/// --train-iters counts them), tokens_per_step = global_batch · seq_len, seconds = steps · step_time,
/// days = seconds / 86,400, GPU-hours = seconds / 3,600 · GPUs, cost = GPU-hours · the price per GPU-hour.
struct TimeToTrain {
    double tokens = 0, tokens_per_step = 0, steps = 0, seconds = 0, days = 0, gpu_hours = 0;
    std::optional<double> gpu_hour_price_usd;  ///< US dollars per GPU-hour (--gpu-hour-price)
    std::optional<double> cost_usd;            ///< set with gpu_hour_price_usd
};

/// The time to train `tokens` (> 0) at `r`'s step time, layout and sequence length; the cost when
/// `gpu_hour_price_usd` is given (>= 0).
TimeToTrain time_to_train(const Report& r, double tokens, std::optional<double> gpu_hour_price_usd);

/// A count with a decimal suffix and one decimal: "950", "12.3K", "4.5M", "202.7B", "15.0T".
std::string count_text(double n);

/// The text report. With `train`: the time-to-train line(s) after the headline figures.
std::string format_text(const Report& r, const Measured* measured, const TimeToTrain* train = nullptr);
nlohmann::json to_json(const Report& r, const Measured* measured);
/// {"tokens", "tokens_per_step", "steps", "days", "gpu_hours"} and, with a price, "gpu_hour_price_usd" and
/// "cost_usd".
nlohmann::json to_json(const TimeToTrain& t);
/// "time to train 15.0T tokens   123.4 days" and GPU-hours (and cost) lines, as format_text prints them.
std::string time_to_train_text(const TimeToTrain& t);
// ---- The Chrome trace (trace-event JSON, read by Perfetto and chrome://tracing) ----

/// Which GPUs a trace holds: the GPUs of DP replica 0 (every TP, CP and PP rank: the default), one GPU per
/// pipeline stage (tp = cp = dp = 0; with TP folding the stage's other GPUs have the same timeline), or all.
enum class TraceRanks { first_replica, stages, all };
/// Whether `rank` is in the selection.
bool trace_holds(TraceRanks ranks, const Layout& l, int rank);

/// What a trace holds: its GPUs, and the slices that overlap [window_start, window_end] of simulated time
/// (written whole, not clipped).
struct TraceSelection {
    TraceSelection() = default;
    explicit TraceSelection(TraceRanks r, Time start = Time{}, Time end = Time::max())
        : ranks(r), window_start(start), window_end(end) {}
    TraceRanks ranks = TraceRanks::first_replica;
    Time window_start;
    Time window_end = Time::max();
};

/// Streams the trace as the executor reports slices (an ExecutorObserver): nothing of the timeline is kept
/// but the last end time of each track of each GPU. Writes, through `sink`, in pieces of about
/// `buffer_bytes`:
///   {"displayTimeUnit":"ms","traceEvents":[ ...events... ]}
/// Every event has ph, name, pid (the GPU's global rank), tid (the track, executor_observer.hpp's Track
/// value) and ts; slices are complete events (ph "X") with dur, written when the slice ends, with ts and dur
/// in microseconds to the nanosecond (times floored to the nanosecond, so slices that did not overlap do not
/// overlap after rounding); metadata events (ph "M": process_name, thread_name, with ts 0) are written before
/// a GPU's first slice. Events are in the executor's report order, not sorted by ts (the format does not
/// require it). Per (pid, tid) slices never overlap partially: a P2P send that overlaps the previous one on
/// its track (two sends in flight) goes to a second lane, tid = track + 5 x lane ("P2P sends (2)").
/// finished() writes the closing bracket and flushes; a sink that throws fails the simulation.
class ChromeTraceWriter : public ExecutorObserver {
  public:
    using Sink = std::function<void(std::string_view)>;
    ChromeTraceWriter(const Layout& l, const TraceSelection& selection, Sink sink,
                      std::size_t buffer_bytes = std::size_t{1} << 20);
    bool observes(int rank) const override;
    void slice_end(const TimelineSlice& s) override;
    void finished(Time step_time) override;
    std::uint64_t slices_written() const { return slices_; }

  private:
    struct RankState {
        bool opened = false;
        std::vector<std::int64_t> lane_end_ns[kTracks];  ///< [track][lane] end of its last slice (ns)
    };
    void open_rank(int rank, RankState& st);
    void thread_name(int rank, int tid, std::string_view name);
    void event_prefix();
    void flush();

    Layout layout_;
    TraceSelection sel_;
    Sink sink_;
    std::size_t buffer_bytes_;
    std::string buf_;
    std::vector<int> slot_;  ///< [rank] index into states_, -1 before its first slice
    std::vector<RankState> states_;
    std::uint64_t slices_ = 0;
    bool first_ = true;
};

/// The size of a trace, estimated before simulating from the program: per GPU the slices it reports (one per
/// compute op, TP/CP/embedding collective launch, DP collective launch and P2P send, and one wait per TP,
/// DP and P2P wait op), each at the bytes of its event (its name plus the fixed fields), times the GPUs
/// the selection holds. For the whole iteration (a window writes less); waits that do not block are counted
/// too, so it tends to be an upper bound.
struct TraceEstimate {
    std::uint64_t events = 0;
    double bytes = 0;
    int gpus = 0;
};
TraceEstimate estimate_trace(const Program& p, const Layout& l, TraceRanks ranks);

}  // namespace trainsim
