// The kinds of collective an op or a measured nccl-tests row names: shared vocabulary of the program (ops),
// the collectives (flows), the executor and the measured-runs reader, in a leaf header so that naming a
// collective does not pull in the network model (collectives.hpp has the algorithms and their costs).
#pragma once

namespace trainsim {

/// NCCL's collectives as trainsim models them (collectives.hpp): all-reduce (S = bytes per rank),
/// all-gather (S = gathered output bytes per rank), reduce-scatter (S = input bytes per rank), all-to-all
/// (S = input bytes per rank: S / n go to each member, the own share stays; expert parallelism's token
/// dispatch and combine).
enum class CollectiveKind { all_reduce, all_gather, reduce_scatter, all_to_all };

}  // namespace trainsim
