// Layout sweep (`trainsim sweep`): every training layout of one model on one or several cluster sizes, the
// invalid ones and those that do not fit in HBM (less a safety margin, SweepOptions::min_headroom) rejected
// and counted by reason, the rest simulated in parallel (threads, and processes: SweepOptions::processes)
// and ranked by step time in one ranking over the sizes.
//
// Grid. The dimensions are tp, pp, cp, micro_batch, vpp, recompute, sequence_parallel and
// distributed_optimizer; dp is derived, dp = GPUs / (tp·pp·cp). Every other layout field (global batch,
// schedule, precision, attention kernel, overlap flags, bucket size) comes from the base layout (the workload
// file); zero_stage is set to 0, the sharding of the optimizer state being the distributed_optimizer
// dimension. Defaults (a dimension the user does not restrict):
//   tp                     powers of 2 from 1 to min(gpus_per_node, GPUs) (larger values may be asked for)
//   pp                     divisors of model.layers (plus 1 for each account_for_*_in_pipeline_split flag
//                          of the base, which every pp keeps) up to GPUs, plus the base layout's pp when the
//                          base gives layers_per_stage (that split is kept for that pp; every other pp
//                          splits evenly)
//   cp                     {1} (context parallelism pays off for long sequences: ask for it, --vary cp=1,2,4)
//   micro_batch            {1, 2, 4, 8}
//   vpp                    {1, 2, 4}
//   recompute              {none, selective, full}
//   sequence_parallel      {false, true}
//   distributed_optimizer  {false, true}
// Two kinds of combination are not grid points at all, because they duplicate another point: vpp > 1 with
// pp = 1, and sequence_parallel with tp = 1. A dp restriction filters the grid (points whose derived dp is
// not listed are not enumerated).
//
// Evaluation of one point, in this order: reject_reason() (the layout checks, a short category per failed
// check, then check_layout and build_program for anything else); the memory walk (simulate_memory, the
// busiest stage against the GPU's HBM capacity: "out of memory: <the pile to blame>"); then one
// simulated iteration. Results are stored by enumeration index and then sorted, so the outcome does not
// depend on the number of threads or processes.
//
// Several sizes (SweepOptions::gpus): each size's cluster is the topology with nodes = GPUs / gpus_per_node,
// its grid enumerated as above; the points are numbered size by size (ascending), and ranked together.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "trainsim/cluster.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"
#include "trainsim/perturbation.hpp"
#include "trainsim/report.hpp"

