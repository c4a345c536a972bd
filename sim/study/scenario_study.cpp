// What-if studies: the unperturbed run, the perturbed runs over seeds, and the attribution
// (include/trainsim/scenario_study.hpp).
#include <nlohmann/json.hpp>

#include "trainsim/scenario_study.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include <fmt/format.h>

#include "trainsim/collectives.hpp"
#include "trainsim/compute.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/limits.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/parallel_map.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

double nearest_rank_percentile(std::vector<double> values, double q) {
    if (values.empty()) return 0;
    std::sort(values.begin(), values.end());
    const auto n = values.size();
    auto rank = static_cast<std::size_t>(std::ceil(q * static_cast<double>(n)));
    rank = std::clamp<std::size_t>(rank, 1, n);
    return values[rank - 1];
}

namespace {

StageWaits::Parts parts_of(const RankTimes& t) {
    StageWaits::Parts p;
    p.compute_s = t.compute_s;
    p.tp_wait_s = t.tp_wait_s;
    p.tp_transfer_s = t.tp_exposed_s - t.cp_exposed_s - t.tp_wait_s;
    p.cp_wait_s = t.cp_wait_s;
    p.cp_transfer_s = t.cp_exposed_s - t.cp_wait_s;
    p.dp_wait_s = t.dp_wait_s;
    p.dp_transfer_s = t.dp_exposed_s - t.dp_wait_s;
    p.bubble_s = t.bubble_s;
    p.pp_exposed_s = t.pp_exposed_s;
    p.idle_s = t.idle_s;
    return p;
}

void add(StageWaits::Parts& a, const StageWaits::Parts& b, double w) {
    a.compute_s += w * b.compute_s;
    a.tp_wait_s += w * b.tp_wait_s;
    a.tp_transfer_s += w * b.tp_transfer_s;
    a.cp_wait_s += w * b.cp_wait_s;
    a.cp_transfer_s += w * b.cp_transfer_s;
    a.dp_wait_s += w * b.dp_wait_s;
    a.dp_transfer_s += w * b.dp_transfer_s;
    a.bubble_s += w * b.bubble_s;
    a.pp_exposed_s += w * b.pp_exposed_s;
    a.idle_s += w * b.idle_s;
}

/// The GPU that caused the most waiting beyond the unperturbed run (-1: none caused any more).
int critical_gpu(const std::vector<double>& caused, const std::vector<double>& base) {
    int best = -1;
    double most = 0;
    for (std::size_t g = 0; g < caused.size(); ++g) {
        const double extra = caused[g] - (g < base.size() ? base[g] : 0.0);
        if (extra > most) {
            most = extra;
            best = static_cast<int>(g);
        }
    }
    return best;
}

/// The most loaded direction of a perturbed link option: (bytes, busy seconds).
std::pair<double, double> load_of(const std::vector<int>& links, const std::vector<double>& bytes,
                                  const std::vector<double>& capacity) {
    std::pair<double, double> out{0, 0};
    for (int l : links) {
        const auto i = static_cast<std::size_t>(l);
        const double busy = bytes[i] / capacity[i];
        if (busy >= out.second) out = {bytes[i], busy};
    }
    return out;
}

/// The GPUs that caused more waiting than in the unperturbed run, the most first (at most 8).
std::vector<CriticalRank> critical_ranks(const Cluster& cluster, const Layout& layout,
                                         const SimulationOptions& options, const ExecutionResult& ex,
                                         const ExecutionResult& base) {
    const Perturbations& p = options.perturbations;
    std::vector<CriticalRank> out;
    const std::vector<double> factors = p.stragglers.empty()
                                            ? std::vector<double>{}
                                            : compute_factors(p.stragglers, cluster.gpus(), options.seed);
    for (int g = 0; g < cluster.gpus(); ++g) {
        const auto i = static_cast<std::size_t>(g);
        const double extra = ex.caused_wait_s[i] - base.caused_wait_s[i];
        if (!(extra > 0)) continue;
        CriticalRank c;
        c.gpu = g;
        c.coord = coord_of(layout, g);
        c.compute_factor = factors.empty() ? 1.0 : factors[i];
        c.caused_wait_s = extra;
        out.push_back(c);
    }
    std::stable_sort(out.begin(), out.end(), [](const CriticalRank& a, const CriticalRank& b) {
        return a.caused_wait_s > b.caused_wait_s;
    });
    if (out.size() > 8) out.resize(8);
    return out;
}

/// Each perturbed link option's most loaded direction, perturbed and unperturbed.
std::vector<LinkLoad> link_loads(const Cluster& cluster, const Cluster& base_cluster,
                                 const ExecutionResult& ex, const ExecutionResult& base) {
    std::vector<LinkLoad> out;
    const std::vector<double> cap = link_capacities(cluster), base_cap = link_capacities(base_cluster);
    for (const PerturbedLinks& pl : cluster.perturbed_links()) {
        LinkLoad ll;
        ll.text = pl.text;
        std::tie(ll.bytes, ll.busy_s) = load_of(pl.links, ex.link_bytes, cap);
        std::tie(ll.base_bytes, ll.base_busy_s) = load_of(pl.links, base.link_bytes, base_cap);
        out.push_back(ll);
    }
    return out;
}

/// Each pipeline stage's time accounts, the mean over its GPUs, perturbed and unperturbed.
std::vector<StageWaits> stage_waits(const Layout& layout, const ExecutionResult& ex,
                                    const ExecutionResult& base) {
    std::vector<StageWaits> out(static_cast<std::size_t>(layout.pp));
    const double per_stage = static_cast<double>(layout.gpus() / layout.pp);
    for (int g = 0; g < layout.gpus(); ++g) {
        const auto i = static_cast<std::size_t>(g);
        StageWaits& sw = out[static_cast<std::size_t>(coord_of(layout, g).pp)];
        add(sw.perturbed, parts_of(ex.ranks[i]), 1.0 / per_stage);
        add(sw.base, parts_of(base.ranks[i]), 1.0 / per_stage);
    }
    for (int s = 0; s < layout.pp; ++s)
        out[static_cast<std::size_t>(s)].stage = s;
    return out;
}

/// The step-time percentiles over the seeds and the GPU most often critical.
void add_seed_statistics(ScenarioStudy& st, const std::vector<ScenarioRun>& runs) {
    st.runs = runs;
    std::vector<double> steps;
    std::map<int, int> critical_count;
    for (const auto& r : runs) {
        steps.push_back(r.step_time_s);
        if (r.critical_gpu >= 0) ++critical_count[r.critical_gpu];
    }
    st.median_step_s = nearest_rank_percentile(steps, 0.5);
    st.p90_step_s = nearest_rank_percentile(steps, 0.9);
    st.p99_step_s = nearest_rank_percentile(steps, 0.99);
    st.median_slowdown = st.median_step_s / st.base_step_time_s;
    for (const auto& [gpu, count] : critical_count)
        if (count > st.most_frequent_critical_count) {
            st.most_frequent_critical_gpu = gpu;
            st.most_frequent_critical_count = count;
        }
}

/// The study's checks before anything is built: the seeds, the layout, its work on the fabric, and the work
/// of seeds perturbed simulations of this size (seeds <= 100,000 and the passes <= 2^23, so the product fits
/// in 64 bits).
void check_study_size(const TopologySpec& topology, const ModelSpec& model, const Layout& layout, int seeds) {
    if (seeds < 1) throw InputError(fmt::format("--seeds = {} must be at least 1", seeds));
    check_layout(model, layout, topology.gpus());
    check_shared_tp_port_work(topology, model, layout);
    const std::int64_t passes = gpu_layer_passes_per_step(model, layout);
    if (static_cast<std::int64_t>(seeds) * passes > limits::kMaxGpuLayerPassesPerStudy)
        throw InputError(fmt::format(
            "--seeds = {}: {} seeds of {} GPU layer passes per step ((model.layers + model.mtp_layers) * "
            "micro-batches per step * "
            "layout.dp * layout.cp * layout.tp) pass the limit of {} for a what-if study (limits.hpp); at "
            "most "
            "{} seeds for this run",
            seeds, seeds, passes, limits::kMaxGpuLayerPassesPerStudy,
            limits::kMaxGpuLayerPassesPerStudy / std::max<std::int64_t>(passes, 1)));
}

}  // namespace

