// The sweep's grid: its axes restricted from --fix / --vary, the layouts it enumerates, why a layout is
// rejected, and what limits a simulated one (include/trainsim/sweep.hpp). Running the grid:
// sweep_run.cpp; the outputs: sweep_output.cpp.
#include "trainsim/sweep.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "sweep_internal.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/units.hpp"

namespace trainsim {

namespace sweep_detail {

/// The layout field an axis of the grid sets (sweep_keys(): every key names one).
const schema::Field<Layout>& axis_field(const std::string& key) {
    const auto* f = schema::find(layout_fields(), key);
    if (!f) throw InternalError(fmt::format("sweep axis \"{}\" is not a layout field", key));
    return *f;
}

/// A positive integer value of axis `key`, within the field's range.

/// The message with every number replaced by "N": the category of a check without a fixed one.
std::string numbers_to_n(const std::string& msg) {
    std::string out;
    for (std::size_t i = 0; i < msg.size();) {
        if (std::isdigit(static_cast<unsigned char>(msg[i]))) {
            while (i < msg.size() && (std::isdigit(static_cast<unsigned char>(msg[i])) || msg[i] == '.' ||
                                      msg[i] == 'e' || msg[i] == '+'))
                ++i;
            out += 'N';
        } else {
            out += msg[i++];
        }
    }
    return out;
}

std::string csv_field(const std::string& s) {
    if (s.find_first_of(",\"\n") == std::string::npos) return s;
    std::string q = "\"";
    for (char c : s) {
        if (c == '"') q += '"';
        q += c;
    }
    return q + "\"";
}

const char* status_name(SweepStatus s) {
    switch (s) {
        case SweepStatus::simulated:
            return "simulated";
        case SweepStatus::out_of_memory:
            return "out_of_memory";
        case SweepStatus::rejected:
            return "rejected";
        case SweepStatus::pruned:
            return "pruned";
    }
    return "?";
}

/// reject_reason, also giving check_layout's message (the first violation's): the category of the first
/// rank-grid check the layout fails in LayoutCheck's order, else the first violation's message with its
/// numbers replaced by "N".
std::string classify(const ModelSpec& m, const Layout& l, int gpus, std::string* detail) {
    const auto violations = layout_violations(m, l, gpus);
    if (violations.empty()) return "";
    if (detail) *detail = violations.front().message;
    const LayoutViolation* grid = nullptr;
    for (const auto& v : violations)
        if (is_grid_check(v.check) && (!grid || v.check < grid->check)) grid = &v;
    return grid ? to_string(grid->check) : numbers_to_n(violations.front().message);
}

}  // namespace sweep_detail

namespace {

using namespace sweep_detail;

std::string trim(const std::string& s) {
    const auto b = s.find_first_not_of(" \t");
    if (b == std::string::npos) return "";
    const auto e = s.find_last_not_of(" \t");
    return s.substr(b, e - b + 1);
}

std::vector<std::string> split_commas(const std::string& s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (true) {
        const auto comma = s.find(',', start);
        out.push_back(trim(s.substr(start, comma == std::string::npos ? std::string::npos : comma - start)));
        if (comma == std::string::npos) return out;
        start = comma + 1;
    }
}

template <class T>
T parse_positive(const std::string& v, const std::string& where) {
    T x = 0;
    const auto* end = v.data() + v.size();
    const auto [ptr, ec] = std::from_chars(v.data(), end, x);
    if (v.empty() || ec != std::errc() || ptr != end || x <= 0)
        throw InputError(fmt::format("{}: \"{}\" is not a positive integer", where, clip_for_message(v)));
    return x;
}

bool parse_bool(const std::string& v, const std::string& where) {
    if (v == "true") return true;
    if (v == "false") return false;
    throw InputError(fmt::format("{}: \"{}\" is not true or false", where, clip_for_message(v)));
}

std::int64_t parse_axis_integer(const std::string& key, const std::string& v, const std::string& where) {
    const auto x = parse_positive<std::int64_t>(v, where);
    const auto& f = axis_field(key);
    if (f.range)
        if (const auto problem = schema::range_problem(static_cast<double>(x), *f.range))
            throw InputError(fmt::format("{}: {} {}", where, v, *problem));
    return x;
}

Recompute parse_recompute(const std::string& v, const std::string& where) {
    const auto& f = axis_field("recompute");
    if (std::find(f.choices.begin(), f.choices.end(), v) == f.choices.end())
        throw InputError(fmt::format("{}: \"{}\" is not one of {}", where, clip_for_message(v),
                                     fmt::join(f.choices, ", ")));
    Layout l;
    f.set(l, schema::Value{v});
    return l.recompute;
}

/// Parses every value with `parse` into `dim` (which must still be empty), sorted. A value given twice
/// (`--vary tp=2,4,2`) is refused, as `--gpus 8,8` and `--only a,a` are: it was dropped without a word
/// (round 11).
template <class T, class Parse>
void fill(std::vector<T>& dim, const std::vector<std::string>& values, const std::string& where,
          Parse parse) {
    if (!dim.empty()) throw InputError(fmt::format("{}: the key is restricted twice", where));
    for (const auto& v : values)
        dim.push_back(parse(v, where));
    std::vector<T> sorted = dim;
    std::sort(sorted.begin(), sorted.end());
    if (const auto twice = std::adjacent_find(sorted.begin(), sorted.end()); twice != sorted.end()) {
        const auto first = std::find(dim.begin(), dim.end(), *twice) - dim.begin();
        throw InputError(fmt::format("{}: \"{}\" is given twice", where,
                                     clip_for_message(values[static_cast<std::size_t>(first)])));
    }
    dim = std::move(sorted);
}

template <class T>
std::vector<T> or_default(const std::vector<T>& given, std::vector<T> fallback) {
    return given.empty() ? fallback : given;
}

std::string seconds(double s) {
    if (s >= 0.1) return fmt::format("{:.1f} s", s);
    if (s >= 1e-3) return fmt::format("{:.1f} ms", s * 1e3);
    return fmt::format("{:.0f} us", s * 1e6);
}

std::string scale_out_name(const TopologySpec& t) {
    if (t.scale_out_kind == "infiniband") return "InfiniBand";
    if (t.scale_out_kind == "roce") return "RoCE";
    return t.scale_out_kind;
}

}  // namespace

const std::vector<std::string>& sweep_keys() {
    static const std::vector<std::string> keys = {"tp",
                                                  "pp",
                                                  "dp",
                                                  "cp",
                                                  "micro_batch",
                                                  "vpp",
                                                  "recompute",
                                                  "sequence_parallel",
                                                  "distributed_optimizer"};
    return keys;
}

void restrict_sweep_grid(SweepGrid& grid, const std::string& assignment, const std::string& option) {
    const std::string shown = clip_for_message(assignment);  // a list of 100,000 characters is cut
    const bool fix = option == "--fix" || option == "fix";   // the CLI's option or the Python argument
    const auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == assignment.size())
        throw InputError(
            fmt::format("{} \"{}\": expected key=value{}", option, shown, fix ? "" : ",value..."));
    const std::string key = trim(assignment.substr(0, eq));
    const auto values = split_commas(assignment.substr(eq + 1));
    const std::string where = fmt::format("{} {}", option, key);
    const auto& keys = sweep_keys();
    if (std::find(keys.begin(), keys.end(), key) == keys.end() && key != "ep")
        throw InputError(fmt::format("{} \"{}\": unknown key \"{}\"; the keys are {}", option, shown,
                                     clip_for_message(key), fmt::join(keys, ", ")));
    if (fix && values.size() != 1)
        throw InputError(fmt::format("{} \"{}\": {} takes one value; {} takes a list", option, shown, option,
                                     option == "fix" ? "vary" : "--vary"));
    auto to_int = [&key](const std::string& v, const std::string& w) {
        return static_cast<int>(parse_axis_integer(key, v, w));
    };
    auto to_int64 = [&key](const std::string& v, const std::string& w) {
        return parse_axis_integer(key, v, w);
    };
    if (key == "tp") fill(grid.tp, values, where, to_int);
    if (key == "pp") fill(grid.pp, values, where, to_int);
    if (key == "dp") fill(grid.dp, values, where, to_int);
    if (key == "cp") fill(grid.cp, values, where, to_int);
    if (key == "ep") fill(grid.ep, values, where, to_int);
    if (key == "vpp") fill(grid.vpp, values, where, to_int);
    if (key == "micro_batch") fill(grid.micro_batch, values, where, to_int64);
    if (key == "recompute") fill(grid.recompute, values, where, parse_recompute);
    if (key == "sequence_parallel") fill(grid.sequence_parallel, values, where, parse_bool);
    if (key == "distributed_optimizer") fill(grid.distributed_optimizer, values, where, parse_bool);
}

