// The sweep's pruning (SweepOptions::prune_beyond_top): the bound it prunes by (step_time_lower_bound_s)
// holds the busiest stage's compute, the pipeline's fill and drain and every collective alone on the fabric,
// and never exceeds a simulated step time; a pruned sweep ranks the same top N, per cluster size, as the
// exhaustive one, whatever the threads.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "test_helpers.hpp"
#include "trainsim/cluster.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/html_report.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/sweep.hpp"

using namespace trainsim;

namespace {

SweepGrid pruning_grid() {
    SweepGrid g;
    for (const char* r : {"micro_batch=1,2,4", "recompute=none,full", "vpp=1,2"})
        restrict_sweep_grid(g, r, "--vary");
    return g;
}

/// The busiest stage's compute time, summed here from the public program API as simulate() times it.
double compute_of_busiest_stage(const TopologySpec& topo, const ModelSpec& m, const Layout& l) {
    const Cluster cluster(topo);
    Program p = build_program(m, l);
    time_program(p, run_compute_model(topo, cluster.gpu(), l), m, l);
    double busiest = 0;
    for (const auto& st : p.stages) {
        double s = 0;
        for (const auto& op : st.ops)
            if (op.kind == OpKind::compute) s += p.segments[static_cast<std::size_t>(op.segment)].seconds;
        busiest = std::max(busiest, s);
    }
    return busiest;
}

/// 4 layers (the first dense), 16 experts top-2, hidden 512, seq 1024: an MoE small enough to simulate on
/// small_topology(2) in milliseconds, with all-to-alls that matter.
ModelSpec small_moe() {
    ModelSpec m = trainsim::test::small_gpt(4, 512, 8, 1024, 4096);
    m.name = "small-moe";
    m.num_experts = 16;
    m.moe_top_k = 2;
    m.moe_first_dense_layers = 1;
    return m;
}

Layout moe_layout(int pp, int dp, int ep, int vpp, bool overlap) {
    Layout l;
    l.pp = pp;
    l.dp = dp;
    l.ep = ep;
    l.vpp = vpp;
    l.micro_batch = 1;
    l.global_batch = 4 * dp;
    l.moe_a2a_overlap = overlap;
    return l;
}

/// A sweep's entries by enumeration index.
std::map<std::size_t, const SweepEntry*> entries_by_index(const SweepResult& r) {
    std::map<std::size_t, const SweepEntry*> out;
    for (const SweepEntry& e : r.entries)
        out[e.index] = &e;
    return out;
}

/// The simulated entries of each size: (gpus, canonical layout, step time), best first.
std::vector<std::string> top_of_each_size(const SweepResult& r, std::size_t n) {
    std::vector<std::string> out;
    for (int g : r.sizes) {
        std::size_t k = 0;
        for (std::size_t i = 0; i < r.simulated && k < n; ++i)
            if (r.entries[i].gpus == g) {
                out.push_back(std::to_string(g) + " " + canonical_string(r.entries[i].layout) + " " +
                              std::to_string(r.entries[i].report.step_time_s));
                ++k;
            }
    }
    return out;
}

}  // namespace

TEST_CASE("sweep pruning: the bound is at least the busiest GPU's compute and at most the simulated step") {
    const TopologySpec topo = trainsim::test::small_topology(2);  // 16 GPUs on 2 nodes
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    Layout base;
    base.global_batch = 32;
    const SweepResult r = run_sweep(topo, m, base, pruning_grid(), "tiny", SweepOptions{});
    REQUIRE(r.simulated > 20);
    CHECK(r.pruned == 0);
    for (std::size_t i = 0; i < r.simulated; ++i) {
        const auto& e = r.entries[i];
        const double compute = compute_of_busiest_stage(topo, m, e.layout);
        const double bound = step_time_lower_bound_s(Cluster(topo), m, e.layout);
        CHECK(compute > 0);
        CHECK(bound >= compute * (1 - 1e-5));  // less a picosecond per rounded duration
        CHECK(bound <= e.report.step_time_s * (1 + 1e-9));
    }
}

