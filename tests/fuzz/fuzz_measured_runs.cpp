// libFuzzer harness: the measured-runs loader (parse_measured_runs; rows it cannot read carry an error).
#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "trainsim/config.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/measured_runs.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    trainsim::fuzz::expect_clean([&] {
        const auto j = trainsim::parse_json_text(trainsim::fuzz::as_text(data, size), "fuzz.json");
        const auto runs = trainsim::parse_measured_runs(j, "fuzz.json");
        for (const auto& r : runs.runs)
            if (!r.error && !r.unsupported)
                trainsim::fuzz::expect_clean(
                    [&] { trainsim::check_layout(r.model, r.layout, r.topology.gpus()); });
    });
    return 0;
}