namespace {

/// The workload's layers_per_stage holds at its own pp only; one of another length (check_layout refuses it)
/// was copied into every layout of that pp: 6 M entries passed 25 s and gigabytes (round 10).
void check_base_stages(const Layout& base) {
    const auto stages = static_cast<std::int64_t>(base.layers_per_stage.size());
    if (stages > 0 && ((base.pipeline_layout.empty() && stages != base.pp) || stages > limits::kMaxGpus))
        throw InputError(
            fmt::format("sweep: layout.layers_per_stage has {} entries; layout.pp = {}", stages, base.pp));
}

/// What the layouts at another vpp (`base` without its pipeline_layout) and at another pp (without its
/// layers_per_stage too) start from: each layout copied them and cleared them, keeping their capacity, so a
/// 65,000-character pipeline_layout cost 64 KB in every layout of the grid (1.5 GB for 23,000; round 10).
std::pair<Layout, Layout> bases_without_split(const Layout& base) {
    Layout other_vpp = base;
    other_vpp.pipeline_layout.clear();
    other_vpp.pipeline_layout.shrink_to_fit();
    Layout other_pp = other_vpp;
    other_pp.layers_per_stage.clear();
    other_pp.layers_per_stage.shrink_to_fit();
    return {std::move(other_vpp), std::move(other_pp)};
}

}  // namespace