TEST_CASE(
    "sweep pruning: the bound holds the pipeline and the blocking all-to-alls, below the simulated step") {
    const TopologySpec topo = trainsim::test::small_topology(2);  // 16 GPUs on 2 nodes of 8
    const Cluster cluster(topo);
    struct Case {
        const char* name;
        ModelSpec model;
        Layout layout;
        bool above_compute;  ///< the bound exceeds the busiest stage's compute by more than 1%
    };
    Layout dense_pp4 = trainsim::test::tp2_pp2_dp4(1, 16);
    dense_pp4.pp = 4;
    dense_pp4.dp = 2;
    const std::vector<Case> cases = {
        {"EP 16 over both nodes", small_moe(), moe_layout(1, 16, 16, 1, false), true},
        {"EP 8 in a node, PP 2", small_moe(), moe_layout(2, 8, 8, 1, false), true},
        {"EP 4, PP 2, VPP 2", small_moe(), moe_layout(2, 8, 4, 2, false), true},
        {"EP 16, all-to-all overlapped", small_moe(), moe_layout(1, 16, 16, 1, true), false},
        {"dense, PP 4, 8 micro-batches", trainsim::test::small_gpt(8, 1024, 16, 512, 8192), dense_pp4, true},
    };
    for (const Case& c : cases) {
        CAPTURE(c.name);
        const double bound = step_time_lower_bound_s(cluster, c.model, c.layout);
        const double compute = compute_of_busiest_stage(topo, c.model, c.layout);
        const double step = simulate(cluster, c.model, c.layout, build_program(c.model, c.layout), "bound")
                                .report.step_time_s;
        CHECK(bound >= compute * (1 - 1e-5));  // less a picosecond per rounded duration
        CHECK(bound <= step * (1 + 1e-9));
        if (c.above_compute) CHECK(bound > 1.01 * compute);
    }
}

TEST_CASE("sweep pruning: the top N of each size are the exhaustive sweep's, for any number of threads") {
    const TopologySpec topo = trainsim::test::small_topology(2);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    Layout base;
    base.global_batch = 16;
    SweepOptions all;
    all.gpus = {8, 16};
    {
        // A headroom that the median layout just fits, so that half of them count as out of memory (the peaks
        // of the 16-GPU layouts: the sanitizer build runs this test slowly).
        SweepOptions one_size = all;
        one_size.gpus = {16};
        const SweepResult free = run_sweep(topo, m, base, pruning_grid(), "tiny", one_size);
        std::vector<double> peaks;
        for (const SweepEntry& e : free.entries)
            if (e.status == SweepStatus::simulated) peaks.push_back(e.peak_memory_bytes);
        REQUIRE(peaks.size() > 4);
        std::sort(peaks.begin(), peaks.end());
        all.min_headroom = 1 - peaks[peaks.size() / 2] / free.hbm_bytes;
    }
    SweepOptions pruned_one = all, pruned_two = all;
    pruned_one.prune_beyond_top = pruned_two.prune_beyond_top = 3;
    pruned_two.jobs = 2;
    const SweepResult a = run_sweep(topo, m, base, pruning_grid(), "tiny", all);
    const SweepResult b = run_sweep(topo, m, base, pruning_grid(), "tiny", pruned_one);
    const SweepResult c = run_sweep(topo, m, base, pruning_grid(), "tiny", pruned_two);
    CHECK(b.pruned > 0);
    // A pruned layout is neither simulated nor walked for memory: it may be one the exhaustive sweep found
    // out of memory. Every layout the pruned sweep walked has the exhaustive sweep's verdict.
    CHECK(b.simulated + b.pruned + b.out_of_memory == a.simulated + a.out_of_memory);
    CHECK(b.out_of_memory <= a.out_of_memory);
    CHECK(b.out_of_memory < a.out_of_memory);  // pruning skipped some walks of layouts that do not fit
    CHECK(b.rejected == a.rejected);
    const auto exhaustive = entries_by_index(a);
    for (const SweepEntry& e : b.entries) {
        const SweepEntry& x = *exhaustive.at(e.index);
        if (e.status == SweepStatus::pruned) {
            CHECK(x.status != SweepStatus::rejected);
        } else {
            CHECK(x.status == e.status);
            CHECK(x.peak_memory_bytes == e.peak_memory_bytes);
        }
    }
    CHECK(b.entries.size() == a.entries.size());
    CHECK(top_of_each_size(b, 3) == top_of_each_size(a, 3));
    CHECK(format_sweep_text(b, 3) == format_sweep_text(c, 3));
    CHECK(sweep_csv(b) == sweep_csv(c));
    // Pruned layouts are listed after the simulated ones with their status, and no memory.
    for (std::size_t i = b.simulated; i < b.simulated + b.pruned; ++i) {
        CHECK(b.entries[i].status == SweepStatus::pruned);
        CHECK(b.entries[i].peak_memory_bytes == 0);
    }
    CHECK(format_sweep_text(b, 3).find("pruned: ") != std::string::npos);
    CHECK(format_sweep_text(a, 3).find("pruned: ") == std::string::npos);
}

