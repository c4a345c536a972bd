// Benchmark of the jitter-study target of issue 13 (docs/performance.md has the figure and the machine):
//   BM_JitterStudy70B_1024_100Seeds   `trainsim run --topology topologies/dgx-h100.json --workload
//                                     workloads/llama3-70b.json --jitter lognormal,sigma=0.05 --seeds 100
//                                     --jobs 2` without the printing: Llama 3 70B on 1,024 H100 (TP 8 x PP 4
//                                     x DP 32), the unperturbed run, then 100 jittered seeds on 2 threads:
//                                     target <= 30 s on 2 cores.
// Run it alone with  trainsim_bench --benchmark_filter=JitterStudy  (engine_bench.cpp holds BENCHMARK_MAIN).
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <string>

#include "trainsim/config.hpp"
#include "trainsim/scenario_study.hpp"

namespace {

void BM_JitterStudy70B_1024_100Seeds(benchmark::State& state) {
    const std::string src = TRAINSIM_SOURCE_DIR;
    const std::string topo_file = src + "/topologies/dgx-h100.json";
    const std::string work_file = src + "/workloads/llama3-70b.json";
    const trainsim::TopologySpec topo =
        trainsim::parse_topology(trainsim::read_json_file(topo_file), topo_file);
    const trainsim::Workload work = trainsim::parse_workload(trainsim::read_json_file(work_file), work_file);
    trainsim::SimulationOptions o;
    o.perturbations.jitter = trainsim::parse_jitter("lognormal,sigma=0.05");
    double median = 0, base = 0;
    for (auto _ : state) {
        trainsim::SimulationResult first;
        const trainsim::ScenarioStudy st = trainsim::study_scenario(
            topo, work.model, work.layout, work.name, o, 100, static_cast<int>(state.range(0)), first);
        median = st.median_step_s;
        base = st.base_step_time_s;
    }
    state.counters["median_step_s"] = median;
    state.counters["unperturbed_step_s"] = base;
}
BENCHMARK(BM_JitterStudy70B_1024_100Seeds)->Arg(2)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
