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

}  // namespace

int validate_command(const std::vector<std::string>& args) {
    po::options_description desc(
        "trainsim validate FILE... [options]\n\n"
        "Simulates every run of measured-run files (format trainsim-measured-runs/1) and compares the "
        "predicted\n"
        "step time (s) with the measured one; error_pct = 100 * (predicted - measured) / measured. Also "
        "simulates\n"
        "the files' nccl-tests collective rows and compares bus bandwidth (GB/s).\n"
        "Exit code: 0 when every simulated run is within the tolerance, 4 when one is not, 2 on a malformed "
        "file.\n\n"
        "options");
    std::vector<std::string> files;
    double tolerance = 10.0;
    double max_mape = -1;
    std::string only, calibration_file, profile_file;
    desc.add_options()("help,h", "this help")("json", "print the result as JSON")(
        "tolerance", po::value(&tolerance), "allowed absolute step-time error, percent (default 10)")(
        "only", po::value(&only), "comma-separated run ids to simulate (default: all)")(
        "max-mape", po::value(&max_mape),
        "also fail (exit 4) when the mean absolute step-time error exceeds this, percent (regression gate)")(
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
    nlohmann::json runs_json = nlohmann::json::array();
    nlohmann::json coll_json = nlohmann::json::array();
    MetricStats step_stats, mem_stats, busbw_stats;
    int n_runs = 0, n_sim = 0, n_unsup = 0, n_err = 0;
    std::string table;
    table +=
        fmt::format("{:<40} {:>12} {:>12} {:>9}  {}\n", "run", "measured", "predicted", "error", "status");
    std::set<std::string> seen;
    for (const auto& file : files) {
        const auto doc = read_json_file(file);
        auto parsed = parse_measured_runs(doc, file);
        if (calibration) {
            for (auto& run : parsed.runs)
                apply_calibration(*calibration, run.topology);
            for (auto& row : parsed.collectives)
                apply_calibration(*calibration, row.topology);
        }
        if (profile)
            for (auto& run : parsed.runs)
                if (run.topology.gpu == profile->gpu) run.topology.profile = profile, ++n_profiled;
        for (const auto& run : parsed.runs) {
            if (!only_ids.empty() && !only_ids.count(run.id)) continue;
            seen.insert(run.id);
            ++n_runs;
            nlohmann::json rj = {{"id", run.id}, {"metrics", nlohmann::json::array()}};
            if (run.unsupported) {
                ++n_unsup;
                rj["status"] = "unsupported";
                rj["reason"] = *run.unsupported;
                table += fmt::format("{:<40} {:>12} {:>12} {:>9}  unsupported: {}\n", run.id,
                                     fmt::format("{:.3f} s", run.step_time_s), "-", "-", *run.unsupported);
                runs_json.push_back(rj);
                continue;
            }
            try {
                const auto res = simulate(run.topology, run.model, run.layout, run.id);
                const double pred = res.report.step_time_s;
                const double err = 100.0 * (pred - run.step_time_s) / run.step_time_s;
                step_stats.add(err, tolerance);
                ++n_sim;
                rj["status"] = "ok";
                rj["reason"] = "";
                rj["metrics"].push_back({{"name", "step_time_s"},
                                         {"measured", run.step_time_s},
                                         {"predicted", pred},
                                         {"error_pct", err}});
                if (run.peak_memory_gib) {
                    // The busiest GPU's peak over the phases of the iteration, framework pile included (what
                    // nvidia-smi shows; torch.cuda.max_memory_reserved() is lower by the CUDA context).
                    const double pred_gib = res.report.memory.peak().peak_bytes / kGiB;
                    const double merr = 100.0 * (pred_gib - *run.peak_memory_gib) / *run.peak_memory_gib;
                    mem_stats.add(merr, tolerance);
                    rj["metrics"].push_back({{"name", "peak_memory_GiB"},
                                             {"measured", *run.peak_memory_gib},
                                             {"predicted", pred_gib},
                                             {"error_pct", merr}});
                }
                table += fmt::format("{:<40} {:>12} {:>12} {:>9}  {}\n", run.id,
                                     fmt::format("{:.3f} s", run.step_time_s), fmt::format("{:.3f} s", pred),
                                     fmt::format("{:+.1f}%", err),
                                     std::fabs(err) <= tolerance ? "ok" : "OUTSIDE TOLERANCE");
            } catch (const InputError& e) {
                ++n_err;
                rj["status"] = "error";
                rj["reason"] = e.what();
                table += fmt::format("{:<40} {:>12} {:>12} {:>9}  error: {}\n", run.id,
                                     fmt::format("{:.3f} s", run.step_time_s), "-", "-", e.what());
            }
            runs_json.push_back(rj);
        }
        for (const auto& row : parsed.collectives) {
            if (!only_ids.empty() && !only_ids.count(row.id)) continue;
            seen.insert(row.id);
            const double t = simulate_collective(row);
            const double algbw = row.bytes / t / 1e9;
            const double busbw = algbw * busbw_factor(row.op, row.gpus);
            const double err = 100.0 * (busbw - row.busbw_GBps) / row.busbw_GBps;
            busbw_stats.add(err, tolerance);
            coll_json.push_back({{"id", row.id},
                                 {"op", op_name(row.op)},
                                 {"gpus", row.gpus},
                                 {"bytes", row.bytes},
                                 {"measured_busbw_GBps", row.busbw_GBps},
                                 {"predicted_busbw_GBps", busbw},
                                 {"predicted_algbw_GBps", algbw},
                                 {"error_pct", err}});
        }
    }
    for (const auto& id : only_ids)
        if (!seen.count(id)) throw InputError(fmt::format("--only: no run or collective with id \"{}\"", id));
    if (profile && n_profiled == 0)
        throw InputError(fmt::format("{}: the profile describes GPU {}, and no run of the files is on it",
                                     profile_file, profile->gpu));

    nlohmann::json summary = {{"runs", n_runs},
                              {"simulated", n_sim},
                              {"unsupported", n_unsup},
                              {"errors", n_err},
                              {"step_time_s", step_stats.json()},
                              {"peak_memory_GiB", mem_stats.json()},
                              {"collectives_busbw", busbw_stats.json()}};
    if (vm.count("json")) {
        nlohmann::json out = {{"runs", runs_json}, {"summary", summary}, {"collectives", coll_json}};
        std::cout << out.dump(2) << "\n";
    } else {
        std::cout << table;
        std::cout << fmt::format(
            "\nsummary: {} runs, {} simulated, {} unsupported, {} errors; step time MAPE {:.1f}%, "
            "max |error| {:.1f}%, {} of {} within {:.0f}%\n",
            n_runs, n_sim, n_unsup, n_err, n_sim ? step_stats.sum_abs / n_sim : 0.0, step_stats.max_abs,
            step_stats.within, n_sim, tolerance);
        if (!coll_json.empty()) {
            std::cout << fmt::format("\n{:<44} {:>14} {:>14} {:>14} {:>9}\n", "collective", "bytes",
                                     "measured busbw", "predicted", "error");
            for (const auto& c : coll_json)
                std::cout << fmt::format("{:<44} {:>14} {:>14} {:>14} {:>9}\n", c["id"].get<std::string>(),
                                         c["bytes"].get<double>(),
                                         fmt::format("{:.1f} GB/s", c["measured_busbw_GBps"].get<double>()),
                                         fmt::format("{:.1f} GB/s", c["predicted_busbw_GBps"].get<double>()),
                                         fmt::format("{:+.1f}%", c["error_pct"].get<double>()));
            std::cout << fmt::format(
                "\ncollectives: {} rows, bus bandwidth MAPE {:.1f}%, max |error| {:.1f}%\n", busbw_stats.n,
                busbw_stats.n ? busbw_stats.sum_abs / busbw_stats.n : 0.0, busbw_stats.max_abs);
        }
    }
    const double mape = n_sim ? step_stats.sum_abs / n_sim : 0.0;
    if (max_mape >= 0 && mape > max_mape) {
        std::cerr << fmt::format("validate: step-time MAPE {:.2f}% exceeds --max-mape {:.2f}%\n", mape,
                                 max_mape);
        return kExitOutsideTolerance;
    }
    return step_stats.within == n_sim && mem_stats.within == mem_stats.n ? kExitOk : kExitOutsideTolerance;
}

}  // namespace trainsim::cli