TEST_CASE("sweep pruning keeping the Pareto front: the exhaustive sweep's front and top N, any threads") {
    // With --html (prune_keeps_pareto_front) a layout above the bar is pruned only when a simulated one is
    // faster and no larger: the page's Pareto front of step time against peak memory is the exhaustive
    // sweep's, point for point, and so are the top N; layouts kept have the exhaustive verdicts and memory.
    const TopologySpec topo = trainsim::test::small_topology(2);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    Layout base;
    base.global_batch = 16;
    SweepOptions all;
    all.gpus = {8, 16};
    const SweepResult a = run_sweep(topo, m, base, pruning_grid(), "tiny", all);
    const auto front_of = [](const SweepResult& r) {
        std::vector<std::string> out;
        for (std::size_t i : sweep_pareto_front(r))
            out.push_back(std::to_string(r.entries[i].gpus) + " " + canonical_string(r.entries[i].layout) +
                          " " + std::to_string(r.entries[i].report.step_time_s) + " " +
                          std::to_string(r.entries[i].peak_memory_bytes));
        return out;
    };
    REQUIRE(front_of(a).size() > 2);
    const auto exhaustive = entries_by_index(a);
    std::vector<std::string> outputs;
    for (int jobs : {1, 3}) {
        CAPTURE(jobs);
        SweepOptions o = all;
        o.jobs = jobs;
        o.prune_beyond_top = 2;
        o.prune_keeps_pareto_front = true;
        const SweepResult b = run_sweep(topo, m, base, pruning_grid(), "tiny", o);
        CHECK(b.pruned > 0);
        CHECK(b.pruned_keeps_pareto_front);
        CHECK(b.simulated < a.simulated);
        CHECK(front_of(b) == front_of(a));
        CHECK(top_of_each_size(b, 2) == top_of_each_size(a, 2));
        for (const SweepEntry& e : b.entries) {
            const SweepEntry& x = *exhaustive.at(e.index);
            CAPTURE(canonical_string(e.layout));
            if (e.status == SweepStatus::pruned) {
                CHECK(x.status != SweepStatus::rejected);
                CHECK(e.reason.find("faster and no larger") != std::string::npos);
                // Dominated: an exhaustive layout faster and no larger in memory.
                if (x.status == SweepStatus::simulated)
                    CHECK(std::any_of(a.entries.begin(), a.entries.end(), [&](const SweepEntry& y) {
                        return y.status == SweepStatus::simulated &&
                               y.report.step_time_s < x.report.step_time_s &&
                               y.peak_memory_bytes <= x.peak_memory_bytes;
                    }));
            } else {
                CHECK(x.status == e.status);
                CHECK(x.peak_memory_bytes == e.peak_memory_bytes);
                if (e.status == SweepStatus::simulated) CHECK(x.report.step_time_s == e.report.step_time_s);
            }
        }
        outputs.push_back(sweep_csv(b) + format_sweep_text(b, 2));
    }
    CHECK(outputs[0] == outputs[1]);
    CHECK(outputs[0].find("none is on the Pareto front") != std::string::npos);
}

