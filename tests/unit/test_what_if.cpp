// What-if perturbations (include/trainsim/perturbation.hpp, include/trainsim/scenario_study.hpp): the
// counter-based draws, the option parsers, the coupling of slow ranks through the simulation, and each
// symmetry shortcut declining (and staying exact) under perturbations.
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <set>

#include "test_helpers.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/executor.hpp"
#include "trainsim/executor_observer.hpp"
#include "trainsim/perturbation.hpp"
#include "trainsim/program.hpp"
#include "trainsim/scenario_study.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/sweep.hpp"

using namespace trainsim;
using trainsim::test::check_identical;
using trainsim::test::contains;
using trainsim::test::message_of;
using trainsim::test::small_gpt;
using trainsim::test::small_topology;

namespace {

Layout make_layout(int tp, int pp, int dp, std::int64_t global_batch) {
    Layout l;
    l.tp = tp;
    l.pp = pp;
    l.dp = dp;
    l.micro_batch = 1;
    l.global_batch = global_batch;
    return l;
}

SimulationOptions straggle(int gpu, double f) {
    SimulationOptions o;
    Straggler s;
    s.gpu = gpu;
    s.slowdown = f;
    o.perturbations.stragglers.push_back(s);
    return o;
}

/// The two results agree rank by rank (times to the picosecond).
void check_same(const ExecutionResult& a, const ExecutionResult& b) {
    REQUIRE(a.ranks.size() == b.ranks.size());
    CHECK(a.step_time_s == doctest::Approx(b.step_time_s).epsilon(1e-12));
    for (std::size_t i = 0; i < a.ranks.size(); ++i) {
        CAPTURE(i);
        CHECK(a.ranks[i].compute_s == doctest::Approx(b.ranks[i].compute_s).epsilon(1e-12));
        CHECK(a.ranks[i].tp_exposed_s == doctest::Approx(b.ranks[i].tp_exposed_s).epsilon(1e-9));
        CHECK(a.ranks[i].dp_exposed_s == doctest::Approx(b.ranks[i].dp_exposed_s).epsilon(1e-9));
        CHECK(a.ranks[i].finish_s == doctest::Approx(b.ranks[i].finish_s).epsilon(1e-12));
    }
}

ExecutionResult run_with(const TopologySpec& t, const ModelSpec& m, const Layout& l,
                         const SimulationOptions& o, const ExecutionOptions& ex,
                         const ClusterOptions& co = {}) {
    SimulationOptions opts = o;
    opts.execution = ex;
    opts.cluster = co;
    return simulate(t, m, l, "what-if", opts).execution;
}

const ExecutionOptions kAllOn{};
const ExecutionOptions kAllOff{false, false, false};

}  // namespace

TEST_CASE("what-if: the counter-based draws depend on their key only") {
    CHECK(counter_uniform(7, 1, 3, 9) == counter_uniform(7, 1, 3, 9));
    CHECK(counter_uniform(7, 1, 3, 9) != counter_uniform(8, 1, 3, 9));
    CHECK(counter_uniform(7, 1, 3, 9) != counter_uniform(7, 2, 3, 9));
    CHECK(counter_uniform(7, 1, 3, 9) != counter_uniform(7, 1, 3, 10));
    CHECK(counter_normal(7, 1, 3, 9) == counter_normal_at(counter_prefix(7, 1, 3), 9));
    double sum = 0, sq = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        const double u = counter_uniform(1, 1, 0, static_cast<std::uint64_t>(i));
        CHECK_FALSE((u <= 0 || u >= 1));
        const double z = counter_normal(1, 1, 1, static_cast<std::uint64_t>(i));
        sum += z;
        sq += z * z;
    }
    CHECK(std::abs(sum / n) < 0.01);
    CHECK(std::abs(sq / n - 1) < 0.02);
}

