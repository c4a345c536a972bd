// Benchmark of the goodput target of issue 13 (docs/performance.md has the figure and the machine):
//   BM_Goodput54Days16K_1000Seeds   `trainsim goodput` for Llama 3 405B on 16,384 H100 (DGX H100, 2,048
//   nodes,
//                                   TP 8 x PP 16 x DP 128) with the Llama 3 default MTBFs: the simulated
//                                   step, the checkpoint size, then 54 days of wall time over 1,000 seeds at
//                                   Young's interval on 2 threads: target <= 5 s.
// Run it alone with  trainsim_bench --benchmark_filter=Goodput  (engine_bench.cpp holds BENCHMARK_MAIN).
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "trainsim/config.hpp"
#include "trainsim/goodput.hpp"
#include "trainsim/simulate.hpp"

namespace {

void BM_Goodput54Days16K_1000Seeds(benchmark::State& state) {
    const std::string src = TRAINSIM_SOURCE_DIR;
    const std::string topo_file = src + "/topologies/dgx-h100.json";
    const std::string work_file = src + "/workloads/llama3-405b.json";
    trainsim::TopologySpec topo = trainsim::parse_topology(trainsim::read_json_file(topo_file), topo_file);
    trainsim::Workload work = trainsim::parse_workload(trainsim::read_json_file(work_file), work_file);
    topo.nodes = 2048;
    work.layout.dp = 128;
    double goodput = 0, failures = 0;
    for (auto _ : state) {
        const auto res = trainsim::simulate(topo, work.model, work.layout, work.name);
        const auto ckpt =
            trainsim::checkpoint_cost(trainsim::checkpoint_bytes(work.model, work.layout), work.layout, topo);
        trainsim::GoodputConfig c;
        c.step_s = res.report.step_time_s;
        c.save_s = ckpt.save_s;
        c.copy_s = ckpt.copy_s;
        c.load_s = ckpt.load_s;
        c.horizon_s = 54 * 86400.0;
        c.failures = trainsim::default_failure_model(16384, 2048, 16384, trainsim::switch_count(topo));
        const auto f = trainsim::interval_formulas(c.save_s, 1.0 / c.failures.rate_per_s(),
                                                   c.detection_s + c.restart_s + c.load_s);
        c.interval_steps = std::max<std::int64_t>(1, std::llround(f.young_s / c.step_s));
        const auto s = trainsim::simulate_goodput(c, 1, 1000, static_cast<int>(state.range(0)));
        goodput = s.goodput.p50;
        failures = 0;
        for (const auto& x : s.failures)
            failures += x.mean;
    }
    state.counters["goodput_p50"] = goodput;
    state.counters["failures_per_run"] = failures;
}
BENCHMARK(BM_Goodput54Days16K_1000Seeds)->Arg(2)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