namespace trainsim {

/// The values each grid dimension takes. An empty list means the dimension's default (see the file comment).
struct SweepGrid {
    std::vector<int> tp;
    std::vector<int> pp;
    std::vector<int> dp;  ///< a filter on the derived dp; empty = no filter
    std::vector<int> cp;
    std::vector<std::int64_t> micro_batch;
    std::vector<int> vpp;
    std::vector<Recompute> recompute;
    std::vector<bool> sequence_parallel;
    std::vector<bool> distributed_optimizer;
    /// Expert-parallel sizes (MoE models only; --vary ep=...). Empty: every divisor of model.num_experts up
    /// to the GPUs for a MoE model (the layout checks reject those etp * ep does not divide tp * cp * dp:
    /// "etp*ep does not divide tp*cp*dp"), the base layout's ep for a dense one.
    std::vector<int> ep;
};

/// The keys --fix and --vary accept, in this order: tp, pp, dp, cp, micro_batch, vpp, recompute,
/// sequence_parallel, distributed_optimizer. Each names a field of layout_fields(), whose range (integers)
/// or choices (recompute) bound the values and which writes the CSV column and the JSON key of the same name.
const std::vector<std::string>& sweep_keys();

/// Besides sweep_keys(), --fix and --vary accept "ep" (expert parallelism, MoE models); its value is shown
/// in the layout string (" ep8") and as a column only when a layout of the sweep has ep > 1.
/// Restricts one dimension from "key=v1,v2,..." (`option` names the CLI option for the messages: "--fix" or
/// "--vary"; --fix takes exactly one value). Integers must be positive and within the field's range;
/// booleans are true/false; recompute is one of the field's choices. Throws InputError (one line) for an
/// unknown key, a malformed value, a repeated value, or a key restricted twice.
void restrict_sweep_grid(SweepGrid& grid, const std::string& assignment, const std::string& option);

/// The largest TP degree of the default grid: 8. Every one of the 142 published runs of
/// shared/validation/public_runs*.json (Megatron-LM, Megatron-Bridge, NeMo, MLPerf, DeepSpeed, torchtitan,
/// including the GB200/GB300 NVL72 rows, whose layouts are Megatron-Bridge's recipe presets) uses TP <= 8:
/// beyond it each GPU's GEMMs narrow while the TP traffic per layer stays.
inline constexpr int kSweepMaxDefaultTp = 8;

/// Every grid point in enumeration order (nested loops, outermost first: tp, pp, cp, ep, vpp, micro_batch,
/// recompute, sequence_parallel, distributed_optimizer, each over its values in ascending order), as layouts
/// copied from `base` with the dimensions set. dp = gpus / (tp·pp·cp), or 0 when that is not an integer (the
/// point is then rejected). The default tp is every power of 2 up to min(gpus_per_node, kSweepMaxDefaultTp):
/// `gpus_per_node` is the NVLink domain (72 on GB200 NVL72), where TP 16-64 would be valid but is used by no
/// published recipe and costs the most to simulate; `--vary tp=16,32` still reaches them.
/// A point whose recompute granularity differs from the base's drops the base's settings of the other
/// granularities (drop_other_granularity), as Megatron ignores them there. Throws InputError when the grid
/// holds more than limits::kMaxSweepPoints points (include/trainsim/limits.hpp), before making them.
std::vector<Layout> enumerate_layouts(const ModelSpec& model, const Layout& base, const SweepGrid& grid,
                                      int gpus, int gpus_per_node);

/// Resets the settings that belong to a recompute granularity other than l.recompute: the selective
/// modules (recompute_modules, recompute_mla_up_proj: Megatron's --recompute-modules apply only with
/// --recompute-granularity selective) and the full-recompute block count (recompute_num_layers: only with
/// full). So a sweep of a preset with selective MLA up-projection recompute (workloads/deepseek-v3.json)
/// also ranks its none and full layouts instead of rejecting them.
void drop_other_granularity(Layout& l);

/// The short category of the layout's failed checks (layout_violations): the first rank-grid check it fails
/// in LayoutCheck's order, as to_string(LayoutCheck) writes it ("tp does not divide heads", "global_batch not
/// divisible by micro_batch*dp", "2*cp does not divide seq_len", ...); when it fails only other checks, the
/// first violation's message with the numbers replaced by "N". "" when it passes check_layout.
std::string reject_reason(const ModelSpec& model, const Layout& layout, int gpus);

/// "tp8 pp4 dp32 cp1 mb1 vpp1 rc=none sp1 do1": the grid coordinates of a layout; the tie-break of the
/// ranking.
std::string canonical_string(const Layout& l);

/// One line on what limits a simulated layout, from its time breakdown: the largest non-compute component
/// ("bubble 18%: 12 micro-batches on 16 stages", "exposed DP 1.9 s (23%) over InfiniBand", "exposed TP 0.8 s
/// (9%) over NVLink", "idle 0.3 s (4%): stages unevenly loaded"), or "compute-bound (91%)" when that
/// component is under 5% of the step. The fabric is the one the group's traffic crosses on `topology`. When
/// the EP all-to-alls are most of the exposed TP time, they are named with their own fabric ("exposed TP
/// 7.5 s (63%) over NVLink, of which EP all-to-all 7.3 s over InfiniBand").
std::string explain_limit(const Report& r, const TopologySpec& topology);

/// A lower bound on the step time of `layout` on `cluster` (s), what the sweep prunes by
/// (SweepOptions::prune_beyond_top): the executor's timeline (include/trainsim/executor.hpp) with every
/// duration at its least and every wait that is not a dependency dropped. Each pipeline stage's ops run in
/// order on three streams: its compute kernels back to back, timed as simulate() times them; its TP-stream
/// collectives (TP, CP, EP, expert TP, embedding) one at a time and its DP-stream collectives (DP x CP,
/// expert DP) one at a time, each lasting its time alone on the fabric (isolated_collective_seconds over the
/// group of the stage's first rank: the executor runs the same collective algorithms, and other flows only
/// lower a flow's max-min share); a tp_wait until the TP stream is idle, a dp_wait until the DP stream has
/// done the collectives it waits for; a receive until the peer stage has sent (the transfer free). So the
/// bound holds the pipeline's fill and drain and the exposed part of every collective as if it ran alone,
/// and a perturbation-free simulate() of the layout is never shorter.
/// Throws InputError for a layout build_program refuses; InternalError if the stages' sends and receives do
/// not match (a program bug).
double step_time_lower_bound_s(const Cluster& cluster, const ModelSpec& model, const Layout& layout);

/// pruned: valid, but not simulated (and reported without its memory): its lower bound
/// (SweepOptions::prune_beyond_top) exceeds the step time of the N-th best layout of its cluster size, so it
/// cannot be among the top N whether it fits in memory or not (and, with
/// SweepOptions::prune_keeps_pareto_front, a simulated layout is faster and no larger: it is on no Pareto
/// front).
enum class SweepStatus { simulated, out_of_memory, rejected, pruned };

struct SweepEntry {
    std::size_t index = 0;  ///< position in enumeration order (sizes ascending, each size's grid in order)
    Layout layout;
    int gpus = 0;  ///< the size of the cluster it was evaluated on
    SweepStatus status = SweepStatus::rejected;
    std::string reason;  ///< category (rejected, out_of_memory); empty when simulated
    std::string detail;  ///< the full InputError message (rejected by check_layout or build_program)
    double peak_memory_bytes = 0;  ///< busiest stage, per GPU (simulated, out_of_memory; 0 when pruned)
    int peak_stage = 0;
    /// Simulated only. Spread over several processes, only the best entry's report has its memory (the
    /// others' report.memory is empty; peak_memory_bytes and peak_stage hold every point's peak).
    Report report;
    std::string limit;  ///< explain_limit (simulated only)
};

struct SweepResult {
    std::string topology_name, workload_name, gpu_name;
    int gpus = 0;             ///< the (smallest) cluster size
    std::vector<int> sizes;   ///< every cluster size, ascending (one: a single-size sweep)
    double min_headroom = 0;  ///< SweepOptions::min_headroom
    /// SweepOptions::train_tokens and gpu_hour_price_usd: the outputs add the time to train (and its cost).
    std::optional<double> train_tokens, gpu_hour_price_usd;
    std::int64_t global_batch = 0;
    double hbm_bytes = 0;  ///< per GPU
    /// Simulated layouts by (step time, canonical_string) ascending, then the out-of-memory ones, then the
    /// rejected ones, each of these two in enumeration order.
    std::vector<SweepEntry> entries;
    std::size_t simulated = 0, out_of_memory = 0, rejected = 0;
    /// Layouts not simulated because their lower bound exceeds the N-th best step time of their size
    /// (SweepOptions::prune_beyond_top; 0 when off). Listed after the simulated ones, in enumeration order.
    std::size_t pruned = 0;
    std::size_t pruned_beyond_top = 0;  ///< SweepOptions::prune_beyond_top (0: every layout simulated)
    /// SweepOptions::prune_keeps_pareto_front: a pruned layout was walked and is also dominated by a
    /// simulated one (faster and no larger), so on no Pareto front.
    bool pruned_keeps_pareto_front = false;
    /// (reason, count) over the out-of-memory and rejected layouts, by count descending, then reason.
    std::vector<std::pair<std::string, std::size_t>> reject_counts;
    /// What-if: the perturbation options every layout ran under (empty: none), and over how many seeds.
    std::vector<std::string> perturbations;
    int seeds = 1;
};

/// Where a sweep stands: every point is checked first (layout checks, program, step-time bound), then the
/// points that pass are walked for memory and those that fit simulated (with pruning, round by round).
struct SweepProgress {
    std::size_t layouts = 0;      ///< grid points
    std::size_t checked = 0;      ///< points checked so far
    bool checks_done = false;     ///< every point checked; to_simulate is known
    std::size_t to_simulate = 0;  ///< at most this many simulations: the groups of points that passed the
                                  ///< checks (points with identical programs on the same rank grid share
                                  ///< one; a group pruned or out of memory is not simulated; set with
                                  ///< checks_done)
    std::size_t simulated = 0;    ///< of which simulated so far
};

class ProcessGroup;

/// Groups of points per round when pruning over processes (SweepOptions::prune_beyond_top): fixed. What a
/// pruned sweep keeps does not depend on it, nor on the threads or processes (sweep_phase2.cpp).
inline constexpr std::size_t kPruneRoundSize = 8;

struct SweepOptions {
    int jobs = 1;  ///< worker threads (>= 1), per process
    /// Cluster sizes in GPUs, each a multiple of gpus_per_node (InputError otherwise); empty: the topology's
    /// own size. Sorted and repeats dropped.
    std::vector<int> gpus;
    /// Memory safety margin, a fraction of HBM in [0, 1): a layout whose peak exceeds (1 - min_headroom) x
    /// HBM is out of memory ("under 10% headroom: <pile> largest" when it fits the HBM itself).
    double min_headroom = 0;
    /// Tokens to train (> 0) and the price of a GPU-hour (US dollars): copied to the result, whose outputs
    /// add each simulated layout's time to train (report.hpp time_to_train) and cost.
    std::optional<double> train_tokens, gpu_hour_price_usd;
    /// Processes that share the points (MPI ranks; process_group.hpp): each checks and simulates its share
    /// and every process gets the whole result, the same as one process's (but see SweepEntry::report). Null:
    /// this process alone. The progress callback is not called with more than one process.
    ProcessGroup* processes = nullptr;
    /// What-if: every layout simulated under these perturbations (docs/what-if.md); the links are applied to
    /// the sweep's cluster. The GPU ids of --straggler are global ranks, so each layout meets the slow GPU in
    /// its own role.
    Perturbations perturbations;
    std::uint64_t seed = kDefaultSeed;
    /// With perturbations: each layout runs seeds seed .. seed+seeds-1 and is ranked by its median step time
    /// (nearest rank); its report is that of the median seed.
    int seeds = 1;
    /// With perturbations: the event bound of each simulation (ExecutionOptions::max_events, a step of the
    /// fabric's rate updates counted as an event). 0: the sweep's share of limits::kMaxWhatIfStudyEvents,
    /// 2^26 / (the layouts that pass the grid checks x seeds). A layout whose simulation passes it is
    /// rejected with that reason (jitter on DP 512 rings: ~120 M events and steps per simulation).
    std::uint64_t max_events = 0;
    /// Layouts whose programs are identical on the same rank grid are simulated once. Exact with
    /// perturbations too: a run is a function of the program, the rank grid and (seed, GPU, kernel index),
    /// all equal for the copies. A test checks on == off.
    bool deduplicate = true;
    /// N > 0 (and no perturbations): walk and simulate only what can reach the top N of each cluster size.
    /// Every passed point has a lower bound on its step time (step_time_lower_bound_s: compute, pipeline and
    /// every collective alone on the fabric). The groups of points with identical programs are taken by
    /// bound ascending (then enumeration order): the threads of one process each take the next group when
    /// they are free, processes take rounds of kPruneRoundSize; each group's points are walked against
    /// memory and its first point that fits is simulated, unless its bound already exceeds the N-th best
    /// step time simulated so far on its size. Once every group is decided, each group whose bound exceeds
    /// its size's final N-th best step time is pruned (SweepStatus::pruned: reported as neither walked nor
    /// simulated, whatever the schedule did of it), so what is kept is exactly the groups whose bound is at
    /// most that time: the same for any threads, processes or timing (the argument: sweep_phase2.cpp). The
    /// out-of-memory count holds only the kept walked points and those whose parameters, gradients and
    /// optimizer state alone pass the HBM on some stage (held_piles, include/trainsim/memory.hpp: out of
    /// memory before their program is built, their peak that floor). The top N of each size are those of
    /// the exhaustive sweep. 0: every point walked, and simulated if it fits.
    std::size_t prune_beyond_top = 0;
    /// With prune_beyond_top: keep the Pareto front of (step time, peak memory) over every fitting layout
    /// as well (the HTML page draws it: sweep_pareto_front). Every group is then walked against memory, and
    /// one above its size's N-th best step time is simulated unless each of its fitting points is dominated
    /// by a layout simulated so far (a step time below the group's lower bound and a peak memory at most its
    /// own): such a layout is slower and no smaller, so on no front. At the end a group above its size's
    /// final N-th best whose fitting points are all dominated is pruned (whatever the schedule did of it);
    /// the kept groups, the front and the top N are those of any schedule, and the front and the top N
    /// those of the exhaustive sweep (sweep_phase2.cpp). The out-of-memory layouts are the exhaustive
    /// sweep's, but for the members of pruned groups.
    bool prune_keeps_pareto_front = false;
    /// Called after each point is checked, once when every point is checked (checks_done), and after each
    /// point is simulated; from the worker threads, one call at a time. May be empty.
    std::function<void(const SweepProgress&)> progress;
};

/// Enumerates, evaluates and ranks the grid on `topology` (whose GPU count is the cluster size unless
/// options.gpus gives sizes). Throws InputError for a bad topology or size, or a precision or FP8 recipe of
/// `base` that the GPU lacks (the grid does not vary them: "layout.fp8_recipe = "mxfp8" needs block-scaled
/// tensor cores ..."); a layout's InputError only rejects that layout; an InternalError of any layout
/// propagates (the first in enumeration order).
SweepResult run_sweep(const TopologySpec& topology, const ModelSpec& model, const Layout& base,
                      const SweepGrid& grid, const std::string& workload_name, const SweepOptions& options);

/// The program-build work of a sweep's first phase, in the units of limits::kMaxSweepProgramLayerPasses
/// (program layer passes, with limits::kSweepProgramPassesPerLocalExpert per local expert of each program).
/// Every layout that passes the grid checks has a program built, hashed and bounded; with pruning (no
/// perturbations, options.prune_beyond_top > 0) first one of a micro-batch per pipeline stage, whose
/// parameters, gradients and optimizer state screen it, and its own program only where those fit in memory.
struct SweepBuildWork {
    std::size_t layouts = 0;          ///< that pass the grid checks
    std::size_t built = 0;            ///< whose own program is built (all of them without pruning)
    std::int64_t screening_work = 0;  ///< the screening's programs (0 without pruning)
    std::int64_t work = 0;            ///< everything phase 1 builds: the screening's and the layouts' own
};

/// What run_sweep builds before it simulates (SweepBuildWork), found as run_sweep finds it (the grid
/// enumerated, each layout's held piles screened), with no layout's own program built. Throws the
/// InputError run_sweep throws when that passes limits::kMaxSweepProgramLayerPasses (before the screening
/// when its own work does; naming --global-batch, or model.num_experts when local experts weigh most), or
/// for a bad topology, size or study (docs/reliability.md, the limits table).
SweepBuildWork sweep_build_work(const TopologySpec& topology, const ModelSpec& model, const Layout& base,
                                const SweepGrid& grid, const SweepOptions& options);

/// The text summary: the top `top_k` layouts (with several sizes, the GPUs first; step time s, tokens/s,
/// tokens/s per GPU, tokens/day, MFU, bubble, exposed TP/PP/DP s, peak memory and headroom GiB, with
/// train_tokens the days, GPU-hours and cost to train, what limits it), the counts of rejected layouts by
/// reason, with several sizes the best layout of each size, then the best layout's full report
/// (format_text). Byte-identical for identical results.
std::string format_sweep_text(const SweepResult& r, std::size_t top_k);

/// Every evaluated layout, one CSV row each in the order of SweepResult::entries, header first; numbers with
/// fixed decimals (times 6, GiB 3, MFU and fractions 6, tokens/s 1, tokens/day 0, days 3, GPU-hours 1,
/// dollars 2). Column gpus (after rank) with several sizes; time_to_train_days and gpu_hours with
/// train_tokens, cost_usd with gpu_hour_price_usd too.
std::string sweep_csv(const SweepResult& r);

/// The same rows as JSON ("layouts"), with the counts, the reject reasons, and "best": to_json of the best
/// report (null when nothing was simulated). Format "trainsim-sweep/1". With several sizes "gpus" is the
/// list of sizes and each row has "gpus"; with train_tokens each simulated row has "time_to_train"
/// (to_json(TimeToTrain)) and "min_headroom" is written when above 0.
nlohmann::json sweep_json(const SweepResult& r);

}  // namespace trainsim