TEST_CASE("what-if: option parsers accept the documented forms and name option and value otherwise") {
    const Straggler s = parse_straggler("gpu=17,slowdown=1.3");
    CHECK(s.gpu == 17);
    CHECK(s.slowdown == 1.3);
    const Straggler f = parse_straggler("fraction=0.01,slowdown=1.5");
    CHECK(f.gpu == -1);
    CHECK(f.fraction == 0.01);
    CHECK(parse_jitter("lognormal,sigma=0.05").sigma == 0.05);
    const LinkPerturbation l = parse_link("node3.nic2,bandwidth=0.5");
    CHECK(l.name == "node3.nic2");
    CHECK(l.bandwidth_factor == 0.5);
    CHECK(parse_link("leaf5.uplink,latency=5us").extra_latency == Time::seconds(5e-6));
    CHECK(parse_link("rail1,down").down);

    const std::string m1 = message_of<InputError>([] { parse_straggler("gpu=x,slowdown=1.3"); });
    CHECK(contains(m1, "--straggler gpu=x,slowdown=1.3"));
    CHECK(contains(m1, "\"x\""));
    CHECK(contains(message_of<InputError>([] { parse_straggler("gpu=1,slowdown=0.5"); }), "slowdown = 0.5"));
    CHECK(contains(message_of<InputError>([] { parse_straggler("gpu=1"); }), "slowdown=F is missing"));
    CHECK(contains(message_of<InputError>([] { parse_jitter("normal,sigma=1"); }), "\"normal\""));
    CHECK(contains(message_of<InputError>([] { parse_link("node3.nic,bandwidth=0.5"); }),
                   "unknown link name \"node3.nic\""));
    CHECK(contains(message_of<InputError>([] { parse_link("node3.nvlink,down"); }), "NICs and rails only"));
    CHECK(contains(message_of<InputError>([] { parse_link("node3.nic1,bandwidth=2"); }), "bandwidth = 2"));
    // a key given twice is refused, whichever value would have won
    CHECK(contains(message_of<InputError>([] { parse_straggler("gpu=1,slowdown=2,gpu=3"); }),
                   "field \"gpu\" is given twice"));
    CHECK(contains(message_of<InputError>([] { parse_jitter("lognormal,sigma=0.1,sigma=0.2"); }),
                   "field \"sigma\" is given twice"));
    CHECK(contains(message_of<InputError>([] { parse_link("rail1,latency=1us,latency=2us"); }),
                   "field \"latency\" is given twice"));
}

TEST_CASE("what-if: a fraction of stragglers is drawn from the seed") {
    Straggler s;
    s.fraction = 0.1;
    s.slowdown = 1.5;
    const auto a = compute_factors({s}, 1000, 1);
    const auto b = compute_factors({s}, 1000, 2);
    CHECK(std::count(a.begin(), a.end(), 1.5) == 100);
    CHECK(a == compute_factors({s}, 1000, 1));
    CHECK(a != b);
    Straggler one;
    one.gpu = 1000;
    one.slowdown = 1.2;
    one.text = "gpu=1000,slowdown=1.2";
    CHECK(contains(message_of<InputError>([&] { compute_factors({one}, 1000, 1); }), "gpu = 1000"));
    // One GPU slowed once: a fraction is drawn among the GPUs the other options leave (GPU 0 at 2 x 3
    // before).
    Straggler g0;
    g0.gpu = 0;
    g0.slowdown = 2;
    Straggler all;
    all.fraction = 1;
    all.slowdown = 3;
    all.text = "fraction=1,slowdown=3";
    CHECK(message_of<InputError>([&] {
              compute_factors({g0, all}, 16, 1);
          }) ==
          "--straggler fraction=1,slowdown=3: 16 GPUs to slow, but 1 of the cluster's 16 are slowed by the "
          "other "
          "--straggler options (one GPU is slowed once)");
    Straggler quarter = all;
    quarter.fraction = 0.25;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        const auto f = compute_factors({quarter, g0, quarter}, 16, seed);
        CHECK(f[0] == 2);
        CHECK(std::count(f.begin(), f.end(), 3.0) == 8);
        CHECK(std::count(f.begin(), f.end(), 1.0) == 7);
    }
}

TEST_CASE("what-if: a link name out of the cluster's range is refused naming it") {
    LinkPerturbation p = parse_link("node2.nic1,bandwidth=0.5");
    const std::string m = message_of<InputError>([&] { Cluster c(small_topology(2), {p}); });
    CHECK(contains(m, "node2.nic1"));
    CHECK(contains(m, "node 2 is not one of the 2 nodes"));
    p = parse_link("node1.nic8,down");
    CHECK(contains(message_of<InputError>([&] { Cluster c(small_topology(2), {p}); }), "NIC 8"));
}

