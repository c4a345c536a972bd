// Running the sweep's grid (include/trainsim/sweep.hpp run_sweep): every point checked (layout checks,
// memory), the survivors simulated, costliest first, once per distinct program, then ranked. Both phases
// spread over threads, and over processes with SweepOptions::processes (process_group.hpp).
#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <functional>
#include <iterator>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <tuple>

#include <fmt/format.h>

#include "sweep_internal.hpp"
#include "trainsim/collectives.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/fingerprint.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/parallel_groups.hpp"
#include "trainsim/process_group.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/sweep.hpp"

namespace trainsim {

namespace sweep_detail {

/// Feeds `put` everything of a program that the simulation reads: every segment's kernels and every stage's
/// ops, field by field.
template <class Put>
void program_fields(const Program& p, Put&& put) {
    for (const auto& seg : p.segments) {
        put(seg.kernels.size());
        for (const auto& k : seg.kernels) {
            put(k.kind);
            put(k.flops);
            put(k.bytes);
            put(k.m);
            put(k.n);
            put(k.k);
            put(k.batch);
        }
    }
    for (const auto& st : p.stages) {
        put(st.ops.size());
        put(st.hardware_flops);
        for (const auto& op : st.ops) {
            put(op.kind);
            put(op.phase);
            put(op.segment);
            put(op.collective);
            put(op.bytes);
            put(op.direction);
            put(op.virtual_stage);
            put(op.micro_batch);
            put(op.dp_target);
            put(op.group);
        }
    }
}

/// The program's fields as bytes. Two layouts with the same signature and the same rank grid simulate
/// identically.
std::string program_signature(const Program& p) {
    std::size_t size = 0;  // sized first: a large program's signature is tens of MB, grown it was copied
    program_fields(p, [&size](const auto& v) { size += sizeof v; });
    std::string sig;
    sig.reserve(size);
    program_fields(p, [&sig](const auto& v) { sig.append(reinterpret_cast<const char*>(&v), sizeof v); });
    return sig;
}

bool has_signature(const Program& p, const std::string& sig) {
    std::size_t at = 0;
    bool same = true;
    program_fields(p, [&](const auto& v) {
        if (!same) return;
        same = at + sizeof v <= sig.size() && std::memcmp(sig.data() + at, &v, sizeof v) == 0;
        at += sizeof v;
    });
    return same && at == sig.size();
}

namespace {

/// One FNV-1a step over a 64-bit word, then a rotation so that a word's high bits reach the low bits of
/// later steps.
struct HashLane {
    std::uint64_t h = kFnv1a64Offset;
    void step(std::uint64_t w) { h = std::rotl((h ^ w) * kFnv1a64Prime, 29); }
};

template <class T>
std::uint64_t word(const T& v) {
    static_assert(sizeof v <= sizeof(std::uint64_t), "a program field wider than a word");
    std::uint64_t w = 0;
    std::memcpy(&w, &v, sizeof v);
    return w;
}

/// Two fields of at most 32 bits in one word.
template <class A, class B>
std::uint64_t pair_word(const A& a, const B& b) {
    static_assert(sizeof a <= 4 && sizeof b <= 4, "a program field wider than half a word");
    return word(a) | word(b) << 32;
}

}  // namespace

/// A 64-bit hash of the signature's fields, computed without building it (a program of a large MoE layout is
/// tens of MB). The kernels go field by field through one lane (HashLane); each op's ten fields are packed
/// into four words, two through each of two lanes, which the processor runs side by side. The checks of a
/// small-cluster sweep spent a third of their time here with one step per field. Equal programs hash equal;
/// equal hashes are confirmed by comparing signatures (plan_simulations).
std::uint64_t program_hash(const Program& p) {
    HashLane a, b;
    for (const auto& seg : p.segments) {
        a.step(word(seg.kernels.size()));
        for (const auto& k : seg.kernels)
            for (std::uint64_t w :
                 {word(k.kind), word(k.flops), word(k.bytes), word(k.m), word(k.n), word(k.k), word(k.batch)})
                a.step(w);
    }
    for (const auto& st : p.stages) {
        a.step(word(st.ops.size()));
        a.step(word(st.hardware_flops));
        for (const auto& op : st.ops) {
            const std::uint64_t tags = word(static_cast<std::uint8_t>(op.kind)) |
                                       word(static_cast<std::uint8_t>(op.phase)) << 8 |
                                       word(static_cast<std::uint8_t>(op.collective)) << 16 |
                                       word(static_cast<std::uint8_t>(op.group)) << 24;
            a.step(tags | word(op.direction) << 32);
            a.step(pair_word(op.segment, op.virtual_stage));
            b.step(pair_word(op.micro_batch, op.dp_target));
            b.step(word(op.bytes));
        }
    }
    a.step(b.h);
    return a.h;
}

namespace {

constexpr double kPicosecondS = Time::ps(1).to_seconds();  ///< the executor's time unit (units.hpp Time)

/// The walk of one pipeline stage's ops (step_time_lower_bound_s): the next op, when the main stream, the TP
/// stream and the DP stream are free (s from the step's start), when each DP-stream collective ends, the
/// stage's first rank's groups and the collectives' times alone on the fabric.
struct StageWalk {
    std::size_t pc = 0;
    double main_s = 0, tp_stream_s = 0, dp_stream_s = 0;
    std::vector<double> dp_done_s;  ///< [k] the end of the stage's k-th DP-stream collective
    /// What the executor's picosecond times can take off the walk's: half a picosecond per duration it
    /// rounds to the nearest (Time::seconds), counted here as one per compute op and two per collective
    /// (summed over the stages: the critical path may cross them).
    double rounding_s = 0;
    std::array<std::vector<int>, kGroupKindCount> ranks;     ///< [GroupKind] the stage's first rank's group
    AloneCollectiveTimes* alone = nullptr;                   ///< the sweep's times of collectives alone
    std::map<std::tuple<int, int, double>, double> alone_s;  ///< of them, by (group kind, collective, bytes)
};

/// A P2P message's key as the executor's: (receiving stage, direction, virtual stage, micro-batch).
using MessageKey = std::tuple<int, int, int, int>;

MessageKey message_key(int stage, const Op& op) {
    return {stage, op.direction, op.virtual_stage, op.micro_batch};
}

/// The least time a collective the stage launches can take: its time alone on the fabric over the stage's
/// first rank's group (isolated_collective_seconds, the executor's collective algorithms on an idle
/// cluster: other flows only lower a flow's max-min share), nothing over a group of one.
double least_collective_s(StageWalk& w, const Op& op, const Cluster& cluster) {
    const GroupKind kind = group_kind_of(op);  // the executor's group for it (program.hpp)
    const auto& ranks = w.ranks[static_cast<std::size_t>(kind)];
    if (ranks.size() < 2 || !(op.bytes > 0)) return 0;
    auto [it, added] =
        w.alone_s.try_emplace({static_cast<int>(kind), static_cast<int>(op.collective), op.bytes}, 0.0);
    if (added) it->second = w.alone->seconds(cluster, op.collective, ranks, op.bytes);
    return it->second;
}

/// Advances stage `s`'s walk until its ops end or a receive whose message is not sent yet; true if it moved.
bool advance(std::size_t s, StageWalk& w, const Program& program, int pp, const Cluster& cluster,
             std::map<MessageKey, double>& sent_s) {
    const auto& ops = program.stages[s].ops;
    const std::size_t from = w.pc;
    for (; w.pc < ops.size(); ++w.pc) {
        const Op& op = ops[w.pc];
        if (op.kind == OpKind::compute) {
            w.main_s += program.segments[static_cast<std::size_t>(op.segment)].seconds;
            w.rounding_s += kPicosecondS;
        } else if (op.kind == OpKind::tp_launch) {
            w.tp_stream_s = std::max(w.tp_stream_s, w.main_s) + least_collective_s(w, op, cluster);
            w.rounding_s += 2 * kPicosecondS;
        } else if (op.kind == OpKind::tp_wait) {
            w.main_s = std::max(w.main_s, w.tp_stream_s);
        } else if (op.kind == OpKind::dp_launch) {
            w.dp_stream_s = std::max(w.dp_stream_s, w.main_s) + least_collective_s(w, op, cluster);
            w.dp_done_s.push_back(w.dp_stream_s);
            w.rounding_s += 2 * kPicosecondS;
        } else if (op.kind == OpKind::dp_wait) {
            if (op.dp_target > 0 && !w.dp_done_s.empty())
                w.main_s = std::max(
                    w.main_s,
                    w.dp_done_s[std::min(static_cast<std::size_t>(op.dp_target), w.dp_done_s.size()) - 1]);
        } else if (op.kind == OpKind::send) {
            const int to = (static_cast<int>(s) + op.direction + pp) % pp;
            sent_s[message_key(to, op)] = w.main_s;
        } else if (op.kind == OpKind::recv) {
            const auto it = sent_s.find(message_key(static_cast<int>(s), op));
            if (it == sent_s.end()) break;
            w.main_s = std::max(w.main_s, it->second);
            sent_s.erase(it);
        }
    }
    return w.pc != from;
}

}  // namespace

/// A lower bound on the step time (s): the executor's timeline (include/trainsim/executor.hpp) with every
/// duration at its least and every wait that is not a dependency dropped. Per pipeline stage its ops run in
/// order on three streams: compute ops back to back on the main stream, timed as simulate() times them (the
/// program's activation copies sized, assign_durations with the run's ComputeModel); a tp_launch queues its
/// collective on the TP stream and a dp_launch on the DP stream, each of which runs one at a time; a tp_wait
/// holds the main stream until the TP stream is idle, a dp_wait until the DP stream has ended the
/// collectives it waits for; a receive holds it until the peer stage has sent the message (the transfer
/// taking no time). A collective lasts its time alone on the fabric (isolated_collective_seconds over the
/// group of the stage's first rank, kept in `alone` across the sweep's points: the executor runs the same
/// algorithms, and other flows only lower a flow's max-min share). Every duration of the executor is at
/// least as long and every start at least as late, so no run of the layout is shorter
/// (SweepOptions::prune_beyond_top). It is lowered by a picosecond per duration the executor rounds
/// (StageWalk::rounding_s) and then by a part in 10^9, so that the executor's picosecond times cannot put it
/// above the step time.
double step_time_lower_bound_s(Program& program, const ModelSpec& model, const Layout& l,
                               const Cluster& cluster, AloneCollectiveTimes& alone) {
    time_program(program, run_compute_model(cluster.spec(), cluster.gpu(), l), model, l);
    const ParallelGroups groups(l);
    const std::size_t stages = program.stages.size();
    std::vector<StageWalk> walks(stages);
    for (std::size_t s = 0; s < stages; ++s) {
        GridCoord first;
        first[Dim::pp] = static_cast<int>(s);
        const int rank = groups.dense().rank_of(first);
        walks[s].alone = &alone;
        for (int k = 0; k < kGroupKindCount; ++k) {
            const auto kind = static_cast<GroupKind>(k);
            walks[s].ranks[static_cast<std::size_t>(k)] = groups.ranks(kind, groups.index(kind, rank));
        }
    }
    std::map<MessageKey, double> sent_s;
    for (bool moved = true; moved;) {
        moved = false;
        for (std::size_t s = 0; s < stages; ++s)
            moved = advance(s, walks[s], program, static_cast<int>(stages), cluster, sent_s) || moved;
    }
    double busiest = 0, rounding = 0;  // a path may cross stages: every stage's rounding counts
    for (std::size_t s = 0; s < stages; ++s) {
        if (walks[s].pc != program.stages[s].ops.size())
            throw InternalError(fmt::format("sweep bound: stage {} waits for a message no stage sends", s));
        busiest = std::max(busiest, walks[s].main_s);
        rounding += walks[s].rounding_s;
    }
    return std::max(0.0, (busiest - rounding) * (1 - 1e-9));
}

}  // namespace sweep_detail

double step_time_lower_bound_s(const Cluster& cluster, const ModelSpec& model, const Layout& layout) {
    sweep_detail::AloneCollectiveTimes alone;
    Program program = build_program(model, layout);
    return sweep_detail::step_time_lower_bound_s(program, model, layout, cluster, alone);
}

namespace sweep_detail {

double AloneCollectiveTimes::seconds(const Cluster& cluster, CollectiveKind kind,
                                     const std::vector<int>& ranks, double bytes) {
    auto key = std::make_tuple(&cluster, static_cast<int>(kind), ranks, bytes);
    {
        const std::lock_guard<std::mutex> lock(mutex_);
        const auto it = seconds_.find(key);
        if (it != seconds_.end()) return it->second;
    }
    const double s = isolated_collective_seconds(cluster, kind, ranks, bytes);  // outside the lock
    const std::lock_guard<std::mutex> lock(mutex_);
    seconds_.emplace(std::move(key), s);
    return s;
}

Layout held_piles_layout(const Layout& l) {
    Layout shallow = l;
    shallow.global_batch = static_cast<std::int64_t>(l.micro_batch) * l.dp * l.pp;
    return shallow;
}

std::int64_t program_build_work(const ModelSpec& model, const Layout& l) {
    const std::int64_t experts = model.moe() ? model.num_experts / std::max(l.ep, 1) : 0;
    return program_layer_passes(model, l) + limits::kSweepProgramPassesPerLocalExpert * experts;
}

namespace {

/// The last program this thread built in screen_point, check_point or check_memory: its op lists are reused
/// for the next (build_program's `recycled`; fresh lists of millions of ops cost a small cluster's sweep as
/// much in page faults as the building, and the screening of a toy MoE of 16,384 experts 14 s of system
/// CPU).
Program& program_scratch() {
    thread_local Program scratch;
    return scratch;
}

/// With pruning, a point whose parameters, gradients and optimizer state alone pass the HBM on some stage is
/// out of memory without its program or its walk: those piles are held all along, so every walk's peak is
/// above them (held_piles). They come from a program of the layout with one micro-batch per pipeline stage
/// (the piles do not depend on the count), cheap where the layout's own runs to millions of ops. The reason
/// is the walk's for held piles over the HBM: the largest of the three, at the stage that holds the most;
/// the peak is that stage's held piles (a floor). False when no stage passes or the short program is
/// refused (the full checks then decide); `c` then unchanged but for its memory floor (the largest stage's
/// held piles; 0 when refused). The HBM is that less `min_headroom` (--min-headroom), as check_memory's test:
/// at 99.99% every layout of Llama 3 8B on 64 H100 was walked in full, 46 s, where none can fit.
bool held_piles_overflow(const Layout& l, const Cluster& cluster, const ModelSpec& model, double min_headroom,
                         PointCheck& c) {
    const Layout shallow = held_piles_layout(l);
    PileBytes worst{};
    double worst_held = 0;
    int worst_stage = 0;
    try {
        Program& scratch = program_scratch();
        scratch = build_program(model, shallow, std::move(scratch));
        const Program& p = scratch;
        for (int s = 0; s < l.pp; ++s) {
            const PileBytes piles = held_piles(model, l, p, s, cluster.gpu());
            c.memory_floor_bytes = std::max(c.memory_floor_bytes, total_bytes(piles));
            const double held = piles[0] + piles[1] + piles[2];
            if (held > worst_held) {
                worst = piles;
                worst_held = held;
                worst_stage = s;
            }
        }
    } catch (const InputError&) {
        c.memory_floor_bytes = 0;
        return false;
    }
    const double hbm = cluster.gpu().hbm_bytes;
    if (!(worst_held > (1.0 - min_headroom) * hbm)) return false;
    Pile blame = Pile::parameters;
    for (Pile q : {Pile::gradients, Pile::optimizer})
        if (worst[static_cast<std::size_t>(q)] > worst[static_cast<std::size_t>(blame)]) blame = q;
    c.status = SweepStatus::out_of_memory;
    c.reason = worst_held > hbm
                   ? fmt::format("out of memory: {} largest", to_string(blame))
                   : fmt::format("under {:g}% headroom: {} largest", 100.0 * min_headroom, to_string(blame));
    c.peak_memory_bytes = total_bytes(worst);
    c.peak_stage = worst_stage;
    return true;
}

}  // namespace

PointCheck screen_point(const Layout& l, const Cluster& cluster, const ModelSpec& model, bool held_floor,
                        double min_headroom) {
    PointCheck c;
    c.reason = classify(model, l, cluster.gpus(), &c.detail);
    if (!c.reason.empty()) return c;
    if (held_floor && held_piles_overflow(l, cluster, model, min_headroom, c)) return c;
    c.status = SweepStatus::simulated;  // to be built
    return c;
}

PointCheck check_point(const PointCheck& screened, const Layout& l, const Cluster& cluster,
                       const ModelSpec& model, AloneCollectiveTimes& alone) {
    if (screened.status != SweepStatus::simulated) return screened;
    PointCheck c = screened;
    c.status = SweepStatus::rejected;
    Program& scratch = program_scratch();
    try {
        Program program = build_program(model, l, std::move(scratch));
        c.program_hash = program_hash(program);
        for (const auto& st : program.stages)
            c.cost += static_cast<double>(st.ops.size()) * l.dp;
        c.status = SweepStatus::simulated;
        try {
            c.lower_bound_s = step_time_lower_bound_s(program, model, l, cluster, alone);
        } catch (const InputError& err) {
            c.bound_error = err.what();
        }
        scratch = std::move(program);
    } catch (const InputError& err) {
        c.status = SweepStatus::rejected;
        c.detail = err.what();
        c.reason = numbers_to_n(err.what());
    }
    return c;
}

double early_memory_floor(const Layout& l, const Cluster& cluster, const ModelSpec& model) {
    Program& scratch = program_scratch();
    try {
        scratch = build_program(model, l, std::move(scratch));
        return memory_peak_floor_bytes(model, l, scratch, cluster.gpu());
    } catch (const InputError&) {
        return 0;
    }
}

PointCheck check_memory(const Layout& l, const Cluster& cluster, const ModelSpec& model, double min_headroom,
                        const PointCheck& passed) {
    PointCheck c = passed;
    Program& scratch = program_scratch();
    try {
        scratch = build_program(model, l, std::move(scratch));
        const MemoryReport memory = simulate_memory(model, l, scratch, cluster.gpu());
        c.peak_memory_bytes = memory.peak().peak_bytes;
        for (const StageMemory& st : memory.stages)
            c.memory_floor_bytes = std::max(c.memory_floor_bytes, st.early_peak_bytes);
        c.peak_stage = memory.peak_stage;
        if (!memory.fits() || c.peak_memory_bytes > (1.0 - min_headroom) * cluster.gpu().hbm_bytes) {
            c.status = SweepStatus::out_of_memory;
            c.reason = memory.fits()
                           ? fmt::format("under {:g}% headroom: {} largest", 100.0 * min_headroom,
                                         to_string(memory.blamed_pile()))
                           : fmt::format("out of memory: {} largest", to_string(memory.blamed_pile()));
            return c;
        }
        if (!passed.bound_error.empty()) throw InputError(passed.bound_error);
    } catch (const InputError& err) {
        c.status = SweepStatus::rejected;
        c.detail = err.what();
        c.reason = numbers_to_n(err.what());
    }
    return c;
}

PointRun simulate_point(const Layout& l, const Cluster& cluster, const ModelSpec& model,
                        const std::string& workload_name, const SweepOptions& options) {
    PointRun run;
    try {
        if (options.perturbations.empty()) {
            run.report = simulate(cluster, model, l, build_program(model, l), workload_name).report;
        } else {
            // Each seed's run; the report of the median one (nearest rank, the lower seed on ties).
            SimulationOptions o;
            o.perturbations = options.perturbations;
            o.execution.max_events = options.max_events;
            const Program program = build_program(model, l);
            std::vector<std::pair<double, Report>> runs;
            for (int k = 0; k < options.seeds; ++k) {
                o.seed = options.seed + static_cast<std::uint64_t>(k);
                Report r = simulate(cluster, model, l, program, workload_name, o).report;
                runs.emplace_back(r.step_time_s, std::move(r));
            }
            std::stable_sort(runs.begin(), runs.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
            run.report = std::move(runs[(runs.size() + 1) / 2 - 1].second);
        }
        run.limit = explain_limit(run.report, cluster.spec());
    } catch (const InputError& err) {
        run.status = SweepStatus::rejected;
        run.detail = err.what();
        run.reason = numbers_to_n(err.what());
    } catch (...) {
        run.error = std::current_exception();
    }
    return run;
}

}  // namespace sweep_detail

namespace {

using namespace sweep_detail;

/// The rank grid and batch of a layout: with the program signature, what decides its simulation.
std::string execution_key(const Layout& l, std::uint64_t program_hash) {
    return fmt::format("{} {} {} {} {} {} {} {} {} {} {}", l.tp, l.pp, l.dp, l.cp, l.ep, l.expert_tp(), l.vpp,
                       l.micro_batch, l.global_batch, static_cast<int>(l.precision), program_hash);
}

/// The cluster sizes of a sweep: the options' (sorted, repeats dropped) or the topology's own.
std::vector<int> sweep_sizes(const TopologySpec& topology, const SweepOptions& options) {
    std::vector<int> sizes = options.gpus.empty() ? std::vector<int>{topology.gpus()} : options.gpus;
    std::sort(sizes.begin(), sizes.end());
    sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
    for (int g : sizes)
        if (g <= 0 || g % topology.gpus_per_node != 0)
            throw InputError(fmt::format("sweep: {} GPUs is not a positive multiple of {}: {}", g,
                                         topology.name, topology.node_gpus_field()));
    return sizes;
}

Points enumerate_points(const TopologySpec& topology, const ModelSpec& model, const Layout& base,
                        const SweepGrid& grid, const SweepOptions& options) {
    Points pts;
    pts.sizes = sweep_sizes(topology, options);
    // A straggler named by its GPU must exist in every cluster size swept (else the smaller clusters'
    // layouts would all be rejected one by one for it).
    for (const Straggler& st : options.perturbations.stragglers)
        if (st.gpu >= pts.sizes.front())
            throw InputError(
                fmt::format("--straggler {}: gpu = {} is not one of the {} GPUs of the smallest "
                            "cluster swept",
                            clip_for_message(st.text), st.gpu, pts.sizes.front()));
    // So must the fractions' GPUs beside the named ones (one GPU slowed once; the counts do not depend on the
    // seed): refused at once rather than once per layout.
    if (!options.perturbations.stragglers.empty())
        for (const int g : pts.sizes)
            (void)compute_factors(options.perturbations.stragglers, g, options.seed);
    for (std::size_t s = 0; s < pts.sizes.size(); ++s) {
        TopologySpec t = topology;
        t.nodes = pts.sizes[s] / topology.gpus_per_node;
        pts.clusters.push_back(std::make_unique<Cluster>(t, options.perturbations.links));
        std::vector<Layout> layouts = enumerate_layouts(model, base, grid, t.gpus(), t.gpus_per_node);
        if (static_cast<std::int64_t>(pts.entries.size() + layouts.size()) > limits::kMaxSweepPoints)
            throw InputError(
                fmt::format("sweep: the grid holds at least {} layouts over its first {} cluster size(s) "
                            "(--gpus {} adds {}): "
                            "above the limit of {}; sweep fewer sizes, or narrow the grid with --fix",
                            pts.entries.size() + layouts.size(), s + 1, pts.sizes[s], layouts.size(),
                            limits::kMaxSweepPoints));
        for (Layout& l : layouts) {
            SweepEntry& e = pts.entries.emplace_back();
            e.index = pts.entries.size() - 1;
            e.layout = std::move(l);
            e.gpus = t.gpus();
            pts.cluster_of.push_back(s);
        }
    }
    return pts;
}

/// Whether phase 1 screens each point's held piles before building its program (held_piles_overflow): with
/// pruning, without perturbations.
bool screens_held_piles(const SweepOptions& options) {
    return options.perturbations.empty() && options.prune_beyond_top > 0;
}

/// The first part of phase 1 over the points `begin` .. `end` - 1 (screen_point), in index order.
std::vector<PointCheck> screen_points(const Points& pts, const ModelSpec& model, const SweepOptions& options,
                                      std::size_t begin, std::size_t end) {
    const bool held_floor = screens_held_piles(options);
    return spread_map(
        end - begin, options.jobs, options.processes,
        [&](std::size_t k) {
            const std::size_t i = begin + k;
            return screen_point(pts.entries[i].layout, *pts.clusters[pts.cluster_of[i]], model, held_floor,
                                options.min_headroom);
        },
        encode_check, [](const std::string& bytes, std::size_t) { return decode_check(bytes); });
}

/// Phase 1 over every point, after its screening; the checks' results, in index order.
std::vector<PointCheck> check_points(const Points& pts, const ModelSpec& model, const SweepOptions& options,
                                     const std::vector<PointCheck>& screened,
                                     const std::function<void()>& checked) {
    AloneCollectiveTimes alone;  // shared by the points' bounds
    return spread_map(
        pts.entries.size(), options.jobs, options.processes,
        [&](std::size_t i) {
            PointCheck c = check_point(screened[i], pts.entries[i].layout, *pts.clusters[pts.cluster_of[i]],
                                       model, alone);
            checked();
            return c;
        },
        encode_check, [](const std::string& bytes, std::size_t) { return decode_check(bytes); });
}

/// The serial confirmation (the reference): each passed point, in enumeration order, copies the first
/// earlier representative of its execution key whose program is identical, else becomes one.
void plan_serially(const std::vector<SweepEntry>& entries, const std::vector<PointCheck>& checks,
                   const std::vector<std::string>& keys, const ModelSpec& model,
                   std::vector<std::size_t>& copy_of) {
    const std::size_t n = entries.size();
    copy_of.assign(n, n);
    std::map<std::string, std::vector<std::size_t>> reps;
    for (std::size_t i = 0; i < n; ++i) {
        if (checks[i].status != SweepStatus::simulated) continue;
        auto& r = reps[keys[i]];
        const std::string sig = program_signature(build_program(model, entries[i].layout));
        for (std::size_t rep : r)
            if (has_signature(build_program(model, entries[rep].layout), sig)) {
                copy_of[i] = rep;
                break;
            }
        if (copy_of[i] == n) r.push_back(i);
    }
}

/// For each group (its representative first): whether every point's program equals the representative's,
/// the groups compared in parallel (threads and processes).
std::vector<bool> confirm_groups(const std::vector<std::vector<std::size_t>>& groups,
                                 const std::vector<SweepEntry>& entries, const ModelSpec& model,
                                 const SweepOptions& options) {
    return spread_map(
        groups.size(), options.jobs, options.processes,
        [&](std::size_t k) {
            const auto& pts = groups[k];
            const std::string sig = program_signature(build_program(model, entries[pts[0]].layout));
            for (std::size_t m = 1; m < pts.size(); ++m)
                if (!has_signature(build_program(model, entries[pts[m]].layout), sig)) return false;
            return true;
        },
        [](bool ok) { return std::string(ok ? "1" : "0"); },
        [](const std::string& bytes, std::size_t) { return bytes == "1"; });
}

/// The points to simulate, costliest first, and for each other passed point the one it copies (n: none).
/// Points whose programs are identical on the same rank grid (e.g. selective recomputation with flash
/// attention, which recomputes nothing, beside no recomputation; the distributed optimizer at DP = 1) are
/// simulated once: the simulation is deterministic, so the copies are exact. A point is a candidate copy of
/// the first point of its execution key (the rank grid and a hash of the program); every candidate is
/// confirmed by comparing the two programs in full, the keys' groups in parallel (threads and processes).
/// Should a confirmation fail (a hash collision), plan_serially decides, as it would have alone: with every
/// candidate confirmed, both give the same copies. `defer`: the candidates are taken as copies unconfirmed;
/// the caller confirms those it used (copies_hold) and plans again without deferring if one fails (a
/// pruned sweep simulates a few dozen of thousands of points: confirming every group, two program builds
/// each, took half of a small-cluster sweep).
void plan_simulations(const std::vector<SweepEntry>& entries, const std::vector<PointCheck>& checks,
                      const ModelSpec& model, const SweepOptions& options, bool defer,
                      std::vector<std::size_t>& todo, std::vector<std::size_t>& copy_of) {
    const std::size_t n = entries.size();
    todo.clear();
    copy_of.assign(n, n);
    std::vector<std::string> keys(n);
    std::map<std::string, std::size_t> group_of;   // execution key -> group
    std::vector<std::vector<std::size_t>> groups;  // [group] its points, the first the representative
    for (std::size_t i = 0; i < n; ++i) {
        if (checks[i].status != SweepStatus::simulated) continue;
        if (!options.deduplicate) {
            todo.push_back(i);
            continue;
        }
        keys[i] =
            fmt::format("{} {}", entries[i].gpus, execution_key(entries[i].layout, checks[i].program_hash));
        const auto [it, added] = group_of.emplace(keys[i], groups.size());
        if (added) groups.emplace_back();
        groups[it->second].push_back(i);
    }
    std::vector<std::vector<std::size_t>> with_copies;
    if (!defer)
        for (const auto& g : groups)
            if (g.size() > 1) with_copies.push_back(g);
    const std::vector<bool> confirmed = confirm_groups(with_copies, entries, model, options);
    if (std::all_of(confirmed.begin(), confirmed.end(), [](bool ok) { return ok; })) {
        for (const auto& pts : groups)
            for (std::size_t m = 1; m < pts.size(); ++m)
                copy_of[pts[m]] = pts[0];
    } else {
        plan_serially(entries, checks, keys, model, copy_of);
    }
    if (options.deduplicate)
        for (std::size_t i = 0; i < n; ++i)
            if (checks[i].status == SweepStatus::simulated && copy_of[i] == n) todo.push_back(i);
    std::stable_sort(todo.begin(), todo.end(),
                     [&](std::size_t a, std::size_t b) { return checks[a].cost > checks[b].cost; });
}

/// After a sweep planned with deferred confirmation: true when every copy that took a simulation has its
/// runner's program (signatures compared, the groups in parallel) and every member of a pruned group its
/// representative's bound (a copy's bound is its own reason to be pruned; equal programs on one rank grid
/// have equal bounds).
bool copies_hold(const std::vector<SweepEntry>& entries, const std::vector<PointCheck>& checks,
                 const std::vector<std::size_t>& todo, const Phase2& p2, const ModelSpec& model,
                 const SweepOptions& options) {
    const std::size_t n = entries.size();
    std::vector<std::vector<std::size_t>> groups;
    for (std::size_t k = 0; k < todo.size(); ++k) {
        const auto& g = p2.members[k];
        if (p2.pruned[k]) {
            for (std::size_t i : g)
                if (checks[i].lower_bound_s != checks[todo[k]].lower_bound_s) return false;
            continue;
        }
        std::vector<std::size_t> sharing;  // the runner first
        for (std::size_t i : g)
            if (p2.runner[i] != n) sharing.push_back(i);
        if (sharing.size() > 1) groups.push_back(std::move(sharing));
    }
    const std::vector<bool> confirmed = confirm_groups(groups, entries, model, options);
    return std::all_of(confirmed.begin(), confirmed.end(), [](bool ok) { return ok; });
}

/// Phase 2 (run_phase2); then each point's entry: pruned, its memory walk's verdict, or its runner's
/// results, a copy with its own layout and, in one process, its own memory (spread over processes, the
/// reports carry no memory: rank_points gives the best its own). Rethrows the error of the first point in
/// enumeration order.
void simulate_points(Points& pts, const std::vector<PointCheck>& checks, std::vector<std::size_t>& todo,
                     std::vector<std::size_t>& copy_of, bool deferred, const ModelSpec& model,
                     const std::string& workload_name, const SweepOptions& options,
                     const std::function<void()>& simulated) {
    const std::size_t n = pts.entries.size();
    Phase2 p2 = run_phase2(pts, checks, todo, copy_of, model, workload_name, options, simulated);
    if (deferred && !copies_hold(pts.entries, checks, todo, p2, model, options)) {
        plan_simulations(pts.entries, checks, model, options, false, todo, copy_of);
        p2 = run_phase2(pts, checks, todo, copy_of, model, workload_name, options, simulated);
    }
    const bool one_process = !options.processes || options.processes->size() <= 1;
    for (std::size_t i = 0; i < n; ++i) {
        SweepEntry& e = pts.entries[i];
        const PointCheck& c = p2.walked[i] ? p2.memory[i] : checks[i];
        e.status = c.status;
        e.reason = c.reason;
        e.detail = c.detail;
        e.peak_memory_bytes = c.peak_memory_bytes;
        e.peak_stage = c.peak_stage;
        if (c.status != SweepStatus::simulated) continue;
        if (!p2.walked[i]) {
            e.status = SweepStatus::pruned;
            e.reason = fmt::format("lower bound {:.6g} s above the {} step time{}", c.lower_bound_s,
                                   ordinal_best(options.prune_beyond_top),
                                   options.prune_keeps_pareto_front
                                       ? ", and a layout simulated faster and no larger in memory"
                                       : "");
            continue;
        }
        const PointRun& run = p2.runs.at(p2.runner[i]);
        if (run.error) std::rethrow_exception(run.error);  // the first in enumeration order
        e.status = run.status;
        e.reason = run.reason;
        e.detail = run.detail;
        e.limit = run.limit;
        e.report = run.report;
        if (p2.runner[i] == i) continue;
        e.report.layout = e.layout;  // its own layout, and its own memory
        if (one_process)
            e.report.memory = simulate_memory(model, e.layout, build_program(model, e.layout),
                                              pts.clusters[pts.cluster_of[i]]->gpu());
    }
}

/// The work of the layouts that pass the grid checks (classify), summed in one pass over the grid: a passed
/// layout's GPU layer passes are at most 2^23 (check_sizes) and the grid at most limits::kMaxSweepPoints, so
/// the sums fit in 64 bits.
struct GridWork {
    std::size_t layouts = 0;
    std::int64_t gpu_layer_passes = 0;      ///< gpu_layer_passes_per_step, summed
    std::int64_t program_layer_passes = 0;  ///< program_layer_passes, summed
    /// Local experts (model.num_experts / layout.ep), summed: each MoE template of a layout's program holds
    /// one GEMM per local expert and linear layer, built and timed once per program whatever its
    /// micro-batches (at most 65,536 per layout: the sum fits).
    std::int64_t local_experts = 0;
    /// With pruning (screens_held_piles): each layout's held piles come first, from a program of one
    /// micro-batch per stage (held_piles_layout); its own program is built only when they fit the HBM.
    bool screened = false;
    std::int64_t screening_layer_passes = 0;  ///< program_layer_passes of the held_piles_layout, summed
    /// When screened, each point's screening program (program_build_work of its held_piles_layout; 0 for a
    /// point the grid checks reject), in index order: the screening is cut into blocks by it.
    std::vector<std::int64_t> screening_work_of;
    /// The program layer passes built before the grid's own programs (check_first_work): the screening's
    /// programs when screened, else every layout's own; with limits::kSweepProgramPassesPerLocalExpert per
    /// local expert either way.
    std::int64_t first_layer_passes() const {
        return screened ? screening_layer_passes : program_layer_passes;
    }
    std::int64_t first_work() const {
        return first_layer_passes() + limits::kSweepProgramPassesPerLocalExpert * local_experts;
    }
};

GridWork grid_work(const Points& pts, const ModelSpec& model, bool screened) {
    GridWork w;
    w.screened = screened;
    if (screened) w.screening_work_of.assign(pts.entries.size(), 0);
    for (std::size_t i = 0; i < pts.entries.size(); ++i) {
        const Layout& l = pts.entries[i].layout;
        if (!classify(model, l, pts.clusters[pts.cluster_of[i]]->gpus(), nullptr).empty()) continue;
        w.gpu_layer_passes += gpu_layer_passes_per_step(model, l);
        w.program_layer_passes += program_layer_passes(model, l);
        if (screened) {
            w.screening_layer_passes += program_layer_passes(model, held_piles_layout(l));
            w.screening_work_of[i] = program_build_work(model, held_piles_layout(l));
        }
        if (model.moe()) w.local_experts += model.num_experts / std::max(l.ep, 1);
        ++w.layouts;
    }
    return w;
}

/// A sweep under perturbations runs every layout that passes the grid checks (no pruning) over its seeds:
/// refused at once, naming --seeds, when seeds x their GPU layer passes per step pass
/// limits::kMaxGpuLayerPassesPerStudy, the bound of `run --seeds` (scenario_study.cpp).
/// Returns the event bound of each perturbed simulation (SweepOptions::max_events, its default the share of
/// limits::kMaxWhatIfStudyEvents); 0 without perturbations.
std::uint64_t check_study_work(const GridWork& work, const SweepOptions& options) {
    if (options.perturbations.empty()) return 0;
    const std::int64_t passes = work.gpu_layer_passes;
    if (work.layouts == 0) return options.max_events;
    if (static_cast<double>(options.seeds) * static_cast<double>(passes) <=
        static_cast<double>(limits::kMaxGpuLayerPassesPerStudy)) {
        if (options.max_events > 0) return options.max_events;
        const double share = static_cast<double>(limits::kMaxWhatIfStudyEvents) /
                             (static_cast<double>(work.layouts) * static_cast<double>(options.seeds));
        return static_cast<std::uint64_t>(std::max(1.0, std::floor(share)));
    }
    throw InputError(fmt::format(
        "sweep: --seeds = {}: {} seeds of the {} layouts that pass the grid checks ({} GPU layer "
        "passes per step in all) pass the limit of {} for a what-if study (limits.hpp); at most {} "
        "seeds here (--fix and --vary narrow the grid)",
        options.seeds, options.seeds, work.layouts, passes, limits::kMaxGpuLayerPassesPerStudy,
        limits::kMaxGpuLayerPassesPerStudy / passes));
}

/// Every grid point that passes the grid checks has a program built, hashed and bounded (check_points), at a
/// cost that grows with its program's layer passes (program_layer_passes) and, for an MoE model, its local
/// experts (program_build_work). Without pruning that is the layout's own program; with pruning, first the
/// program of one micro-batch per stage (held_piles_layout), and the layout's own only where its held piles
/// fit (check_built_work). Refused at once when the first programs' work (GridWork::first_work) passes
/// limits::kMaxSweepProgramLayerPasses, naming the global batch, or model.num_experts when the experts'
/// share alone passes half the limit.
void check_first_work(const GridWork& work, const ModelSpec& model) {
    if (work.first_work() <= limits::kMaxSweepProgramLayerPasses) return;
    const std::int64_t experts_work = limits::kSweepProgramPassesPerLocalExpert * work.local_experts;
    const std::string screening = work.screened ? " to screen their memory" : "";
    if (experts_work > limits::kMaxSweepProgramLayerPasses / 2)
        throw InputError(fmt::format(
            "sweep: model.num_experts = {}: the {} layouts that pass the grid checks hold {} local experts "
            "(model.num_experts / layout.ep, summed; {} program layer pass{} each) and {} program layer "
            "passes{}, {} in all, above the limit of {} (limits.hpp kMaxSweepProgramLayerPasses); --fix ep=N "
            "(a larger EP) or --fix / --vary narrow it",
            model.num_experts, work.layouts, work.local_experts, limits::kSweepProgramPassesPerLocalExpert,
            limits::kSweepProgramPassesPerLocalExpert == 1 ? "" : "es", work.first_layer_passes(), screening,
            work.first_work(), limits::kMaxSweepProgramLayerPasses));
    throw InputError(fmt::format(
        "sweep: the {} layouts that pass the grid checks hold {} program layer passes{} ((model.layers + "
        "3 * model.mtp_layers) * {}, summed{}), above the limit of {} (limits.hpp "
        "kMaxSweepProgramLayerPasses); {}--fix / --vary narrow it",
        work.layouts, work.first_work(), screening, work.screened ? "pp" : "micro-batches per step",
        work.local_experts > 0
            ? fmt::format(", with {} per local expert", limits::kSweepProgramPassesPerLocalExpert)
            : std::string(),
        limits::kMaxSweepProgramLayerPasses,
        work.screened ? "" : "a smaller --global-batch (layout.global_batch) or "));
}

/// After the screening (screen_points): the programs still to build are those of the layouts it passed (with
/// pruning, those whose held piles fit); the work of phase 1 (SweepBuildWork). With pruning, refused before
/// any is built when their work (program_build_work, summed) and the screening's pass
/// limits::kMaxSweepProgramLayerPasses, naming the global batch (without, check_first_work bounded it all).
SweepBuildWork check_built_work(const GridWork& work, const Points& pts,
                                const std::vector<PointCheck>& screened, const ModelSpec& model) {
    SweepBuildWork b;
    b.layouts = work.layouts;
    b.screening_work = work.screened ? work.first_work() : 0;
    std::int64_t own = 0;
    for (std::size_t i = 0; i < pts.entries.size(); ++i) {
        if (screened[i].status != SweepStatus::simulated) continue;
        ++b.built;
        own += program_build_work(model, pts.entries[i].layout);
    }
    b.work = b.screening_work + own;
    if (b.work <= limits::kMaxSweepProgramLayerPasses) return b;
    throw InputError(fmt::format(
        "sweep: the {} of {} layouts whose parameters, gradients and optimizer state fit in memory hold {} "
        "program layer passes ((model.layers + 3 * model.mtp_layers) * micro-batches per step, summed{}), {} "
        "with their screening, above the limit of {} (limits.hpp kMaxSweepProgramLayerPasses); a smaller "
        "--global-batch or --fix / --vary narrow it",
        b.built, work.layouts, own,
        work.local_experts > 0
            ? fmt::format("; {} per local expert", limits::kSweepProgramPassesPerLocalExpert)
            : std::string(),
        b.work, limits::kMaxSweepProgramLayerPasses));
}

/// The result's header fields: names, sizes, HBM, batch, what-if perturbations, time-to-train options.
SweepResult result_header(const TopologySpec& topology, const Points& pts, const Layout& base,
                          const std::string& workload_name, const SweepOptions& options) {
    SweepResult res;
    res.topology_name = topology.name;
    res.workload_name = workload_name;
    res.gpu_name = pts.clusters.front()->gpu().name;
    res.gpus = pts.sizes.front();
    res.sizes = pts.sizes;
    res.global_batch = base.global_batch;
    res.hbm_bytes = pts.clusters.front()->gpu().hbm_bytes;
    res.min_headroom = options.min_headroom;
    res.train_tokens = options.train_tokens;
    res.gpu_hour_price_usd = options.gpu_hour_price_usd;
    if (!options.perturbations.empty()) {
        for (const auto& st : options.perturbations.stragglers)
            res.perturbations.push_back("--straggler " + st.text);
        if (options.perturbations.jitter)
            res.perturbations.push_back("--jitter " + options.perturbations.jitter->text);
        for (const auto& l : options.perturbations.links)
            res.perturbations.push_back("--link " + l.text);
        res.seeds = options.seeds;
    }
    return res;
}

/// The entries ranked into `res`: simulated by (step time, canonical_string), then out of memory, then
/// rejected, each in enumeration order; the reject counts. The best report gets its memory when the
/// reports came without (spread over processes).
void rank_points(std::vector<SweepEntry>& entries, const ModelSpec& model, const Points& pts,
                 SweepResult& res) {
    std::vector<SweepEntry> simulated, oom, rejected, pruned;
    std::map<std::string, std::size_t> counts;
    for (auto& e : entries) {
        if (e.status == SweepStatus::pruned) {
            pruned.push_back(std::move(e));
            continue;
        }
        if (e.status != SweepStatus::simulated) ++counts[e.reason];
        (e.status == SweepStatus::simulated       ? simulated
         : e.status == SweepStatus::out_of_memory ? oom
                                                  : rejected)
            .push_back(std::move(e));
    }
    std::vector<std::string> keys(simulated.size());
    std::vector<std::size_t> order(simulated.size());
    for (std::size_t i = 0; i < simulated.size(); ++i) {
        keys[i] = canonical_string(simulated[i].layout);
        order[i] = i;
    }
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const double ta = simulated[a].report.step_time_s, tb = simulated[b].report.step_time_s;
        if (ta != tb) return ta < tb;
        return keys[a] < keys[b];
    });
    res.simulated = simulated.size();
    res.out_of_memory = oom.size();
    res.rejected = rejected.size();
    res.pruned = pruned.size();
    res.entries.reserve(entries.size());
    for (auto i : order)
        res.entries.push_back(std::move(simulated[i]));
    for (auto& e : pruned)
        res.entries.push_back(std::move(e));
    for (auto& e : oom)
        res.entries.push_back(std::move(e));
    for (auto& e : rejected)
        res.entries.push_back(std::move(e));
    res.reject_counts.assign(counts.begin(), counts.end());
    std::stable_sort(res.reject_counts.begin(), res.reject_counts.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    if (res.simulated > 0 && res.entries.front().report.memory.stages.empty()) {
        SweepEntry& best = res.entries.front();
        const auto size = std::find(pts.sizes.begin(), pts.sizes.end(), best.gpus) - pts.sizes.begin();
        best.report.memory = simulate_memory(model, best.layout, build_program(model, best.layout),
                                             pts.clusters[static_cast<std::size_t>(size)]->gpu());
    }
}

/// The screening's work per block (GridWork::screening_work_of): 1/64 of the build bound, about 0.3 s of CPU.
constexpr std::int64_t kScreeningBlockWork = limits::kMaxSweepProgramLayerPasses / 64;

/// The screening (screen_points) in blocks of about kScreeningBlockWork program layer passes, in index order
/// (the same blocks for any --jobs and processes). After each block the programs still to build are those
/// of the layouts screened so far that fit, plus those of the layouts not yet screened that do: when the
/// first part alone, with the whole screening, passes limits::kMaxSweepProgramLayerPasses, check_built_work
/// would refuse the sweep after the screening, so it is refused now. The 14-size Qwen3-30B-A3B sweep on B200
/// paid its whole screening (6.3-7.0 s of CPU) to be refused (round 13's open item; round 14).
std::vector<PointCheck> screen_in_blocks(const GridWork& work, const Points& pts, const ModelSpec& model,
                                         const SweepOptions& options) {
    const std::size_t n = pts.entries.size();
    if (!work.screened) return screen_points(pts, model, options, 0, n);
    std::vector<PointCheck> screened;
    screened.reserve(n);
    std::int64_t own = 0;
    std::size_t built = 0, layouts_screened = 0;
    for (std::size_t begin = 0; begin < n;) {
        std::size_t end = begin;
        for (std::int64_t block = 0; end < n && (end == begin || block < kScreeningBlockWork); ++end) {
            block += work.screening_work_of[end];
            if (work.screening_work_of[end] > 0) ++layouts_screened;
        }
        std::vector<PointCheck> part = screen_points(pts, model, options, begin, end);
        for (std::size_t k = 0; k < part.size(); ++k) {
            if (part[k].status != SweepStatus::simulated) continue;
            ++built;
            own += program_build_work(model, pts.entries[begin + k].layout);
        }
        std::move(part.begin(), part.end(), std::back_inserter(screened));
        begin = end;
        if (begin < n && work.first_work() + own > limits::kMaxSweepProgramLayerPasses)
            throw InputError(fmt::format(
                "sweep: {} of the first {} of {} layouts screened fit in memory (parameters, gradients, "
                "optimizer state) and hold {} program layer passes (layers x micro-batches, summed{}), {} "
                "with "
                "the whole screening, above the limit of {} (limits.hpp): refused before the other {} are "
                "screened; a smaller --global-batch or --fix / --vary narrow it",
                built, layouts_screened, work.layouts, own,
                work.local_experts > 0
                    ? fmt::format("; {} per local expert", limits::kSweepProgramPassesPerLocalExpert)
                    : std::string(),
                work.first_work() + own, limits::kMaxSweepProgramLayerPasses,
                work.layouts - layouts_screened));
    }
    return screened;
}

/// The bounds checked before any layout's own program is built: the study's (check_study_work: `bounded`
/// gets its event bound), the first programs' (check_first_work), then, during and after the screening
/// (`screened`, screen_in_blocks), the programs still to build (check_built_work).
SweepBuildWork screen_within_bounds(const Points& pts, const ModelSpec& model, const SweepOptions& options,
                                    SweepOptions& bounded, std::vector<PointCheck>& screened) {
    const GridWork work = grid_work(pts, model, screens_held_piles(options));
    bounded.max_events = check_study_work(work, options);
    check_first_work(work, model);
    screened = screen_in_blocks(work, pts, model, bounded);
    return check_built_work(work, pts, screened, model);
}

}  // namespace

SweepBuildWork sweep_build_work(const TopologySpec& topology, const ModelSpec& model, const Layout& base,
                                const SweepGrid& grid, const SweepOptions& options) {
    const Points pts = enumerate_points(topology, model, base, grid, options);
    (void)run_compute_model(topology, pts.clusters.front()->gpu(), base);
    SweepOptions bounded = options;
    std::vector<PointCheck> screened;
    return screen_within_bounds(pts, model, options, bounded, screened);
}

SweepResult run_sweep(const TopologySpec& topology, const ModelSpec& model, const Layout& base,
                      const SweepGrid& grid, const std::string& workload_name, const SweepOptions& options) {
    Points pts = enumerate_points(topology, model, base, grid, options);
    // The grid does not vary the precision or the FP8 recipe: one the GPU lacks would reject every layout
    // (or, pruning, count them out of memory first), so it is the input's error, as for `run`.
    (void)run_compute_model(topology, pts.clusters.front()->gpu(), base);
    const std::size_t n = pts.entries.size();
    // Progress in one process only: spread over processes, each sees its own share.
    const bool report = options.progress && (!options.processes || options.processes->size() <= 1);
    std::mutex progress_mutex;
    SweepProgress progress;
    progress.layouts = n;
    auto step = [&](std::size_t SweepProgress::*counter) {
        if (!report) return;
        const std::lock_guard<std::mutex> lock(progress_mutex);
        ++(progress.*counter);
        options.progress(progress);
    };
    SweepOptions bounded = options;
    std::vector<PointCheck> screened;
    (void)screen_within_bounds(pts, model, options, bounded, screened);
    const SweepOptions& opts = bounded;
    const std::vector<PointCheck> checks =
        check_points(pts, model, opts, screened, [&] { step(&SweepProgress::checked); });
    std::vector<std::size_t> todo, copy_of;
    // Pruning simulates few points: their copies are confirmed after (copies_hold), not every group's now.
    const bool defer = opts.deduplicate && opts.perturbations.empty() && opts.prune_beyond_top > 0;
    plan_simulations(pts.entries, checks, model, opts, defer, todo, copy_of);
    if (report) {
        const std::lock_guard<std::mutex> lock(progress_mutex);
        progress.to_simulate = todo.size();
        progress.checks_done = true;
        options.progress(progress);
    }
    simulate_points(pts, checks, todo, copy_of, defer, model, workload_name, opts,
                    [&] { step(&SweepProgress::simulated); });
    SweepResult res = result_header(topology, pts, base, workload_name, options);
    res.pruned_beyond_top = options.perturbations.empty() ? options.prune_beyond_top : 0;
    res.pruned_keeps_pareto_front = res.pruned_beyond_top > 0 && options.prune_keeps_pareto_front;
    rank_points(pts.entries, model, pts, res);
    return res;
}

}  // namespace trainsim
