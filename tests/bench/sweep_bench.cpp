// Benchmarks of the targets of the issue "sweep" (docs/performance.md has the figures and the machine):
//   BM_Llama405B_16K_OneIteration   one simulated iteration of Llama 3 405B on 16,384 H100 (DGX H100, 2048
//                                   nodes; TP 8 x PP 16 x DP 128): target <= 1 s and <= 1 GiB RSS on one core
//   BM_SweepLlama70B_1024           the full default sweep of Llama 3 70B on 1,024 H100 on 2 threads:
//                                   target <= 60 s
//   BM_SweepPruned/W/N               the text sweep's default (`trainsim sweep`: the top 10 per size, the
//   rest
//                                   pruned by step_time_lower_bound_s) of Qwen3-30B-A3B on 1,024 H100 and of
//                                   Llama 3 8B on 128, 2 threads: targets <= 30 s and <= 60 s (the first is
//                                   the all-to-all bound's case, the second the checks of deep programs)
// Both are registered with one iteration: each takes seconds to minutes today. Run them alone with
//   trainsim_bench --benchmark_filter='Llama'
// (engine_bench.cpp holds BENCHMARK_MAIN).
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <string>

#include "trainsim/config.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/sweep.hpp"

namespace {

struct Preset {
    trainsim::TopologySpec topology;
    trainsim::Workload workload;
};

/// topologies/dgx-h100.json with `nodes` nodes and the workload preset `workload` (workloads/*.json).
Preset load(const std::string& workload, int nodes) {
    const std::string src = TRAINSIM_SOURCE_DIR;
    const std::string topo_file = src + "/topologies/dgx-h100.json";
    const std::string work_file = src + "/workloads/" + workload;
    Preset p{trainsim::parse_topology(trainsim::read_json_file(topo_file), topo_file),
             trainsim::parse_workload(trainsim::read_json_file(work_file), work_file)};
    p.topology.nodes = nodes;
    return p;
}

void BM_Llama405B_16K_OneIteration(benchmark::State& state) {
    Preset p = load("llama3-405b.json", 2048);
    p.workload.layout.dp = 128;  // TP 8 x PP 16 x DP 128 = 16,384 GPUs; global batch 2048: 16 micro-batches
    std::uint64_t events = 0;
    double step_s = 0;
    for (auto _ : state) {
        const auto res = trainsim::simulate(p.topology, p.workload.model, p.workload.layout, p.workload.name);
        events += res.report.events;
        step_s = res.report.step_time_s;
    }
    state.counters["events/s"] = benchmark::Counter(static_cast<double>(events), benchmark::Counter::kIsRate);
    state.counters["simulated_step_s"] = step_s;
}
BENCHMARK(BM_Llama405B_16K_OneIteration)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void BM_SweepLlama70B_1024(benchmark::State& state) {
    const Preset p = load("llama3-70b.json", 128);
    trainsim::SweepOptions options;
    options.jobs = static_cast<int>(state.range(0));
    std::size_t layouts = 0, simulated = 0;
    for (auto _ : state) {
        const auto res = trainsim::run_sweep(p.topology, p.workload.model, p.workload.layout,
                                             trainsim::SweepGrid{}, p.workload.name, options);
        layouts += res.entries.size();
        simulated += res.simulated;
    }
    state.counters["layouts"] = static_cast<double>(layouts);
    state.counters["simulated"] = static_cast<double>(simulated);
    state.counters["simulated/s"] =
        benchmark::Counter(static_cast<double>(simulated), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_SweepLlama70B_1024)->Arg(2)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

void sweep_pruned(benchmark::State& state, const std::string& workload, int nodes, bool keep_front = false) {
    const Preset p = load(workload, nodes);
    trainsim::SweepOptions options;
    options.jobs = 2;
    options.prune_beyond_top = 10;
    options.prune_keeps_pareto_front = keep_front;  // sweep --html
    std::size_t simulated = 0, pruned = 0;
    for (auto _ : state) {
        const auto res = trainsim::run_sweep(p.topology, p.workload.model, p.workload.layout,
                                             trainsim::SweepGrid{}, p.workload.name, options);
        simulated += res.simulated;
        pruned += res.pruned;
    }
    state.counters["simulated"] = static_cast<double>(simulated);
    state.counters["pruned"] = static_cast<double>(pruned);
}
BENCHMARK_CAPTURE(sweep_pruned, qwen3_30b_a3b_1024, std::string("qwen3-30b-a3b.json"), 128)
    ->Name("BM_SweepPruned/qwen3-30b-a3b/1024")
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();
// sweep --html: pruned, the Pareto front of step time against peak memory kept (29 s exhaustive, 2026-11-28).
BENCHMARK_CAPTURE(sweep_pruned, llama3_70b_1024_front, std::string("llama3-70b.json"), 128, true)
    ->Name("BM_SweepPrunedKeepingFront/llama3-70b/1024")
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();
BENCHMARK_CAPTURE(sweep_pruned, llama3_8b_128, std::string("llama3-8b.json"), 16)
    ->Name("BM_SweepPruned/llama3-8b/128")
    ->Iterations(1)
    ->Unit(benchmark::kSecond)
    ->UseRealTime();

}  // namespace