TEST_CASE("what-if: one straggler in pure DP slows the step by its extra compute and nothing else") {
    const TopologySpec topo = small_topology(1);
    const ModelSpec m = small_gpt(4, 1024, 16, 512);
    const Layout l = make_layout(1, 1, 8, 8);
    const double f = 1.25;
    SimulationResult slow;
    const ScenarioStudy st = study_scenario(topo, m, l, "dp", straggle(3, f), 1, 1, slow);
    const SimulationResult base = simulate(topo, m, l, "dp");
    const double extra = (f - 1) * base.execution.ranks[3].compute_s;
    CHECK(st.base_step_time_s == base.execution.step_time_s);
    CHECK(st.cost_s == doctest::Approx(extra).epsilon(1e-3));
    // The others waited for it at the gradient all-reduce: it is the critical rank.
    REQUIRE(!st.critical_ranks.empty());
    CHECK(st.critical_ranks.front().gpu == 3);
    CHECK(slow.execution.ranks[0].dp_wait_s > 0.5 * extra);
    CHECK(slow.execution.ranks[3].dp_wait_s == doctest::Approx(0).epsilon(1e-12));
}

TEST_CASE(
    "what-if: in 1F1B (PP 2) a slow bottleneck stage stretches every pass, a slow stage with slack only "
    "the fill and the drain") {
    // Stage 1 holds the LM head of a 65,536-word vocabulary: it is the pipeline's bottleneck, so stage 0
    // waits for it in the steady state (its slack).
    const TopologySpec topo = small_topology(1, 2, 2);
    ModelSpec m = small_gpt(4, 1024, 16, 512, 65536);
    m.tied_embeddings = false;
    const int mb = 4;
    const Layout l = make_layout(1, 2, 1, mb);
    const SimulationResult base = simulate(topo, m, l, "pp");
    const auto& s0 = base.execution.ranks[0];
    const auto& s1 = base.execution.ranks[1];
    const auto fwd = static_cast<std::size_t>(Phase::forward),
               bwd = static_cast<std::size_t>(Phase::backward),
               opt = static_cast<std::size_t>(Phase::optimizer);
    REQUIRE(s1.compute_by_phase_s[fwd] + s1.compute_by_phase_s[bwd] >
            2 * (s0.compute_by_phase_s[fwd] + s0.compute_by_phase_s[bwd]));
    const double f = 1.5;
    // Hand-computed timeline (Megatron 1F1B, PP 2, m = 4): stage 0 runs F1 | F2 B1 F3 B2 F4 B3 | B4 opt,
    // stage 1 F1 B1 F2 B2 F3 B3 F4 B4 opt. With stage 1 the bottleneck the step is F0 + m·(F1 + B1) + B0 +
    // opt0 (+ the P2P transfers), so:
    //   stage 1 slowed by f: + (f-1)·m·(F1 + B1)                 (its optimizer step hides behind B0 + opt0)
    //   stage 0 slowed by f: + (f-1)·(F0 + B0 + opt0)            (its m-1 other passes fit in its slack)
    const double slow1 = simulate(topo, m, l, "pp", straggle(1, f)).execution.step_time_s;
    const double slow0 = simulate(topo, m, l, "pp", straggle(0, f)).execution.step_time_s;
    const double step = base.execution.step_time_s;
    const double expect1 = (f - 1) * (s1.compute_by_phase_s[fwd] + s1.compute_by_phase_s[bwd]);
    const double expect0 = (f - 1) * ((s0.compute_by_phase_s[fwd] + s0.compute_by_phase_s[bwd]) / mb +
                                      s0.compute_by_phase_s[opt]);
    CHECK(slow1 - step == doctest::Approx(expect1).epsilon(1e-3));
    CHECK(slow0 - step == doctest::Approx(expect0).epsilon(1e-3));
    // The slack absorbed the extra time of the m-1 steady-state passes (90% of it at least).
    CHECK(slow0 - step <
          (f - 1) * s0.compute_s -
              0.9 * (f - 1) * (mb - 1) * (s0.compute_by_phase_s[fwd] + s0.compute_by_phase_s[bwd]) / mb);
}