ScenarioStudy study_scenario(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                             const std::string& workload_name, const SimulationOptions& options, int seeds,
                             int jobs, SimulationResult& first) {
    check_study_size(topology, model, layout, seeds);
    const Cluster base_cluster(topology);
    const Cluster cluster(topology, options.perturbations.links, options.cluster);
    const Program program = build_program(model, layout);

    ScenarioStudy st;
    const Perturbations& p = options.perturbations;
    for (const auto& s : p.stragglers)
        st.perturbations.push_back("--straggler " + s.text);
    if (p.jitter) st.perturbations.push_back("--jitter " + p.jitter->text);
    for (const auto& l : p.links)
        st.perturbations.push_back("--link " + l.text);
    st.seed = options.seed;

    SimulationOptions base_opts;
    base_opts.execution = options.execution;
    base_opts.attribute = true;
    const SimulationResult base = simulate(base_cluster, model, layout, program, workload_name, base_opts);
    st.base_step_time_s = base.execution.step_time_s;

    // The seeds after the first need only the executor's step time and waiting caused: the program is timed
    // and the scenario built once for them, and no report is made (the first seed's full result is).
    Program timed = program;
    const ComputeModel compute = run_compute_model(cluster.spec(), cluster.gpu(), layout);
    time_program(timed, compute, model, layout);
    SimulationOptions seed_opts = options;
    seed_opts.attribute = true;
    const ExecutionScenario proto = execution_scenario(cluster, timed, compute, seed_opts);

    // The seeds' runs, each a pure function of its seed, stored at its index (parallel_map).
    const auto n = static_cast<std::size_t>(seeds);
    const std::vector<ScenarioRun> runs = parallel_map(n, jobs, [&](std::size_t k) {
        ScenarioRun run;
        run.seed = options.seed + k;
        if (k == 0) {
            SimulationOptions o = seed_opts;
            o.seed = run.seed;
            first = simulate(cluster, model, layout, program, workload_name, o);
            run.step_time_s = first.execution.step_time_s;
            run.critical_gpu = critical_gpu(first.execution.caused_wait_s, base.execution.caused_wait_s);
            return run;
        }
        ExecutionScenario sc = proto;
        set_scenario_seed(sc, cluster, p, run.seed);
        const ExecutionResult r = execute(cluster, layout, timed, {}, options.execution, sc);
        run.step_time_s = r.step_time_s;
        run.critical_gpu = critical_gpu(r.caused_wait_s, base.execution.caused_wait_s);
        return run;
    });

    // The first seed's run, attributed.
    const ExecutionResult& ex = first.execution;
    st.step_time_s = ex.step_time_s;
    st.cost_s = st.step_time_s - st.base_step_time_s;
    st.slowdown = st.step_time_s / st.base_step_time_s;
    st.tp_folded = ex.tp_folded;
    st.ran_ahead = ex.ran_ahead;
    st.bundles_omitted = cluster.bundles_omitted();
    st.critical_ranks = critical_ranks(cluster, layout, options, ex, base.execution);
    st.links = link_loads(cluster, base_cluster, ex, base.execution);
    st.stages = stage_waits(layout, ex, base.execution);
    add_seed_statistics(st, runs);
    return st;
}