std::vector<Layout> enumerate_layouts(const ModelSpec& model, const Layout& base, const SweepGrid& grid,
                                      int gpus, int gpus_per_node) {
    check_base_stages(base);
    std::vector<int> tp_default;
    for (int t = 1; t <= std::min({gpus_per_node, gpus, kSweepMaxDefaultTp}); t *= 2)
        tp_default.push_back(t);
    std::vector<int> pp_default;
    const std::int64_t split_layers = pipeline_split_layers(model, base);  // + embedding / loss if counted
    for (std::int64_t d = 1; d <= std::min<std::int64_t>(split_layers, gpus); ++d)
        if (split_layers % d == 0) pp_default.push_back(static_cast<int>(d));
    if ((!base.layers_per_stage.empty() || !base.pipeline_layout.empty()) && base.pp <= gpus)
        pp_default.push_back(base.pp);
    std::sort(pp_default.begin(), pp_default.end());
    pp_default.erase(std::unique(pp_default.begin(), pp_default.end()), pp_default.end());

    const auto tps = or_default(grid.tp, tp_default);
    const auto pps = or_default(grid.pp, pp_default);
    const auto cps = or_default(grid.cp, {1});
    const auto vpps = or_default(grid.vpp, {1, 2, 4});
    const auto mbs = or_default(grid.micro_batch, {1, 2, 4, 8});
    const auto rcs = or_default(grid.recompute, {Recompute::none, Recompute::selective, Recompute::full});
    const auto sps = or_default(grid.sequence_parallel, {false, true});
    const auto dos = or_default(grid.distributed_optimizer, {false, true});
    // EP, as Megatron-Core carves it out of TP x CP x DP: for MoE models every divisor of the experts up to
    // the GPUs; dense models keep the base layout's (1).
    std::vector<int> ep_default;
    if (model.moe()) {
        for (std::int64_t e = 1; e <= std::min<std::int64_t>(model.num_experts, gpus); ++e)
            if (model.num_experts % e == 0) ep_default.push_back(static_cast<int>(e));
    } else {
        ep_default.push_back(base.ep);
    }
    const auto eps = or_default(grid.ep, ep_default);

    const auto [base_at_other_vpp, base_at_other_pp] = bases_without_split(base);
    std::vector<Layout> out;
    for (int tp : tps)
        for (int pp : pps)
            for (int cp : cps) {
                const std::int64_t cells = std::int64_t{tp} * pp * cp;
                const int dp = gpus % cells == 0 ? static_cast<int>(gpus / cells) : 0;
                if (!grid.dp.empty() && std::find(grid.dp.begin(), grid.dp.end(), dp) == grid.dp.end())
                    continue;
                for (int ep : eps)
                    for (int vpp : vpps) {
                        if (vpp > 1 && pp == 1) continue;
                        for (auto mb : mbs)
                            for (auto rc : rcs)
                                for (bool sp : sps) {
                                    if (sp && tp == 1) continue;
                                    for (bool dist : dos) {
                                        Layout l = pp != base.pp     ? base_at_other_pp
                                                   : vpp != base.vpp ? base_at_other_vpp
                                                                     : base;
                                        l.tp = tp;
                                        l.pp = pp;
                                        l.cp = cp;
                                        l.dp = dp;
                                        l.ep = ep;
                                        l.vpp = vpp;
                                        l.micro_batch = mb;
                                        l.recompute = rc;
                                        l.sequence_parallel = sp;
                                        l.distributed_optimizer = dist;
                                        l.zero_stage = 0;
                                        drop_other_granularity(l);
                                        if (static_cast<std::int64_t>(out.size()) == limits::kMaxSweepPoints)
                                            throw InputError(fmt::format(
                                                "sweep: the grid holds more than {} layouts on {} GPUs: "
                                                "above "
                                                "the limit; narrow it with --fix or shorter --vary lists",
                                                limits::kMaxSweepPoints, gpus));
                                        out.push_back(std::move(l));
                                    }
                                }
                    }
            }
    return out;
}

