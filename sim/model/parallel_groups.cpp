#include "trainsim/parallel_groups.hpp"

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace trainsim {

const char* to_string(Dim d) {
    switch (d) {
        case Dim::tp:
            return "tp";
        case Dim::cp:
            return "cp";
        case Dim::ep:
            return "ep";
        case Dim::dp:
            return "dp";
        case Dim::pp:
            return "pp";
    }
    return "?";
}

std::string DimSet::to_string() const {
    std::string s;
    for (Dim d : kDimOrder)
        if (contains(d)) {
            if (!s.empty()) s += '-';
            s += trainsim::to_string(d);
        }
    return s;
}

RankGrid::RankGrid(const std::array<int, kDimCount>& sizes) : sizes_(sizes) {
    world_ = 1;
    for (std::size_t i = 0; i < sizes_.size(); ++i) {
        if (sizes_[i] < 1)
            throw InternalError(fmt::format("rank grid: size {} of {}", sizes_[i], to_string(kDimOrder[i])));
        strides_[i] = world_;
        world_ *= sizes_[i];
    }
}

RankGrid RankGrid::dense(const Layout& l) {
    return RankGrid({l.tp, l.cp, 1, l.dp, l.pp});
}

RankGrid RankGrid::expert(const Layout& l) {
    const int etp = l.expert_tp();
    const int ep = l.ep;
    const int local = l.tp * l.cp * l.dp;
    if (etp * ep <= 0 || local % (etp * ep) != 0)
        throw InternalError(
            fmt::format("expert grid: etp {} x ep {} does not divide tp x cp x dp = {}", etp, ep, local));
    return RankGrid({etp, 1, ep, local / (etp * ep), l.pp});
}

GridCoord RankGrid::coord_of(int rank) const {
    if (rank < 0 || rank >= world_)
        throw InternalError(fmt::format("rank {} outside the grid of {}", rank, world_));
    GridCoord c;
    for (std::size_t i = 0; i < sizes_.size(); ++i)
        c.index[i] = (rank / strides_[i]) % sizes_[i];
    return c;
}

int RankGrid::rank_of(const GridCoord& c) const {
    int r = 0;
    for (std::size_t i = 0; i < sizes_.size(); ++i)
        r += c.index[i] * strides_[i];
    return r;
}

int RankGrid::group_size(DimSet dims) const {
    int n = 1;
    for (std::size_t i = 0; i < sizes_.size(); ++i)
        if (dims.contains(kDimOrder[i])) n *= sizes_[i];
    return n;
}

int RankGrid::group_count(DimSet dims) const {
    return world_ / group_size(dims);
}

int RankGrid::group_index(DimSet dims, int rank) const {
    const GridCoord c = coord_of(rank);
    int index = 0, radix = 1;
    for (std::size_t i = 0; i < sizes_.size(); ++i)
        if (!dims.contains(kDimOrder[i])) {
            index += c.index[i] * radix;
            radix *= sizes_[i];
        }
    return index;
}

std::vector<int> RankGrid::group_ranks(DimSet dims, int index) const {
    if (index < 0 || index >= group_count(dims))
        throw InternalError(
            fmt::format("group {} of {} outside 0 .. {}", index, dims.to_string(), group_count(dims) - 1));
    // The group's base rank: its index decomposed over the dimensions outside `dims`.
    int base = 0, rest = index;
    for (std::size_t i = 0; i < sizes_.size(); ++i)
        if (!dims.contains(kDimOrder[i])) {
            base += (rest % sizes_[i]) * strides_[i];
            rest /= sizes_[i];
        }
    // Its members: every combination of the masked coordinates, the first dimension fastest.
    const int n = group_size(dims);
    std::vector<int> ranks;
    ranks.reserve(static_cast<std::size_t>(n));
    for (int k = 0; k < n; ++k) {
        int r = base, q = k;
        for (std::size_t i = 0; i < sizes_.size(); ++i)
            if (dims.contains(kDimOrder[i])) {
                r += (q % sizes_[i]) * strides_[i];
                q /= sizes_[i];
            }
        ranks.push_back(r);
    }
    return ranks;
}

std::vector<std::vector<int>> RankGrid::groups(DimSet dims) const {
    std::vector<std::vector<int>> out;
    for (int g = 0; g < group_count(dims); ++g)
        out.push_back(group_ranks(dims, g));
    return out;
}

const char* to_string(GroupKind k) {
    switch (k) {
        case GroupKind::tp:
            return "tp";
        case GroupKind::cp:
            return "cp";
        case GroupKind::dp_cp:
            return "dp-cp";
        case GroupKind::pp:
            return "pp";
        case GroupKind::embedding:
            return "embedding";
        case GroupKind::ep:
            return "ep";
        case GroupKind::edp:
            return "edp";
        case GroupKind::etp:
            return "etp";
    }
    return "?";
}

ParallelGroups::ParallelGroups(const Layout& l) : dense_(RankGrid::dense(l)), expert_(RankGrid::expert(l)) {}

const RankGrid& ParallelGroups::grid(GroupKind k) const {
    return k == GroupKind::ep || k == GroupKind::edp || k == GroupKind::etp ? expert_ : dense_;
}

DimSet ParallelGroups::dims(GroupKind k) {
    switch (k) {
        case GroupKind::tp:
            return {Dim::tp};
        case GroupKind::cp:
            return {Dim::cp};
        case GroupKind::dp_cp:
            return {Dim::cp, Dim::dp};
        case GroupKind::pp:
        case GroupKind::embedding:
            return {Dim::pp};
        case GroupKind::ep:
            return {Dim::ep};
        case GroupKind::edp:
            return {Dim::dp};
        case GroupKind::etp:
            return {Dim::tp};
    }
    return {};
}

int ParallelGroups::count(GroupKind k) const {
    return grid(k).group_count(dims(k));
}

int ParallelGroups::index(GroupKind k, int rank) const {
    return grid(k).group_index(dims(k), rank);
}

std::vector<int> ParallelGroups::ranks(GroupKind k, int index) const {
    std::vector<int> r = grid(k).group_ranks(dims(k), index);
    if (k == GroupKind::embedding && r.size() > 2) r.erase(r.begin() + 1, r.end() - 1);
    return r;
}

RankCoord coord_of(const Layout& l, int rank) {
    RankCoord c;
    c.tp = rank % l.tp;
    c.cp = (rank / l.tp) % l.cp;
    c.dp = (rank / (l.tp * l.cp)) % l.dp;
    c.pp = rank / (l.tp * l.cp * l.dp);
    return c;
}

int rank_of(const Layout& l, RankCoord c) {
    return c.tp + l.tp * (c.cp + l.cp * (c.dp + l.dp * c.pp));
}

}  // namespace trainsim