TEST_CASE("what-if: a degraded rail slows only the collectives that cross it") {
    // TP 8 inside each node, DP 2 across the two nodes: TP index k's gradient all-reduce runs on rail k.
    const TopologySpec topo = small_topology(2);
    const ModelSpec m = small_gpt(4, 1024, 16, 512);
    const Layout l = make_layout(8, 1, 2, 2);
    SimulationOptions o;
    o.perturbations.links.push_back(parse_link("rail3,bandwidth=0.25"));
    o.attribute = true;
    const ExecutionResult base = run_with(topo, m, l, {}, kAllOff);
    const ExecutionResult slow = run_with(topo, m, l, o, kAllOff);
    CHECK(slow.step_time_s > base.step_time_s);
    for (int g = 0; g < 16; ++g) {
        CAPTURE(g);
        const auto& b = base.ranks[static_cast<std::size_t>(g)];
        const auto& s = slow.ranks[static_cast<std::size_t>(g)];
        CHECK(s.compute_s == b.compute_s);
        // TP collectives stay inside the node (NVLink): their transfer is unchanged.
        CHECK(s.tp_exposed_s - s.tp_wait_s == doctest::Approx(b.tp_exposed_s - b.tp_wait_s).epsilon(1e-9));
        const double dp_b = b.dp_exposed_s - b.dp_wait_s, dp_s = s.dp_exposed_s - s.dp_wait_s;
        if (g % 8 == 3)
            CHECK(dp_s > dp_b);
        else
            CHECK(dp_s == doctest::Approx(dp_b).epsilon(1e-9));
    }
    // On one node nothing crosses a rail: the same step.
    const TopologySpec one = small_topology(1);
    const Layout l1 = make_layout(8, 1, 1, 2);
    CHECK(run_with(one, m, l1, o, kAllOn).step_time_s ==
          doctest::Approx(run_with(one, m, l1, {}, kAllOn).step_time_s).epsilon(1e-12));
}

TEST_CASE(
    "what-if: TP folding declines when the members of a TP group differ, and stays exact when they do not") {
    const TopologySpec topo = small_topology(2);
    const ModelSpec m = small_gpt(8, 1024, 16, 512);
    const Layout l = make_layout(2, 2, 4, 16);
    // One slow GPU of a TP pair: folding declines.
    const ExecutionResult on = run_with(topo, m, l, straggle(5, 1.3), {true, false, false});
    const ExecutionResult off = run_with(topo, m, l, straggle(5, 1.3), kAllOff);
    CHECK_FALSE(on.tp_folded);
    check_same(on, off);
    // Both GPUs of the pair equally slow: folding is taken and gives the unfolded result.
    SimulationOptions pair = straggle(4, 1.3);
    pair.perturbations.stragglers.push_back(straggle(5, 1.3).perturbations.stragglers.front());
    const ExecutionResult on2 = run_with(topo, m, l, pair, {true, false, false});
    CHECK(on2.tp_folded);
    check_same(on2, run_with(topo, m, l, pair, kAllOff));
    // Jitter and link perturbations: declines.
    SimulationOptions j;
    j.perturbations.jitter = parse_jitter("lognormal,sigma=0.1");
    const ExecutionResult jon = run_with(topo, m, l, j, {true, false, false});
    CHECK_FALSE(jon.tp_folded);
    check_same(jon, run_with(topo, m, l, j, kAllOff));
    SimulationOptions nic;
    nic.perturbations.links.push_back(parse_link("node1.nic2,bandwidth=0.5"));
    const ExecutionResult non = run_with(topo, m, l, nic, {true, false, false});
    CHECK_FALSE(non.tp_folded);
    check_same(non, run_with(topo, m, l, nic, kAllOff));
}