TEST_CASE("sweep pruning: the threads simulate exactly the layouts kept, the front's and the top's") {
    // The groups of phase 2 are simulated only once known to be kept by the final rule (a bound at most a
    // floor under the final bar, or, keeping the front, a fitting member that no simulated or pending layout
    // can dominate); the others wait (sweep_phase2.cpp ByBound). No simulation is dropped at the end, for
    // any number of threads: every simulation is a simulated entry (deduplicate off: one simulation per
    // layout). Before, a thread simulated what the other's pending run would have pruned (this check
    // failed 2 times in 3 on 2 threads). The outputs are the same for any threads.
    const TopologySpec topo = trainsim::test::small_topology(2);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    Layout base;
    base.global_batch = 16;
    for (const auto& [front_case, top_case] : std::vector<std::pair<bool, std::size_t>>{
             {false, 2}, {false, 6}, {true, 2}, {true, 4}, {true, 6}, {true, 8}}) {
        // Copies: clang 14 does not let CAPTURE's lambda refer to a structured binding.
        const bool front = front_case;
        const std::size_t top = top_case;
        CAPTURE(front);
        CAPTURE(top);
        SweepOptions o;
        o.gpus = {8, 16};
        o.deduplicate = false;
        o.prune_beyond_top = top;
        o.prune_keeps_pareto_front = front;
        std::vector<std::string> outputs;
        for (int jobs : {1, 2, 3}) {
            CAPTURE(jobs);
            o.jobs = jobs;
            std::size_t simulations = 0;
            o.progress = [&](const SweepProgress& p) { simulations = std::max(simulations, p.simulated); };
            const SweepResult r = run_sweep(topo, m, base, pruning_grid(), "tiny", o);
            REQUIRE(r.pruned > 0);
            CHECK(simulations == r.simulated);
            outputs.push_back(sweep_csv(r) + format_sweep_text(r, top) + sweep_html(r, "tiny"));
        }
        CHECK(outputs[0] == outputs[1]);
        CHECK(outputs[0] == outputs[2]);
    }
}

TEST_CASE("sweep pruning: a layout is kept iff its bound is at most the final N-th best of its size") {
    // What a pruned sweep keeps does not depend on how far its threads ran beyond the bar: every layout
    // simulated has its bound at most the N-th best step time of its size, every
    // pruned one above it (sweep_phase2.cpp).
    const TopologySpec topo = trainsim::test::small_topology(2);
    const ModelSpec m = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    Layout base;
    base.global_batch = 16;
    SweepOptions o;
    o.prune_beyond_top = 3;
    for (int jobs : {1, 3}) {
        CAPTURE(jobs);
        o.jobs = jobs;
        const SweepResult r = run_sweep(topo, m, base, pruning_grid(), "tiny", o);
        REQUIRE(r.simulated >= 3);
        REQUIRE(r.pruned > 0);
        const double bar = r.entries[2].report.step_time_s;  // one size: the third best
        const Cluster cluster(topo);
        for (const SweepEntry& e : r.entries) {
            if (e.status == SweepStatus::rejected) continue;
            CAPTURE(canonical_string(e.layout));
            const double bound = step_time_lower_bound_s(cluster, m, e.layout);
            if (e.status == SweepStatus::pruned)
                CHECK(bound > bar);
            else if (e.status == SweepStatus::simulated)
                CHECK(bound <= bar);
        }
    }
}

