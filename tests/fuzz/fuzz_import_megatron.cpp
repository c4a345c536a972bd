// libFuzzer harness: `trainsim import megatron` (split_args_text, import_megatron with its NeMo translation,
// finish_import: the loader and the layout checks of the imported workload).
#include "fuzz_common.hpp"
#include "trainsim/config.hpp"
#include "trainsim/importers.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    trainsim::fuzz::expect_clean([&] {
        trainsim::ImportTarget target;
        target.cluster_gpus = 1024;
        trainsim::Imported imp = trainsim::import_megatron(
            trainsim::split_args_text(trainsim::fuzz::as_text(data, size), "fuzz.args"), "fuzz.args", target);
        nlohmann::json topology = trainsim::default_topology_json();
        trainsim::finish_import(imp, {}, topology);
        (void)trainsim::workload_text(imp.workload);
    });
    return 0;
}
