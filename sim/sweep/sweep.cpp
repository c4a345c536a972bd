#include "trainsim/sweep.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <exception>
#include <limits>
#include <map>
#include <mutex>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "trainsim/errors.hpp"
#include "trainsim/parallel_map.hpp"
#include "trainsim/program.hpp"
#include "trainsim/simulate.hpp"
#include "trainsim/units.hpp"

namespace trainsim {

namespace {

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
        throw InputError(fmt::format("{}: \"{}\" is not a positive integer", where, v));
    return x;
}

bool parse_bool(const std::string& v, const std::string& where) {
    if (v == "true") return true;
    if (v == "false") return false;
    throw InputError(fmt::format("{}: \"{}\" is not true or false", where, v));
}

/// The layout field an axis of the grid sets (sweep_keys(): every key names one).
const schema::Field<Layout>& axis_field(const std::string& key) {
    const auto* f = schema::find(layout_fields(), key);
    if (!f) throw InternalError(fmt::format("sweep axis \"{}\" is not a layout field", key));
    return *f;
}

/// A positive integer value of axis `key`, within the field's range.
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
        throw InputError(fmt::format("{}: \"{}\" is not one of {}", where, v, fmt::join(f.choices, ", ")));
    Layout l;
    f.set(l, schema::Value{v});
    return l.recompute;
}

/// Parses every value with `parse`, sorts them and drops repeats, into `dim` (which must still be empty).
template <class T, class Parse>
void fill(std::vector<T>& dim, const std::vector<std::string>& values, const std::string& where,
          Parse parse) {
    if (!dim.empty()) throw InputError(fmt::format("{}: the key is restricted twice", where));
    for (const auto& v : values)
        dim.push_back(parse(v, where));
    std::sort(dim.begin(), dim.end());
    dim.erase(std::unique(dim.begin(), dim.end()), dim.end());
}

template <class T>
std::vector<T> or_default(const std::vector<T>& given, std::vector<T> fallback) {
    return given.empty() ? fallback : given;
}

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
    }
    return "?";
}

/// Phase 1 of a grid point: the checks and the memory estimate. Leaves `e.status` simulated when the point is
/// to be simulated, with `cost` its estimated simulation cost (main-stream ops over all TP groups, which the
/// executor runs one by one). InputError of this layout rejects it.
/// Everything of a program that the simulation reads: every segment's kernels and every stage's ops, as
/// bytes. Two layouts with the same signature and the same rank grid simulate identically.
std::string program_signature(const Program& p) {
    std::string sig;
    auto put = [&sig](const auto& v) { sig.append(reinterpret_cast<const char*>(&v), sizeof v); };
    for (const auto& seg : p.segments) {
        put(seg.kernels.size());
        for (const auto& k : seg.kernels) {
            put(k.kind);
            put(k.flops);
            put(k.bytes);
            put(k.m);
            put(k.n);
            put(k.k);
            put(k.batch);
        }
    }
    for (const auto& st : p.stages) {
        put(st.ops.size());
        put(st.hardware_flops);
        for (const auto& op : st.ops) {
            put(op.kind);
            put(op.phase);
            put(op.segment);
            put(op.collective);
            put(op.bytes);
            put(op.direction);
            put(op.virtual_stage);
            put(op.micro_batch);
            put(op.dp_target);
            put(op.group);
        }
    }
    return sig;
}

/// The rank grid and batch of a layout: with the program signature, what decides its simulation.
std::string execution_key(const Layout& l, std::size_t program_hash) {
    return fmt::format("{} {} {} {} {} {} {} {} {} {} {}", l.tp, l.pp, l.dp, l.cp, l.ep, l.expert_tp(), l.vpp,
                       l.micro_batch, l.global_batch, static_cast<int>(l.precision), program_hash);
}

void check_point(SweepEntry& e, double& cost, std::size_t& program_hash, const Cluster& cluster,
                 const ModelSpec& model) {
    const Layout& l = e.layout;
    e.reason = classify(model, l, cluster.gpus(), &e.detail);
    if (!e.reason.empty()) {
        e.status = SweepStatus::rejected;
        return;
    }
    try {
        const Program program = build_program(model, l);
        const MemoryReport memory = simulate_memory(model, l, program, cluster.gpu());
        e.peak_memory_bytes = memory.peak().peak_bytes;
        e.peak_stage = memory.peak_stage;
        if (!memory.fits()) {
            e.status = SweepStatus::out_of_memory;
            e.reason = fmt::format("out of memory: {} largest", to_string(memory.blamed_pile()));
            return;
        }
        program_hash = std::hash<std::string>{}(program_signature(program));
        cost = 0;
        for (const auto& st : program.stages)
            cost += static_cast<double>(st.ops.size()) * l.dp;
        e.status = SweepStatus::simulated;
    } catch (const InputError& err) {
        e.status = SweepStatus::rejected;
        e.detail = err.what();
        e.reason = numbers_to_n(err.what());
    }
}

