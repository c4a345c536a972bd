// libFuzzer harness: the workload loader (parse_workload) and the layout checks (check_layout, the limits).
#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "trainsim/config.hpp"
#include "trainsim/layout.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    trainsim::fuzz::expect_clean([&] {
        const auto j = trainsim::parse_json_text(trainsim::fuzz::as_text(data, size), "fuzz.json");
        const auto w = trainsim::parse_workload(j, "fuzz.json");
        const std::int64_t gpus =
            static_cast<std::int64_t>(w.layout.tp) * w.layout.pp * w.layout.dp * w.layout.cp;
        trainsim::check_layout(w.model, w.layout, gpus > 0 && gpus <= (1 << 17) ? static_cast<int>(gpus) : 1);
    });
    return 0;
}
