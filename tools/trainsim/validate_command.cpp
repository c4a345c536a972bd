// `trainsim validate FILE... [--json] [--tolerance PCT] [--only ID,...]`: simulates measured runs and
// compares.
#include <algorithm>
#include <cmath>
#include <iostream>
#include <optional>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <boost/program_options.hpp>

#include "commands.hpp"
#include "trainsim/calibration.hpp"
#include "trainsim/config.hpp"
#include "trainsim/engine.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/measured_runs.hpp"
#include "trainsim/network.hpp"
#include "trainsim/profile.hpp"
#include "trainsim/simulate.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

namespace {

struct MetricStats {
    double sum_abs = 0, max_abs = 0;
    int n = 0, within = 0;
    void add(double err_pct, double tol) {
        sum_abs += std::fabs(err_pct);
        max_abs = std::max(max_abs, std::fabs(err_pct));
        ++n;
        if (std::fabs(err_pct) <= tol) ++within;
    }
    nlohmann::json json() const {
        return {{"mape_pct", n ? sum_abs / n : 0.0},
                {"max_abs_error_pct", max_abs},
                {"within_tolerance", within}};
    }
};

/// Simulated time of one collective row on an otherwise idle cluster, seconds.
double simulate_collective(const CollectiveRow& row) {
    std::vector<int> ranks;
    for (int i = 0; i < row.gpus; ++i)
        ranks.push_back(i);
    return isolated_collective_seconds(Cluster(row.topology), row.op, ranks, row.bytes);
}

const char* op_name(CollectiveKind k) {
    return k == CollectiveKind::all_reduce   ? "all_reduce"
           : k == CollectiveKind::all_gather ? "all_gather"
                                             : "reduce_scatter";
}

/// The predicted figure compared with a run's measured `peak_memory_GiB`: the busiest GPU's peak over the
/// phases of the iteration, framework pile included (what nvidia-smi shows; torch.cuda.max_memory_reserved()
/// is lower by the CUDA context). The one place to switch to another figure (e.g. the allocator's reserved
/// bytes).
/// The busiest GPU's peak as the run's framework reports it (torchtitan: max reserved; see
/// include/trainsim/memory.hpp reported_memory), in GiB.
double predicted_peak_memory_gib(const SimulationResult& res, Framework framework) {
    return reported_peak_bytes(res.report.memory, framework) / kGiB;
}

std::string pct(double e) {
    return fmt::format("{:+.1f}%", e);
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
    double tolerance = 10.0;
    double max_mape = -1;
    int max_oom = 0;
    std::string only, calibration_file, profile_file;
    desc.add_options()("help,h", "this help")("json", "print the result as JSON")(
        "tolerance", po::value(&tolerance), "allowed absolute step-time error, percent (default 10)")(
        "only", po::value(&only), "comma-separated run ids to simulate (default: all)")(
        "max-mape", po::value(&max_mape),
        "also fail (exit 4) when the mean absolute step-time error exceeds this, percent (regression gate)")(
        "max-oom", po::value(&max_oom),
        "runs allowed to be predicted out of memory before exit 4 (default 0; a regression gate sets the "
        "count that holds today)")(
        "calibration", po::value(&calibration_file),
        "GPU model constants measured or fitted (format trainsim-calibration/1), applied over the catalog")(
        "profile", po::value(&profile_file),
        "measured kernel times (format trainsim-profile/1) for the runs on the profile's GPU type; runs on "
        "other GPUs use the analytic model")("files", po::value(&files)->composing(), "measured-run files");
    po::variables_map vm;
    if (!parse_file_command(args, desc, vm, "validate")) return kExitOk;
    if (files.empty()) throw InputError("validate: no measured-run file given");
    if (!(tolerance >= 0)) throw InputError(fmt::format("--tolerance = {} must be >= 0", tolerance));
    std::set<std::string> only_ids;
    {
        std::stringstream ss(only);
        std::string id;
        while (std::getline(ss, id, ','))
            if (!id.empty()) only_ids.insert(id);
    }

    std::optional<Calibration> calibration;
    if (!calibration_file.empty())
        calibration = parse_calibration(read_json_file(calibration_file), calibration_file);
    std::shared_ptr<const Profile> profile;
    if (!profile_file.empty()) profile = std::make_shared<const Profile>(read_profile(profile_file));
    int n_profiled = 0;
    // Every file is read first: one that is not a measured-runs file at all stops the command (exit 2).
    std::vector<MeasuredRunsFile> parsed_files;
    for (const auto& file : files)
        parsed_files.push_back(parse_measured_runs(read_json_file(file), file));

    nlohmann::json runs_json = nlohmann::json::array();
    nlohmann::json coll_json = nlohmann::json::array();
    nlohmann::json notes_json = nlohmann::json::array();
    MetricStats step_stats, mem_stats, busbw_stats;
    int n_runs = 0, n_sim = 0, n_unsup = 0, n_err = 0, n_oom = 0, n_unscored = 0, n_coll_err = 0;
    std::size_t id_width = 40;
    for (const auto& parsed : parsed_files)
        for (const auto& run : parsed.runs)
            if (only_ids.empty() || only_ids.count(run.id)) id_width = std::max(id_width, run.id.size());
    std::string table;
    auto row = [&](const std::string& id, const std::string& meas, const std::string& pred,
                   const std::string& err, const std::string& mmeas, const std::string& mpred,
                   const std::string& merr, const std::string& status) {
        table += fmt::format("{:<{}} {:>10} {:>10} {:>8}  {:>9} {:>9} {:>8}  {}\n", id, id_width, meas, pred,
                             err, mmeas, mpred, merr, status);
    };
    row("run", "measured", "predicted", "error", "peak meas", "peak pred", "error", "status");
    std::string notes_text;
    std::set<std::string> seen;
    std::set<std::string> uncalibrated_notes;  ///< uncalibrated_note() of the GPUs of simulated runs
    for (std::size_t fi = 0; fi < parsed_files.size(); ++fi) {
        auto& parsed = parsed_files[fi];
        for (const auto& n : parsed.notes) {
            notes_text += "note: " + n + "\n";
            notes_json.push_back(n);
        }
        if (calibration) {
            for (auto& run : parsed.runs)
                if (!run.error) apply_calibration(*calibration, run.topology);
            for (auto& c : parsed.collectives)
                if (!c.error) apply_calibration(*calibration, c.topology);
        }
        if (profile)
            for (auto& run : parsed.runs)
                if (!run.error && run.topology.gpu == profile->gpu)
                    run.topology.profile = profile, ++n_profiled;
        for (const auto& run : parsed.runs) {
            if (!only_ids.empty() && !only_ids.count(run.id)) continue;
            seen.insert(run.id);
            ++n_runs;
            nlohmann::json rj = {{"id", run.id},
                                 {"metrics", nlohmann::json::array()},
                                 {"ignored", run.ignored},
                                 {"notes", run.notes}};
            const std::string meas = run.step_time_s ? fmt::format("{:.3f} s", *run.step_time_s) : "-";
            const std::string mmeas = run.peak_memory_gib ? fmt::format("{:.1f}", *run.peak_memory_gib) : "-";
            // What was ignored or assumed matters only for a run that is simulated.
            const bool simulated = !run.error && !run.unsupported;
            if (simulated && !run.ignored.empty()) {
                std::string list;
                for (const auto& x : run.ignored)
                    list += (list.empty() ? "" : "; ") + x;
                notes_text += fmt::format("note: {}: ignored: {}\n", run.id, list);
            }
            for (const auto& n : simulated ? run.notes : std::vector<std::string>{})
                notes_text += fmt::format("note: {}: {}\n", run.id, n);
            auto finish_row = [&](const char* status, const std::string& reason) {
                rj["status"] = status;
                rj["reason"] = reason;
                rj["scored"] = false;
                runs_json.push_back(rj);
            };
            if (run.error) {
                ++n_err;
                row(run.id, meas, "-", "-", mmeas, "-", "-", "error: " + *run.error);
                finish_row("error", *run.error);
                continue;
            }
            if (run.unsupported) {
                ++n_unsup;
                row(run.id, meas, "-", "-", mmeas, "-", "-", "unsupported: " + *run.unsupported);
                finish_row("unsupported", *run.unsupported);
                continue;
            }
            try {
                const auto res = simulate(run.topology, run.model, run.layout, run.id);
                ++n_sim;
                const double pred = res.report.step_time_s;
                const bool oom = !res.report.memory.fits();
                if (!res.report.gpu_uncalibrated.empty()) {  // said once per GPU type after the table
                    rj["gpu_uncalibrated"] = res.report.gpu_uncalibrated;
                    uncalibrated_notes.insert(res.report.gpu_uncalibrated);
                }
                std::string err_text = "-";
                std::string status;
                if (run.step_time_s) {
                    const double err = 100.0 * (pred - *run.step_time_s) / *run.step_time_s;
                    err_text = pct(err);
                    // A run predicted out of memory is not scored: its step time has no error_pct.
                    rj["metrics"].push_back(
                        {{"name", "step_time_s"},
                         {"measured", *run.step_time_s},
                         {"predicted", pred},
                         {"error_pct", oom ? nlohmann::json(nullptr) : nlohmann::json(err)}});
                    if (!oom) step_stats.add(err, tolerance);
                    status = std::fabs(err) <= tolerance ? "ok" : "OUTSIDE TOLERANCE";
                } else {
                    ++n_unscored;
                    rj["metrics"].push_back({{"name", "step_time_s"}, {"predicted", pred}});
                    status = "not scored (step time not reported)";
                }
                const double pred_gib = predicted_peak_memory_gib(res, run.layout.framework);
                std::string merr_text = "-";
                if (run.peak_memory_gib) {
                    const double merr = 100.0 * (pred_gib - *run.peak_memory_gib) / *run.peak_memory_gib;
                    mem_stats.add(merr, tolerance);
                    merr_text = pct(merr);
                    rj["metrics"].push_back({{"name", "peak_memory_GiB"},
                                             {"measured", *run.peak_memory_gib},
                                             {"predicted", pred_gib},
                                             {"error_pct", merr}});
                    if (std::fabs(merr) > tolerance && status == "ok")
                        status = "ok (peak memory OUTSIDE TOLERANCE)";
                }
                if (oom) {
                    ++n_oom;
                    status = "oom: " + res.report.memory.oom_message();
                }
                row(run.id, meas, fmt::format("{:.3f} s", pred), err_text, mmeas,
                    fmt::format("{:.1f}", pred_gib), merr_text, status);
                rj["status"] = oom ? "oom" : "ok";
                rj["reason"] = oom ? res.report.memory.oom_message() : "";
                rj["scored"] = !oom && run.step_time_s.has_value();
                runs_json.push_back(rj);
            } catch (const InputError& e) {
                ++n_err;
                row(run.id, meas, "-", "-", mmeas, "-", "-", "error: " + std::string(e.what()));
                finish_row("error", e.what());
            }
        }
        for (const auto& c : parsed.collectives) {
            if (!only_ids.empty() && !only_ids.count(c.id)) continue;
            seen.insert(c.id);
            nlohmann::json cj = {{"id", c.id}, {"op", op_name(c.op)}, {"gpus", c.gpus}, {"bytes", c.bytes}};
            if (c.error) {
                ++n_coll_err;
                cj["status"] = "error";
                cj["reason"] = *c.error;
                coll_json.push_back(cj);
                continue;
            }
            const double t = simulate_collective(c);
            const double algbw = c.bytes / t / 1e9;
            const double busbw = algbw * busbw_factor(c.op, c.gpus);
            cj["status"] = "ok";
            cj["predicted_busbw_GBps"] = busbw;
            cj["predicted_algbw_GBps"] = algbw;
            if (const auto measured = c.measured_busbw_GBps()) {
                const double err = 100.0 * (busbw - *measured) / *measured;
                busbw_stats.add(err, tolerance);
                cj["measured_busbw_GBps"] = *measured;
                cj["error_pct"] = err;
            } else {
                cj["measured_busbw_GBps"] = nullptr;
                cj["error_pct"] = nullptr;
            }
            coll_json.push_back(cj);
        }
    }
    for (const auto& id : only_ids)
        if (!seen.count(id)) throw InputError(fmt::format("--only: no run or collective with id \"{}\"", id));
    if (profile && n_profiled == 0)
        throw InputError(fmt::format("{}: the profile describes GPU {}, and no run of the files is on it",
                                     profile_file, profile->gpu));

    for (const auto& n : uncalibrated_notes) {
        notes_text += "note: " + n + "\n";
        notes_json.push_back(n);
    }
    const int n_scored = step_stats.n;
    nlohmann::json summary = {{"runs", n_runs},
                              {"simulated", n_sim},
                              {"scored", n_scored},
                              {"not_scored", n_unscored},
                              {"oom", n_oom},
                              {"unsupported", n_unsup},
                              {"errors", n_err},
                              {"step_time_s", step_stats.json()},
                              {"peak_memory_GiB", mem_stats.json()},
                              {"collectives_busbw", busbw_stats.json()},
                              {"collective_errors", n_coll_err}};
    if (vm.count("json")) {
        nlohmann::json out = {
            {"runs", runs_json}, {"summary", summary}, {"collectives", coll_json}, {"notes", notes_json}};
        std::cout << out.dump(2) << "\n";
    } else {
        std::cout << table;
        if (!notes_text.empty()) std::cout << "\n" << notes_text;
        std::cout << fmt::format(
            "\nsummary: {} runs, {} simulated ({} scored, {} not scored, {} oom), {} unsupported, {} errors; "
            "step time MAPE {:.1f}%, max |error| {:.1f}%, {} of {} within {:.0f}%\n",
            n_runs, n_sim, n_scored, n_unscored, n_oom, n_unsup, n_err,
            n_scored ? step_stats.sum_abs / n_scored : 0.0, step_stats.max_abs, step_stats.within, n_scored,
            tolerance);
        if (mem_stats.n > 0)
            std::cout << fmt::format("peak memory: {} runs, MAPE {:.1f}%, max |error| {:.1f}%\n", mem_stats.n,
                                     mem_stats.sum_abs / mem_stats.n, mem_stats.max_abs);
        if (!coll_json.empty()) {
            std::cout << fmt::format("\n{:<44} {:>14} {:>14} {:>14} {:>9}\n", "collective", "bytes",
                                     "measured busbw", "predicted", "error");
            for (const auto& c : coll_json) {
                const std::string id = c["id"].get<std::string>();
                if (c["status"] == "error") {
                    std::cout << fmt::format("{:<44} {:>14} {:>14} {:>14} {:>9}  error: {}\n", id, "-", "-",
                                             "-", "-", c["reason"].get<std::string>());
                    continue;
                }
                const bool scored = !c["measured_busbw_GBps"].is_null();
                std::cout << fmt::format(
                    "{:<44} {:>14} {:>14} {:>14} {:>9}{}\n", id, c["bytes"].get<double>(),
                    scored ? fmt::format("{:.1f} GB/s", c["measured_busbw_GBps"].get<double>()) : "-",
                    fmt::format("{:.1f} GB/s", c["predicted_busbw_GBps"].get<double>()),
                    scored ? pct(c["error_pct"].get<double>()) : "-",
                    scored ? "" : "  not scored (no bandwidth or time reported)");
            }
            std::cout << fmt::format(
                "\ncollectives: {} rows, bus bandwidth MAPE {:.1f}%, max |error| {:.1f}%{}\n", busbw_stats.n,
                busbw_stats.n ? busbw_stats.sum_abs / busbw_stats.n : 0.0, busbw_stats.max_abs,
                n_coll_err ? fmt::format(", {} errors", n_coll_err) : "");
        }
    }
    const double mape = n_scored ? step_stats.sum_abs / n_scored : 0.0;
    if (max_mape >= 0 && mape > max_mape) {
        std::cerr << fmt::format("validate: step-time MAPE {:.2f}% exceeds --max-mape {:.2f}%\n", mape,
                                 max_mape);
        return kExitOutsideTolerance;
    }
    const bool all_within = step_stats.within == step_stats.n && mem_stats.within == mem_stats.n;
    return all_within && n_oom <= max_oom && n_err == 0 && n_coll_err == 0 ? kExitOk : kExitOutsideTolerance;
}

}  // namespace trainsim::cli
