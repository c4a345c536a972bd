// Failures, checkpoints and goodput over a whole training run (days to months), simulated as events.
//
// The run alternates computing, checkpointing and recovering. Time is wall-clock seconds; "work" is seconds
// of training progress (steps x step time). docs/goodput.md has the model, every option and a worked study.
//
//   Failures   every unit of each component class (GPU, node, NIC, switch, and software counted per GPU)
//              fails independently; a unit's lifetime is exponential with mean MTBF, or Weibull with shape k
//              and scale MTBF / Gamma(1 + 1/k) (so its mean stays the MTBF). A failed unit is replaced by a
//              new one (renewal). Exponential classes are drawn as one Poisson process of rate count / MTBF
//              (the superposition of independent exponential units); in a Weibull class the units still on
//              their first lifetime are drawn in the order they fail (the first of m survivors at t0 fails at
//              t with (t/L)^k = (t0/L)^k + E/m, E ~ Exp(1); Ross, Simulation, Sec. 5.3), each replacement
//              keeps its own clock.
//              Failures happen on the wall clock, during checkpoints and recoveries too.
//   A failure  rolls the work back to the last durable checkpoint (the work since then is lost) and starts a
//              recovery: detection + relaunch + checkpoint load. A failure during a recovery starts it again.
//              With hot spares, a failure of a node-local unit (GPU, node, NIC) swaps in a spare node, which
//              relaunches in spare_restart_s instead of restart_s; the failed node is repaired and returns to
//              the pool after repair_s. With the pool empty, the relaunch is the cold one (restart_s).
//   Checkpoint every `interval_steps` steps of work:
//              sync   the job blocks for the whole write (save_s); the checkpoint is durable when it ends;
//              async  the job blocks for the copy to host memory (copy_s), the write (save_s) proceeds in the
//                     background and makes the checkpoint durable when it ends; a failure during the write
//                     loses that checkpoint. A checkpoint due while the previous write is in flight first
//                     waits for it (PyTorch DCP async_save keeps one save in flight).
//              The last checkpoint of a run with a work target is written before the run ends (async: copy,
//              then the write, both blocking).
//   Goodput    useful work / wall time (Meta's "effective training time ratio"): lost work, checkpoint
//              blocking and recovery are the badput; they add up with the useful work to the wall time.
//
// Randomness: a counter-based generator keyed by (seed, stream, draw index) (SplitMix64 finalizer, Steele,
// Lea & Flood, OOPSLA 2014), one stream per component class (per unit for Weibull), so a seed's outcome does
// not depend on the thread that runs it or on other seeds.
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"

