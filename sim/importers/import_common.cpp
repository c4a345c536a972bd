// The importers' shared pieces: the workload document, DP from the GPUs, --set overrides and the final check.
#include "import_common.hpp"

#include <charconv>
#include <cmath>

#include <fmt/format.h>

#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/schema.hpp"
#include "trainsim/schema_json.hpp"

namespace trainsim {
namespace importers_detail {

namespace {
/// The fields of `table` that `s` states: required, derived by default, or different from `defaults`.
template <class S>
nlohmann::json stated_fields(const schema::Table<S>& table, const S& s, const S& defaults) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& f : table) {
        const nlohmann::json v = schema::to_json(f.get(s));
        if (f.required || f.derive_default || v != schema::to_json(f.get(defaults))) j[f.name] = v;
    }
    return j;
}
}  // namespace

nlohmann::json workload_document(const std::string& name, const std::string& description, const ModelSpec& m,
                                 const Layout& l) {
    nlohmann::json doc = nlohmann::json::object();
    doc["name"] = name;
    // The source's file name is part of the description: one that is not UTF-8 (a Latin-1 name) is written
    // with its bytes escaped (\xff), as messages echo it; the JSON writer threw on it (round 14).
    doc["description"] = clip_for_message(description, description.size());
    doc["model"] = stated_fields(model_fields(), m, ModelSpec{});
    doc["layout"] = stated_fields(layout_fields(), l, Layout{});
    return doc;
}

int derive_dp(int gpus, const Layout& l, const std::string& source) {
    const long long grid = static_cast<long long>(l.tp) * l.pp * l.cp;
    if (gpus <= 0)
        throw InputError(
            fmt::format("{}: the GPU count is not known: give --gpus N (or a topology)", source));
    if (grid <= 0 || gpus % grid != 0)
        throw InputError(fmt::format("{}: {} GPUs are not a multiple of TP x PP x CP = {} x {} x {} = {}",
                                     source, gpus, l.tp, l.pp, l.cp, grid));
    return static_cast<int>(gpus / grid);
}

int import_gpus(const ImportTarget& target, int stated) {
    // --gpus past the limit is the option's fault, not the config file's (whose layout.dp it would become).
    if (target.gpus > limits::kMaxGpus)
        throw InputError(fmt::format("import: --gpus {} is above the limit of {} GPUs (limits.hpp)",
                                     target.gpus, limits::kMaxGpus));
    if (target.gpus > 0) return target.gpus;
    if (stated > 0) return stated;
    return target.cluster_gpus;
}

std::optional<std::int64_t> parse_integer(const std::string& text) {
    std::int64_t v = 0;
    const char* end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc() || p != end) return std::nullopt;
    return v;
}

std::optional<double> parse_number(const std::string& text) {
    double v = 0;
    const char* end = text.data() + text.size();
    const auto [p, ec] = std::from_chars(text.data(), end, v);
    if (text.empty() || ec != std::errc() || p != end || !std::isfinite(v)) return std::nullopt;
    return v;
}

void bad_value(const std::string& source, const std::string& what, const std::string& value,
               const std::string& problem) {
    throw InputError(fmt::format("{}: {} = \"{}\" {}", source, what, clip_for_message(value), problem));
}

void bad_written_value(const std::string& source, const std::string& what, const std::string& written,
                       const std::string& problem) {
    throw InputError(fmt::format("{}: {} = {} {}", source, what, clip_for_message(written), problem));
}

double yarn_concentration_factor(double s, std::optional<double> mscale,
                                 std::optional<double> mscale_all_dim) {
    const auto of = [s](double x) { return s <= 1 ? 1.0 : 0.1 * x * std::log(s) + 1.0; };
    return mscale && mscale_all_dim ? of(*mscale) / of(*mscale_all_dim) : of(1.0);
}

}  // namespace importers_detail

namespace {
/// The integer at `key` of the layout object, or `fallback` when absent or not an integer.
long long layout_int(const nlohmann::json& layout, const char* key, long long fallback) {
    const auto it = layout.find(key);
    return it != layout.end() && it->is_number_integer() ? it->get<long long>() : fallback;
}
}  // namespace

