#include "trainsim/report.hpp"
#include "trainsim/schema_json.hpp"

#include <algorithm>

#include <fmt/format.h>

namespace trainsim {

Report make_report(const Cluster& cluster, const ModelSpec& m, const Layout& l, const Program& p,
                   const ExecutionResult& r, const std::string& topology_name,
                   const std::string& workload_name, const std::vector<std::vector<double>>* compute_end_s,
                   bool memory_timeline) {
    Report rep;
    rep.topology_name = topology_name;
    rep.workload_name = workload_name;
    rep.gpu_name = cluster.gpu().name;
    rep.gpu_uncalibrated = uncalibrated_note(cluster.gpu());
    rep.gpus = l.gpus();
    rep.model = m;
    rep.layout = l;
    rep.step_time_s = r.step_time_s;
    const double seqs = static_cast<double>(l.global_batch);
    rep.tokens_per_s = seqs * static_cast<double>(m.seq_len) / r.step_time_s;
    rep.tokens_per_s_per_gpu = rep.tokens_per_s / rep.gpus;
    rep.tokens_per_day = rep.tokens_per_s * kSecondsPerDay;
    rep.model_flops = m.model_flops(seqs);
    double hw = 0;
    for (int st = 0; st < l.pp; ++st)
        hw += p.stages[static_cast<std::size_t>(st)].hardware_flops * l.tp * l.dp * l.cp;
    rep.hardware_flops = hw;
    rep.peak_flops = cluster.gpu().peak_flops(l.precision);
    rep.model_tflops_per_gpu = rep.model_flops / r.step_time_s / rep.gpus / 1e12;
    rep.hardware_tflops_per_gpu = rep.hardware_flops / r.step_time_s / rep.gpus / 1e12;
    rep.mfu = rep.model_tflops_per_gpu * 1e12 / rep.peak_flops;
    rep.hfu = rep.hardware_tflops_per_gpu * 1e12 / rep.peak_flops;

    rep.stages.resize(static_cast<std::size_t>(l.pp));
    const double n = static_cast<double>(r.ranks.size());
    for (std::size_t i = 0; i < r.ranks.size(); ++i) {
        const auto& t = r.ranks[i];
        rep.compute_s += t.compute_s / n;
        rep.tp_exposed_s += t.tp_exposed_s / n;
        rep.ep_exposed_s += t.ep_exposed_s / n;
        rep.pp_exposed_s += t.pp_exposed_s / n;
        rep.dp_exposed_s += t.dp_exposed_s / n;
        rep.bubble_s += t.bubble_s / n;
        rep.idle_s += t.idle_s / n;
        const int st = coord_of(l, static_cast<int>(i)).pp;
        auto& s = rep.stages[static_cast<std::size_t>(st)];
        const double k = static_cast<double>(l.tp * l.dp * l.cp);
        s.stage = st;
        s.compute_s += t.compute_s / k;
        s.tp_exposed_s += t.tp_exposed_s / k;
        s.cp_exposed_s += t.cp_exposed_s / k;
        s.ep_exposed_s += t.ep_exposed_s / k;
        s.pp_exposed_s += t.pp_exposed_s / k;
        s.bubble_s += t.bubble_s / k;
        s.dp_exposed_s += t.dp_exposed_s / k;
        s.idle_s += t.idle_s / k;
    }
    rep.bubble_ratio = rep.step_time_s > rep.bubble_s ? rep.bubble_s / (rep.step_time_s - rep.bubble_s) : 0.0;
    rep.bubble_closed_form = static_cast<double>(l.pp - 1) / static_cast<double>(l.micro_batches() * l.vpp);
    rep.memory = simulate_memory(m, l, p, cluster.gpu(), compute_end_s, memory_timeline);
    rep.gpu_memory_bytes = cluster.gpu().hbm_bytes;
    rep.events = r.events;
    rep.flows = r.flows;
    return rep;
}

namespace {
std::string gib(double bytes) {
    return fmt::format("{:.1f} GiB", bytes / kGiB);
}
std::string pct(double f) {
    return fmt::format("{:.1f}%", 100.0 * f);
}
}  // namespace

namespace {

/// The title, the cluster, model and layout lines (and the out-of-memory warning first).
std::string text_header(const Report& r) {
    std::string o;
    const auto& l = r.layout;
    const auto& m = r.model;
    if (!r.memory.fits())
        o += fmt::format("OUT OF MEMORY: {}\n(the timing below is infeasible as laid out)\n\n",
                         r.memory.oom_message());
    o += fmt::format("trainsim: one training iteration, simulated event by event\n\n");
    o += fmt::format("cluster   {} ({} x {})\n", r.topology_name, r.gpus, r.gpu_name);
    if (!r.gpu_uncalibrated.empty()) o += fmt::format("note      {}\n", r.gpu_uncalibrated);
    // MoE: "256 experts top-8 (expert ffn 2048, shared 2048)"; MLA and MTP named.
    std::string arch;
    if (m.moe())
        arch += fmt::format(
            ", {} experts top-{} (expert ffn {}{})", m.num_experts, m.moe_top_k, m.expert_ffn(),
            m.moe_shared_expert_ffn_hidden > 0 ? fmt::format(", shared {}", m.moe_shared_expert_ffn_hidden)
                                               : "");
    if (m.mla()) arch += ", MLA";
    if (m.mtp_layers > 0) arch += fmt::format(", {} MTP", m.mtp_layers);
    o += fmt::format(
        "model     {}: {} layers, hidden {}, heads {} (kv {}), ffn {} ({}){}, vocab {}, seq {}; {:.1f} B "
        "parameters\n",
        r.workload_name, m.layers, m.hidden, m.heads, m.kv_heads, m.ffn_hidden,
        mlp_kind_names().at(static_cast<std::size_t>(m.mlp)), arch, m.vocab, m.seq_len,
        m.total_params() / 1e9);
    o += fmt::format(
        "layout    TP {} x PP {} x DP {}{}{}, micro-batch {}, global batch {} ({} micro-batches per "
        "pipeline), {}, recompute {}, {}{}{}, attention {}\n\n",
        l.tp, l.pp, l.dp, l.cp > 1 ? fmt::format(" x CP {}", l.cp) : "",
        l.vpp > 1 ? fmt::format(" (VPP {})", l.vpp) : "", l.micro_batch, l.global_batch, l.micro_batches(),
        l.vpp > 1 ? "interleaved 1f1b" : to_string(l.schedule), to_string(l.recompute),
        to_string(l.precision), l.sequence_parallel ? ", sequence parallel" : "",
        l.zero_stage >= 2       ? fmt::format(", ZeRO-{}", l.zero_stage)
        : l.sharded_optimizer() ? ", distributed optimizer"
                                : "",
        to_string(l.attention));
    return o;
}

/// The headline figures, predicted (and measured, with the error, when given), and the time to train.
std::string text_figures(const Report& r, const Measured* measured, const TimeToTrain* train) {
    std::string o = fmt::format("{:<34}{:>16}", "", "predicted");
    if (measured) o += fmt::format("{:>16}{:>10}", "measured", "error");
    o += "\n";
    auto row = [&](const std::string& name, double pred, const std::string& unit, double meas) {
        o += fmt::format("{:<34}{:>16}", name, fmt::format("{:.3f} {}", pred, unit));
        if (measured && meas > 0)
            o += fmt::format("{:>16}{:>10}", fmt::format("{:.3f} {}", meas, unit),
                             fmt::format("{:+.1f}%", 100.0 * (pred - meas) / meas));
        o += "\n";
    };
    row("step time", r.step_time_s, "s", measured ? measured->step_time_s : 0);
    const bool hw_convention = measured && measured->tflops_convention == "narayanan2021-eq3";
    row("TFLOP/s per GPU (hardware)", r.hardware_tflops_per_gpu, "TFLOP/s",
        hw_convention ? measured->tflops_per_gpu : 0);
    row("TFLOP/s per GPU (model)", r.model_tflops_per_gpu, "TFLOP/s",
        measured && !hw_convention ? measured->tflops_per_gpu : 0);
    o += fmt::format("{:<34}{:>16}\n", "tokens/s", fmt::format("{:.0f}", r.tokens_per_s));
    o += fmt::format("{:<34}{:>16}\n", "tokens/s per GPU", fmt::format("{:.1f}", r.tokens_per_s_per_gpu));
    o += fmt::format("{:<34}{:>16}\n", "tokens/day", count_text(r.tokens_per_day));
    o += fmt::format("{:<34}{:>16}\n", "MFU", pct(r.mfu));
    o += fmt::format("{:<34}{:>16}\n", "HFU", pct(r.hfu));
    if (train) o += time_to_train_text(*train);
    if (measured)
        o += fmt::format("(measured: {}{})\n", measured->source,
                         measured->tflops_per_gpu > 0 ? "; TFLOP/s as " + measured->tflops_convention : "");
    return o;
}

/// Where the step goes: the time accounts, mean over GPUs, and the bubble against its closed form.
std::string text_breakdown(const Report& r) {
    std::string o = fmt::format("\nwhere the step goes (mean over GPUs)\n");
    auto part = [&](const char* name, double s) {
        o += fmt::format("  {:<32}{:>12}{:>9}\n", name, fmt::format("{:.3f} s", s), pct(s / r.step_time_s));
    };
    part("compute", r.compute_s);
    part("pipeline bubble", r.bubble_s);
    part("exposed TP communication", r.tp_exposed_s);
    if (r.ep_exposed_s > 0) part("  of which EP all-to-all", r.ep_exposed_s);
    part("exposed PP communication", r.pp_exposed_s);
    part("exposed DP communication", r.dp_exposed_s);
    part("idle (waiting for slower ranks)", r.idle_s);
    o += fmt::format("  bubble ratio bubble/(step - bubble) {:.3f}; closed form (p-1)/(m*v) = {:.3f}\n",
                     r.bubble_ratio, r.bubble_closed_form);
    return o;
}

/// Per pipeline stage: its time accounts and its memory piles at its peak; then the busiest stage.
std::string text_stages(const Report& r) {
    std::string o = fmt::format("\nper pipeline stage (per GPU; memory at the stage's peak)\n");
    o += fmt::format(
        "  {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} {:>6}\n",
        "stage", "compute", "bubble", "TP exp.", "PP exp.", "DP exp.", "params", "grads", "optim.", "activ.",
        "buffers", "framew.", "peak", "phase", "in-fl.");
    for (std::size_t i = 0; i < r.stages.size(); ++i) {
        const auto& s = r.stages[i];
        const auto& mm = r.memory.stages[i];
        const auto& pk = mm.peak().piles;
        auto sec = [](double v) { return fmt::format("{:.2f} s", v); };
        auto g = [](double v) { return fmt::format("{:.1f}", v / kGiB); };
        o += fmt::format(
            "  {:>5} {:>9} {:>9} {:>9} {:>9} {:>9} | {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>9} {:>10} "
            "{:>6.1f}\n",
            s.stage, sec(s.compute_s), sec(s.bubble_s), sec(s.tp_exposed_s), sec(s.pp_exposed_s),
            sec(s.dp_exposed_s), g(pk[0]), g(pk[1]), g(pk[2]), g(pk[3]), g(pk[4]), g(pk[5]), g(mm.peak_bytes),
            to_string(mm.peak_phase), mm.peak_in_flight_microbatches);
    }
    o += "  (memory in GiB; `trainsim memory` prints every phase)\n";
    const auto& pk = r.memory.peak();
    o += fmt::format("  busiest stage {}: {} of {} HBM, peak in {}{}\n", pk.stage, gib(pk.peak_bytes),
                     gib(r.gpu_memory_bytes), to_string(pk.peak_phase),
                     r.memory.fits() ? "" : " -- DOES NOT FIT");
    o += fmt::format("  caching allocator (busiest GPU): max allocated {}, max reserved {}\n",
                     gib(r.memory.peak_of(ReportedMemory::allocated)),
                     gib(r.memory.peak_of(ReportedMemory::reserved)));
    for (const auto& n : r.memory.notes)
        o += fmt::format("  note: {}\n", n);
    return o;
}

/// The kernel costs that came from a hardware profile (empty without one), and the simulation's size.
std::string text_footer(const Report& r) {
    std::string o;
    if (!r.profile_use.empty()) {
        o += fmt::format("\ncompute costs from profile {} (kernels of one GPU per stage, one iteration):\n",
                         r.profile_file);
        for (const auto& u : r.profile_use)
            o += fmt::format(
                "  {:<13} {:>8} of {:>8} kernels from the profile ({:.3f} of {:.3f} s), the rest "
                "analytic\n",
                u.kind, u.from_profile, u.from_profile + u.analytic, u.profile_s, u.profile_s + u.analytic_s);
    }
    o += fmt::format("\nsimulation: {} events, {} network flows\n", r.events, r.flows);
    return o;
}

}  // namespace

std::string format_text(const Report& r, const Measured* measured, const TimeToTrain* train) {
    return text_header(r) + text_figures(r, measured, train) + text_breakdown(r) + text_stages(r) +
           text_footer(r);
}

nlohmann::json to_json(const Report& r, const Measured* measured) {
    using nlohmann::json;
    json j;
    j["topology"] = r.topology_name;
    j["workload"] = r.workload_name;
    j["gpu"] = r.gpu_name;
    j["gpus"] = r.gpus;
    if (!r.gpu_uncalibrated.empty()) j["gpu_uncalibrated"] = r.gpu_uncalibrated;
    j["layout"] = schema::to_json(layout_fields(), r.layout, /*summary_only=*/true);
    j["layout"]["micro_batches"] = r.layout.micro_batches();
    j["step_time_s"] = r.step_time_s;
    j["tokens_per_s"] = r.tokens_per_s;
    j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
    j["tokens_per_day"] = r.tokens_per_day;
    j["model_flops"] = r.model_flops;
    j["hardware_flops"] = r.hardware_flops;
    j["model_tflops_per_gpu"] = r.model_tflops_per_gpu;
    j["hardware_tflops_per_gpu"] = r.hardware_tflops_per_gpu;
    j["mfu"] = r.mfu;
    j["hfu"] = r.hfu;
    j["bubble"] = {{"time_s", r.bubble_s},
                   {"fraction_of_step", r.bubble_s / r.step_time_s},
                   {"ratio", r.bubble_ratio},
                   {"closed_form_ratio", r.bubble_closed_form}};
    j["bubble_fraction"] = r.bubble_s / r.step_time_s;
    j["breakdown_s"] = {{"compute", r.compute_s},       {"bubble", r.bubble_s},
                        {"tp_exposed", r.tp_exposed_s}, {"pp_exposed", r.pp_exposed_s},
                        {"dp_exposed", r.dp_exposed_s}, {"idle", r.idle_s}};
    if (r.ep_exposed_s > 0) j["breakdown_s"]["ep_exposed"] = r.ep_exposed_s;
    json stages = json::array();
    for (std::size_t i = 0; i < r.stages.size(); ++i) {
        const auto& s = r.stages[i];
        stages.push_back({{"stage", s.stage},
                          {"compute_s", s.compute_s},
                          {"bubble_s", s.bubble_s},
                          {"tp_exposed_s", s.tp_exposed_s},
                          {"pp_exposed_s", s.pp_exposed_s},
                          {"dp_exposed_s", s.dp_exposed_s},
                          {"idle_s", s.idle_s}});
    }
    j["stages"] = stages;
    j["memory"] = memory_json(r.memory, false);
    j["gpu_memory_bytes"] = r.gpu_memory_bytes;
    j["simulation"] = {{"events", r.events}, {"flows", r.flows}};
    if (!r.profile_use.empty()) {
        json use = json::object();
        for (const auto& u : r.profile_use)
            use[u.kind] = {{"from_profile", u.from_profile},
                           {"analytic", u.analytic},
                           {"profile_s", u.profile_s},
                           {"analytic_s", u.analytic_s}};
        j["profile"] = {{"file", r.profile_file}, {"kernels", use}};
    }
    if (measured)
        j["measured"] = {
            {"source", measured->source},
            {"step_time_s", measured->step_time_s},
            {"tflops_per_gpu", measured->tflops_per_gpu},
            {"tflops_convention", measured->tflops_convention},
            {"step_time_error_pct", 100.0 * (r.step_time_s - measured->step_time_s) / measured->step_time_s}};
    return j;
}

}  // namespace trainsim
