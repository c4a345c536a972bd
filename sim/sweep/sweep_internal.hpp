// What the files of the sweep module share (sim/sweep/ only; the public API is include/trainsim/sweep.hpp):
// the layout field of a grid axis, the status names, CSV quoting, the reject categories, and the two phases
// of a grid point with their byte encodings for spreading them over processes (process_group.hpp).
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/program.hpp"
#include "trainsim/report.hpp"
#include "trainsim/schema.hpp"
#include "trainsim/sweep.hpp"

namespace trainsim::sweep_detail {

/// The layout field an axis of the grid sets (sweep_keys(): every key names one).
const schema::Field<Layout>& axis_field(const std::string& key);
/// "simulated", "out_of_memory", "rejected".
const char* status_name(SweepStatus s);
/// `s` quoted for CSV when it holds a comma, a quote or a newline.
std::string csv_field(const std::string& s);
/// The message with every number replaced by "N": the category of a check without a fixed one.
std::string numbers_to_n(const std::string& msg);

/// reject_reason, also giving check_layout's message (the first violation's) in `detail` when not null.
std::string classify(const ModelSpec& m, const Layout& l, int gpus, std::string* detail);

/// Phase 1 of a grid point: the layout checks, the program's hash and cost, and the step-time bound; and
/// (check_memory, in phase 2) its memory walk.
struct PointCheck {
    SweepStatus status = SweepStatus::rejected;  ///< simulated: passed (phase 1: to be walked; then to be
                                                 ///< simulated), out_of_memory, rejected
    std::string reason, detail;                  ///< as SweepEntry
    double peak_memory_bytes = 0;                ///< check_memory only
    int peak_stage = 0;
    double cost = 0;                 ///< estimated simulation cost (main-stream ops over all TP groups)
    std::uint64_t program_hash = 0;  ///< hash of the program's signature (passed points)
    /// Passed points: a lower bound on the step time (s; step_time_lower_bound_s)
    /// (SweepOptions::prune_beyond_top).
    double lower_bound_s = 0;
    /// The InputError the bound threw (lower_bound_s then 0): the point is rejected with it if it fits in
    /// memory, as when the memory walk came first.
    std::string bound_error;
    /// With pruning: a floor under the peak memory of its walk (bytes per GPU; 0: not known): the largest
    /// held piles of a stage (held_piles: parameters, gradients, optimizer state, held buffers), which
    /// every sample of that stage's walk holds; after check_memory, at least the walk's early peak
    /// (memory_peak_floor_bytes: the same for any order of the work).
    double memory_floor_bytes = 0;
};

/// "best", "2nd best", "3rd best", "10th best", "21st best", ... (the N of SweepOptions::prune_beyond_top)
std::string ordinal_best(std::size_t n);

/// Phase 2: one simulated iteration (the median seed's with perturbations).
struct PointRun {
    SweepStatus status = SweepStatus::simulated;  ///< rejected when the simulation threw InputError
    std::string reason, detail, limit;
    Report report;
    std::exception_ptr error;  ///< any other exception, rethrown for the first point in enumeration order
};

/// The times of collectives alone on a cluster (isolated_collective_seconds), kept for every point of a
/// sweep: the bounds of thousands of layouts ask for the same few groups and sizes. Thread-safe.
class AloneCollectiveTimes {
  public:
    double seconds(const Cluster& cluster, CollectiveKind kind, const std::vector<int>& ranks, double bytes);