/// Phase 2: one simulated iteration of a point that passed check_point (the program is built again rather
/// than kept: a program of a large layout holds millions of ops).
void simulate_point(SweepEntry& e, const Cluster& cluster, const ModelSpec& model,
                    const std::string& workload_name, const SweepOptions& options) {
    try {
        if (options.perturbations.empty()) {
            e.report =
                simulate(cluster, model, e.layout, build_program(model, e.layout), workload_name).report;
        } else {
            // Each seed's run; the report of the median one (nearest rank, the lower seed on ties).
            SimulationOptions o;
            o.perturbations = options.perturbations;
            const Program program = build_program(model, e.layout);
            std::vector<std::pair<double, Report>> runs;
            for (int k = 0; k < options.seeds; ++k) {
                o.seed = options.seed + static_cast<std::uint64_t>(k);
                Report r = simulate(cluster, model, e.layout, program, workload_name, o).report;
                runs.emplace_back(r.step_time_s, std::move(r));
            }
            std::stable_sort(runs.begin(), runs.end(),
                             [](const auto& a, const auto& b) { return a.first < b.first; });
            e.report = std::move(runs[(runs.size() + 1) / 2 - 1].second);
        }
        e.limit = explain_limit(e.report, cluster.spec());
    } catch (const InputError& err) {
        e.status = SweepStatus::rejected;
        e.detail = err.what();
        e.reason = numbers_to_n(err.what());
    }
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
    const auto eq = assignment.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == assignment.size())
        throw InputError(fmt::format("{} \"{}\": expected key=value{}", option, assignment,
                                     option == "--fix" ? "" : ",value..."));
    const std::string key = trim(assignment.substr(0, eq));
    const auto values = split_commas(assignment.substr(eq + 1));
    const std::string where = fmt::format("{} {}", option, key);
    const auto& keys = sweep_keys();
    if (std::find(keys.begin(), keys.end(), key) == keys.end() && key != "ep")
        throw InputError(fmt::format("{} \"{}\": unknown key \"{}\"; the keys are {}", option, assignment,
                                     key, fmt::join(keys, ", ")));
    if (option == "--fix" && values.size() != 1)
        throw InputError(
            fmt::format("{} \"{}\": --fix takes one value; --vary takes a list", option, assignment));
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

std::vector<Layout> enumerate_layouts(const ModelSpec& model, const Layout& base, const SweepGrid& grid,
                                      int gpus, int gpus_per_node) {
    std::vector<int> tp_default;
    for (int t = 1; t <= std::min(gpus_per_node, gpus); t *= 2)
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
                                        Layout l = base;
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
                                        if (pp != base.pp) l.layers_per_stage.clear();
                                        if (pp != base.pp || vpp != base.vpp) l.pipeline_layout.clear();
                                        out.push_back(std::move(l));
                                    }
                                }
                    }
            }
    return out;
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
    auto fabric = [&](std::int64_t span) {
        return span > gpn ? scale_out_name(topology) : std::string("NVLink");
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
    const std::int64_t span = what == "TP" ? tp * cp : what == "DP" ? tp * cp * dp : tp * cp * dp * pp;
    const std::string name = what == "TP" && cp > 1 ? "TP+CP" : what;
    return fmt::format("exposed {} {} ({}) over {}", name, seconds(top->second), pct, fabric(span));
}

