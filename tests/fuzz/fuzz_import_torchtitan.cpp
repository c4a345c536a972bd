// libFuzzer harness: `trainsim import torchtitan` (toml++'s parser, import_torchtitan, finish_import).
#include "fuzz_common.hpp"
#include "trainsim/config.hpp"
#include "trainsim/importers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    trainsim::fuzz::expect_clean([&] {
        trainsim::ImportTarget target;
        target.cluster_gpus = 64;
        trainsim::Imported imp =
            trainsim::import_torchtitan(trainsim::fuzz::as_text(data, size), "t.toml", target);
        nlohmann::json topology = trainsim::default_topology_json();
        trainsim::finish_import(imp, {}, topology);
    });
    return 0;
}
