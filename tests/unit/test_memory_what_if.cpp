// `trainsim memory --what-if` (include/trainsim/what_if.hpp): remedies' memory from the walk equals the
// simulated memory; the event bound (ExecutionOptions::max_events) stops a simulation with EventLimitExceeded
// and leaves the memory answer whole.
#include <doctest/doctest.h>

#include "test_helpers.hpp"
#include "trainsim/engine.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/what_if.hpp"

using namespace trainsim;
using trainsim::test::small_gpt;
using trainsim::test::small_topology;

namespace {

/// TP 2 x PP 2 x DP 4, micro-batch 2, global batch 32.
Layout small_layout() {
    return trainsim::test::tp2_pp2_dp4(2, 32);
}

}  // namespace

TEST_CASE("engine: run(max_events) stops after that many events and leaves the rest pending") {
    Simulator sim;
    int ran = 0;
    for (int i = 0; i < 10; ++i)
        sim.schedule(Time::seconds(i * 1e-6), Priority::kDefault, [&ran] { ++ran; });
    CHECK(sim.run(4) == 4);
    CHECK(ran == 4);
    CHECK(sim.pending() == 6);
    CHECK(sim.run() == 6);
    CHECK(sim.pending() == 0);
}

TEST_CASE(
    "executor: max_events stops the simulation with EventLimitExceeded; a large enough bound changes "
    "nothing") {
    const TopologySpec t = small_topology(2);
    const ModelSpec m = small_gpt();
    const Layout l = small_layout();
    const SimulationResult full = simulate(t, m, l, "small");
    SimulationOptions o;
    o.execution.max_events = 100;
    REQUIRE(full.report.events > 100);
    CHECK_THROWS_AS(simulate(t, m, l, "small", o), EventLimitExceeded);
    o.execution.max_events = full.report.events;
    const SimulationResult bounded = simulate(t, m, l, "small", o);
    CHECK(bounded.report.step_time_s == full.report.step_time_s);
    CHECK(bounded.report.events == full.report.events);
}

TEST_CASE("memory what-if: each remedy's memory is the simulated memory; step times within the bound") {
    const TopologySpec t = small_topology(2);
    const ModelSpec m = small_gpt();
    const Layout l = small_layout();
    const WhatIf w = memory_what_if(t, m, l, "small");
    const SimulationResult base = simulate(t, m, l, "small");
    CHECK(w.baseline_peak_bytes == base.report.memory.peak().peak_bytes);
    CHECK(w.baseline_step_simulated);
    CHECK(w.baseline_step_time_s == base.report.step_time_s);
    int applicable = 0;
    for (const Remedy& r : w.remedies) {
        CAPTURE(r.name);
        if (!r.applicable) continue;
        ++applicable;
        CHECK(r.step_simulated);
        CHECK(r.step_time_s > 0);
        CHECK(r.step_time_delta_s == doctest::Approx(r.step_time_s - w.baseline_step_time_s));
    }
    CHECK(applicable >= 5);
    // "recompute full" against a simulation of the same layout change.
    Layout full = l;
    full.recompute = Recompute::full;
    const SimulationResult rf = simulate(t, m, full, "small");
    bool found = false;
    for (const Remedy& r : w.remedies)
        if (r.name == "recompute full") {
            found = true;
            CHECK(r.peak_bytes == rf.report.memory.peak().peak_bytes);
            CHECK(r.step_time_s == rf.report.step_time_s);
        }
    CHECK(found);
}

TEST_CASE(
    "memory what-if: past max_events the memory answer stays, the step times are marked not simulated") {
    const TopologySpec t = small_topology(2);
    const ModelSpec m = small_gpt();
    const Layout l = small_layout();
    const WhatIf full = memory_what_if(t, m, l, "small");
    WhatIfOptions o;
    o.max_events = 100;
    const WhatIf cut = memory_what_if(t, m, l, "small", o);
    CHECK_FALSE(cut.baseline_step_simulated);
    CHECK(cut.baseline_peak_bytes == full.baseline_peak_bytes);
    REQUIRE(cut.remedies.size() == full.remedies.size());
    for (std::size_t i = 0; i < cut.remedies.size(); ++i) {
        CAPTURE(cut.remedies[i].name);
        CHECK(cut.remedies[i].applicable == full.remedies[i].applicable);
        CHECK_FALSE(cut.remedies[i].step_simulated);
        CHECK(cut.remedies[i].peak_bytes == full.remedies[i].peak_bytes);
        CHECK(cut.remedies[i].fits == full.remedies[i].fits);
    }
}

TEST_CASE("memory what-if: activation offload of half the layers, where Megatron-Core allows it") {
    const TopologySpec t = small_topology(2);
    const ModelSpec m = small_gpt();  // 8 layers: 4 offloaded
    Layout l = trainsim::test::tp2_pp2_dp4(2, 32);
    const std::string name = "activation offload of 4 layers";
    auto remedy = [&](const WhatIf& w) {
        for (const Remedy& r : w.remedies)
            if (r.name == name) return r;
        FAIL("no activation offload remedy");
        return Remedy{};
    };
    // PP 2: not applicable, said why.
    Remedy r = remedy(memory_what_if(t, m, l, "small"));
    CHECK_FALSE(r.applicable);
    CHECK(r.reason == "needs pp 1, no recompute, Megatron (Megatron-Core's conditions)");
    // TP 2 x DP 8, no recompute: applicable, saves memory, equal to the simulation of the changed layout.
    l.pp = 1;
    l.dp = 8;
    l.recompute = Recompute::none;
    const WhatIf w = memory_what_if(t, m, l, "small");
    r = remedy(w);
    REQUIRE(r.applicable);
    CHECK(r.saved_bytes > 0);
    Layout off = l;
    off.activation_offload_layers = 4;
    CHECK(r.peak_bytes == simulate(t, m, off, "small").report.memory.peak().peak_bytes);
}
