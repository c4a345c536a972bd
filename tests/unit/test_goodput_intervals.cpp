#include <doctest/doctest.h>

#include <cmath>

#include "test_helpers.hpp"
#include "trainsim/goodput.hpp"

using namespace trainsim;

TEST_CASE("goodput: a job's failure model counts its GPUs, nodes, NICs and its share of the switches") {
    const TopologySpec t = test::small_topology(2048);  // 544 switches (test_goodput.cpp)
    Layout l;
    l.tp = 8;
    l.dp = 2044;  // 16,352 GPUs: 2,044 nodes of 2,048
    const FailureModel f = job_failure_model(l, t);
    auto count = [&](FailureComponent c) { return f.components[static_cast<std::size_t>(c)].count; };
    CHECK(count(FailureComponent::gpu) == 16352.0);
    CHECK(count(FailureComponent::node) == 2044.0);
    CHECK(count(FailureComponent::nic) == 2044.0 * 8);
    CHECK(count(FailureComponent::network_switch) == std::round(544.0 * 2044 / 2048));
    CHECK(f.components[0].mtbf_h == kDefaultGpuMtbfH);
}

TEST_CASE("goodput: the interval study simulates the given interval, or the sweep around Young's") {
    GoodputConfig c;
    c.step_s = 10.0;
    c.tokens_per_step = 1e6;
    c.save_s = 20.0;
    c.copy_s = 2.0;
    c.load_s = 30.0;
    c.horizon_s = 2e5;
    c.failures.components[0] = {1.0, 1000.0 / 3600.0};  // one unit, MTBF 1000 s
    const CheckpointIntervalStudy given = study_checkpoint_intervals(c, 30, 1, 8, 2);
    REQUIRE(given.sweep.size() == 1);
    CHECK(given.chosen().interval_steps == 30);
    CHECK(given.mtbf_s == doctest::Approx(1000.0));
    CHECK(given.blocking_s == 20.0);  // sync: the save blocks
    CHECK(given.recovery_s == c.detection_s + c.restart_s + 30.0);
    CHECK(given.formulas.young_s == doctest::Approx(std::sqrt(2.0 * 20.0 * 1000.0)));

    const CheckpointIntervalStudy sweep = study_checkpoint_intervals(c, std::nullopt, 1, 8, 2);
    const auto intervals = interval_sweep(sweep.formulas.young_s, c.step_s);
    REQUIRE(sweep.sweep.size() == intervals.size());
    for (std::size_t i = 0; i < intervals.size(); ++i) {
        CHECK(sweep.sweep[i].interval_steps == intervals[i]);
        CHECK(sweep.sweep[i].goodput.p50 <= sweep.chosen().goodput.p50);
    }
    c.mode = CheckpointMode::async;
    CHECK(study_checkpoint_intervals(c, 30, 1, 2, 1).blocking_s == 2.0);  // async: the copy blocks
}
