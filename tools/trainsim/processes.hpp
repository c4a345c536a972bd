// The processes of an MPI launch (`mpirun -np N trainsim sweep|validate ...`): sweep and validate spread
// their points over them (include/trainsim/process_group.hpp); rank 0 alone prints and writes files.
//
// A launch is recognized by the environment the launcher sets (OMPI_COMM_WORLD_SIZE for Open MPI, PMI_SIZE
// for MPICH and Intel MPI, PMIX_RANK for PMIx launchers): without it nothing of MPI is started, so a plain
// `trainsim ...` needs no mpirun. Built without MPI (CMake TRAINSIM_MPI off, or Boost.MPI / MPI not found:
// tools/trainsim/mpi/no_mpi_processes.cpp), a launch of more than one process is refused (InputError) rather
// than run N times over.
#pragma once

#include "trainsim/process_group.hpp"

namespace trainsim::cli {

/// Called once by main() before any command: under an MPI launch, initializes MPI and, on every rank but 0,
/// sends standard output and standard error to /dev/null. Throws InputError for a launch of several
/// processes when built without MPI.
void start_processes();

/// The launch's processes; null when not launched by MPI or launched with one process.
ProcessGroup* processes();

/// Whether this process writes output files: rank 0, or the only process.
bool output_process();

}  // namespace trainsim::cli
