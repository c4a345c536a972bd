// libFuzzer harness: the topology loader (read_json_file's parser, parse_topology, check_topology).
#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "trainsim/config.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    trainsim::fuzz::expect_clean([&] {
        const auto j = trainsim::parse_json_text(trainsim::fuzz::as_text(data, size), "fuzz.json");
        const auto t = trainsim::parse_topology(j, "fuzz.json");
        (void)t.gpus();
    });
    return 0;
}