SweepResult run_sweep(const TopologySpec& topology, const ModelSpec& model, const Layout& base,
                      const SweepGrid& grid, const std::string& workload_name, const SweepOptions& options) {
    const Cluster cluster(topology, options.perturbations.links);
    const auto layouts = enumerate_layouts(model, base, grid, topology.gpus(), topology.gpus_per_node);
    const std::size_t n = layouts.size();
    std::vector<SweepEntry> entries(n);
    std::vector<double> cost(n, 0.0);
    std::vector<std::size_t> program_hash(n, 0);
    std::vector<std::exception_ptr> errors(n);
    std::mutex progress_mutex;
    SweepProgress progress;
    progress.layouts = n;
    auto report_progress = [&](bool simulated) {
        if (!options.progress) return;
        const std::lock_guard<std::mutex> lock(progress_mutex);
        ++(simulated ? progress.simulated : progress.checked);
        options.progress(progress);
    };
    // Phase 1: checks and memory, every point.
    parallel_for(n, options.jobs, [&](std::size_t i) {
        entries[i].index = i;
        entries[i].layout = layouts[i];
        check_point(entries[i], cost[i], program_hash[i], cluster, model);
        report_progress(false);
    });
    // Phase 2: simulate the survivors, the costliest first (the threads then finish together); results stay
    // at their index, so the outcome does not depend on the order or the number of threads.
    // Points whose programs are identical on the same rank grid (e.g. selective recomputation with flash
    // attention, which recomputes nothing, beside no recomputation; the distributed optimizer at DP = 1) are
    // simulated once: the simulation is deterministic, so the copies are exact. A hash match is confirmed by
    // comparing the two programs in full.
    std::vector<std::size_t> todo, copy_of(n, n);
    {
        std::map<std::string, std::vector<std::size_t>> first;  // execution key -> representatives
        for (std::size_t i = 0; i < n; ++i) {
            if (entries[i].status != SweepStatus::simulated) continue;
            if (!options.deduplicate) {
                todo.push_back(i);
                continue;
            }
            auto& reps = first[execution_key(entries[i].layout, program_hash[i])];
            const std::string sig = program_signature(build_program(model, entries[i].layout));
            for (std::size_t r : reps)
                if (program_signature(build_program(model, entries[r].layout)) == sig) {
                    copy_of[i] = r;
                    break;
                }
            if (copy_of[i] == n) {
                reps.push_back(i);
                todo.push_back(i);
            }
        }
    }
    std::stable_sort(todo.begin(), todo.end(),
                     [&](std::size_t a, std::size_t b) { return cost[a] > cost[b]; });
    if (options.progress) {
        const std::lock_guard<std::mutex> lock(progress_mutex);
        progress.to_simulate = todo.size();
        progress.checks_done = true;
        options.progress(progress);
    }
    // An exception is kept at its point's index: the first in enumeration order is rethrown below.
    parallel_for(todo.size(), options.jobs, [&](std::size_t k) {
        try {
            simulate_point(entries[todo[k]], cluster, model, workload_name, options);
            report_progress(true);
        } catch (...) {
            errors[todo[k]] = std::current_exception();
        }
    });
    for (std::size_t i = 0; i < n; ++i) {
        if (copy_of[i] == n) continue;
        const SweepEntry& from = entries[copy_of[i]];
        SweepEntry& e = entries[i];
        e.status = from.status;
        e.reason = from.reason;
        e.detail = from.detail;
        e.limit = from.limit;
        e.report = from.report;
        e.report.layout = e.layout;  // its own layout, and its own memory (phase 1 walked it)
        e.report.memory = simulate_memory(model, e.layout, build_program(model, e.layout), cluster.gpu());
    }
    for (const auto& err : errors)  // the first in enumeration order
        if (err) std::rethrow_exception(err);

    SweepResult res;
    res.topology_name = topology.name;
    res.workload_name = workload_name;
    res.gpu_name = cluster.gpu().name;
    res.gpus = topology.gpus();
    res.global_batch = base.global_batch;
    res.hbm_bytes = cluster.gpu().hbm_bytes;
    if (!options.perturbations.empty()) {
        for (const auto& st : options.perturbations.stragglers)
            res.perturbations.push_back("--straggler " + st.text);
        if (options.perturbations.jitter)
            res.perturbations.push_back("--jitter " + options.perturbations.jitter->text);
        for (const auto& l : options.perturbations.links)
            res.perturbations.push_back("--link " + l.text);
        res.seeds = options.seeds;
    }
    std::vector<SweepEntry> simulated, oom, rejected;
    std::map<std::string, std::size_t> counts;
    for (auto& e : entries) {
        if (e.status != SweepStatus::simulated) ++counts[e.reason];
        (e.status == SweepStatus::simulated       ? simulated
         : e.status == SweepStatus::out_of_memory ? oom
                                                  : rejected)
            .push_back(std::move(e));
    }
    std::vector<std::string> keys(simulated.size());
    std::vector<std::size_t> order(simulated.size());
    for (std::size_t i = 0; i < simulated.size(); ++i) {
        keys[i] = canonical_string(simulated[i].layout);
        order[i] = i;
    }
    std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
        const double ta = simulated[a].report.step_time_s, tb = simulated[b].report.step_time_s;
        if (ta != tb) return ta < tb;
        return keys[a] < keys[b];
    });
    res.simulated = simulated.size();
    res.out_of_memory = oom.size();
    res.rejected = rejected.size();
    res.entries.reserve(n);
    for (auto i : order)
        res.entries.push_back(std::move(simulated[i]));
    for (auto& e : oom)
        res.entries.push_back(std::move(e));
    for (auto& e : rejected)
        res.entries.push_back(std::move(e));
    res.reject_counts.assign(counts.begin(), counts.end());
    std::stable_sort(res.reject_counts.begin(), res.reject_counts.end(),
                     [](const auto& a, const auto& b) { return a.second > b.second; });
    return res;
}