namespace trainsim {

/// Component classes that fail. `software` (bugs, NCCL watchdog timeouts) is counted per GPU: its rate grows
/// with the job's size.
enum class FailureComponent { gpu, node, nic, network_switch, software };
inline constexpr int kFailureComponents = 5;
std::string to_string(FailureComponent c);  ///< "gpu", "node", "nic", "switch", "software"

// Default MTBFs per unit, hours, from Meta's Llama 3 405B pre-training (Llama Team, "The Llama 3 Herd of
// Models", arXiv:2407.21783, Sec. 3.3.4, Table 5): 419 unexpected interruptions in a 54-day snapshot on
// 16,384 H100 GPUs in 2,048 Grand Teton servers (8 GPUs and 8 NICs each). The table's root causes grouped by
// the unit that fails (counts as printed; the table prints 30.1% beside the 148 faulty-GPU interruptions,
// which is 35.3% of 419: the counts are used):
//   gpu      faulty GPU 148 + HBM3 72 + SRAM 19 + GPU system processor 17 + silent data corruption 6
//            + GPU thermal interface and sensor 6 = 268
//   node     host maintenance 32 + SSD 3 + power supply 3 + server chassis 2 + IO expansion board 2 + CPU 2
//            + system memory 2 = 46
//   nic      NIC 7
//   switch   network switch and cable 35, over the 544 switches (512 leaves, 32 spines) that trainsim's
//            rail-optimized fat-tree of 2,048 DGX H100 nodes has (switch_count)
//   software software bug 54 + NCCL watchdog timeouts 7 + dependency 2 = 63, per GPU
// MTBF per unit = units x 54 days x 24 h / interruptions.
inline constexpr double kLlama3SnapshotHours = 54.0 * 24.0;
inline constexpr double kLlama3Gpus = 16384.0, kLlama3Nodes = 2048.0, kLlama3Nics = 16384.0,
                        kLlama3Switches = 544.0;
inline constexpr double kDefaultGpuMtbfH = kLlama3Gpus * kLlama3SnapshotHours / 268.0;        // 79,230 h
inline constexpr double kDefaultNodeMtbfH = kLlama3Nodes * kLlama3SnapshotHours / 46.0;       // 57,700 h
inline constexpr double kDefaultNicMtbfH = kLlama3Nics * kLlama3SnapshotHours / 7.0;          // 3.03 Mh
inline constexpr double kDefaultSwitchMtbfH = kLlama3Switches * kLlama3SnapshotHours / 35.0;  // 20,140 h
inline constexpr double kDefaultSoftwareMtbfH = kLlama3Gpus * kLlama3SnapshotHours / 63.0;    // 337,000 h
/// Failure detection: PyTorch's default NCCL process-group timeout, 10 min (torch.distributed
/// default_pg_nccl_timeout; Megatron-LM --distributed-timeout-minutes 10): the worst case, a hang.
inline constexpr double kDefaultDetectionS = 600.0;
/// Relaunch of the job after a failure (scheduler, processes, NCCL init), without the checkpoint load:
/// R = 600 s, the worked example of NVIDIA's checkpoint-interval study (arXiv:2410.18124).
inline constexpr double kDefaultRestartS = 600.0;
/// Relaunch onto a hot spare: under 5 minutes (Crusoe's H200 fleet report, hot spares replacing failed
/// nodes; ../shared/design/what-if-figures.md).
inline constexpr double kDefaultSpareRestartS = 300.0;
/// Automatic repair of a failed node before it can serve as a spare again: 2 h (AIReSim defaults,
/// arXiv:2603.07041).
inline constexpr double kDefaultRepairS = 2.0 * 3600.0;

/// One component class: how many units the cluster has and the MTBF of one unit (hours; 0: never fails).
struct ComponentReliability {
    double count = 0;
    double mtbf_h = 0;
    /// Failures per second of the whole class: count / (mtbf_h x 3600); 0 when mtbf_h is 0.
    double rate_per_s() const { return mtbf_h > 0 ? count / (mtbf_h * 3600.0) : 0.0; }
};

struct FailureModel {
    std::array<ComponentReliability, kFailureComponents> components{};
    double weibull_shape = 1.0;  ///< 1: exponential lifetimes; otherwise Weibull with this shape (> 0)
    /// Failures per second of the whole cluster (sum of the classes' rates); 1 / it is the system MTBF (s).
    double rate_per_s() const;
};

/// The failure model with the Llama 3 default MTBFs for a cluster of `gpus` GPUs on `nodes` nodes with
/// `nics` NICs and `switches` switches.
FailureModel default_failure_model(double gpus, double nodes, double nics, double switches);

/// Switches of the topology's scale-out fabric (include/trainsim/cluster.hpp): one leaf per group of
/// nodes_per_leaf nodes per rail (NIC index), plus one spine per leaf uplink (ceil(min(nodes, nodes_per_leaf)
/// / oversubscription): a leaf has as many uplinks as nodes it serves, divided by the oversubscription).
/// Three tiers (scale_out.tiers = 3): those spines in every pod (ceil(nodes / nodes_per_pod) pods), plus the
/// cores: one plane per pod spine, ceil(leaves per pod / spine_oversubscription) cores per plane (the k = 64
/// fat-tree of topologies/dgx-h100-3tier-64k.json: 2,048 leaves + 2,048 spines + 1,024 cores = 5k^2/4 =
/// 5,120, Al-Fares et al., SIGCOMM 2008). 0 for a single node.
double switch_count(const TopologySpec& t);

enum class CheckpointMode { sync, async };
std::string to_string(CheckpointMode m);

/// The checkpoint of a layout and what it costs on a topology's storage.
struct CheckpointCost {
    double bytes = 0;   ///< whole checkpoint: model weights + optimizer state (all ranks, stored once)
    double save_s = 0;  ///< write to storage: bytes / (writing nodes x write bandwidth per node)
    double copy_s = 0;  ///< device-to-host copy of one GPU's share (async save's blocking part), over PCIe
    double load_s = 0;  ///< read at restart: bytes / (reading nodes x read bandwidth per node)
};

/// Bytes of one checkpoint, from the quantities of the memory model (include/trainsim/memory.hpp, the
/// parameters and optimizer piles before sharding): per stage, the 16-bit weights (QLoRA's frozen base in
/// NF4; PyTorch FSDP under ZeRO-3: the fp32 sharded parameter, which is the master weight) plus
/// Layout::optimizer_bytes_per_param() per trainable parameter (fp32 master weight and moments; offloaded
/// state included). What Megatron's torch_dist format and PyTorch DCP save: model and optimizer state
/// dicts, each tensor once however it is replicated. fp8 weight caches and gradients are not saved.
double checkpoint_bytes(const ModelSpec& m, const Layout& l);

/// Save, copy and load times of `bytes` for `layout` on `topology`. A sharded save spreads the checkpoint
/// over every node of the job (Megatron's fully parallel save, DCP: each rank writes its share), a rank-0
/// save (CheckpointSave::rank0) goes through one node, which also reads it at restart. Storage bandwidths are
/// TopologySpec::storage_*_bandwidth_per_node; the copy runs on every GPU at once over PCIe
/// (TopologySpec::pcie_bandwidth). Throws InputError if the layout needs more GPUs than the topology has.
CheckpointCost checkpoint_cost(double bytes, const Layout& layout, const TopologySpec& topology);

/// Everything the run simulation needs. Times in seconds.
struct GoodputConfig {
    double step_s = 0;                ///< one training step (> 0)
    double tokens_per_step = 0;       ///< global batch x sequence length (for the time-to-train figure)
    std::int64_t interval_steps = 0;  ///< steps between checkpoints (>= 1)
    CheckpointMode mode = CheckpointMode::sync;
    double save_s = 0, copy_s = 0, load_s = 0;  ///< CheckpointCost
    double detection_s = kDefaultDetectionS;
    double restart_s = kDefaultRestartS;
    int hot_spares = 0;  ///< spare nodes kept warm; 0: none
    double spare_restart_s = kDefaultSpareRestartS;
    double repair_s = kDefaultRepairS;
    double horizon_s = 0;      ///< stop after this wall time (0: no limit; then target_work_s > 0)
    double target_work_s = 0;  ///< stop when this much work is done and checkpointed (0: none)
    FailureModel failures;
};
/// Throws InputError naming the field when a value is out of range (negative times, no stop condition...),
/// or when the run is expected to see more than a million failures (over the horizon, or over Daly's
/// expected run time for a target: MTBFs far too small for the recovery time).
void check_goodput_config(const GoodputConfig& c);

/// The work one run is expected to take, in checkpoint events: the expected failures (the failure rate
/// times the horizon, or times Daly's expected run time for a target: expected_run_time_s; for Weibull k < 1
/// the fresh units failing within the span) times limits::kGoodputFailureWorkEvents, plus the checkpoints
/// over that span (span / (interval_steps * step_s)). For a config that passed check_goodput_config.
double expected_run_events(const GoodputConfig& c);

/// One simulated run.
struct RunOutcome {
    double wall_s = 0;    ///< when the run stopped (target reached, or the horizon)
    double useful_s = 0;  ///< work done and kept (at the horizon: all work done so far, checkpointed or not)
    double lost_work_s = 0;           ///< work rolled back by failures
    double checkpoint_blocked_s = 0;  ///< time the job stood still for checkpoints
    double recovery_s = 0;            ///< detection, relaunch and checkpoint load (restarted ones included)
    std::array<std::int64_t, kFailureComponents> failures{};
    std::int64_t checkpoints_durable = 0, checkpoints_lost = 0;  ///< lost: a failure hit the write
    std::int64_t spare_swaps = 0;                                ///< recoveries onto a hot spare
    bool finished = false;                                       ///< target work reached
    double goodput() const { return wall_s > 0 ? useful_s / wall_s : 0.0; }
};

/// Simulates one run with seed `seed`. Deterministic for a given (config, seed). Call check_goodput_config
/// first (InternalError otherwise on a config it cannot run).
RunOutcome simulate_run(const GoodputConfig& c, std::uint64_t seed);

/// Mean, percentiles (linear interpolation between order statistics) and the half-width of the mean's 95%
/// confidence interval (1.96 standard errors) of a figure over the seeds.
struct SeedStats {
    double mean = 0, ci95 = 0, p10 = 0, p50 = 0, p90 = 0, min = 0, max = 0;
};
SeedStats seed_stats(std::vector<double> values);

struct GoodputSummary {
    std::int64_t interval_steps = 0;
    int seeds = 0;
    SeedStats goodput, wall_s, useful_s, lost_work_s, checkpoint_blocked_s, recovery_s, checkpoints_lost;
    std::array<SeedStats, kFailureComponents> failures{};
    double finished_fraction = 0;  ///< seeds that reached the target work
};

/// Runs seeds first_seed .. first_seed + seeds - 1 on `jobs` threads; the result does not depend on `jobs`.
/// Throws InputError on a bad config, seeds < 1, jobs < 1, or seeds * expected_run_events above
/// limits::kMaxGoodputStudyEvents (naming --seeds and how many seeds the config allows).
GoodputSummary simulate_goodput(const GoodputConfig& c, std::uint64_t first_seed, int seeds, int jobs);

/// Checkpoint intervals from the formulas, in seconds of work, for save (blocking) time delta_s, system MTBF
/// mtbf_s and recovery time restart_s:
///   Young (1974)      tau = sqrt(2 delta M)
///   Daly (2006)       tau = sqrt(2 delta M) [1 + (1/3) sqrt(delta / 2M) + (delta / 2M) / 9] - delta for
///   delta <
///                     2M, else M ("A higher order estimate of the optimum checkpoint interval for restart
///                     dumps", FGCS 22(3))
///   restart-aware     tau = delta + sqrt(2 (M + R) delta + delta^2) (NVIDIA, arXiv:2410.18124)
///   exact             the tau minimizing Daly's expected run time for exponential failures and a sync save,
///                     E[T] = (W / tau) e^(R/M) M (e^((tau + delta)/M) - 1) (expected_run_time_s), found by
///                     golden-section search
struct IntervalFormulas {
    double young_s = 0, daly_s = 0, restart_aware_s = 0, exact_s = 0;
};
IntervalFormulas interval_formulas(double delta_s, double mtbf_s, double restart_s);

/// Daly's (2006) expected wall time to do `work_s` of work in segments of tau_s work each followed by a
/// blocking save of delta_s, with exponential failures of mean mtbf_s and a recovery of restart_s after
/// each (restarted by a failure during it): (work_s / tau_s) e^(R/M) M (e^((tau + delta)/M) - 1). Exact for
/// the simulator's sync mode without hot spares when work_s is a multiple of tau_s.
double expected_run_time_s(double work_s, double tau_s, double delta_s, double mtbf_s, double restart_s);

/// The intervals (steps) `--checkpoint-interval auto` sweeps: around `center_s` of work, factors 2^(k/4) for
/// k = -12 .. 12, rounded to whole steps (>= 1), without duplicates, ascending.
std::vector<std::int64_t> interval_sweep(double center_s, double step_s);

/// The failure model of a job of layout.gpus() GPUs on `topology` with the Llama 3 default MTBFs: its GPUs,
/// its nodes (ceil(gpus / gpus_per_node)) and their NICs, and the fabric's switches (switch_count) in
/// proportion to the job's share of the nodes, rounded.
FailureModel job_failure_model(const Layout& layout, const TopologySpec& topology);

/// The configuration of a job whose step takes step_s (simulated) and whose checkpoint costs `checkpoint`:
/// tokens per step = global batch x sequence length, the checkpoint's save, copy and load times, the job's
/// failure model (job_failure_model); the recovery times, the stop condition and the interval keep
/// GoodputConfig's defaults for the caller to set.
GoodputConfig job_goodput_config(double step_s, const ModelSpec& model, const Layout& layout,
                                 const TopologySpec& topology, const CheckpointCost& checkpoint);

/// Checkpoint intervals compared: the formulas at the configuration's blocking time (the save when sync,
/// the copy when async), system MTBF (1 / FailureModel::rate_per_s, 0 without failures) and recovery
/// (detection + restart + load); every interval simulated over the seeds.
struct CheckpointIntervalStudy {
    double blocking_s = 0, mtbf_s = 0, recovery_s = 0;
    IntervalFormulas formulas;
    std::vector<GoodputSummary> sweep;  ///< one per interval, ascending
    std::size_t best = 0;               ///< the highest median goodput (the first among equals)
    const GoodputSummary& chosen() const { return sweep[best]; }
};
/// Simulates `interval_steps` when given, else interval_sweep around Young's interval (1000 steps when there
/// are no failures); c.interval_steps is ignored. Seeds and jobs as simulate_goodput (which throws); also
/// throws InputError, before simulating, when seeds times the sum of expected_run_events over the intervals
/// passes limits::kMaxGoodputStudyEvents (naming --seeds, the intervals and how many seeds they allow).
CheckpointIntervalStudy study_checkpoint_intervals(const GoodputConfig& c,
                                                   std::optional<std::int64_t> interval_steps,
                                                   std::uint64_t first_seed, int seeds, int jobs);

}  // namespace trainsim
