// The processes of an MPI launch with Boost.MPI (tools/trainsim/processes.hpp); built with TRAINSIM_MPI.
#include <cstdio>
#include <cstdlib>
#include <memory>

#include <boost/mpi/collectives/all_gather.hpp>
#include <boost/mpi/communicator.hpp>
#include <boost/mpi/environment.hpp>
#include <boost/serialization/string.hpp>
#include <boost/serialization/vector.hpp>

#include "../processes.hpp"

namespace trainsim::cli {

namespace {

/// MPI_COMM_WORLD as a ProcessGroup. all_gather is Boost.MPI's (MPI_Allgather of the sizes, then of the
/// serialized items).
class MpiProcesses : public ProcessGroup {
  public:
    int rank() const override { return world_.rank(); }
    int size() const override { return world_.size(); }
    std::vector<std::vector<std::string>> all_gather(const std::vector<std::string>& mine) override {
        std::vector<std::vector<std::string>> all;
        boost::mpi::all_gather(world_, mine, all);
        return all;
    }

  private:
    boost::mpi::communicator world_;
};

// MPI is finalized when these are destroyed, at the end of the program.
std::unique_ptr<boost::mpi::environment> environment;
std::unique_ptr<MpiProcesses> group;

bool launched_by_mpi() {
    return std::getenv("OMPI_COMM_WORLD_SIZE") || std::getenv("PMI_SIZE") || std::getenv("PMIX_RANK");
}

}  // namespace

void start_processes() {
    if (!launched_by_mpi() || environment) return;
    // Only the main thread calls MPI; the worker threads of parallel_map do not.
    environment = std::make_unique<boost::mpi::environment>(boost::mpi::threading::funneled);
    group = std::make_unique<MpiProcesses>();
    if (group->rank() != 0) {
        if (!std::freopen("/dev/null", "w", stdout) || !std::freopen("/dev/null", "w", stderr)) return;
    }
}

ProcessGroup* processes() {
    return group && group->size() > 1 ? group.get() : nullptr;
}

bool output_process() {
    return !group || group->rank() == 0;
}

}  // namespace trainsim::cli