TEST_CASE(
    "sweep pruning: the bound stays below the simulated step with TP, CP, DP and EP collectives timed") {
    // The bound times every collective of a stage's first rank alone on the fabric: TP and CP collectives
    // (with and without TE's overlap), DP buckets overlapped or not, ZeRO-3/FSDP gathers (Megatron,
    // DeepSpeed, torchtitan's FSDP2, Composer's FSDP), the EP all-to-alls. Each variant's whole sweep,
    // unpruned.
    const TopologySpec topo = trainsim::test::small_topology(2);  // 16 GPUs on 2 nodes
    struct Variant {
        const char* name;
        ModelSpec model;
        Layout base;
        std::vector<const char*> vary;
    };
    std::vector<Variant> variants;
    const ModelSpec dense = trainsim::test::small_gpt(4, 256, 16, 128, 1024);
    Layout overlap;
    overlap.global_batch = 32;
    overlap.overlap_grad_reduce = overlap.overlap_param_gather = overlap.tp_comm_overlap = true;
    variants.push_back(
        {"TP, CP, DP overlapped", dense, overlap, {"micro_batch=2", "cp=1,2", "recompute=none", "vpp=1,2"}});
    Layout plain;
    plain.global_batch = 32;
    variants.push_back(
        {"TP, CP, DP exposed", dense, plain, {"micro_batch=2", "cp=1,2", "recompute=none", "vpp=1"}});
    for (Framework f :
         {Framework::megatron, Framework::deepspeed, Framework::torchtitan, Framework::composer}) {
        Layout z3 = plain;
        z3.zero_stage = 3;
        z3.framework = f;
        variants.push_back({"ZeRO-3", dense, z3, {"micro_batch=2", "pp=1", "recompute=none"}});
    }
    Layout moe = plain;
    moe.global_batch = 16;
    variants.push_back({"EP", small_moe(), moe, {"micro_batch=1", "recompute=none", "vpp=1"}});
    for (const Variant& v : variants) {
        CAPTURE(v.name);
        SweepGrid g;
        for (const char* r : v.vary)
            restrict_sweep_grid(g, r, "--vary");
        const SweepResult r = run_sweep(topo, v.model, v.base, g, "bound", SweepOptions{});
        REQUIRE(r.simulated > 3);
        for (std::size_t i = 0; i < r.simulated; ++i) {
            const auto& e = r.entries[i];
            CAPTURE(canonical_string(e.layout));
            CHECK(step_time_lower_bound_s(Cluster(topo), v.model, e.layout) <=
                  e.report.step_time_s * (1 + 1e-9));
        }
    }
}

TEST_CASE("sweep pruning: layouts whose held piles pass the HBM are out of memory without their walk") {
    // ~19 B parameters (24 layers of hidden 8192) on 16 GPUs: parameters and gradients alone pass 80 GB on
    // one GPU unless TP x PP spreads them. With pruning those layouts are out of memory from the held piles
    // of a one-micro-batch program; the exhaustive sweep walks them. Same verdicts and reasons; the floor is
    // under the walk's peak.
    const TopologySpec topo = trainsim::test::small_topology(2);
    const ModelSpec m = trainsim::test::small_gpt(24, 8192, 64, 256, 32000);
    Layout base;
    base.global_batch = 16;
    SweepGrid g;
    for (const char* r : {"micro_batch=1", "recompute=full", "vpp=1", "sequence_parallel=true"})
        restrict_sweep_grid(g, r, "--vary");
    SweepOptions all, pruned = all;
    pruned.prune_beyond_top = 2;
    const SweepResult a = run_sweep(topo, m, base, g, "big", all);
    const SweepResult b = run_sweep(topo, m, base, g, "big", pruned);
    REQUIRE(a.out_of_memory > 0);
    REQUIRE(a.simulated > 0);
    CHECK(top_of_each_size(b, 2) == top_of_each_size(a, 2));
    const auto exhaustive = entries_by_index(a);
    std::size_t floored = 0;
    for (const SweepEntry& e : b.entries) {
        if (e.status != SweepStatus::out_of_memory) continue;
        const SweepEntry& x = *exhaustive.at(e.index);
        CAPTURE(canonical_string(e.layout));
        CHECK(x.status == SweepStatus::out_of_memory);
        CHECK(x.reason == e.reason);
        CHECK(e.peak_memory_bytes > a.hbm_bytes);
        CHECK(e.peak_memory_bytes <= x.peak_memory_bytes);
        if (e.peak_memory_bytes < x.peak_memory_bytes) ++floored;
    }
    CHECK(floored > 0);
}

