#include <fmt/format.h>

#include "trainsim/cluster.hpp"
#include "trainsim/errors.hpp"

namespace trainsim {

void apply_scale_up_domain(TopologySpec& spec, int domain_gpus) {
    const int host = spec.gpus_per_node;
    if (domain_gpus == host) return;
    auto fail = [&](const std::string& why) {
        throw InputError(fmt::format("topology.scale_up.domain_gpus = {} {}", domain_gpus, why));
    };
    if (domain_gpus <= 0 || host <= 0 || domain_gpus % host != 0)
        fail(fmt::format("must be a positive multiple of topology.gpus_per_node = {} (the GPUs of one host)",
                         host));
    const int hosts = domain_gpus / host;
    if (spec.nodes <= 0 || spec.nodes % hosts != 0)
        fail(fmt::format("spans {} hosts of {} GPUs; topology.nodes = {} must be a multiple of it", hosts,
                         host, spec.nodes));
    if (spec.nodes_per_leaf <= 0 || spec.nodes_per_leaf % hosts != 0)
        fail(fmt::format(
            "spans {} hosts; topology.scale_out.nodes_per_leaf = {} must be a multiple of it (whole "
            "domains per leaf group)",
            hosts, spec.nodes_per_leaf));
    if (spec.nodes_per_pod % hosts != 0)  // a multiple of nodes_per_leaf once check_topology has passed
        fail(fmt::format("spans {} hosts; topology.scale_out.nodes_per_pod = {} must be a multiple of it",
                         hosts, spec.nodes_per_pod));
    spec.gpus_per_host = host;
    spec.gpus_per_node = domain_gpus;
    spec.nodes /= hosts;
    spec.nics_per_node *= hosts;
    spec.nodes_per_leaf /= hosts;
    spec.nodes_per_pod /= hosts;
    spec.host_memory_bandwidth = Bandwidth{spec.host_memory_bandwidth.bytes_per_s * hosts};
    spec.nvme_bandwidth = Bandwidth{spec.nvme_bandwidth.bytes_per_s * hosts};
    spec.storage_read_bandwidth_per_node =
        Bandwidth{spec.storage_read_bandwidth_per_node.bytes_per_s * hosts};
    spec.storage_write_bandwidth_per_node =
        Bandwidth{spec.storage_write_bandwidth_per_node.bytes_per_s * hosts};
}

}  // namespace trainsim
