// Parallel groups as data: the parallel dimensions of a layout as an ordered list, rank coordinates indexed
// by dimension, and the groups of ranks that differ only in a set of dimensions, as Megatron-Core's
// RankGenerator builds them (megatron/core/parallel_state.py: RankGenerator, get_ranks,
// generate_masked_orthogonal_rank_groups; default order "tp-cp-ep-dp-pp").
//
// Two decompositions of the same ranks (parallel_state.initialize_model_parallel):
//   dense  (decoder_rank_generator): sizes tp, cp, ep = 1, dp, pp
//          rank = tp + TP·(cp + CP·(dp + DP·pp))
//   expert (expert_decoder_rank_generator): sizes etp, cp = 1, ep, edp, pp, where etp = Layout expert TP
//          (etp, default tp), edp = tp·cp·dp / (etp·ep) (expert data parallel)
//          rank = etp + ETP·(ep + EP·(edp + EDP·pp))
// In the expert decomposition Dim::tp is the expert-TP index and Dim::dp the expert-DP index.
//
// Groups (RankGenerator.get_ranks(token)): for a set of dimensions D, the group of a rank holds the ranks
// with the same coordinates outside D. Groups are numbered by their coordinates outside D read as one
// mixed-radix number, the first dimension of the order fastest; a group's ranks are in ascending rank order
// (the masked dimensions enumerated first-fastest, which is ascending since strides grow along the order).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "trainsim/layout.hpp"

namespace trainsim {

/// The parallel dimensions in Megatron-Core's order (tp fastest, pp slowest).
enum class Dim : std::uint8_t { tp, cp, ep, dp, pp };
inline constexpr int kDimCount = 5;
inline constexpr std::array<Dim, kDimCount> kDimOrder = {Dim::tp, Dim::cp, Dim::ep, Dim::dp, Dim::pp};
/// "tp", "cp", "ep", "dp", "pp".
const char* to_string(Dim d);

/// A set of dimensions (a Megatron group token such as "dp-cp").
class DimSet {
  public:
    constexpr DimSet() = default;
    constexpr DimSet(std::initializer_list<Dim> dims) {
        for (Dim d : dims)
            bits_ |= bit(d);
    }
    constexpr bool contains(Dim d) const { return (bits_ & bit(d)) != 0; }
    constexpr unsigned bits() const { return bits_; }
    friend constexpr bool operator==(DimSet a, DimSet b) { return a.bits_ == b.bits_; }
    /// The dimensions joined with '-' in the order ("cp-dp"); "" when empty.
    std::string to_string() const;

  private:
    static constexpr unsigned bit(Dim d) { return 1u << static_cast<unsigned>(d); }
    unsigned bits_ = 0;
};

/// A rank's coordinates, one index per dimension (0 for a dimension of size 1).
struct GridCoord {
    std::array<int, kDimCount> index{};
    int& operator[](Dim d) { return index[static_cast<std::size_t>(d)]; }
    int operator[](Dim d) const { return index[static_cast<std::size_t>(d)]; }
    friend bool operator==(const GridCoord&, const GridCoord&) = default;
};

/// One decomposition of the ranks 0 .. world()-1 (Megatron-Core's RankGenerator).
class RankGrid {
  public:
    /// sizes[d] for each dimension in kDimOrder. Throws InternalError if a size is below 1.
    explicit RankGrid(const std::array<int, kDimCount>& sizes);
    /// tp, cp, 1, dp, pp.
    static RankGrid dense(const Layout& l);
    /// expert_tp, 1, ep, expert_dp, pp (see the file comment). Throws InternalError when expert_tp·ep does
    /// not divide tp·cp·dp (check_layout refuses such layouts).
    static RankGrid expert(const Layout& l);

    int size(Dim d) const { return sizes_[static_cast<std::size_t>(d)]; }
    /// Stride of dimension d in the rank: the product of the sizes before it in the order.
    int stride(Dim d) const { return strides_[static_cast<std::size_t>(d)]; }
    int world() const { return world_; }
    /// Throws InternalError for a rank outside 0 .. world()-1.
    GridCoord coord_of(int rank) const;
    int rank_of(const GridCoord& c) const;

    /// Ranks per group of dimensions `dims`: the product of their sizes.
    int group_size(DimSet dims) const;
    /// Groups of dimensions `dims`: world() / group_size(dims).
    int group_count(DimSet dims) const;
    /// The index of the group of `rank` (0 .. group_count-1), in RankGenerator.get_ranks order.
    int group_index(DimSet dims, int rank) const;
    /// The ranks of group `index`, ascending. Throws InternalError for an index out of range.
    std::vector<int> group_ranks(DimSet dims, int index) const;
    /// The ranks of the group of `rank`, ascending.
    std::vector<int> group_of(DimSet dims, int rank) const {
        return group_ranks(dims, group_index(dims, rank));
    }
    /// Every group of `dims`, in index order: RankGenerator.get_ranks.
    std::vector<std::vector<int>> groups(DimSet dims) const;

  private:
    std::array<int, kDimCount> sizes_{};
    std::array<int, kDimCount> strides_{};
    int world_ = 1;
};

/// The communicators a training run uses (Megatron-Core parallel_state's process groups), each a set of
/// dimensions of one decomposition.
enum class GroupKind : std::uint8_t {
    tp,         ///< dense {tp}: tensor parallel
    cp,         ///< dense {cp}: context parallel (ring attention)
    dp_cp,      ///< dense {cp, dp}: gradients of the dense parameters (Megatron data_parallel_group with cp)
    pp,         ///< dense {pp}: pipeline
    embedding,  ///< the first and the last rank of the pp group (tied embeddings; Megatron _EMBEDDING_GROUP)
    ep,         ///< expert {ep}: token dispatch / combine all-to-all
    edp,        ///< expert {dp}: routed-expert gradients (Megatron expert_data_parallel group)
    etp,        ///< expert {tp}: expert tensor parallel
};
inline constexpr int kGroupKindCount = 8;
const char* to_string(GroupKind k);

/// The groups of a layout: both decompositions, and per GroupKind its dimensions, its groups and the group
/// of a rank. The registry is a value computed from the layout; it allocates only in ranks().
class ParallelGroups {
  public:
    /// Throws InternalError when the expert decomposition does not fit the layout (see RankGrid::expert).
    explicit ParallelGroups(const Layout& l);
    const RankGrid& dense() const { return dense_; }
    const RankGrid& expert() const { return expert_; }
    /// The decomposition of kind k (expert for ep, edp, etp).
    const RankGrid& grid(GroupKind k) const;
    /// The dimensions of kind k (embedding: pp).
    static DimSet dims(GroupKind k);
    /// Groups of kind k (the pp groups' count for embedding).
    int count(GroupKind k) const;
    /// The index of the group of kind k that holds `rank`.
    int index(GroupKind k, int rank) const;
    /// The ranks of group `index` of kind k, ascending (embedding: the pp group's first and last rank; one
    /// rank when pp = 1).
    std::vector<int> ranks(GroupKind k, int index) const;
    std::vector<int> ranks_of(GroupKind k, int rank) const { return ranks(k, index(k, rank)); }

  private:
    RankGrid dense_, expert_;
};

/// Rank coordinates of the dense decomposition with the dimensions by name (the executor's and reports'
/// view; RankGrid::dense(l).coord_of gives the same as a GridCoord): rank = tp + TP·(cp + CP·(dp + DP·pp)).
struct RankCoord {
    int tp = 0, dp = 0, pp = 0, cp = 0;
};
RankCoord coord_of(const Layout& l, int rank);
int rank_of(const Layout& l, RankCoord c);

}  // namespace trainsim
