// Benchmark of the trace target of issue 14 (docs/performance.md has the figures and the machine):
//   BM_DefaultRunWithTrace   `trainsim run --trace FILE` on the embedded default (GPT-3 175B on 1,024 A100,
//                            TP 8 x PP 16 x DP 8): one simulated iteration with the Chrome trace of DP
//                            replica 0 (128 GPUs, about 310 MB) streamed to a file through OutputFile, as the
//                            CLI does: target <= 3 s and <= 300 MB RSS (RSS: /usr/bin/time -v on the CLI).
// Run it alone with  trainsim_bench --benchmark_filter=Trace  (engine_bench.cpp holds BENCHMARK_MAIN). It
// writes into the system's temporary folder and removes the file.
#include <benchmark/benchmark.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "trainsim/config.hpp"
#include "trainsim/output_file.hpp"
#include "trainsim/report.hpp"
#include "trainsim/simulate.hpp"

namespace {

void BM_DefaultRunWithTrace(benchmark::State& state) {
    const trainsim::TopologySpec topo =
        trainsim::parse_topology(trainsim::default_topology_json(), "embedded dgx-a100");
    const trainsim::Workload work = trainsim::parse_workload(trainsim::default_workload_json(), "gpt3-175b");
    const std::string file = (std::filesystem::temp_directory_path() / "trainsim-bench-trace.json").string();
    std::uint64_t bytes = 0, slices = 0;
    for (auto _ : state) {
        trainsim::OutputFile out(file);
        trainsim::ChromeTraceWriter writer(work.layout, trainsim::TraceSelection{},
                                           [&](std::string_view piece) { out.write(piece); });
        const auto res =
            trainsim::simulate(topo, work.model, work.layout, work.name, trainsim::with_timeline({&writer}));
        out.commit();
        bytes = out.bytes();
        slices = writer.slices_written();
        benchmark::DoNotOptimize(res.report.step_time_s);
    }
    std::filesystem::remove(file);
    state.counters["trace_MB"] = static_cast<double>(bytes) / 1e6;
    state.counters["slices"] = static_cast<double>(slices);
}
BENCHMARK(BM_DefaultRunWithTrace)->Iterations(1)->Unit(benchmark::kSecond)->UseRealTime();

}  // namespace
