// `trainsim validate FILE... [--json] [--tolerance PCT] [--only ID,...]`: simulates measured runs and
// compares (the computation: include/trainsim/validation.hpp; here the options and the output formats).
#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <optional>
#include <set>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <boost/program_options.hpp>
#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "processes.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/frontend.hpp"
#include "trainsim/validation.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

std::string pct(double e) {
    return fmt::format("{:+.1f}%", e);
}

/// A run's status column: ok, OUTSIDE TOLERANCE, not scored, oom or the reason it was not simulated.
std::string status_text(const RunValidation& r, double tolerance) {
    if (r.status == RunStatus::error) return "error: " + r.reason;
    if (r.status == RunStatus::unsupported) return "unsupported: " + r.reason;
    if (r.status == RunStatus::oom) return "oom: " + r.reason;
    std::string status = !r.step_error_pct                           ? "not scored (step time not reported)"
                         : std::fabs(*r.step_error_pct) <= tolerance ? "ok"
                                                                     : "OUTSIDE TOLERANCE";
    if (r.peak_error_pct && std::fabs(*r.peak_error_pct) > tolerance && status == "ok")
        status = "ok (peak memory OUTSIDE TOLERANCE)";
    return status;
}

/// The width of the id column: the longest id (escaped and cut as printed), at least 40.
std::size_t id_column_width(const std::vector<std::string>& ids) {
    std::size_t width = 40;
    for (const auto& id : ids)
        width = std::max(width, clip_for_message(id, 200).size());
    return width;
}

std::string table_line(std::size_t id_width, const std::string& id, const std::string& meas,
                       const std::string& pred, const std::string& err, const std::string& mmeas,
                       const std::string& mpred, const std::string& merr, const std::string& status) {
    return fmt::format("{:<{}} {:>10} {:>10} {:>8}  {:>9} {:>9} {:>8}  {}\n", id, id_width, meas, pred, err,
                       mmeas, mpred, merr, status);
}

/// The runs table's header line.
std::string table_header(std::size_t id_width) {
    return table_line(id_width, "run", "measured", "predicted", "error", "peak meas", "peak pred", "error",
                      "status");
}

/// A run's line of the table: measured, predicted, error for step time and peak memory; status. The id
/// with control characters escaped (clip_for_message).
std::string table_row(std::size_t id_width, const RunValidation& r, double tolerance) {
    auto seconds = [](const std::optional<double>& v) { return v ? fmt::format("{:.3f} s", *v) : "-"; };
    auto gib = [](const std::optional<double>& v) { return v ? fmt::format("{:.1f}", *v) : "-"; };
    auto error = [](const std::optional<double>& v) { return v ? pct(*v) : "-"; };
    return table_line(id_width, clip_for_message(r.id, 200), seconds(r.measured_step_s),
                      seconds(r.predicted_step_s), error(r.step_error_pct), gib(r.measured_peak_gib),
                      gib(r.predicted_peak_gib), error(r.peak_error_pct), status_text(r, tolerance));
}

/// Stops the validation once standard output is gone (`validate F | head`: a closed pipe; a full disk): the
/// runs not yet started would be simulated for nothing (the 100 rows of public_runs_2026.json ran on for a
/// minute). validate_runs starts no run after a throwing on_run; the message is main's finish_stdout's.
void check_stdout() {
    if (!std::cout) throw InputError("writing failed: standard output");
}

/// Prints the runs table while validate_runs fills it (ValidationOptions::on_ids, on_run), one line at a
/// time and flushed: a long validation shows its first rows at once and stops with what it has printed.
void stream_table(ValidationOptions& options) {
    auto width = std::make_shared<std::size_t>(40);
    options.on_ids = [width](const std::vector<std::string>& ids) {
        *width = id_column_width(ids);
        std::cout << table_header(*width) << std::flush;
        check_stdout();
    };
    options.on_run = [width, tolerance = options.tolerance_pct](const RunValidation& r) {
        std::cout << table_row(*width, r, tolerance) << std::flush;
        check_stdout();
    };
}

/// Prints the document of `validate --json` while validate_runs fills it (validation_json_text's layout):
/// "runs" first, each run as soon as it and every run before it are compared (on_run), flushed; the caller
/// then prints validation_json_tail.
void stream_json(ValidationOptions& options, std::shared_ptr<std::size_t> runs_printed) {
    options.on_ids = [](const std::vector<std::string>&) {
        std::cout << validation_json_head() << std::flush;
        check_stdout();
    };
    options.on_run = [runs_printed](const RunValidation& r) {
        std::cout << validation_json_run(r, (*runs_printed)++) << std::flush;
        check_stdout();
    };
}

