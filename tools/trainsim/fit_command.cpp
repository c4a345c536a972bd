// `trainsim fit FILE... --gpu NAME [--constants a,b] [--out FILE] [--jobs J]`: fits model constants of one
// GPU type to the measured runs of that type (Levenberg-Marquardt on log step-time errors:
// include/trainsim/step_time_fit.hpp), and writes a calibration file (trainsim-calibration/1) with the fitted
// values, the residuals before and after, and the command. The constants are fitted as multipliers of the
// catalog's values; efficiencies are kept at most 1.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <map>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "trainsim/calibration.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/kernel_fit.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/output_file.hpp"
#include "trainsim/profile.hpp"
#include "trainsim/step_time_fit.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

/// n, median, 90th percentile and max of |error| of one group of residuals, before and after.
nlohmann::json group_summary(const std::vector<FitResidual>& rows, const std::string& group,
                             std::string& text) {
    std::vector<double> before, after;
    for (const auto& r : rows)
        if (r.group == group) {
            before.push_back(std::fabs(r.error_before_pct()));
            after.push_back(std::fabs(r.error_pct()));
        }
    if (after.empty()) return nullptr;
    auto stats = [](std::vector<double> v) {
        std::sort(v.begin(), v.end());
        const std::size_t n = v.size();
        const double median = n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
        return nlohmann::json{{"median_abs_error_pct", median},
                              {"p90_abs_error_pct", v[std::min(n - 1, n * 9 / 10)]},
                              {"max_abs_error_pct", v.back()}};
    };
    const auto b = stats(before), a = stats(after);
    text += fmt::format(
        "  {:<16} {:>4} rows  |error| median {:5.1f}% p90 {:5.1f}% max {:5.1f}%   (catalog: median "
        "{:.1f}%, max {:.1f}%)\n",
        group, after.size(), a["median_abs_error_pct"].get<double>(), a["p90_abs_error_pct"].get<double>(),
        a["max_abs_error_pct"].get<double>(), b["median_abs_error_pct"].get<double>(),
        b["max_abs_error_pct"].get<double>());
    return {{"rows", after.size()}, {"after", a}, {"before", b}};
}

/// The command as run, for the calibration file's `source`, less its --jobs (the fit does not depend on it,
/// so neither does the file: `--jobs 1` and `--jobs 2` wrote files that differed in this line).
std::string command_line(const std::vector<std::string>& args) {
    std::string cmd = "trainsim fit";
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (args[i] == "--jobs") {
            ++i;  // and its value
            continue;
        }
        if (args[i].rfind("--jobs=", 0) == 0) continue;
        cmd += " " + args[i];
    }
    return cmd;
}

/// The items of a comma-separated list, in order, empty ones kept ("a,,b" has an empty item, which a
/// constant name refuses); "" has none.
std::vector<std::string> comma_separated(const std::string& list) {
    std::vector<std::string> out;
    std::stringstream ss(list);
    std::string item;
    while (std::getline(ss, item, ','))
        out.push_back(item);
    if (!list.empty() && list.back() == ',') out.emplace_back();
    return out;
}

/// The prefixes of --id-prefix or --attention-held-out: "" is none (every run; no row held out), and an empty
/// item is refused ("a," and "," dropped it: "," fitted every run, as `validate --only` refuses; round 12).
std::vector<std::string> prefix_list(const std::string& list, const char* option) {
    std::vector<std::string> out = comma_separated(list);
    if (std::find(out.begin(), out.end(), std::string()) != out.end())
        throw InputError(
            fmt::format("fit: --{} = \"{}\" has an empty prefix (prefixes are separated by "
                        "single commas)",
                        option, clip_for_message(list)));
    // A prefix given twice was taken once without a word, as `validate --only a,a` was before round 9.
    for (const std::string& p : out)
        if (std::count(out.begin(), out.end(), p) > 1)
            throw InputError(fmt::format("fit: --{} = \"{}\" names the prefix \"{}\" twice", option,
                                         clip_for_message(list), clip_for_message(p)));
    return out;
}

/// Each prefix of a list the user gave must select something: `--id-prefix narayanan2021,nomatch` fitted the
/// narayanan2021 runs and said nothing of the other prefix (a typo), where `validate --only` refuses an id
/// that names no run (round 15). `labels` are what the prefixes select from; `what` names them.
void check_every_prefix_selects(const std::vector<std::string>& prefixes,
                                const std::vector<std::string>& labels, const char* option,
                                const std::string& what) {
    for (const std::string& p : prefixes)
        if (std::none_of(labels.begin(), labels.end(),
                         [&](const std::string& label) { return label.rfind(p, 0) == 0; }))
            throw InputError(
                fmt::format("fit: --{} prefix \"{}\" selects none of {}", option, clip_for_message(p), what));
}

