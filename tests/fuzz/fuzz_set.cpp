// libFuzzer harness: `--set key=value` parsing. Each line of the input is one assignment, applied to the
// embedded default topology and workload, which are then read as trainsim run reads them.
#include <string>

#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "trainsim/config.hpp"
#include "trainsim/layout.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trainsim;
    static const nlohmann::json kTopology = default_topology_json();
    static const nlohmann::json kWorkload = default_workload_json();
    fuzz::expect_clean([&] {
        nlohmann::json topo = kTopology, work = kWorkload;
        const std::string_view text = fuzz::as_text(data, size);
        std::size_t start = 0;
        while (start <= text.size()) {
            const std::size_t end = std::min(text.find('\n', start), text.size());
            apply_override(topo, work, std::string(text.substr(start, end - start)));
            start = end + 1;
        }
        const auto t = parse_topology(topo, "topology");
        const auto w = parse_workload(work, "workload");
        check_layout(w.model, w.layout, t.gpus());
    });
    return 0;
}
