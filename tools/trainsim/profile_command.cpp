// `trainsim profile import FILE [--gpu NAME] [--out FILE]`: converts reference kernel measurements (format
// trainsim-kernel-measurements/1) into a hardware profile (trainsim-profile/1); `trainsim profile check FILE`
// reads a profile and prints what it holds.
#include <iostream>

#include <fmt/format.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/output_file.hpp"
#include "trainsim/profile.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

/// Catalog name of a GPU as its driver names it; empty when not known (then --gpu is needed).
std::string catalog_name(const std::string& device) {
    if (device == "NVIDIA H100 80GB HBM3") return "H100-SXM5-80GB";
    if (device == "NVIDIA A100-SXM4-80GB") return "A100-SXM4-80GB";
    if (device == "NVIDIA A100-SXM4-40GB") return "A100-SXM4-40GB";
    return "";
}

int import_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim profile import FILE [options]\n\n"
        "Converts kernel measurements (format trainsim-kernel-measurements/1, e.g.\n"
        "../shared/calibration/h100/kernels.json) into a hardware profile (format trainsim-profile/1) that\n"
        "`run`, `memory`, `sweep` and `validate` read with --profile and `fit` with --profile.\n\noptions");
    std::vector<std::string> files;
    std::string gpu, out_file;
    desc.add_options()("help,h", "this help")(
        "gpu", po::value(&gpu),
        "GPU catalog name the profile describes (default: from the device name; NVIDIA H100 80GB HBM3 is "
        "H100-SXM5-80GB)")("out", po::value(&out_file), "profile file to write (default: print it)")(
        "files", po::value(&files)->composing(), "the measurements file");
    po::variables_map vm;
    if (!parse_file_command(args, desc, vm, "profile import")) return kExitOk;
    if (files.size() != 1) throw InputError("profile import: give exactly one measurements file");
    check_output_option(vm, "out", out_file, "profile import");
    const std::string& in = files.front();
    check_distinct_outputs({{"--out", out_file}}, {{"the measurements file", in}});
    const nlohmann::json j = read_json_file(in);
    const std::string device = j.is_object() && j.contains("device") && j["device"].is_object() &&
                                       j["device"].contains("gpu") && j["device"]["gpu"].is_string()
                                   ? j["device"]["gpu"].get<std::string>()
                                   : "";
    // Measurements of a known GPU are not another GPU's profile (B200 timed by H100 kernels).
    if (!gpu.empty() && !catalog_name(device).empty() && catalog_name(device) != gpu)
        throw InputError(fmt::format("{}: device.gpu = \"{}\" is {}, not --gpu {}", in, device,
                                     catalog_name(device), clip_for_message(gpu)));
    if (gpu.empty()) {
        gpu = catalog_name(device);
        // The value as the file holds it (a number, an object, or nothing), not the empty name read from it.
        const std::string shown =
            j.contains("device") && j["device"].is_object() && j["device"].contains("gpu")
                ? clip_for_message(j["device"]["gpu"].dump())
                : "(missing)";
        if (gpu.empty())
            throw InputError(fmt::format(
                "{}: device.gpu = {} has no catalog name known to the importer; give --gpu NAME", in, shown));
    }
    const std::string source = fmt::format(
        "Imported by `trainsim profile import {}{}` from the reference measurements {} (format "
        "trainsim-kernel-measurements/1; ../shared/calibration/README.md): PyTorch CUDA events, median of "
        "repetitions after warm-up, random normal inputs, clocks as found (boost enabled, no locking).",
        in, vm.count("gpu") ? " --gpu " + gpu : "", in);
    const Profile p = import_kernel_measurements(j, in, gpu, source);
    const std::string text = to_json(p).dump(1) + "\n";
    // A profile larger than an input file may be (config.hpp) could not be read back: a 64 MiB measurements
    // file of 609,303 GEMM rows wrote a 117 MB profile that --profile then refused.
    if (text.size() > kMaxInputFileBytes)
        throw InputError(
            fmt::format("{}: the profile would be {:.0f} MiB, past the {} MiB an input file may hold "
                        "(config.hpp); give fewer kernel rows",
                        in, static_cast<double>(text.size()) / (1 << 20), kMaxInputFileBytes >> 20));
    if (out_file.empty()) {
        std::cout << text;
        flush_stdout();  // the summary below came before the error of a failed write: 2 lines
    } else {
        write_file_atomically(out_file, text);
    }
    std::cerr << fmt::format(
        "profile import: {} gemm, {} attention, {} memory-bound, {} layer rows for {} ({}, {})\n",
        p.gemm.size(), p.attention.size(), p.memory_bound.size(), p.layers.size(), p.gpu, p.device.name,
        p.date);
    return kExitOk;
}

}  // namespace

int profile_command(const std::vector<std::string>& args) {
    if (args.empty())
        throw InputError("profile: no subcommand given (import); `trainsim profile --help` says more");
    if (args[0] == "--help" || args[0] == "-h") {
        std::cout
            << "trainsim profile import FILE [--gpu NAME] [--out FILE]\n"
               "  converts kernel measurements (trainsim-kernel-measurements/1) into a hardware profile\n"
               "  (trainsim-profile/1); trainsim profile import --help lists the options\n";
        return kExitOk;
    }
    if (args[0] == "import") return import_command({args.begin() + 1, args.end()});
    throw InputError(fmt::format("profile: unknown subcommand \"{}\" (known: import)", args[0]));
}

}  // namespace trainsim::cli