void drop_other_granularity(Layout& l) {
    if (l.recompute != Recompute::selective) {
        l.recompute_modules = RecomputeModules{};
        l.recompute_mla_up_proj = false;
    }
    if (l.recompute != Recompute::full) l.recompute_num_layers = 0;
}

std::string reject_reason(const ModelSpec& model, const Layout& layout, int gpus) {
    return classify(model, layout, gpus, nullptr);
}

std::string canonical_string(const Layout& l) {
    return fmt::format("tp{} pp{} dp{} cp{}{} mb{} vpp{} rc={} sp{} do{}", l.tp, l.pp, l.dp, l.cp,
                       l.ep > 1 ? fmt::format(" ep{}", l.ep) : "", l.micro_batch, l.vpp,
                       to_string(l.recompute), l.sequence_parallel ? 1 : 0, l.distributed_optimizer ? 1 : 0);
}

std::string explain_limit(const Report& r, const TopologySpec& topology) {
    const auto& l = r.layout;
    const double step = r.step_time_s;
    if (!(step > 0)) return "no time measured";
    const int gpn = topology.gpus_per_node;
    // Groups of `span` consecutive GPUs start at multiples of span: on scale-up domains of gpn GPUs one of
    // them crosses a domain boundary unless span divides gpn (EP 64 on NVL72 domains of 72: ranks 64-127).
    auto fabric = [&](std::int64_t span) {
        return span > gpn || gpn % span != 0 ? scale_out_name(topology) : std::string("NVLink");
    };
    const std::pair<const char*, double> parts[] = {{"bubble", r.bubble_s},
                                                    {"TP", r.tp_exposed_s},
                                                    {"PP", r.pp_exposed_s},
                                                    {"DP", r.dp_exposed_s},
                                                    {"idle", r.idle_s}};
    const auto* top = &parts[0];
    for (const auto& p : parts)
        if (p.second > top->second) top = &p;
    const double share = top->second / step;
    if (share < 0.05) return fmt::format("compute-bound ({:.0f}%)", 100.0 * r.compute_s / step);
    const std::string what = top->first;
    const std::string pct = fmt::format("{:.0f}%", 100.0 * share);
    if (what == "bubble")
        return fmt::format("bubble {}: {} micro-batches on {} stages{}", pct, l.micro_batches(), l.pp,
                           l.vpp > 1 ? fmt::format(" x {} chunks", l.vpp) : "");
    if (what == "idle") return fmt::format("idle {} ({}): stages unevenly loaded", seconds(top->second), pct);
    // Ranks are tp fastest, then cp, dp, pp: a group of stride s and n members spans s·n consecutive GPUs.
    // Context-parallel collectives run on the TP stream, so they count as exposed TP.
    const std::int64_t tp = l.tp, cp = l.cp, dp = l.dp, pp = l.pp;
    if (what == "TP" && r.ep_exposed_s > 0.5 * r.tp_exposed_s) {
        // Mostly the EP all-to-alls (on the TP stream): Megatron-Core's expert groups are expert-TP fastest,
        // then EP, over the ranks of one stage, so an EP group spans expert_tp · ep consecutive GPUs.
        const std::int64_t ep_span = static_cast<std::int64_t>(l.expert_tp()) * l.ep;
        return fmt::format("exposed TP {} ({}) over {}, of which EP all-to-all {} over {}",
                           seconds(top->second), pct, fabric(tp * cp), seconds(r.ep_exposed_s),
                           fabric(ep_span));
    }
    const std::int64_t span = what == "TP" ? tp * cp : what == "DP" ? tp * cp * dp : tp * cp * dp * pp;
    const std::string name = what == "TP" && cp > 1 ? "TP+CP" : what;
    return fmt::format("exposed {} {} ({}) over {}", name, seconds(top->second), pct, fabric(span));
}

}  // namespace trainsim
