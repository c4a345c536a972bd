// libFuzzer harness: `trainsim import hf` (parse_json_text, import_hf_config, finish_import).
#include "fuzz_common.hpp"
#include "trainsim/config.hpp"
#include "trainsim/importers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    trainsim::fuzz::expect_clean([&] {
        trainsim::ImportTarget target;
        target.cluster_gpus = 64;
        const auto j = trainsim::parse_json_text(trainsim::fuzz::as_text(data, size), "config.json");
        trainsim::Imported imp = trainsim::import_hf_config(j, "config.json", target);
        nlohmann::json topology = trainsim::default_topology_json();
        trainsim::finish_import(imp, {}, topology);
    });
    return 0;
}