/// The calibration file of a step-time fit: the fitted values, and under "fit" the objective, the catalog's
/// values and each run's error before and after.
nlohmann::json step_time_fit_json(const StepTimeFit& fit, const std::vector<std::string>& names,
                                  const std::string& command) {
    Calibration cal;
    cal.source =
        fmt::format("fitted by `{}` to {} measured runs on {}", command, fit.runs.size(), fit.catalog.name);
    nlohmann::json catalog = nlohmann::json::object();
    for (const auto& name : names) {
        GpuSpec fitted = fit.fitted, before = fit.catalog;
        cal.gpus[fit.catalog.name][name] = gpu_constant(fitted, name);
        catalog[name] = gpu_constant(before, name);
    }
    nlohmann::json runs = nlohmann::json::array();
    for (const auto& r : fit.runs)
        runs.push_back({{"id", r.id},
                        {"measured_step_time_s", r.measured_step_time_s},
                        {"error_pct_before", r.error_pct_before},
                        {"error_pct_after", r.error_pct_after}});
    nlohmann::json j = to_json(cal);
    j["fit"] = {{"objective", "sum of squared log(predicted/measured) step time"},
                {"iterations", fit.iterations},
                {"catalog_values", catalog},
                {"rms_log_error_before", fit.rms_log_error_before},
                {"rms_log_error_after", fit.rms_log_error_after},
                {"runs", runs}};
    return j;
}

/// A fit whose constants land outside the ranges the calibration loader accepts (an efficiency above 1:
/// measurements faster than the GPU's peak) is refused (InputError, exit 2): trainsim never writes a file it
/// would refuse to read (a GEMM row at 22 PFLOP/s on H100 gave gemm_max_efficiency 22.3 with exit 0).
void refuse_out_of_range(const nlohmann::json& calibration, const std::string& from) {
    try {
        parse_calibration(calibration, "the fitted calibration");
    } catch (const InputError& e) {
        throw InputError(
            fmt::format("fit: the constants fitted to {} are outside their ranges ({}); are the "
                        "measurements faster than the GPU's datasheet peak, or far slower than the model?",
                        from, e.what()));
    }
}

int fit_profile(const std::vector<std::string>& args, const std::string& profile_file, std::string gpu_name,
                const std::string& fit_prefix, const std::vector<std::string>& attention_held_out,
                bool check_held_out, const std::string& out_file) {
    const Profile profile = read_profile(profile_file);
    if (check_held_out) {  // the default's prefixes may name no row of a profile measured elsewhere
        std::vector<std::string> labels;
        for (const auto& a : profile.attention)
            if (a.backend != AttentionKernel::unfused) labels.push_back(a.timing.label);
        check_every_prefix_selects(attention_held_out, labels, "attention-held-out",
                                   fmt::format("the fused attention rows of {}", profile_file));
    }
    if (gpu_name.empty()) gpu_name = profile.gpu;
    if (gpu_name != profile.gpu)
        throw InputError(fmt::format("{}: the profile describes GPU {}, but --gpu is {}", profile_file,
                                     profile.gpu, gpu_name));
    KernelFitOptions options;
    options.fit_prefix = fit_prefix;
    options.attention_held_out = attention_held_out;
    const KernelFit fit = fit_kernel_model(profile, find_gpu(gpu_name, "--gpu"), options);
    Calibration cal;
    cal.source = fmt::format(
        "fitted by `{}` to the kernel times of {} ({}, {}); GEMMs fitted on the rows "
        "labelled \"{}...\", the other bf16 GEMMs and the layers held out; attention rows labelled "
        "\"{}...\" held out",
        command_line(args), profile_file, profile.device.name, profile.date, fit_prefix,
        fmt::join(attention_held_out, "...\", \""));
    nlohmann::json catalog = nlohmann::json::object();
    std::string text = fmt::format("fit of the {} kernel model to {}:\n", gpu_name, profile_file);
    for (const auto& name : fit.constants) {
        GpuSpec a = fit.after, b = fit.before;
        cal.gpus[gpu_name][name] = gpu_constant(a, name);
        catalog[name] = gpu_constant(b, name);
        text += fmt::format("  {:<28} {:>12.6g}   (catalog {:.6g})\n", name, gpu_constant(a, name),
                            gpu_constant(b, name));
    }
    text += "residuals, predicted vs measured time (fitted groups, then held out):\n";
    nlohmann::json summary = nlohmann::json::object();
    for (const char* g :
         {"gemm fitted", "gemm fp8", "attention cudnn", "attention flash", "memory", "gemm held out",
          "attention cudnn held out", "attention flash held out", "layer fwd+bwd"}) {
        auto s = group_summary(fit.residuals, g, text);
        if (!s.is_null()) summary[g] = s;
    }
    text += "layers (held out; forward+backward of one TP rank, kernels of the program builder):\n";
    nlohmann::json rows = nlohmann::json::array();
    for (const auto& r : fit.residuals) {
        rows.push_back({{"group", r.group},
                        {"label", r.label},
                        {"measured_s", r.measured_s},
                        {"error_pct_before", r.error_before_pct()},
                        {"error_pct_after", r.error_pct()}});
        if (r.group == "layer fwd+bwd")
            text += fmt::format(
                "  {:<34} measured {:8.3f} ms  fitted {:8.3f} ms {:+6.1f}%  (catalog {:+6.1f}%)\n", r.label,
                r.measured_s * 1e3, r.predicted_after_s * 1e3, r.error_pct(), r.error_before_pct());
    }
    nlohmann::json j = to_json(cal);
    refuse_out_of_range(j, profile_file);
    j["fit"] = {
        {"objective", "per stage, sum of squared log(predicted/measured) kernel time (Levenberg-Marquardt)"},
        {"profile", profile_file},
        {"fitted_gemm_rows", fit_prefix + "*"},
        {"held_out_attention_rows", attention_held_out},
        {"iterations", fit.iterations},
        {"catalog_values", catalog},
        {"summary", summary},
        {"rows", rows}};
    if (out_file.empty()) {
        std::cout << j.dump(1) << "\n";
        flush_stdout();  // else a failed write ended with the table's 45 lines on stderr before its error
        std::cerr << text;
    } else {
        write_file_atomically(out_file, j.dump(1) + "\n");
        std::cout << text;
    }
    return kExitOk;
}

}  // namespace