std::string format_study_text(const ScenarioStudy& s) {
    std::string o = "\nwhat-if:";
    for (const auto& p : s.perturbations)
        o += " " + p;
    o += fmt::format(" (seed {})\n", s.seed);
    o += fmt::format("  step time {:.4f} s unperturbed, {:.4f} s perturbed: {:+.4f} s ({:.4f}x)\n",
                     s.base_step_time_s, s.step_time_s, s.cost_s, s.slowdown);
    o += fmt::format("  shortcuts: TP folding {}, run-ahead {}, spine bundles {}\n",
                     s.tp_folded ? "on" : "off", s.ran_ahead ? "on" : "off",
                     s.bundles_omitted ? "left out of routes" : "in routes");
    if (s.critical_ranks.empty()) {
        o += "  critical path: no rank made the others wait longer than unperturbed\n";
    } else {
        o += "  critical path: ranks that made the others wait (GPU-seconds beyond the unperturbed run)\n";
        for (const auto& c : s.critical_ranks)
            o += fmt::format("    GPU {:>6} (tp {}, cp {}, dp {}, pp {}){:<18} {:>12.4f} GPU-s\n", c.gpu,
                             c.coord.tp, c.coord.cp, c.coord.dp, c.coord.pp,
                             c.compute_factor != 1.0 ? fmt::format(" slowdown {:.2f}", c.compute_factor) : "",
                             c.caused_wait_s);
    }
    if (!s.links.empty()) {
        o += "  perturbed links (busiest direction: bytes, busy time = bytes / capacity)\n";
        for (const auto& l : s.links)
            o += fmt::format("    {:<32} {:>9.3f} GB busy {:.4f} s (unperturbed {:.4f} s)\n", l.text,
                             l.bytes / 1e9, l.busy_s, l.base_busy_s);
    }
    o += "  per pipeline stage (mean per GPU, s; second row: change from unperturbed)\n";
    o += fmt::format("    {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", "stage",
                     "compute", "TP wait", "TP xfer", "CP wait", "CP xfer", "DP wait", "DP xfer", "bubble",
                     "PP xfer", "idle");
    auto row = [&](const std::string& label, const StageWaits::Parts& p, bool sign) {
        auto v = [&](double x) { return sign ? fmt::format("{:+.4f}", x) : fmt::format("{:.4f}", x); };
        o += fmt::format("    {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9}\n", label,
                         v(p.compute_s), v(p.tp_wait_s), v(p.tp_transfer_s), v(p.cp_wait_s),
                         v(p.cp_transfer_s), v(p.dp_wait_s), v(p.dp_transfer_s), v(p.bubble_s),
                         v(p.pp_exposed_s), v(p.idle_s));
    };
    for (const auto& sw : s.stages) {
        row(std::to_string(sw.stage), sw.perturbed, false);
        StageWaits::Parts d = sw.perturbed;
        add(d, sw.base, -1.0);
        row("", d, true);
    }
    if (s.runs.size() > 1) {
        o += fmt::format(
            "  over {} seeds ({} .. {}): step time median {:.4f} s, p90 {:.4f} s, p99 {:.4f} s; median "
            "slowdown {:.4f}x\n",
            s.runs.size(), s.runs.front().seed, s.runs.back().seed, s.median_step_s, s.p90_step_s,
            s.p99_step_s, s.median_slowdown);
        if (s.most_frequent_critical_gpu >= 0)
            o += fmt::format("  most frequent critical rank: GPU {} ({} of {} seeds)\n",
                             s.most_frequent_critical_gpu, s.most_frequent_critical_count, s.runs.size());
    }
    return o;
}