/// The notes: each file's own, then what was ignored or assumed for its runs that were simulated, then
/// once per GPU type the uncalibrated-constants note of the simulated runs' GPUs.
std::string notes_text(const ValidationResult& res) {
    std::string text;
    for (const auto& file : res.files) {
        for (const auto& n : file.notes)
            text += "note: " + n + "\n";
        for (const auto& r : file.runs) {
            if (!r.simulatable) continue;
            if (!r.ignored.empty())
                text += fmt::format("note: {}: ignored: {}\n", r.id, fmt::join(r.ignored, "; "));
            for (const auto& n : r.notes)
                text += fmt::format("note: {}: {}\n", r.id, n);
        }
    }
    for (const auto& n : uncalibrated_notes(res))
        text += "note: " + n + "\n";
    return text;
}

/// "MAPE 4.2%, max |error| 9.1%", or "MAPE -, max |error| -" over no rows: a MAPE of 0.0% over nothing
/// compared read as a perfect match (validate --json gives null there; round 14).
std::string mape_text(const ErrorStats& e) {
    if (e.count == 0) return "MAPE -, max |error| -";
    return fmt::format("MAPE {:.1f}%, max |error| {:.1f}%", e.mape_pct(), e.max_abs_pct);
}

std::string collectives_text(const ValidationResult& res) {
    std::string text = fmt::format("\n{:<44} {:>14} {:>14} {:>14} {:>9}\n", "collective", "bytes",
                                   "measured busbw", "predicted", "error");
    for (const auto& file : res.files)
        for (const auto& c : file.collectives) {
            if (c.error) {
                text += fmt::format("{:<44} {:>14} {:>14} {:>14} {:>9}  error: {}\n",
                                    clip_for_message(c.id, 200), "-", "-", "-", "-", *c.error);
                continue;
            }
            const bool scored = c.measured_busbw_GBps.has_value();
            text += fmt::format("{:<44} {:>14} {:>14} {:>14} {:>9}{}\n", clip_for_message(c.id, 200), c.bytes,
                                scored ? fmt::format("{:.1f} GB/s", *c.measured_busbw_GBps) : "-",
                                fmt::format("{:.1f} GB/s", c.predicted_busbw_GBps),
                                scored ? pct(*c.error_pct) : "-",
                                scored ? "" : "  not scored (no bandwidth or time reported)");
        }
    const ValidationSummary& s = res.summary;
    text += fmt::format("\ncollectives: {} rows, bus bandwidth {}{}\n", s.collectives_busbw.count,
                        mape_text(s.collectives_busbw),
                        s.collective_errors ? fmt::format(", {} errors", s.collective_errors) : "");
    return text;
}

/// What follows the runs table (stream_table printed it): the notes, the summary, the collectives.
std::string after_table_text(const ValidationResult& res, double tolerance) {
    std::string text;
    if (const std::string notes = notes_text(res); !notes.empty()) text += "\n" + notes;
    const ValidationSummary& s = res.summary;
    text += fmt::format(
        "\nsummary: {} runs, {} simulated ({} scored, {} not scored, {} oom), {} unsupported, {} errors; "
        "step time {}, {} of {} within {:.0f}%\n",
        s.runs, s.simulated, s.scored(), s.not_scored, s.oom, s.unsupported, s.errors, mape_text(s.step_time),
        s.step_time.within, s.scored(), tolerance);
    if (s.peak_memory.count > 0)
        text += fmt::format("peak memory: {} runs, MAPE {:.1f}%, max |error| {:.1f}%\n", s.peak_memory.count,
                            s.peak_memory.mape_pct(), s.peak_memory.max_abs_pct);
    bool any_collective = false;
    for (const auto& file : res.files)
        any_collective = any_collective || !file.collectives.empty();
    if (any_collective) text += collectives_text(res);
    return text;
}

/// --only's ids; a repeated one is refused (it was taken once without a word, 2026-11-29), and so is an
/// empty item in a list that names an id ("a," and ",a" skipped it, where `sweep --gpus "16,"` is refused;
/// round 12). "" and ",," name no id (checked by the caller).
std::set<std::string> comma_separated(const std::string& list) {
    std::set<std::string> out;
    std::size_t start = 0;
    while (true) {
        const auto comma = list.find(',', start);
        const std::string id =
            list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        if (!id.empty() && !out.insert(id).second)
            throw InputError(fmt::format("validate: --only = \"{}\" names run id \"{}\" twice",
                                         clip_for_message(list), clip_for_message(id)));
        if (comma == std::string::npos) break;
        start = comma + 1;
    }
    if (!out.empty() && (list.front() == ',' || list.back() == ',' || list.find(",,") != std::string::npos))
        throw InputError(
            fmt::format("validate: --only = \"{}\" has an empty run id (ids are separated by "
                        "single commas)",
                        clip_for_message(list)));
    return out;
}

}  // namespace

