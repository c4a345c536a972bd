#include "trainsim/simulate.hpp"

#include <algorithm>
#include <cstdint>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/limits.hpp"

#include "trainsim/compute.hpp"
#include "trainsim/memory.hpp"
#include "trainsim/profile.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

HostLinks host_links(const TopologySpec& t, const GpuSpec& gpu) {
    HostLinks h;
    h.pcie_bytes_per_s =
        gpu.host_link_bytes_per_s > 0 ? gpu.host_link_bytes_per_s : t.pcie_bandwidth.bytes_per_s;
    h.host_memory_bytes_per_s = t.host_memory_bandwidth.bytes_per_s / t.gpus_per_node;
    h.nvme_bytes_per_s = t.nvme_bandwidth.bytes_per_s / t.gpus_per_node;
    return h;
}

std::vector<ProfileUse> profile_use(const Program& program, const ComputeModel& compute) {
    std::vector<ProfileUse> use(4);
    use[0].kind = "gemm";
    use[1].kind = "attention";
    use[2].kind = "memory_bound";
    use[3].kind = "host";
    for (const auto& st : program.stages)
        for (const auto& op : st.ops) {
            if (op.kind != OpKind::compute) continue;
            for (const auto& k : program.segments[static_cast<std::size_t>(op.segment)].kernels) {
                const KernelCost c = compute.cost(k);
                ProfileUse& u = use[k.kind == KernelKind::gemm              ? 0
                                    : k.kind == KernelKind::flash_attention ? 1
                                    : k.kind == KernelKind::memory_bound    ? 2
                                                                            : 3];
                (c.from_profile ? u.from_profile : u.analytic) += 1;
                (c.from_profile ? u.profile_s : u.analytic_s) += c.seconds;
            }
        }
    std::erase_if(use, [](const ProfileUse& u) { return u.from_profile + u.analytic == 0; });
    return use;
}

void check_shared_tp_port_work(const TopologySpec& topology, const ModelSpec& model, const Layout& layout) {
    const bool rail_only = topology.fabric == ScaleOutTopology::rail_only;
    const bool pcie = topology.scale_up_kind == "pcie";
    if (layout.tp <= 1 || (!rail_only && !pcie)) return;
    const std::int64_t micro_batches =
        layout.global_batch / std::max<std::int64_t>(std::int64_t{layout.micro_batch} * layout.dp, 1);
    const std::int64_t passes = (std::int64_t{model.layers} + model.mtp_layers) * micro_batches *
                                std::max(layout.dp, 1) * std::max(layout.cp, 1);
    if (passes <= limits::kMaxLayerPassesSharedTpPorts) return;
    // micro-batches * dp = global_batch / micro_batch (check_layout: the global batch divides evenly)
    throw InputError(fmt::format(
        "layer passes per step ((model.layers + model.mtp_layers) * layout.global_batch / layout.micro_batch"
        " * layout.cp) = {} at layout.tp = {} on {} ({}: TP collectives as flows) is above the limit of {}",
        passes, layout.tp, topology.name,
        rail_only ? "topology.scale_out.topology = \"rail-only\"" : "topology.scale_up.kind = \"pcie\"",
        limits::kMaxLayerPassesSharedTpPorts));
}

SimulationResult simulate(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                          const std::string& workload_name, const SimulationOptions& options) {
    check_layout(model, layout, topology.gpus());
    check_shared_tp_port_work(topology, model, layout);
    const Cluster cluster(topology, options.perturbations.links, options.cluster);
    return simulate(cluster, model, layout, build_program(model, layout), workload_name, options);
}

void set_scenario_seed(ExecutionScenario& sc, const Cluster& cluster, const Perturbations& p,
                       std::uint64_t seed) {
    sc.seed = seed;
    sc.compute_factor.clear();
    if (!p.stragglers.empty()) sc.compute_factor = compute_factors(p.stragglers, cluster.gpus(), seed);
}

ExecutionScenario execution_scenario(const Cluster& cluster, const Program& program,
                                     const ComputeModel& compute, const SimulationOptions& options) {
    ExecutionScenario sc;
    const Perturbations& p = options.perturbations;
    set_scenario_seed(sc, cluster, p, options.seed);
    sc.attribute = options.attribute;
    sc.links_perturbed = !cluster.perturbed_links().empty();
    if (p.jitter) {
        sc.jitter_sigma = p.jitter->sigma;
        sc.kernel_seconds.reserve(program.segments.size());
        for (const auto& seg : program.segments) {
            std::vector<double> k;
            k.reserve(seg.kernels.size());
            for (const auto& kernel : seg.kernels)
                k.push_back(compute.seconds(kernel));
            if (!seg.hidden_by.empty()) k.assign(1, seg.seconds);  // a copy wait: its exposed part
            sc.kernel_seconds.push_back(std::move(k));
        }
    }
    return sc;
}

ComputeModel run_compute_model(const TopologySpec& topology, const GpuSpec& gpu, const Layout& layout) {
    return ComputeModel(gpu, layout.precision, host_links(topology, gpu), topology.profile,
                        layout.fp8_recipe);
}

void time_program(Program& program, const ComputeModel& compute, const ModelSpec& model,
                  const Layout& layout) {
    set_activation_copy_bytes(program, model, layout);
    assign_durations(program, compute);
}

SimulationResult simulate(const Cluster& cluster, const ModelSpec& model, const Layout& layout,
                          Program program, const std::string& workload_name,
                          const SimulationOptions& options) {
    const ComputeModel compute = run_compute_model(cluster.spec(), cluster.gpu(), layout);
    time_program(program, compute, model, layout);
    // The memory walk's timing subscribes to the executor beside the caller's observers.
    ComputeEndTimes memory_times(layout);
    std::vector<ExecutorObserver*> observers = options.observers;
    if (options.memory_timeline) observers.push_back(&memory_times);
    SimulationResult res;
    res.execution = execute(cluster, layout, program, observers, options.execution,
                            execution_scenario(cluster, program, compute, options));
    res.report =
        make_report(cluster, model, layout, program, res.execution, cluster.spec().name, workload_name,
                    options.memory_timeline ? &memory_times.seconds() : nullptr, options.memory_timeline);
    if (compute.profile()) {
        res.report.profile_file = compute.profile()->file;
        res.report.profile_use = profile_use(program, compute);
    }
    return res;
}

}  // namespace trainsim