TEST_CASE("what-if: running ahead stays exact folded (symmetric slowdown) and unfolded (one slow member)") {
    // TP 8 fills the node: private TP links and running ahead apply. One slow GPU: folding declines and
    // each TP group runs ahead unfolded, together (the same times to the picosecond).
    const TopologySpec topo = small_topology(2);
    const ModelSpec m = small_gpt(8, 1024, 16, 512);
    const Layout l = make_layout(8, 2, 1, 4);
    const ExecutionResult on = run_with(topo, m, l, straggle(3, 1.2), kAllOn);
    CHECK_FALSE(on.tp_folded);
    CHECK(on.ran_ahead);
    check_identical(on, run_with(topo, m, l, straggle(3, 1.2), kAllOff));
    // The whole of node 0 slow: every TP group is uniform, so folding and running ahead are taken, exactly.
    SimulationOptions node;
    for (int g = 0; g < 8; ++g)
        node.perturbations.stragglers.push_back(straggle(g, 1.2).perturbations.stragglers.front());
    const ExecutionResult ahead = run_with(topo, m, l, node, kAllOn);
    CHECK(ahead.ran_ahead);
    check_same(ahead, run_with(topo, m, l, node, {true, true, false}));
    check_same(ahead, run_with(topo, m, l, node, kAllOff));
    CHECK(ahead.step_time_s > run_with(topo, m, l, {}, kAllOn).step_time_s);
}

TEST_CASE("what-if: under jitter a TP group runs its local ops ahead together, exactly as event by event") {
    // TP 8 fills each node (private TP links), PP 2 x DP 2 over 4 nodes with gradient-reduce overlap: the
    // groups meet at P2P, DP and TP collectives. Jitter: folding declines; running ahead (per TP group) is
    // taken and gives the event by event result bit for bit, attributed or not, with a straggler and a
    // link perturbation besides.
    const TopologySpec topo = small_topology(4);
    const ModelSpec m = small_gpt(8, 1024, 16, 512);
    Layout l = make_layout(8, 2, 2, 8);
    l.sequence_parallel = true;
    l.distributed_optimizer = true;
    l.overlap_grad_reduce = true;
    SimulationOptions o;
    o.perturbations.jitter = parse_jitter("lognormal,sigma=0.2");
    o.seed = 11;
    o.attribute = true;
    const ExecutionResult ahead = run_with(topo, m, l, o, kAllOn);
    CHECK_FALSE(ahead.tp_folded);
    CHECK(ahead.ran_ahead);
    const ExecutionResult event = run_with(topo, m, l, o, kAllOff);
    CHECK_FALSE(event.ran_ahead);
    check_identical(ahead, event);
    CHECK(ahead.events < event.events / 2);
    CHECK(ahead.step_time_s > run_with(topo, m, l, {}, kAllOn).step_time_s);
    // Members of a TP group waited for each other: some TP wait, and it differs between them.
    CHECK(ahead.ranks[0].tp_wait_s > 0);
    CHECK(ahead.ranks[0].tp_wait_s != ahead.ranks[1].tp_wait_s);
    SimulationOptions more = o;
    more.perturbations.stragglers.push_back(parse_straggler("gpu=9,slowdown=1.3"));
    more.perturbations.links.push_back(parse_link("node2.nic1,bandwidth=0.5"));
    more.perturbations.links.push_back(parse_link("gpu20.nvlink,bandwidth=0.7"));
    const ExecutionResult ahead2 = run_with(topo, m, l, more, kAllOn);
    CHECK(ahead2.ran_ahead);
    check_identical(ahead2, run_with(topo, m, l, more, kAllOff));
    // Traced GPUs keep the event by event path for their group; the others still run ahead.
    SimulationOptions traced = o;
    std::vector<bool> observed(static_cast<std::size_t>(l.gpus()), false);
    observed[0] = observed[static_cast<std::size_t>(l.gpus() / 2)] = true;
    SliceRecorder recorder(observed);
    traced.observers = {&recorder};
    const ExecutionResult tr = run_with(topo, m, l, traced, kAllOn);
    CHECK(tr.ran_ahead);
    check_identical(tr, event);
    // Attribution off: the same times.
    SimulationOptions plain = o;
    plain.attribute = false;
    const ExecutionResult p1 = run_with(topo, m, l, plain, kAllOn), p0 = run_with(topo, m, l, plain, kAllOff);
    CHECK(p1.step_time_s == p0.step_time_s);
    CHECK(p1.step_time_s == event.step_time_s);
}

