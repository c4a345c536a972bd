// libFuzzer harness: the calibration loader (parse_calibration, applied to the default topology), the profile
// loader (parse_profile) and the kernel-measurement importer (import_kernel_measurements), each on every
// input.
#include <nlohmann/json.hpp>

#include "fuzz_common.hpp"
#include "trainsim/calibration.hpp"
#include "trainsim/config.hpp"
#include "trainsim/profile.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace trainsim;
    nlohmann::json j;
    try {
        j = parse_json_text(fuzz::as_text(data, size), "fuzz.json");
    } catch (const InputError&) {
        return 0;
    }
    fuzz::expect_clean([&] {
        const Calibration c = parse_calibration(j, "fuzz.json");
        TopologySpec t = parse_topology(default_topology_json(), "default");
        apply_calibration(c, t);
    });
    fuzz::expect_clean([&] { (void)to_json(parse_profile(j, "fuzz.json")); });
    fuzz::expect_clean([&] { (void)import_kernel_measurements(j, "fuzz.json", "H100-SXM5-80GB", "fuzz"); });
    return 0;
}
