// A trainsim built without MPI (tools/trainsim/processes.hpp): one process, and a launch of several refused.
#include <cstdlib>
#include <string>

#include "../processes.hpp"
#include "trainsim/errors.hpp"

namespace trainsim::cli {

void start_processes() {
    for (const char* var : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"})
        if (const char* size = std::getenv(var); size && std::atoi(size) > 1)
            throw InputError(
                std::string("this trainsim was built without MPI (CMake TRAINSIM_MPI off, or Boost.MPI ") +
                "not found) and cannot share work over " + size +
                " processes; run it without mpirun, or rebuild with libboost-mpi-dev");
}

ProcessGroup* processes() {
    return nullptr;
}

bool output_process() {
    return true;
}

}  // namespace trainsim::cli
