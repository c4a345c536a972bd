// What-if perturbations of one simulated iteration (docs/what-if.md): slow GPUs, per-kernel jitter, degraded
// or failed links. They are data: the CLI parses them (parse_straggler, parse_jitter, parse_link), simulate()
// resolves them on the cluster (per-GPU compute factors, link capacities and latencies), and the executor
// couples the ranks as it always does (a collective starts when its last member arrives, a stage waits for
// its neighbour's message): nothing here is a closed-form multiplier of the step time.
//
// Random draws come from a counter-based generator (counter_uniform): a pure function of (seed, stream, a,
// b), the SplitMix64 finalizer applied to the key folded in one word at a time (Steele, Lea, Flood,
// "Fast splittable pseudorandom number generators", OOPSLA 2014; the finalizer is Stafford's Mix13). The
// jitter factor of kernel i of GPU r is a function of the hash of key (seed, kJitterStream, r, i) alone
// (LognormalJitter): it depends on nothing else, so a result never depends on the order of events or the
// number of threads.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "trainsim/units.hpp"

namespace trainsim {

/// `--straggler gpu=G,slowdown=F` (one GPU) or `--straggler fraction=X,slowdown=F` (round(X * GPUs) GPUs, at
/// least one, drawn from the seed). Every compute kernel of a slowed GPU takes F times as long (F >= 1:
/// throttling, a degraded HBM stack, a noisy neighbour...). Factors of several options on one GPU multiply.
struct Straggler {
    int gpu = -1;         ///< >= 0: this GPU; -1: `fraction` of the GPUs
    double fraction = 0;  ///< in (0, 1]
    double slowdown = 1;  ///< >= 1
    std::string text;     ///< the option as given, for messages
};

/// `--jitter lognormal,sigma=S`: every kernel of every GPU takes its time times exp(S·z - S²/2), z standard
/// normal drawn per (seed, GPU, kernel index) (LognormalJitter): a log-normal factor of mean 1 (the mean
/// kernel time is unchanged; what costs is that the others wait for the slowest).
struct Jitter {
    double sigma = 0;  ///< > 0, the standard deviation of the log of the factor
    std::string text;
};

/// `--link NAME,bandwidth=F` / `--link NAME,latency=T` / `--link NAME,down`. Names (docs/what-if.md):
///   node<N>.nic<K>   NIC K of node N: its wire to the leaf, both directions
///   node<N>.nvlink   the NVLink ports (GPU <-> NVSwitch, both directions) of every GPU of node N
///   gpu<G>.nvlink    GPU G's NVLink port, both directions
///   leaf<L>.uplink   leaf switch L's links to the spine layer, up and down (L = leaf group · NICs per node +
///                    rail; with adaptive routing one bundle each way, with ECMP one link per spine)
///   rail<K>          NIC K of every node (all of rail K's wires)
/// bandwidth multiplies the link's capacity (> 0); latency adds to each traversal; down (NICs and rails only)
/// takes the NIC out: its GPUs use the node's next working NIC, as NCCL does with the HCAs it finds.
struct LinkPerturbation {
    std::string name;
    double bandwidth_factor = 1;
    Time extra_latency;
    bool down = false;
    std::string text;
};

/// Every perturbation of a scenario; empty(): the plain simulation.
struct Perturbations {
    std::vector<Straggler> stragglers;
    std::optional<Jitter> jitter;
    std::vector<LinkPerturbation> links;
    bool empty() const { return stragglers.empty() && !jitter && links.empty(); }
    /// Perturbs compute (stragglers or jitter).
    bool compute() const { return !stragglers.empty() || jitter.has_value(); }
};

/// The default seed (`--seed`).
inline constexpr std::uint64_t kDefaultSeed = 1;

/// Draw streams of counter_uniform (so that two uses of one seed are independent).
inline constexpr std::uint64_t kJitterStream = 1;
inline constexpr std::uint64_t kStragglerStream = 2;

/// SplitMix64's finalizer (the golden-ratio increment, then Mix13): a bijection of 64-bit words.
std::uint64_t splitmix64(std::uint64_t x);
/// A uniform draw in (0, 1) that depends only on its arguments (see the file comment).
double counter_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t a, std::uint64_t b);
/// A standard normal draw (Box-Muller on two counter_uniform draws of the same key).
double counter_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t a, std::uint64_t b);
/// The key folded up to `a`, for many draws of one (seed, stream, a): counter_normal(seed, stream, a, b) ==
/// counter_normal_at(counter_prefix(seed, stream, a), b) (the executor's jitter draws, one prefix per GPU).
std::uint64_t counter_prefix(std::uint64_t seed, std::uint64_t stream, std::uint64_t a);
double counter_normal_at(std::uint64_t prefix, std::uint64_t b);
/// The hash of key (prefix, b) that counter_uniform turns into a number: splitmix64(prefix ^ b).
inline std::uint64_t counter_hash_at(std::uint64_t prefix, std::uint64_t b) {
    std::uint64_t x = (prefix ^ b) + 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/// The standard normal quantile Phi^-1(u) for u in (0, 1) (Boost.Math's erfc_inv: -sqrt(2)·erfc_inv(2u),
/// accurate to a few ulp).
double normal_quantile(double u);

/// The per-kernel factors of `--jitter lognormal,sigma=S` by inversion: the factor of the draw whose 64-bit
/// hash is h (counter_hash_at(counter_prefix(seed, kJitterStream, GPU), kernel index)) is
/// Q(u) = exp(S·Phi^-1(u) - S²/2), u = (the hash's top 52 bits + 1/2) / 2^52 in (0, 1). Q is tabulated once
/// per sigma at the 4,097 points u = j/4096, and a draw reads its cell from the hash's top 12 bits and
/// interpolates linearly with the next 40: one hash, one table read, no log, cos or exp (a few ns against
/// ~40 ns for Box-Muller and exp). In the outer 8 cells at each end (u < 1/512 or u > 511/512, where Q
/// curves most; 0.4% of the draws) Q(u) is computed exactly. The interpolated factor is within 3e-5
/// (relative) of Q(u) for S = 0.05, 3e-4 for S = 0.5 and 2e-3 for S = 2 (h²/8·|Q''| with h = 1/4096,
/// largest next to the exact cells), so the draws are log-normal of mean 1 to that accuracy
/// (tests/unit/test_jitter_draws.cpp checks the mean, variance and KS distance of the log-factors and the
/// table against the exact Q).
class LognormalJitter {
  public:
    /// sigma > 0: the standard deviation of the log of the factor.
    explicit LognormalJitter(double sigma);
    double sigma() const { return sigma_; }
    /// The factor for the hash h.
    double factor(std::uint64_t h) const {
        const std::uint64_t cell = h >> (64 - kCellBits);
        if (cell - kExactCells < kCells - 2 * kExactCells) {  // an interpolated cell (unsigned wrap below)
            const double t = static_cast<double>((h >> (64 - kCellBits - kFractionBits)) &
                                                 ((std::uint64_t{1} << kFractionBits) - 1)) *
                             kFractionScale;
            const double* q = table_.data() + (cell - kExactCells);
            return q[0] + t * (q[1] - q[0]);
        }
        return exact(h);
    }
    /// The exact factor Q(u) for the hash h (what factor(h) approximates between the table's points).
    double exact(std::uint64_t h) const;

  private:
    static constexpr int kCellBits = 12;
    static constexpr std::uint64_t kCells = std::uint64_t{1} << kCellBits;
    static constexpr std::uint64_t kExactCells = 8;
    static constexpr int kFractionBits = 40;
    static constexpr double kFractionScale = 0x1.0p-40;
    double sigma_;
    std::vector<double> table_;  ///< Q(j / kCells) for j in [kExactCells, kCells - kExactCells]
};

/// Parsers of the CLI's option values (without the option name). Each throws InputError naming the option
/// and the value: "--straggler gpu=x,slowdown=1.3: gpu = \"x\" is not a non-negative integer".
Straggler parse_straggler(const std::string& value);
Jitter parse_jitter(const std::string& value);
/// parse_link also refuses `down` beside bandwidth= or latency= (a link that carries nothing).
LinkPerturbation parse_link(const std::string& value);

/// The GPUs slowed by `stragglers` on a cluster of `gpus` GPUs: their compute factor per GPU ([gpus], 1 for
/// the others). `fraction` draws its GPUs from `seed` (the round(fraction·gpus) GPUs with the smallest
/// counter_uniform(seed, kStragglerStream, gpu, index of the option)) among the GPUs that no gpu= option and
/// no earlier fraction slows: one GPU is slowed once. Throws InputError for a GPU id out of range, or a
/// fraction needing more GPUs than the others leave, naming the option.
std::vector<double> compute_factors(const std::vector<Straggler>& stragglers, int gpus, std::uint64_t seed);

/// A link name split into its parts (see LinkPerturbation); parse_link checks the syntax, the cluster the
/// ranges.
struct LinkName {
    enum class Kind { node_nic, node_nvlink, gpu_nvlink, leaf_uplink, rail } kind = Kind::node_nic;
    int a = 0;  ///< node, GPU, leaf or rail
    int b = 0;  ///< NIC (node_nic)
};
/// Throws InputError naming `option` ("--link node3.nic2,down") when `name` matches no documented form.
LinkName parse_link_name(const std::string& name, const std::string& option);

}  // namespace trainsim
