// The shipped presets (workloads/*.json, topologies/*.json) as users copy them: no preset carries a
// `measured` block (a copied preset kept it, and the report compared a changed run with a published figure:
// the published comparisons are rows of tests/validation/public_runs.json, `run --from-runs FILE --id ID`),
// and the Llama 3 405B preset fits its documented cluster (issue 14).
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <string>

#include "trainsim/config.hpp"
#include "trainsim/gpu_catalog.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/program.hpp"

using namespace trainsim;

namespace {

const std::string kSrc = TRAINSIM_SOURCE_DIR;

}  // namespace

TEST_CASE("presets: no workload preset carries a measured block") {
    int presets = 0;
    for (const auto& entry : std::filesystem::directory_iterator(kSrc + "/workloads")) {
        if (entry.path().extension() != ".json") continue;
        const std::string file = entry.path().string();
        CAPTURE(file);
        ++presets;
        const nlohmann::json j = read_json_file(file);
        CHECK_FALSE(j.contains("measured"));
        CHECK_FALSE(parse_workload(j, file).measured.has_value());
    }
    CHECK(presets >= 4);
}

TEST_CASE("presets: a user's workload may still carry a measured block") {
    nlohmann::json j = read_json_file(kSrc + "/workloads/gpt3-175b.json");
    j["measured"] = {{"source", "my cluster, 2026-11-20"},
                     {"step_time_s", 31.5},
                     {"tflops_per_gpu", 140},
                     {"tflops_convention", "narayanan2021-eq3"}};
    const Workload w = parse_workload(j, "mine.json");
    REQUIRE(w.measured.has_value());
    CHECK(w.measured->step_time_s == 31.5);
    CHECK(w.measured->source == "my cluster, 2026-11-20");
}

TEST_CASE(
    "presets: Llama 3 405B fits its documented cluster, 16,384 H100 (Meta's layout, arXiv:2407.21783 Table "
    "4)") {
    const std::string topo_file = kSrc + "/topologies/dgx-h100.json";
    const std::string work_file = kSrc + "/workloads/llama3-405b.json";
    TopologySpec t = parse_topology(read_json_file(topo_file), topo_file);
    const Workload w = parse_workload(read_json_file(work_file), work_file);
    t.nodes = 2048;  // the description's `--set topology.nodes=2048`
    CHECK(w.layout.tp == 8);
    CHECK(w.layout.cp == 1);
    CHECK(w.layout.pp == 16);
    CHECK(w.layout.dp == 128);
    CHECK(w.layout.global_batch * w.model.seq_len == 2048 * 8192);  // 16M tokens per batch
    REQUIRE_NOTHROW(check_layout(w.model, w.layout, t.gpus()));
    const GpuSpec& gpu = find_gpu(t.gpu, "topology.gpu");
    // The memory walk over the schedule's order (the same piles and peaks `trainsim memory` reports; the
    // simulation adds only the times).
    const MemoryReport mem = simulate_memory(w.model, w.layout, build_program(w.model, w.layout), gpu);
    CAPTURE(mem.oom_message());
    CHECK(mem.fits());
    CHECK(mem.peak().peak_bytes < gpu.hbm_bytes);
}