std::string format_sweep_text(const SweepResult& r, std::size_t top_k) {
    std::string o;
    o += fmt::format("trainsim sweep: {} on {} x {} ({}), global batch {}\n", r.workload_name, r.gpus,
                     r.gpu_name, r.topology_name, r.global_batch);
    o += fmt::format(
        "layouts: {} in the grid: {} simulated, {} out of memory ({:.1f} GiB of HBM per GPU), {} "
        "rejected\n\n",
        r.entries.size(), r.simulated, r.out_of_memory, r.hbm_bytes / kGiB, r.rejected);
    if (!r.perturbations.empty()) {
        o.pop_back();
        o += "what-if: every layout under";
        for (const auto& p : r.perturbations)
            o += " " + p;
        o +=
            r.seeds > 1
                ? fmt::format("; ranked by the median step time over {} seeds (the median seed's report)\n\n",
                              r.seeds)
                : std::string("\n\n");
    }
    const std::size_t k = std::min(top_k, r.simulated);
    if (k > 0) {
        o += fmt::format("top {} of {} by step time (exposed communication: mean over GPUs)\n", k,
                         r.simulated);
        o += fmt::format(
            "{:>4} {:>3} {:>3} {:>5} {:>3} {:>3} {:>3} {:>9} {:>3} {:>3} {:>10} {:>11} {:>6} {:>6} {:>8} "
            "{:>8} {:>8} {:>9} {:>9}  {}\n",
            "rank", "tp", "pp", "dp", "cp", "mb", "vpp", "recompute", "sp", "do", "step (s)", "tokens/s",
            "MFU", "bubble", "TP (s)", "PP (s)", "DP (s)", "peak GiB", "headroom", "limited by");
        for (std::size_t i = 0; i < k; ++i) {
            const auto& e = r.entries[i];
            const auto& l = e.layout;
            const auto& p = e.report;
            o += fmt::format(
                "{:>4} {:>3} {:>3} {:>5} {:>3} {:>3} {:>3} {:>9} {:>3} {:>3} {:>10.4f} {:>11.0f} {:>5.1f}% "
                "{:>5.1f}% {:>8.3f} {:>8.3f} {:>8.3f} {:>9.1f} {:>9.1f}  {}\n",
                i + 1, l.tp, l.pp, l.dp, l.cp, l.micro_batch, l.vpp, to_string(l.recompute),
                l.sequence_parallel ? "on" : "off", l.distributed_optimizer ? "on" : "off", p.step_time_s,
                p.tokens_per_s, 100.0 * p.mfu, 100.0 * p.bubble_s / p.step_time_s, p.tp_exposed_s,
                p.pp_exposed_s, p.dp_exposed_s, e.peak_memory_bytes / kGiB,
                (r.hbm_bytes - e.peak_memory_bytes) / kGiB, e.limit);
        }
        o += "\n";
    } else {
        o += "no layout of the grid was simulated\n\n";
    }
    if (!r.reject_counts.empty()) {
        o += "rejected layouts by reason\n";
        for (const auto& [reason, count] : r.reject_counts)
            o += fmt::format("{:>8}  {}\n", count, reason);
        o += "\n";
    }
    if (r.simulated > 0) {
        o += fmt::format("best layout: {}\n\n", canonical_string(r.entries.front().layout));
        o += format_text(r.entries.front().report, nullptr);
    }
    return o;
}