  private:
    std::mutex mutex_;
    std::map<std::tuple<const Cluster*, int, std::vector<int>, double>, double> seconds_;
};

/// The layout of `l` with one micro-batch per pipeline stage (global batch micro_batch * dp * pp), whose
/// program a pruned sweep builds first for every point that passes the grid checks: its parameters,
/// gradients and optimizer state (held piles) do not depend on the micro-batch count.
Layout held_piles_layout(const Layout& l);
/// What building, hashing and bounding `l`'s program costs, in the units of limits.hpp
/// kMaxSweepProgramLayerPasses: program_layer_passes plus kSweepProgramPassesPerLocalExpert per local expert
/// (model.num_experts / layout.ep) of an MoE model.
std::int64_t program_build_work(const ModelSpec& model, const Layout& l);
/// The first part of phase 1, before the point's own program is built: rejected by the grid checks (reason,
/// detail); with `held_floor` (pruning), out of memory already when its parameters, gradients and optimizer
/// state alone pass the HBM less `min_headroom` on some stage (sweep_run.cpp held_piles_overflow: a program
/// of held_piles_layout is built); else status simulated (its program to be built), with its memory floor.
PointCheck screen_point(const Layout& l, const Cluster& cluster, const ModelSpec& model, bool held_floor,
                        double min_headroom);
/// Phase 1 of a point `screened` passed (screen_point; any other is returned as it is): rejected (reason,
/// detail) or passed, with its program's hash, cost and bound.
PointCheck check_point(const PointCheck& screened, const Layout& l, const Cluster& cluster,
                       const ModelSpec& model, AloneCollectiveTimes& alone);
/// The early part of a passed point's memory walk (memory_peak_floor_bytes): a floor under its peak memory,
/// bytes per GPU, at a fraction of check_memory's cost; 0 when its program is refused.
double early_memory_floor(const Layout& l, const Cluster& cluster, const ModelSpec& model);
/// The memory walk of a passed point (`passed`, its phase 1): out of memory (its peak over (1 - min_headroom)
/// x HBM), rejected (an InputError of the walk, or the bound's), or passed, with its peak either way.
PointCheck check_memory(const Layout& l, const Cluster& cluster, const ModelSpec& model, double min_headroom,
                        const PointCheck& passed);
/// A lower bound on the layout's step time (s): its busiest stage's compute, pipeline and collectives alone
/// (PointCheck; sweep_run.cpp).
double step_time_lower_bound_s(Program& program, const ModelSpec& model, const Layout& l,
                               const Cluster& cluster, AloneCollectiveTimes& alone);

/// Simulates a point that passed check_point (the program is built again rather than kept: a program of a
/// large layout holds millions of ops). Never throws: an InputError rejects the point, anything else is kept
/// in `error`.
PointRun simulate_point(const Layout& l, const Cluster& cluster, const ModelSpec& model,
                        const std::string& workload_name, const SweepOptions& options);

/// Everything of a program that the simulation reads, as bytes: two layouts with the same signature and the
/// same rank grid simulate identically.
std::string program_signature(const Program& p);
/// Whether program_signature(p) == sig, without building it (no allocation: a sweep confirms many copies).
bool has_signature(const Program& p, const std::string& sig);

/// The grid points of every cluster size, size by size, each in enumeration order.
struct Points {
    std::vector<int> sizes;                          ///< GPUs of each cluster, ascending
    std::vector<std::unique_ptr<Cluster>> clusters;  ///< [size]
    std::vector<SweepEntry> entries;                 ///< index, layout and gpus set
    std::vector<std::size_t> cluster_of;             ///< [point] its size
};

/// Phase 2's outcome: each passed point's memory walk (when it was not pruned before it) and the
/// simulations, each at the point that ran it; copies point to it.
struct Phase2 {
    std::vector<PointCheck> memory;                 ///< [point] check_memory (walked points)
    std::vector<bool> walked;                       ///< [point]
    std::vector<std::size_t> runner;                ///< [point] the point whose simulation it takes (n: none)
    std::map<std::size_t, PointRun> runs;           ///< by runner
    std::vector<bool> pruned;                       ///< [todo position] the group was pruned
    std::vector<std::vector<std::size_t>> members;  ///< [todo position] its group, enumeration order
    /// [point] a floor under its peak memory (bytes per GPU): phase 1's held piles, raised to its walk's
    /// early peak once that is known (early_memory_floor, or check_memory's PointCheck::memory_floor_bytes).
    std::vector<double> floor;
};

/// Phase 2 over the groups of `todo` (each representative with its copies, copy_of; sweep_phase2.cpp): each
/// group's members walked against memory (check_memory) and its first member that fits simulated, which the
/// group's other fitting members take. With SweepOptions::prune_beyond_top (and no perturbations) the groups
/// are taken by lower bound ascending and only those that can reach the top N are kept: see there. The
/// outcome does not depend on the order of the work or the number of threads or processes. Throws what a
/// memory walk threw other than InputError (the first group in enumeration order).
Phase2 run_phase2(const Points& pts, const std::vector<PointCheck>& checks,
                  const std::vector<std::size_t>& todo, const std::vector<std::size_t>& copy_of,
                  const ModelSpec& model, const std::string& workload_name, const SweepOptions& options,
                  const std::function<void()>& simulated);

/// The byte encodings that carry a phase's result between processes (CBOR; doubles exact). A PointRun's
/// report travels without its model, layout and memory: decode_run takes the model and layout (which every
/// process has) and leaves the memory empty; an error travels as its kind and message.
std::string encode_check(const PointCheck& c);
PointCheck decode_check(const std::string& bytes);
std::string encode_run(const PointRun& r);
PointRun decode_run(const std::string& bytes, const ModelSpec& model, const Layout& layout);

}  // namespace trainsim::sweep_detail