int validate_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim validate FILE... [options]\n\n"
        "Simulates every run of measured-run files (format trainsim-measured-runs/1) and compares the "
        "predicted\n"
        "step time (s) and, where reported, the peak memory (GiB) with the measured ones; error_pct = 100 * "
        "(predicted - measured) / measured. Also simulates the files' nccl-tests collective rows and "
        "compares\n"
        "bus bandwidth (GB/s). A run's status: ok (simulated), oom (predicted out of memory: counted apart, "
        "not\n"
        "scored), unsupported (uses a feature trainsim does not simulate, named), error (the row is "
        "malformed:\n"
        "the reason names the file, run, field and value). A run whose measured step time is null is "
        "simulated\n"
        "but not scored. Top-level keys the format does not define are ignored with a note; what a run's\n"
        "`extensions` say that trainsim does not model is listed per run as ignored.\n"
        "Exit code: 0 when every scored run (and peak memory) is within the tolerance and no row is oom "
        "(beyond --max-oom) or "
        "error,\n"
        "4 otherwise, 2 when a file is not a measured-runs file at all.\n\n"
        "options");
    std::vector<std::string> files;
    ValidationOptions options;
    ValidationGate gate;
    options.jobs = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    std::string only, calibration_file;
    desc.add_options()("help,h", "this help")("json", "print the result as JSON")(
        "tolerance", po::value(&options.tolerance_pct),
        "allowed absolute step-time error, percent (default 10)")(
        "only", po::value(&only), "comma-separated run ids to simulate (default: all)")(
        "max-mape", po::value(&gate.max_mape_pct),
        "also fail (exit 4) when the mean absolute step-time error exceeds this, percent (regression gate)")(
        "max-oom", po::value(&gate.max_oom),
        "runs allowed to be predicted out of memory before exit 4 (default 0; a regression gate sets the "
        "count that holds today)")(
        "calibration", po::value(&calibration_file),
        "GPU model constants measured or fitted (format trainsim-calibration/1), applied over the catalog")(
        "profile", po::value(&options.profile_file),
        "measured kernel times (format trainsim-profile/1) for the runs on the profile's GPU type; runs on "
        "other GPUs use the analytic model")(
        "jobs,j", po::value(&options.jobs),
        "simulations in parallel (default: the hardware threads); the output does not depend on it")(
        "files", po::value(&files)->composing(), "measured-run files");
    po::variables_map vm;
    if (!parse_file_command(args, desc, vm, "validate")) return kExitOk;
    if (files.empty()) throw InputError("validate: no measured-run file given");
    if (!(options.tolerance_pct >= 0 && options.tolerance_pct <= 1e6))
        throw InputError(fmt::format("validate: --tolerance = {} must be a percentage from 0 to 1e6",
                                     options.tolerance_pct));
    if (vm.count("max-mape") && !(gate.max_mape_pct >= 0 && gate.max_mape_pct <= 1e6))
        throw InputError(fmt::format("--max-mape = {} must be a percentage >= 0", gate.max_mape_pct));
    check_jobs(options.jobs, "");
    options.only = comma_separated(only);
    if (vm.count("only") && options.only.empty())  // an empty list would select every row
        throw InputError(fmt::format("validate: --only = \"{}\" names no run id", clip_for_message(only)));
    std::vector<RunsSource> sources;
    for (const auto& file : files)
        sources.push_back({file, std::nullopt});
    options.processes = processes();  // under mpirun: the runs spread over the processes
    const bool json = vm.count("json") > 0;
    const auto runs_printed = std::make_shared<std::size_t>(0);
    if (json)
        stream_json(options, runs_printed);
    else
        stream_table(options);
    const ValidationResult res = validate_sources(sources, calibration_file, options);
    if (json)
        std::cout << validation_json_tail(res, *runs_printed);
    else
        std::cout << after_table_text(res, options.tolerance_pct);
    const GateVerdict verdict = evaluate_gate(res.summary, gate);
    if (verdict.mape_message) std::cerr << "validate: " << *verdict.mape_message << "\n";
    return verdict.pass ? kExitOk : kExitOutsideTolerance;
}

}  // namespace trainsim::cli