std::string sweep_csv(const SweepResult& r) {
    const bool with_ep =
        std::any_of(r.entries.begin(), r.entries.end(), [](const SweepEntry& e) { return e.layout.ep > 1; });
    std::string o = "rank,";
    for (const auto& key : sweep_keys())
        o += key + ",";
    if (with_ep) o += "ep,";
    o += "micro_batches,status,reason,step_time_s,tokens_per_s,mfu,compute_s,bubble_s,tp_exposed_s,pp_"
         "exposed_s,"
         "dp_exposed_s,idle_s,peak_memory_gib,headroom_gib,limit\n";
    for (std::size_t i = 0; i < r.entries.size(); ++i) {
        const auto& e = r.entries[i];
        const auto& l = e.layout;
        const bool sim = e.status == SweepStatus::simulated;
        const bool has_memory = e.status != SweepStatus::rejected;
        o += sim ? fmt::format("{},", i + 1) : std::string(",");
        for (const auto& key : sweep_keys())
            o += csv_field(schema::text(axis_field(key).get(l))) + ",";
        if (with_ep) o += fmt::format("{},", l.ep);
        o += fmt::format("{},{},{},", has_memory ? fmt::format("{}", l.micro_batches()) : "",
                         status_name(e.status), csv_field(e.reason));
        if (sim) {
            const auto& p = e.report;
            o += fmt::format("{:.6f},{:.1f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},{:.6f},", p.step_time_s,
                             p.tokens_per_s, p.mfu, p.compute_s, p.bubble_s, p.tp_exposed_s, p.pp_exposed_s,
                             p.dp_exposed_s, p.idle_s);
        } else {
            o += ",,,,,,,,,";
        }
        if (has_memory)
            o += fmt::format("{:.3f},{:.3f},", e.peak_memory_bytes / kGiB,
                             (r.hbm_bytes - e.peak_memory_bytes) / kGiB);
        else
            o += ",,";
        o += csv_field(e.limit) + "\n";
    }
    return o;
}

nlohmann::json sweep_json(const SweepResult& r) {
    using nlohmann::json;
    json j;
    j["format"] = "trainsim-sweep/1";
    j["topology"] = r.topology_name;
    j["workload"] = r.workload_name;
    j["gpu"] = r.gpu_name;
    j["gpus"] = r.gpus;
    j["global_batch"] = r.global_batch;
    j["hbm_bytes"] = r.hbm_bytes;
    if (!r.perturbations.empty()) j["what_if"] = {{"perturbations", r.perturbations}, {"seeds", r.seeds}};
    j["counts"] = {{"layouts", r.entries.size()},
                   {"simulated", r.simulated},
                   {"out_of_memory", r.out_of_memory},
                   {"rejected", r.rejected}};
    json reasons = json::array();
    for (const auto& [reason, count] : r.reject_counts)
        reasons.push_back({{"reason", reason}, {"count", count}});
    j["reject_reasons"] = reasons;
    json rows = json::array();
    for (std::size_t i = 0; i < r.entries.size(); ++i) {
        const auto& e = r.entries[i];
        const auto& l = e.layout;
        json row = {{"layout", canonical_string(l)}, {"status", status_name(e.status)}};
        for (const auto& key : sweep_keys())
            row[key] = schema::to_json(axis_field(key).get(l));
        if (l.ep > 1) row["ep"] = l.ep;
        if (e.status == SweepStatus::simulated) {
            const auto& p = e.report;
            row["rank"] = i + 1;
            row["micro_batches"] = l.micro_batches();
            row["step_time_s"] = p.step_time_s;
            row["tokens_per_s"] = p.tokens_per_s;
            row["mfu"] = p.mfu;
            row["breakdown_s"] = {{"compute", p.compute_s},       {"bubble", p.bubble_s},
                                  {"tp_exposed", p.tp_exposed_s}, {"pp_exposed", p.pp_exposed_s},
                                  {"dp_exposed", p.dp_exposed_s}, {"idle", p.idle_s}};
            row["limit"] = e.limit;
        } else {
            row["reason"] = e.reason;
            if (!e.detail.empty()) row["detail"] = e.detail;
        }
        if (e.status != SweepStatus::rejected) {
            row["peak_memory_bytes"] = e.peak_memory_bytes;
            row["peak_memory_stage"] = e.peak_stage;
            row["headroom_bytes"] = r.hbm_bytes - e.peak_memory_bytes;
        }
        rows.push_back(std::move(row));
    }
    j["layouts"] = rows;
    j["best"] = r.simulated > 0 ? to_json(r.entries.front().report, nullptr) : json();
    return j;
}

}  // namespace trainsim