nlohmann::json study_json(const ScenarioStudy& s) {
    using nlohmann::json;
    json j;
    j["perturbations"] = s.perturbations;
    j["seed"] = s.seed;
    j["unperturbed_step_time_s"] = s.base_step_time_s;
    j["step_time_s"] = s.step_time_s;
    j["cost_s"] = s.cost_s;
    j["slowdown"] = s.slowdown;
    j["shortcuts"] = {{"tp_folding", s.tp_folded},
                      {"run_ahead", s.ran_ahead},
                      {"spine_bundles_left_out", s.bundles_omitted}};
    json crit = json::array();
    for (const auto& c : s.critical_ranks)
        crit.push_back({{"gpu", c.gpu},
                        {"tp", c.coord.tp},
                        {"cp", c.coord.cp},
                        {"dp", c.coord.dp},
                        {"pp", c.coord.pp},
                        {"compute_factor", c.compute_factor},
                        {"caused_wait_s", c.caused_wait_s}});
    j["critical_ranks"] = crit;
    json links = json::array();
    for (const auto& l : s.links)
        links.push_back({{"link", l.text},
                         {"bytes", l.bytes},
                         {"busy_s", l.busy_s},
                         {"unperturbed_bytes", l.base_bytes},
                         {"unperturbed_busy_s", l.base_busy_s}});
    j["links"] = links;
    auto parts = [](const StageWaits::Parts& p) {
        return json{{"compute_s", p.compute_s},         {"tp_wait_s", p.tp_wait_s},
                    {"tp_transfer_s", p.tp_transfer_s}, {"cp_wait_s", p.cp_wait_s},
                    {"cp_transfer_s", p.cp_transfer_s}, {"dp_wait_s", p.dp_wait_s},
                    {"dp_transfer_s", p.dp_transfer_s}, {"bubble_s", p.bubble_s},
                    {"pp_exposed_s", p.pp_exposed_s},   {"idle_s", p.idle_s}};
    };
    json stages = json::array();
    for (const auto& sw : s.stages)
        stages.push_back(
            {{"stage", sw.stage}, {"perturbed", parts(sw.perturbed)}, {"unperturbed", parts(sw.base)}});
    j["stages"] = stages;
    json steps = json::array(), crits = json::array();
    for (const auto& r : s.runs) {
        steps.push_back(r.step_time_s);
        crits.push_back(r.critical_gpu);
    }
    j["seeds"] = {{"count", s.runs.size()},
                  {"first", s.runs.empty() ? 0 : s.runs.front().seed},
                  {"step_time_s", steps},
                  {"critical_gpu", crits},
                  {"median_step_time_s", s.median_step_s},
                  {"p90_step_time_s", s.p90_step_s},
                  {"p99_step_time_s", s.p99_step_s},
                  {"median_slowdown", s.median_slowdown},
                  {"most_frequent_critical_gpu", s.most_frequent_critical_gpu},
                  {"most_frequent_critical_count", s.most_frequent_critical_count}};
    return j;
}

}  // namespace trainsim