int fit_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim fit FILE... --gpu NAME [options]\n\n"
        "Fits model constants of one GPU type to the measured runs of that type in measured-run files "
        "(format\n"
        "trainsim-measured-runs/1): minimizes the sum of squared log step-time errors by Levenberg-Marquardt "
        "with\n"
        "finite-difference Jacobians. Writes a calibration file (format trainsim-calibration/1) that `run` "
        "and\n"
        "`validate` read with --calibration, including the per-run errors before and after the "
        "fit.\n\noptions");
    std::vector<std::string> files;
    std::string gpu_name, constants = "gemm_max_efficiency,hbm_efficiency", out_file;
    int jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    int max_iterations = 6;
    std::string id_prefixes, profile_file, fit_on = "grid", attention_held_out = "llama2_,nemo_";
    desc.add_options()("help,h", "this help")("gpu", po::value(&gpu_name),
                                              "GPU catalog name whose runs are fitted")(
        "constants", po::value(&constants),
        "comma-separated constants to fit (default gemm_max_efficiency,hbm_efficiency)")(
        "out", po::value(&out_file), "calibration file to write (default: print it)")(
        "jobs", po::value(&jobs),
        "simulations in parallel (default: all cores); the result does not depend on it")(
        "iterations", po::value(&max_iterations), "at most this many Levenberg-Marquardt steps (default 6)")(
        "id-prefix", po::value(&id_prefixes),
        "comma-separated run-id prefixes: fit only the runs whose id starts with one (default: every run of "
        "the GPU)")(
        "profile", po::value(&profile_file),
        "instead of measured runs: fit the analytic kernel model (GEMM, fp8 GEMM, attention per "
        "backend, memory) to the kernel times of a hardware profile (trainsim-profile/1); prints the "
        "residuals on the fitted and the held-out rows and the layers")(
        "fit-on", po::value(&fit_on),
        "with --profile: fit the 16-bit GEMMs whose label starts with this (default \"grid\"); the others "
        "are "
        "held out")(
        "attention-held-out", po::value(&attention_held_out),
        "with --profile: comma-separated label prefixes of the attention rows held out of the fit "
        "(default \"llama2_,nemo_\"; empty: fit every row)")("files", po::value(&files)->composing(),
                                                             "measured-run files");
    po::variables_map vm;
    if (!parse_file_command(args, desc, vm, "fit")) return kExitOk;
    check_output_option(vm, "out", out_file, "fit");
    {  // the calibration written never replaces a file it was fitted to
        std::vector<NamedFile> inputs = {{"--profile", profile_file}};
        for (const std::string& f : files)
            inputs.push_back({"the measured-run file", f});
        check_distinct_outputs({{"--out", out_file}}, inputs);
    }
    if (!profile_file.empty()) {
        if (!files.empty())
            throw InputError("fit: --profile fits kernel times; give no measured-run file with it");
        for (const char* step_time_only : {"constants", "jobs", "iterations", "id-prefix"})
            if (vm.count(step_time_only) && !vm[step_time_only].defaulted())
                throw InputError(fmt::format(
                    "fit: --{} applies to a fit of measured runs, not to --profile (which fits kernel times)",
                    step_time_only));
    } else {
        for (const char* profile_only : {"fit-on", "attention-held-out"})
            if (vm.count(profile_only) && !vm[profile_only].defaulted())
                throw InputError(fmt::format("fit: --{} applies only with --profile", profile_only));
    }
    if (!profile_file.empty()) {
        return fit_profile(args, profile_file, gpu_name, fit_on,
                           prefix_list(attention_held_out, "attention-held-out"),
                           vm.count("attention-held-out") && !vm["attention-held-out"].defaulted(), out_file);
    }
    if (files.empty()) throw InputError("fit: no measured-run file given");
    if (gpu_name.empty()) throw InputError("fit: --gpu is required");
    check_jobs(jobs, "");
    StepTimeFitOptions options;
    options.constants = comma_separated(constants);
    for (const std::string& name : options.constants) {  // an unknown name, named with its option
        if (std::count(options.constants.begin(), options.constants.end(), name) > 1)
            throw InputError(fmt::format("fit: --constants: \"{}\" is named twice", clip_for_message(name)));
        try {
            GpuSpec probe;
            (void)gpu_constant(probe, name);
        } catch (const InputError& e) {
            throw InputError(fmt::format("fit: --constants: {}", e.what()));
        }
    }
    options.max_iterations = max_iterations;
    options.jobs = jobs;
    const GpuSpec catalog = find_gpu(gpu_name, "--gpu");
    std::vector<MeasuredRunsFile> parsed;
    for (const auto& f : files)
        parsed.push_back(parse_measured_runs(read_json_file(f), f));
    // A run id in two files (one file given twice) weighed its runs twice in the fit; refused, as validate
    // refuses it (round 12).
    std::map<std::string, std::size_t> file_of_id;
    for (std::size_t f = 0; f < parsed.size(); ++f)
        for (const auto& r : parsed[f].runs)
            if (const auto [it, fresh] = file_of_id.emplace(r.id, f); !fresh)
                throw InputError(fmt::format(
                    "fit: {}: run id \"{}\" is also a run of {}; ids must be unique across the files fitted",
                    files[f], clip_for_message(r.id), files[it->second]));
    const auto runs = runs_to_fit(parsed, gpu_name, prefix_list(id_prefixes, "id-prefix"));
    if (runs.size() < options.constants.size())  // named with the files and --id-prefix that selected them
        throw InputError(fmt::format(
            "fit: {}: {} runs on {} with a measured step time{}; fitting {} constants needs at least as many",
            clip_for_message(fmt::format("{}", fmt::join(files, ", ")), 200), runs.size(), gpu_name,
            id_prefixes.empty()
                ? ""
                : fmt::format(" and an id starting with --id-prefix \"{}\"", clip_for_message(id_prefixes)),
            options.constants.size()));
    {
        std::vector<std::string> ids;
        for (const MeasuredRun* r : runs)
            ids.push_back(r->id);
        check_every_prefix_selects(
            prefix_list(id_prefixes, "id-prefix"), ids, "id-prefix",
            fmt::format("the {} runs on {} with a measured step time of {}", runs.size(), gpu_name,
                        clip_for_message(fmt::format("{}", fmt::join(files, ", ")), 200)));
    }
    const StepTimeFit fit = fit_step_time_constants(runs, catalog, options);
    const nlohmann::json fitted = step_time_fit_json(fit, options.constants, command_line(args));
    // Before the progress lines: a refused fit is one line on stderr; so is a failed write (a full disk, a
    // closed standard output), the lines coming after the output.
    refuse_out_of_range(fitted, fmt::format("{}", fmt::join(files, ", ")));
    const std::string text = fitted.dump(2) + "\n";
    if (out_file.empty()) {
        std::cout << text;
        flush_stdout();
    } else {
        write_file_atomically(out_file, text);
    }
    for (std::size_t i = 0; i < fit.steps.size(); ++i)
        std::cerr << fmt::format("fit: iteration {}: rms log error {:.4f} -> {}\n", i + 1,
                                 fit.steps[i].rms_log_error_before,
                                 std::isfinite(fit.steps[i].rms_log_error_after)
                                     ? fmt::format("{:.4f}", fit.steps[i].rms_log_error_after)
                                     : std::string("(a run past the simulated range: step rejected)"));
    return kExitOk;
}

}  // namespace trainsim::cli