void finish_import(Imported& imp, const std::vector<std::string>& sets, nlohmann::json& topology,
                   const std::string& topology_label) {
    bool dp_set = false;
    for (const auto& s : sets) {
        apply_override(topology, imp.workload, s);
        if (s.rfind("layout.dp=", 0) == 0) dp_set = true;
    }
    nlohmann::json& layout = imp.workload["layout"];
    // A name that is no string (`--set name=5`) is refused by parse_workload below, naming the --set:
    // json's value() threw its type_error first, an internal error (exit 1, round 11).
    const auto named = imp.workload.find("name");
    const std::string name =
        named != imp.workload.end() && named->is_string() ? named->get<std::string>() : "import";
    if (!sets.empty() && layout.is_object()) {
        Layout grid;
        grid.tp = static_cast<int>(layout_int(layout, "tp", 1));
        grid.pp = static_cast<int>(layout_int(layout, "pp", 1));
        grid.cp = static_cast<int>(layout_int(layout, "cp", 1));
        if (dp_set) {
            imp.gpus = static_cast<int>(grid.tp * grid.pp * grid.cp * layout_int(layout, "dp", 1));
        } else {
            // A grid a --set gave that does not divide the GPUs is that --set's fault, not the source's.
            std::string source = name;
            for (auto it = sets.rbegin(); it != sets.rend(); ++it)
                if (it->rfind("layout.tp=", 0) == 0 || it->rfind("layout.pp=", 0) == 0 ||
                    it->rfind("layout.cp=", 0) == 0) {
                    source = fmt::format("--set \"{}\"", clip_for_message(*it));
                    break;
                }
            layout["dp"] = importers_detail::derive_dp(imp.gpus, grid, source);
        }
    }
    // A topology value an assignment made invalid is refused here, as `run` would (import wrote it with exit
    // 0 when no --topology-out was asked for).
    if (!sets.empty())
        parse_blaming_sets(sets, topology_label, [&] { return parse_topology(topology, topology_label); });
    parse_blaming_sets(sets, name, [&] {
        const Workload w = parse_workload(imp.workload, name);
        try {
            check_layout(w.model, w.layout, imp.gpus);
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}: {}", name, e.what()));
        }
        return 0;
    });
}

namespace {
/// The object `j` with the fields of `table` first, in its order, then any other key.
template <class S>
nlohmann::ordered_json in_schema_order(const nlohmann::json& j, const schema::Table<S>& table) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    if (!j.is_object()) return nlohmann::ordered_json(j);
    for (const auto& f : table)
        if (j.contains(f.name)) out[f.name] = nlohmann::ordered_json(j.at(f.name));
    for (const auto& [k, v] : j.items())
        if (!out.contains(k)) out[k] = nlohmann::ordered_json(v);
    return out;
}
}  // namespace

std::string workload_text(const nlohmann::json& workload) {
    nlohmann::ordered_json out = nlohmann::ordered_json::object();
    for (const char* k : {"name", "description"})
        if (workload.contains(k)) out[k] = nlohmann::ordered_json(workload.at(k));
    if (workload.contains("model")) out["model"] = in_schema_order(workload.at("model"), model_fields());
    if (workload.contains("layout")) out["layout"] = in_schema_order(workload.at("layout"), layout_fields());
    for (const auto& [k, v] : workload.items())
        if (!out.contains(k)) out[k] = nlohmann::ordered_json(v);
    return out.dump(2) + "\n";
}

int topology_gpus(const nlohmann::json& topology) {
    if (!topology.is_object()) return 0;
    const auto nodes = topology.find("nodes"), per_node = topology.find("gpus_per_node");
    if (nodes == topology.end() || per_node == topology.end() || !nodes->is_number_integer() ||
        !per_node->is_number_integer())
        return 0;
    return static_cast<int>(nodes->get<long long>() * per_node->get<long long>());
}

}  // namespace trainsim
