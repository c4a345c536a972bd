#include <doctest/doctest.h>

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/goodput.hpp"
#include "trainsim/limits.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {

/// One failing class (the GPUs, one unit) of mean time between failures `mtbf_s`; the others never fail.
FailureModel one_class(double mtbf_s, double count = 1.0, FailureComponent c = FailureComponent::gpu) {
    FailureModel f;
    f.components[static_cast<std::size_t>(c)] = {count, mtbf_s / 3600.0};
    return f;
}

GoodputConfig base_config() {
    GoodputConfig c;
    c.step_s = 10.0;
    c.tokens_per_step = 1e6;
    c.interval_steps = 30;  // 300 s of work
    c.save_s = 20.0;
    c.copy_s = 2.0;
    c.load_s = 30.0;
    c.detection_s = 50.0;
    c.restart_s = 100.0;
    c.failures = one_class(1000.0);
    return c;
}

}  // namespace

TEST_CASE("goodput: sync checkpoints match Daly's closed form for exponential failures") {
    // W = 20 intervals of 300 s; delta 20 s; recovery R = 50 + 100 + 30 = 180 s; M = 1000 s.
    GoodputConfig c = base_config();
    c.target_work_s = 20 * 300.0;
    const double expected = expected_run_time_s(c.target_work_s, 300.0, 20.0, 1000.0, 180.0);
    CHECK(expected == doctest::Approx(20 * std::exp(0.18) * 1000.0 * std::expm1(0.32)));
    const GoodputSummary s = simulate_goodput(c, 1, 4000, 2);
    CHECK(s.finished_fraction == 1.0);
    // Within the 95% confidence interval of the mean, widened to 3 standard errors (fails 0.3% of the time
    // for a correct simulator; the seeds are fixed, so the test is deterministic).
    CHECK(std::abs(s.wall_s.mean - expected) < 1.5 * s.wall_s.ci95);
    CHECK(s.wall_s.ci95 < 0.02 * expected);  // the check has teeth: the interval is narrow
    CHECK(s.goodput.p50 < 1.0);
    // And the failures per run are Poisson over the wall time: mean failures = mean wall / M.
    CHECK(s.failures[0].mean == doctest::Approx(s.wall_s.mean / 1000.0).epsilon(0.03));
}

