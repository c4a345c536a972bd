#include "trainsim/simulate.hpp"

#include "trainsim/compute.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

HostLinks host_links(const TopologySpec& t) {
    HostLinks h;
    h.pcie_bytes_per_s = t.pcie_bandwidth.bytes_per_s;
    h.host_memory_bytes_per_s = t.host_memory_bandwidth.bytes_per_s / t.gpus_per_node;
    h.nvme_bytes_per_s = t.nvme_bandwidth.bytes_per_s / t.gpus_per_node;
    return h;
}

SimulationResult simulate(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                          const std::string& workload_name, TraceRanks trace) {
    check_layout(model, layout, topology.gpus());
    const Cluster cluster(topology);
    return simulate(cluster, model, layout, build_program(model, layout), workload_name, trace);
}

SimulationResult simulate(const Cluster& cluster, const ModelSpec& model, const Layout& layout,
                          Program program, const std::string& workload_name, TraceRanks trace) {
    assign_durations(program, ComputeModel(cluster.gpu(), layout.precision, host_links(cluster.spec())));
    std::vector<bool> traced;
    if (trace != TraceRanks::none) {
        traced.assign(static_cast<std::size_t>(layout.gpus()), false);
        for (int r = 0; r < layout.gpus(); ++r) {
            const RankCoord c = coord_of(layout, r);
            traced[static_cast<std::size_t>(r)] =
                trace == TraceRanks::all || (trace == TraceRanks::first_replica && c.dp == 0) ||
                (trace == TraceRanks::stage_leaders && c.dp == 0 && c.tp == 0 && c.cp == 0);
        }
    }
    SimulationResult res;
    res.execution = execute(cluster, layout, program, traced);
    res.report = make_report(cluster, model, layout, program, res.execution, cluster.spec().name,
                             workload_name, trace != TraceRanks::none);
    return res;
}

}  // namespace trainsim
