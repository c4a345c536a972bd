// `validate`: the measured runs read and validated, and the JSON document (include/trainsim/frontend.hpp).
#include <algorithm>
#include <map>
#include <set>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "trainsim/calibration.hpp"
#include "trainsim/config.hpp"
#include "trainsim/frontend.hpp"

namespace trainsim {

namespace {

const char* op_name(CollectiveKind k) {
    switch (k) {
        case CollectiveKind::all_reduce:
            return "all_reduce";
        case CollectiveKind::all_gather:
            return "all_gather";
        case CollectiveKind::reduce_scatter:
            return "reduce_scatter";
        case CollectiveKind::all_to_all:
            return "all_to_all";
    }
    return "?";
}

template <class T>
nlohmann::json or_null(const std::optional<T>& v) {
    return v ? nlohmann::json(*v) : nlohmann::json(nullptr);
}

/// An error statistic with the rows it is over: its MAPE and max are null over none (a file without measured
/// peak memory has no peak-memory error, not one of 0%).
nlohmann::json stats_json(const ErrorStats& s) {
    const auto or_none = [&s](double v) { return s.count > 0 ? nlohmann::json(v) : nlohmann::json(nullptr); };
    return {{"count", s.count},
            {"mape_pct", or_none(s.mape_pct())},
            {"max_abs_error_pct", or_none(s.max_abs_pct)},
            {"within_tolerance", s.within}};
}

nlohmann::json collective_json(const CollectiveValidation& c) {
    nlohmann::json j = {{"id", c.id}, {"op", op_name(c.op)}, {"gpus", c.gpus}, {"bytes", c.bytes}};
    if (c.error) {
        j["status"] = "error";
        j["reason"] = *c.error;
        return j;
    }
    j["status"] = "ok";
    j["predicted_busbw_GBps"] = c.predicted_busbw_GBps;
    j["predicted_algbw_GBps"] = c.predicted_algbw_GBps;
    j["measured_busbw_GBps"] = or_null(c.measured_busbw_GBps);
    j["error_pct"] = or_null(c.error_pct);
    return j;
}

/// `text` with every line after the first indented by `spaces`: a value dumped with indent 2, nested in a
/// document dumped so.
std::string nested(const std::string& text, std::size_t spaces) {
    std::string out;
    for (char c : text) {
        out += c;
        if (c == '\n') out.append(spaces, ' ');
    }
    return out;
}

nlohmann::json run_validation_json(const RunValidation& r) {
    nlohmann::json j = {{"id", r.id},        {"metrics", nlohmann::json::array()}, {"ignored", r.ignored},
                        {"notes", r.notes},  {"status", to_string(r.status)},      {"reason", r.reason},
                        {"scored", r.scored}};
    if (!r.predicted_step_s) return j;
    if (r.measured_step_s)
        // A run predicted out of memory is not scored: its step time has no error_pct.
        j["metrics"].push_back({{"name", "step_time_s"},
                                {"measured", *r.measured_step_s},
                                {"predicted", *r.predicted_step_s},
                                {"error_pct", r.scored ? or_null(r.step_error_pct) : nullptr}});
    else
        j["metrics"].push_back({{"name", "step_time_s"}, {"predicted", *r.predicted_step_s}});
    if (const auto& b = r.predicted_breakdown)
        j["predicted_breakdown"] = {{"compute_s", b->compute_s},
                                    {"pipeline_bubble_s", b->bubble_s},
                                    {"exposed_tp_s", b->tp_exposed_s},
                                    {"exposed_ep_all_to_all_s", b->ep_exposed_s},
                                    {"exposed_pp_s", b->pp_exposed_s},
                                    {"exposed_dp_s", b->dp_exposed_s},
                                    {"idle_s", b->idle_s},
                                    {"mfu", b->mfu}};
    if (r.measured_peak_gib)
        j["metrics"].push_back({{"name", "peak_memory_GiB"},
                                {"measured", *r.measured_peak_gib},
                                {"predicted", *r.predicted_peak_gib},
                                {"error_pct", *r.peak_error_pct}});
    return j;
}

}  // namespace

std::set<std::string> uncalibrated_notes(const ValidationResult& res) {
    std::set<std::string> out;
    for (const auto& file : res.files)
        for (const auto& r : file.runs)
            if (!r.gpu_uncalibrated.empty()) out.insert(r.gpu_uncalibrated);
    return out;
}

namespace {

/// validation_json without its "runs": "summary", "collectives", "notes".
nlohmann::json validation_json_without_runs(const ValidationResult& res) {
    nlohmann::json collectives = nlohmann::json::array(), notes = nlohmann::json::array();
    for (const auto& file : res.files) {
        for (const auto& n : file.notes)
            notes.push_back(n);
        for (const auto& c : file.collectives)
            collectives.push_back(collective_json(c));
    }
    for (const auto& n : uncalibrated_notes(res))
        notes.push_back(n);
    const ValidationSummary& s = res.summary;
    const nlohmann::json summary = {{"runs", s.runs},
                                    {"simulated", s.simulated},
                                    {"scored", s.scored()},
                                    {"not_scored", s.not_scored},
                                    {"oom", s.oom},
                                    {"unsupported", s.unsupported},
                                    {"errors", s.errors},
                                    {"step_time_s", stats_json(s.step_time)},
                                    {"peak_memory_GiB", stats_json(s.peak_memory)},
                                    {"collectives_busbw", stats_json(s.collectives_busbw)},
                                    {"collective_errors", s.collective_errors}};
    return {{"summary", summary}, {"collectives", collectives}, {"notes", notes}};
}

}  // namespace

nlohmann::json validation_json(const ValidationResult& res) {
    nlohmann::json document = validation_json_without_runs(res);
    nlohmann::json& runs = document["runs"] = nlohmann::json::array();
    for (const auto& file : res.files)
        for (const auto& r : file.runs)
            runs.push_back(run_validation_json(r));
    return document;
}

std::string validation_json_head() {
    return "{\n  \"runs\": [";
}

std::string validation_json_run(const RunValidation& r, std::size_t runs_before) {
    return (runs_before ? ",\n    " : "\n    ") + nested(run_validation_json(r).dump(2), 4);
}

std::string validation_json_tail(const ValidationResult& res, std::size_t runs_printed) {
    std::string text = runs_printed ? "\n  ]" : "]";
    const nlohmann::json rest = validation_json_without_runs(res);
    for (const auto& [key, value] : rest.items())
        text += ",\n  " + nlohmann::json(key).dump() + ": " + nested(value.dump(2), 2);
    return text + "\n}\n";
}

std::string validation_json_text(const ValidationResult& res) {
    std::string text = validation_json_head();
    std::size_t count = 0;
    for (const auto& file : res.files)
        for (const auto& r : file.runs)
            text += validation_json_run(r, count++);
    return text + validation_json_tail(res, count);
}

ValidationResult validate_sources(const std::vector<RunsSource>& sources, const std::string& calibration_file,
                                  ValidationOptions options) {
    if (!calibration_file.empty())
        options.calibration = parse_calibration(read_json_file(calibration_file), calibration_file);
    if (!options.profile_file.empty())
        options.profile = std::make_shared<const Profile>(read_profile(options.profile_file));
    // Every file is read first: one that is not a measured-runs file at all stops the command (exit 2).
    std::vector<MeasuredRunsFile> parsed_files;
    for (const auto& s : sources) {
        if (s.file.empty() && !s.text) throw InputError("validate: a measured-runs input names no file");
        parsed_files.push_back(
            s.file.empty() ? parse_measured_runs(parse_json_text(s.text->text, s.text->name), s.text->name)
                           : parse_measured_runs(read_json_file(s.file), s.file));
    }
    // A run id in two files: `--only` would select both, and the table would show two rows of one name.
    std::map<std::string, std::size_t> file_of_id;
    const auto name = [&](std::size_t f) {
        return sources[f].file.empty() ? sources[f].text->name : sources[f].file;
    };
    for (std::size_t f = 0; f < parsed_files.size(); ++f)
        for (const auto& r : parsed_files[f].runs) {
            const auto [it, fresh] = file_of_id.emplace(r.id, f);
            if (!fresh)
                throw InputError(fmt::format(
                    "{}: run id \"{}\" is also a run of {}; ids must be unique across the files validated",
                    name(f), clip_for_message(r.id), name(it->second)));
        }
    // A calibration for none of the rows' GPUs changes nothing: refused, as `run --calibration` refuses one
    // (check_calibration_gpu) and `validate --profile` one of no row's GPU; it was taken silently (round 14).
    if (options.calibration) {
        std::set<std::string> gpus;
        for (const auto& file : parsed_files) {
            for (const auto& r : file.runs)
                if (!r.error) gpus.insert(r.topology.gpu);
            for (const auto& c : file.collectives)
                if (!c.error) gpus.insert(c.topology.gpu);
        }
        if (!gpus.empty() && std::none_of(gpus.begin(), gpus.end(), [&](const std::string& g) {
                return options.calibration->gpus.count(g) > 0;
            }))
            check_calibration_gpu(*options.calibration, calibration_file,
                                  fmt::format("{}", fmt::join(gpus, ", ")), "the measured runs");
    }
    return validate_runs(parsed_files, options);
}

}  // namespace trainsim