namespace {

/// A shipped workload on a shipped topology of `nodes` nodes, as `sweep --topology T --workload W --set
/// topology.nodes=N` reads them.
struct SweepPreset {
    TopologySpec topology;
    Workload workload;
};

SweepPreset sweep_preset(const std::string& topology, const std::string& workload, int nodes) {
    const std::string src = TRAINSIM_SOURCE_DIR;
    const std::string t = src + "/" + topology, w = src + "/" + workload;
    SweepPreset p{parse_topology(read_json_file(t), t), parse_workload(read_json_file(w), w)};
    p.topology.nodes = nodes;
    return p;
}

}  // namespace

TEST_CASE(
    "sweep bound: the default sweep of Qwen3-30B-A3B on its 16 H100 is admitted; only the layouts whose held "
    "piles fit build their own programs") {
    const SweepPreset p = sweep_preset("topologies/dgx-h100.json", "workloads/qwen3-30b-a3b.json", 2);
    SweepOptions o;
    o.jobs = 2;
    o.prune_beyond_top = 10;  // the CLI's default --top
    SweepBuildWork w;
    REQUIRE_NOTHROW(w = sweep_build_work(p.topology, p.workload.model, p.workload.layout, SweepGrid{}, o));
    CHECK(w.built > 0);
    CHECK(w.built < w.layouts);  // the others' parameters, gradients and optimizer state pass 80 GB
    CHECK(w.screening_work > 0);
    CHECK(w.work > w.screening_work);
    CHECK(w.work <= limits::kMaxSweepProgramLayerPasses);
    // Every layout's program, as an exhaustive sweep builds them (no screening): past the limit, refused
    // before any is built, naming the global batch.
    o.prune_beyond_top = 0;
    const std::string why = trainsim::test::message_of<InputError>(
        [&] { (void)sweep_build_work(p.topology, p.workload.model, p.workload.layout, SweepGrid{}, o); });
    CHECK(trainsim::test::contains(
        why, fmt::format("sweep: the {} layouts that pass the grid checks hold", w.layouts)));
    CHECK(trainsim::test::contains(why, "kMaxSweepProgramLayerPasses"));
    CHECK(trainsim::test::contains(why, "--global-batch"));
}

TEST_CASE(
    "sweep bound: a toy MoE of 65,536 experts on 16 GPUs is refused before any program is built, naming "
    "model.num_experts") {
    SweepPreset p = sweep_preset("topologies/dgx-a100.json", "tests/e2e/data/tiny_moe.json", 2);
    p.workload.model.num_experts = 65536;
    SweepOptions o;
    o.prune_beyond_top = 10;
    const std::string why = trainsim::test::message_of<InputError>(
        [&] { (void)sweep_build_work(p.topology, p.workload.model, p.workload.layout, SweepGrid{}, o); });
    CHECK(trainsim::test::contains(why, "sweep: model.num_experts = 65536: the "));
    CHECK(trainsim::test::contains(
        why, "local experts (model.num_experts / layout.ep, summed; 2 program layer passes each)"));
    CHECK(trainsim::test::contains(
        why, fmt::format("above the limit of {}", limits::kMaxSweepProgramLayerPasses)));
    // With its programs' memory screened, the screening alone is past the limit: its local experts are built
    // whether or not the layout's own program follows.
    CHECK(trainsim::test::contains(why, "program layer passes to screen their memory"));
    // Without pruning too.
    o.prune_beyond_top = 0;
    CHECK_THROWS_AS((void)sweep_build_work(p.topology, p.workload.model, p.workload.layout, SweepGrid{}, o),
                    InputError);
}