TEST_CASE("goodput: the wall time is useful work + lost work + checkpoint blocking + recovery") {
    GoodputConfig c = base_config();
    c.mode = CheckpointMode::async;
    c.horizon_s = 50'000;
    c.hot_spares = 2;
    c.repair_s = 3000;
    c.failures = one_class(700.0, 4.0);
    c.failures.components[static_cast<std::size_t>(FailureComponent::software)] = {1.0, 2000.0 / 3600.0};
    c.failures.weibull_shape = 0.7;
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        const RunOutcome r = simulate_run(c, seed);
        CHECK(r.wall_s == doctest::Approx(50'000));
        CHECK(r.useful_s + r.lost_work_s + r.checkpoint_blocked_s + r.recovery_s ==
              doctest::Approx(r.wall_s).epsilon(1e-9));
        CHECK(r.failures[0] > 0);
    }
}

TEST_CASE("goodput: without failures the run is its work plus the blocking part of its checkpoints") {
    GoodputConfig c = base_config();
    c.failures = FailureModel{};
    c.target_work_s = 20 * 300.0;
    c.mode = CheckpointMode::sync;
    const RunOutcome sync = simulate_run(c, 1);
    CHECK(sync.finished);
    CHECK(sync.wall_s == doctest::Approx(6000.0 + 20 * 20.0));  // 20 checkpoints, the last one final
    CHECK(sync.checkpoints_durable == 20);
    c.mode = CheckpointMode::async;
    const RunOutcome async = simulate_run(c, 1);
    // 19 copies of 2 s (each write of 20 s ends long before the next checkpoint), then the final copy +
    // write.
    CHECK(async.wall_s == doctest::Approx(6000.0 + 19 * 2.0 + 22.0));
    CHECK(async.checkpoints_durable == 20);
    CHECK(async.wall_s < sync.wall_s);
}

TEST_CASE("goodput: an asynchronous checkpoint blocks less than a synchronous one under failures") {
    GoodputConfig c = base_config();
    c.save_s = 120.0;  // a slow write: sync blocks for it, async only for the 2 s copy
    c.horizon_s = 200'000;
    c.failures = one_class(5000.0);
    c.mode = CheckpointMode::sync;
    const GoodputSummary sync = simulate_goodput(c, 1, 200, 2);
    c.mode = CheckpointMode::async;
    const GoodputSummary async = simulate_goodput(c, 1, 200, 2);
    CHECK(async.goodput.mean > sync.goodput.mean);
    CHECK(async.checkpoint_blocked_s.mean < sync.checkpoint_blocked_s.mean);
    // Async loses checkpoints whose write a failure interrupts; sync loses the one being written.
    CHECK(async.checkpoints_lost.mean > 0);
}

TEST_CASE("goodput: a failure during an asynchronous write loses that checkpoint") {
    // One unit with Weibull lifetimes of shape 1000: it fails at 1040 s (+- 0.2%). Steps of 1 s, checkpoints
    // every 100 steps, no copy time: the checkpoint of work 1000 starts its write at t = 1000.
    GoodputConfig c = base_config();
    c.step_s = 1.0;
    c.interval_steps = 100;
    c.copy_s = 0.0;
    c.mode = CheckpointMode::async;
    c.horizon_s = 1500;  // the next failure comes ~1040 s after the recovery: outside
    c.failures = one_class(1040.0);
    c.failures.weibull_shape = 1000.0;
    for (std::uint64_t seed = 1; seed <= 5; ++seed) {
        c.save_s = 80.0;  // the write runs to 1080: the failure hits it
        const RunOutcome hit = simulate_run(c, seed);
        CHECK(hit.failures[0] == 1);
        CHECK(hit.checkpoints_lost == 1);
        CHECK(hit.lost_work_s > 130.0);  // rolled back to the checkpoint of work 900
        CHECK(hit.lost_work_s < 150.0);
        c.save_s = 20.0;  // the write is durable at 1020, before the failure
        const RunOutcome safe = simulate_run(c, seed);
        CHECK(safe.failures[0] == 1);
        CHECK(safe.checkpoints_lost == 0);
        CHECK(safe.lost_work_s > 30.0);  // rolled back to the checkpoint of work 1000 only
        CHECK(safe.lost_work_s < 50.0);
    }
}

TEST_CASE("goodput: hot spares shorten the restart after node failures") {
    GoodputConfig c = base_config();
    c.horizon_s = 100'000;
    c.failures = one_class(2000.0, 1.0, FailureComponent::node);
    c.restart_s = 600.0;
    c.spare_restart_s = 60.0;
    c.repair_s = 1000.0;
    const GoodputSummary cold = simulate_goodput(c, 1, 100, 2);
    c.hot_spares = 2;
    const GoodputSummary hot = simulate_goodput(c, 1, 100, 2);
    CHECK(hot.recovery_s.mean < cold.recovery_s.mean);
    CHECK(hot.goodput.mean > cold.goodput.mean);
    // One spare that never comes back from repair serves one failure only.
    c.hot_spares = 1;
    c.repair_s = 1e9;
    const RunOutcome one = simulate_run(c, 3);
    CHECK(one.spare_swaps == 1);
    // Software failures restart in place: spares do not help them.
    c.hot_spares = 4;
    c.failures = one_class(2000.0, 1.0, FailureComponent::software);
    CHECK(simulate_run(c, 3).spare_swaps == 0);
}

TEST_CASE("goodput: Weibull lifetimes keep their mean (renewal rate = units / MTBF)") {
    GoodputConfig c = base_config();
    c.horizon_s = 3.6e7;  // 10,000 h
    c.failures = one_class(100.0 * 3600.0, 50.0);
    c.failures.weibull_shape = 2.0;
    const GoodputSummary s = simulate_goodput(c, 1, 4, 2);
    CHECK(s.failures[0].mean == doctest::Approx(50.0 * 10'000.0 / 100.0).epsilon(0.02));
}

TEST_CASE("goodput: Weibull k < 1, units drawn in failure order, match one renewal clock per unit") {
    // 200 units of MTBF 100 h, shape 0.5, over 1,000 h: the mean failure count of the simulator (its first
    // lifetimes drawn lazily as order statistics) against a direct reference, one renewal process per unit
    // (std::mt19937_64, inverse-CDF draws). Failures happen on the wall clock whatever the job does, so the
    // count is the renewal count. Renewal theory puts it near 200 * (10 + (CV^2 - 1) / 2) = 2,400 (CV^2 = 5).
    GoodputConfig c = base_config();
    c.horizon_s = 1000.0 * 3600.0;
    c.failures = one_class(100.0 * 3600.0, 200.0);
    c.failures.weibull_shape = 0.5;
    const double k = 0.5, scale = 100.0 * 3600.0 / std::tgamma(1.0 + 1.0 / k);
    std::mt19937_64 rng(12345);
    std::uniform_real_distribution<double> u01(0.0, 1.0);
    const int reps = 400;
    double total = 0;
    for (int r = 0; r < reps; ++r)
        for (int unit = 0; unit < 200; ++unit)
            for (double t = 0;;) {
                t += scale * std::pow(-std::log(1.0 - u01(rng)), 1.0 / k);
                if (t > c.horizon_s) break;
                total += 1;
            }
    const double reference = total / reps;
    CHECK(reference == doctest::Approx(2400).epsilon(0.1));
    const GoodputSummary s = simulate_goodput(c, 1, 200, 2);
    CHECK(s.failures[0].mean == doctest::Approx(reference).epsilon(0.03));
}

TEST_CASE("goodput: the interval sweep's work is bounded over its intervals and seeds") {
    GoodputConfig c = base_config();
    c.horizon_s = 1e6;
    const auto intervals = interval_sweep(interval_formulas(c.save_s, 1000.0, 180.0).young_s, c.step_s);
    double per_seed = 0;
    for (auto n : intervals) {
        GoodputConfig ci = c;
        ci.interval_steps = n;
        per_seed += expected_run_events(ci);
    }
    const auto most =
        static_cast<int>(std::floor(static_cast<double>(limits::kMaxGoodputStudyEvents) / per_seed));
    const std::string msg =
        message_of<InputError>([&] { study_checkpoint_intervals(c, std::nullopt, 1, most + 1, 1); });
    CHECK(contains(msg, fmt::format("--seeds = {}", most + 1)));
    CHECK(contains(msg, fmt::format("{} checkpoint intervals swept", intervals.size())));
    CHECK(contains(msg, fmt::format("at most {} seeds", most)));
}

TEST_CASE("goodput: the result does not depend on the thread count") {
    GoodputConfig c = base_config();
    c.horizon_s = 30'000;
    c.mode = CheckpointMode::async;
    const GoodputSummary a = simulate_goodput(c, 7, 50, 1);
    const GoodputSummary b = simulate_goodput(c, 7, 50, 3);
    CHECK(a.goodput.mean == b.goodput.mean);
    CHECK(a.goodput.p90 == b.goodput.p90);
    CHECK(a.lost_work_s.p10 == b.lost_work_s.p10);
    const GoodputSummary other = simulate_goodput(c, 8, 50, 1);
    CHECK(other.goodput.mean != a.goodput.mean);
}

TEST_CASE("goodput: checkpoint interval formulas") {
    // NVIDIA's worked example (arXiv:2410.18124): M = 6000 s, R = 600 s, delta = 10 s, steps of 15 s ->
    // about 24 steps.
    const IntervalFormulas f = interval_formulas(10.0, 6000.0, 600.0);
    CHECK(f.young_s == doctest::Approx(std::sqrt(2.0 * 10 * 6000)));
    CHECK(f.restart_aware_s / 15.0 == doctest::Approx(24.9).epsilon(0.01));
    // Daly's higher-order form tracks the exact optimum of his model closely when delta << M.
    CHECK(f.daly_s == doctest::Approx(f.exact_s).epsilon(0.01));
    const double e = expected_run_time_s(1e6, f.exact_s, 10, 6000, 600);
    CHECK(e < expected_run_time_s(1e6, f.exact_s * 1.2, 10, 6000, 600));
    CHECK(e < expected_run_time_s(1e6, f.exact_s / 1.2, 10, 6000, 600));
    const auto sweep = interval_sweep(300.0, 10.0);
    CHECK(sweep.front() == 4);  // 300 / 8 / 10 = 3.75
    CHECK(sweep.back() == 240);
    CHECK(std::is_sorted(sweep.begin(), sweep.end()));
}

TEST_CASE("goodput: checkpoint size and times from the memory model and the topology") {
    ModelSpec m = test::llama_style(8, 1024, 16, 4, 4096, 32000, 2048);
    Layout l;
    l.tp = 2;
    l.pp = 2;
    l.dp = 4;
    l.micro_batch = 1;
    l.global_batch = 32;
    l.distributed_optimizer = true;
    // Megatron: bf16 weights (2 B) + fp32 master, m and v (12 B) per parameter, each tensor saved once.
    const double bytes = checkpoint_bytes(m, l);
    CHECK(bytes == doctest::Approx(14.0 * m.total_params()));
    TopologySpec t = test::small_topology(2);
    t.storage_write_bandwidth_per_node = Bandwidth::GBps(2);
    t.storage_read_bandwidth_per_node = Bandwidth::GBps(4);
    const CheckpointCost cost = checkpoint_cost(bytes, l, t);
    CHECK(cost.save_s == doctest::Approx(bytes / (2 * 2e9)));
    CHECK(cost.load_s == doctest::Approx(bytes / (2 * 4e9)));
    CHECK(cost.copy_s == doctest::Approx(bytes / 16 / 32e9));
    l.checkpoint_save = CheckpointSave::rank0;  // one node writes and reads it all
    CHECK(checkpoint_cost(bytes, l, t).save_s == doctest::Approx(bytes / 2e9));
    // PyTorch FSDP under ZeRO-3: the fp32 shard is the master weight, no 16-bit copy: 12 B per parameter.
    Layout fsdp;
    fsdp.dp = 8;
    fsdp.micro_batch = 1;
    fsdp.global_batch = 8;
    fsdp.zero_stage = 3;
    fsdp.framework = Framework::torchtitan;
    CHECK(checkpoint_bytes(m, fsdp) == doctest::Approx(12.0 * m.total_params()));
    // The rail-optimized fat-tree of 2,048 DGX H100 nodes: 64 groups x 8 rails = 512 leaves, 32 spines.
    TopologySpec big = test::small_topology(2048);
    CHECK(switch_count(big) == 544.0);
    // Three tiers, the k = 64 fat-tree (topologies/dgx-h100-3tier-64k.json): 8,192 nodes, pods of 128 nodes
    // (4 groups x 8 rails = 32 leaves, 32 spines each), 64 pods; 2,048 leaves + 64 x 32 spines + 32 planes x
    // 32 cores = 5,120 = 5 k^2 / 4. With the pod spines oversubscribed 2:1, 16 cores per plane: 4,608.
    TopologySpec three = test::small_topology(8192);
    three.tiers = 3;
    three.nodes_per_pod = 128;
    CHECK(switch_count(three) == 5120.0);
    three.spine_oversubscription = 2.0;
    CHECK(switch_count(three) == 2048.0 + 2048.0 + 32.0 * 16.0);
    // The defaults reproduce the Llama 3 snapshot's 419 interruptions in 54 days on that cluster.
    const FailureModel f = default_failure_model(16384, 2048, 16384, 544);
    CHECK(f.rate_per_s() * 54 * 86400 == doctest::Approx(419.0));
}

TEST_CASE("goodput: bad configurations are refused naming the value") {
    GoodputConfig c = base_config();
    CHECK(contains(message_of<InputError>([&] { check_goodput_config(c); }), "stop condition"));
    c.horizon_s = 100;
    c.interval_steps = 0;
    CHECK(contains(message_of<InputError>([&] { check_goodput_config(c); }), "interval = 0"));
    c.interval_steps = 1;
    c.restart_s = -1;
    CHECK(contains(message_of<InputError>([&] { check_goodput_config(c); }), "restart time = -1"));
    c.restart_s = 1;
    c.failures.weibull_shape = 0;
    CHECK(contains(message_of<InputError>([&] { check_goodput_config(c); }), "Weibull shape = 0"));
    c.failures.weibull_shape = 1;
    CHECK(contains(message_of<InputError>([&] { simulate_goodput(c, 1, 0, 1); }), "seeds = 0"));
    c.failures = one_class(0.01);  // a failure every 10 ms over 100 s: 10^4 failures, fine
    CHECK_NOTHROW(check_goodput_config(c));
    c.horizon_s = 1e5;  // 10^7 failures: refused
    CHECK(contains(message_of<InputError>([&] { check_goodput_config(c); }), "expected failures per run"));
    c.horizon_s = 0;  // a target whose recovery (180 s) never completes within the 10 ms MTBF
    c.target_work_s = 1000;
    CHECK(contains(message_of<InputError>([&] { check_goodput_config(c); }), "expected failures per run"));
    // The class that gives most of them is named with its MTBF (round 13: a denormal MTBF gave "inf expected
    // failures" naming none of the five).
    c.failures = one_class(1000.0, 4.0, FailureComponent::node);
    c.failures.components[static_cast<std::size_t>(FailureComponent::nic)] = {1.0, 5e-324};
    const std::string m = message_of<InputError>([&] { check_goodput_config(c); });
    CAPTURE(m);
    CHECK(
        contains(m, "inf expected failures per run, most from the nic class's MTBF of 4.94e-324 h (1 unit;"));
}

TEST_CASE("goodput: a study's expected events are bounded over its seeds") {
    // Horizon 10^6 s, M = 1000 s: 1000 expected failures; interval 30 steps of 10 s: 3333.3 checkpoints.
    GoodputConfig c = base_config();
    c.horizon_s = 1e6;
    CHECK(expected_run_events(c) ==
          doctest::Approx(limits::kGoodputFailureWorkEvents * 1000.0 + 1e6 / 300.0));
    // Without failures only the checkpoints count.
    GoodputConfig quiet = c;
    quiet.failures = FailureModel{};
    CHECK(expected_run_events(quiet) == doctest::Approx(1e6 / 300.0));
    const double per_run = limits::kGoodputFailureWorkEvents * 1000.0 + 1e6 / 300.0;
    const auto most =
        static_cast<int>(std::floor(static_cast<double>(limits::kMaxGoodputStudyEvents) / per_run));
    const std::string msg = message_of<InputError>([&] { simulate_goodput(c, 1, most + 1, 1); });
    CHECK(contains(msg, fmt::format("--seeds = {}", most + 1)));
    CHECK(contains(msg, fmt::format("at most {} seeds", most)));
}

TEST_CASE("config: the topology's optional storage bandwidths are read and range-checked") {
    const std::string src = TRAINSIM_SOURCE_DIR;
    nlohmann::json j = read_json_file(src + "/topologies/dgx-h100.json");
    TopologySpec t = parse_topology(j, "t.json");
    CHECK(t.storage_write_bandwidth_per_node.bytes_per_s == kDefaultStorageBandwidthPerNode);
    j["storage"] = {{"read_bandwidth_per_node", "5GBps"}, {"write_bandwidth_per_node", "2.5GBps"}};
    t = parse_topology(j, "t.json");
    CHECK(t.storage_read_bandwidth_per_node.bytes_per_s == 5e9);
    CHECK(t.storage_write_bandwidth_per_node.bytes_per_s == 2.5e9);
    j["storage"] = {{"write_bandwidth_per_node", "0.5MBps"}};
    CHECK(contains(message_of<InputError>([&] { parse_topology(j, "t.json"); }),
                   "storage.write_bandwidth_per_node"));
    j["storage"] = {{"bandwidth", "1GBps"}};
    CHECK(contains(message_of<InputError>([&] { parse_topology(j, "t.json"); }), "storage.bandwidth"));
}
