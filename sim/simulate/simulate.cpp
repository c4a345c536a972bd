#include "trainsim/simulate.hpp"

#include "trainsim/compute.hpp"
#include "trainsim/program.hpp"

namespace trainsim {

SimulationResult simulate(const TopologySpec& topology, const ModelSpec& model, const Layout& layout,
                          const std::string& workload_name, TraceRanks trace) {
    check_layout(model, layout, topology.gpus());
    const Cluster cluster(topology);
    return simulate(cluster, model, layout, build_program(model, layout), workload_name, trace);
}

SimulationResult simulate(const Cluster& cluster, const ModelSpec& model, const Layout& layout,
                          Program program, const std::string& workload_name, TraceRanks trace) {
    assign_durations(program, ComputeModel(cluster.gpu(), layout.precision));
    std::vector<bool> traced;
    if (trace != TraceRanks::none) {
        traced.assign(static_cast<std::size_t>(layout.gpus()), false);
        for (int r = 0; r < layout.gpus(); ++r)
            traced[static_cast<std::size_t>(r)] = trace == TraceRanks::all || coord_of(layout, r).dp == 0;
    }
    SimulationResult res;
    res.execution = execute(cluster, layout, program, traced);
    res.report =
        make_report(cluster, model, layout, program, res.execution, cluster.spec().name, workload_name);
    return res;
}

}  // namespace trainsim