TEST_CASE("what-if: spine bundles are left out of routes only while they cannot bind") {
    // One node per leaf: the DP all-reduce crosses the spine layer.
    const TopologySpec topo = small_topology(2, 8, 8, 1);
    const ModelSpec m = small_gpt(4, 1024, 16, 512);
    const Layout l = make_layout(1, 1, 16, 16);
    CHECK(Cluster(topo).bundles_omitted());
    // A degraded uplink bundle can bind: the shortcut declines, and equals the routes with bundles.
    const std::vector<LinkPerturbation> up = {parse_link("leaf3.uplink,bandwidth=0.1")};
    CHECK_FALSE(Cluster(topo, up).bundles_omitted());
    SimulationOptions o;
    o.perturbations.links = up;
    const ExecutionResult on = run_with(topo, m, l, o, kAllOn);
    const ExecutionResult off = run_with(topo, m, l, o, kAllOn, ClusterOptions{false});
    check_same(on, off);
    CHECK(on.step_time_s > run_with(topo, m, l, {}, kAllOn).step_time_s);
    // A slower NIC only lowers the bundle's load: the shortcut stays, and stays exact.
    const std::vector<LinkPerturbation> nic = {parse_link("node1.nic3,bandwidth=0.5")};
    CHECK(Cluster(topo, nic).bundles_omitted());
    o.perturbations.links = nic;
    check_same(run_with(topo, m, l, o, kAllOn), run_with(topo, m, l, o, kAllOn, ClusterOptions{false}));
}

TEST_CASE("what-if: a NIC that is down moves its GPUs to the next NIC of the node") {
    const TopologySpec topo = small_topology(2, 8, 8, 1);
    const ModelSpec m = small_gpt(4, 1024, 16, 512);
    const Layout l = make_layout(1, 1, 16, 16);
    SimulationOptions o;
    o.perturbations.links.push_back(parse_link("node0.nic2,down"));
    o.attribute = true;
    const ExecutionResult down = run_with(topo, m, l, o, kAllOn);
    const Cluster c(topo, o.perturbations.links);
    for (int link : c.perturbed_links().front().links)
        CHECK(down.link_bytes[static_cast<std::size_t>(link)] == 0);
    CHECK(down.step_time_s > run_with(topo, m, l, {}, kAllOn).step_time_s);
}

TEST_CASE("what-if: a study over seeds does not depend on the number of threads") {
    const TopologySpec topo = small_topology(1);
    const ModelSpec m = small_gpt(4, 1024, 16, 512);
    const Layout l = make_layout(2, 1, 4, 8);
    SimulationOptions o;
    o.perturbations.jitter = parse_jitter("lognormal,sigma=0.1");
    o.seed = 7;
    SimulationResult a, b;
    const ScenarioStudy one = study_scenario(topo, m, l, "j", o, 6, 1, a);
    const ScenarioStudy two = study_scenario(topo, m, l, "j", o, 6, 2, b);
    CHECK(study_json(one).dump() == study_json(two).dump());
    std::set<double> steps;
    for (const auto& r : one.runs)
        steps.insert(r.step_time_s);
    CHECK(steps.size() > 1);                          // the seeds differ
    CHECK(one.median_step_s > one.base_step_time_s);  // the others wait for the slowest kernel draws
    CHECK(nearest_rank_percentile({3, 1, 2, 4}, 0.5) == 2);
    CHECK(nearest_rank_percentile({3, 1, 2, 4}, 0.9) == 4);
}

TEST_CASE(
    "what-if: sweep deduplication stays exact under perturbations (on == off), and the median seed ranks") {
    const TopologySpec topo = small_topology(1);
    const ModelSpec m = small_gpt(4, 256, 16, 128, 1024);
    Layout base;
    base.global_batch = 16;
    base.attention = AttentionKernel::flash;
    SweepGrid grid;
    for (const char* r : {"tp=1,2", "pp=2", "micro_batch=1", "recompute=none,selective",
                          "sequence_parallel=false", "distributed_optimizer=false"})
        restrict_sweep_grid(grid, r, "--vary");
    SweepOptions on;
    on.jobs = 2;
    on.perturbations.stragglers.push_back(parse_straggler("gpu=1,slowdown=1.4"));
    on.perturbations.jitter = parse_jitter("lognormal,sigma=0.05");
    on.seeds = 3;
    SweepOptions off = on;
    off.deduplicate = false;
    const SweepResult a = run_sweep(topo, m, base, grid, "dedupe", on);
    const SweepResult b = run_sweep(topo, m, base, grid, "dedupe", off);
    REQUIRE(a.entries.size() == b.entries.size());
    REQUIRE(a.simulated >= 2);
    for (std::size_t i = 0; i < a.entries.size(); ++i) {
        CHECK(canonical_string(a.entries[i].layout) == canonical_string(b.entries[i].layout));
        CHECK(a.entries[i].report.step_time_s == b.entries[i].report.step_time_s);
    }
    // The ranked step time is the median of the three seeds' runs.
    const SweepEntry& best = a.entries.front();
    std::vector<double> steps;
    for (std::uint64_t s = 1; s <= 3; ++s) {
        SimulationOptions o;
        o.perturbations = on.perturbations;
        o.seed = s;
        steps.push_back(simulate(topo, m, best.layout, "dedupe", o).report.step_time_s);
    }
    CHECK(best.report.step_time_s == nearest_rank_percentile(steps, 0.5));
    CHECK(best.report.step_time_s >
          run_sweep(topo, m, base, grid, "dedupe", SweepOptions{}).entries.front().report.step_time_s);
}

TEST_CASE("what-if: the waiting each GPU caused does not depend on the folding") {
    const TopologySpec topo = small_topology(2);
    const ModelSpec m = small_gpt(8, 1024, 16, 512);
    const Layout l = make_layout(2, 2, 4, 16);
    SimulationOptions o;
    o.attribute = true;
    const ExecutionResult folded = run_with(topo, m, l, o, kAllOn);
    const ExecutionResult unfolded = run_with(topo, m, l, o, kAllOff);
    CHECK(folded.tp_folded);
    REQUIRE(folded.caused_wait_s.size() == 16);
    for (std::size_t g = 0; g < 16; ++g) {
        CAPTURE(g);
        CHECK(folded.caused_wait_s[g] == doctest::Approx(unfolded.caused_wait_s[g]).epsilon(1e-6));
    }
}

TEST_CASE("what-if: a straggler whose slack covers the delay costs nothing") {
    // PP 2 with 7 of the 8 layers on stage 0 and a small vocabulary: stage 1's forward and backward of a
    // micro-batch take less than stage 0's backward, so in 1F1B stage 1 always waits for stage 0 (its slack);
    // its step-end work (the optimizer step) runs while stage 0 does its last backward and its own optimizer
    // step.
    const TopologySpec topo = small_topology(1, 2, 2);
    ModelSpec m = small_gpt(8, 1024, 16, 512, 1024);
    m.tied_embeddings = false;
    Layout l = make_layout(1, 2, 1, 4);
    l.layers_per_stage = {7, 1};
    const SimulationResult base = simulate(topo, m, l, "slack");
    const auto& s0 = base.execution.ranks[0];
    const auto& s1 = base.execution.ranks[1];
    const auto fwd = static_cast<std::size_t>(Phase::forward),
               bwd = static_cast<std::size_t>(Phase::backward);
    const double f = 1.5;
    // The premise: slowed, stage 1's pass still fits in stage 0's backward of a micro-batch.
    REQUIRE(f * (s1.compute_by_phase_s[fwd] + s1.compute_by_phase_s[bwd]) < 0.8 * s0.compute_by_phase_s[bwd]);
    const SimulationResult slow = simulate(topo, m, l, "slack", straggle(1, f));
    CHECK(slow.execution.ranks[1].compute_s > 1.4 * s1.compute_s);  // it is slower
    CHECK(slow.execution.step_time_s == doctest::Approx(base.execution.step_time_s).epsilon(1e-9));
    // The same straggler on stage 0 (no slack) costs.
    CHECK(simulate(topo, m, l, "slack", straggle(0, f)).execution.step_time_s >
          1.2 * base.execution.step_time_s);
}
