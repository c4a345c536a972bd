// Parallel groups as data (include/trainsim/parallel_groups.hpp) against Megatron-Core's RankGenerator order,
// written out by hand.
#include <doctest/doctest.h>

#include <vector>

#include "trainsim/errors.hpp"
#include "trainsim/parallel_groups.hpp"

using namespace trainsim;
using Groups = std::vector<std::vector<int>>;

namespace {

/// TP 2, CP 2, DP 2, PP 2: 16 ranks, rank = tp + 2·(cp + 2·(dp + 2·pp)).
Layout tp2_cp2_dp2_pp2() {
    Layout l;
    l.tp = 2;
    l.cp = 2;
    l.dp = 2;
    l.pp = 2;
    return l;
}

}  // namespace

TEST_CASE("parallel groups: dimensions in Megatron-Core's order tp-cp-ep-dp-pp") {
    CHECK(std::string(to_string(kDimOrder[0])) == "tp");
    CHECK(std::string(to_string(kDimOrder[4])) == "pp");
    CHECK(DimSet{Dim::dp, Dim::cp}.to_string() == "cp-dp");
    CHECK(DimSet{Dim::dp, Dim::cp} == DimSet{Dim::cp, Dim::dp});
    const RankGrid g = RankGrid::dense(tp2_cp2_dp2_pp2());
    CHECK(g.world() == 16);
    CHECK(g.stride(Dim::tp) == 1);
    CHECK(g.stride(Dim::cp) == 2);
    CHECK(g.stride(Dim::ep) == 4);
    CHECK(g.stride(Dim::dp) == 4);
    CHECK(g.stride(Dim::pp) == 8);
    // rank 13 = 1 + 2·(0 + 2·(1 + 2·1))
    const GridCoord c = g.coord_of(13);
    CHECK(c[Dim::tp] == 1);
    CHECK(c[Dim::cp] == 0);
    CHECK(c[Dim::ep] == 0);
    CHECK(c[Dim::dp] == 1);
    CHECK(c[Dim::pp] == 1);
    for (int r = 0; r < g.world(); ++r) {
        CHECK(g.rank_of(g.coord_of(r)) == r);
        const RankCoord rc = coord_of(tp2_cp2_dp2_pp2(), r);
        const GridCoord gc = g.coord_of(r);
        CHECK(rc.tp == gc[Dim::tp]);
        CHECK(rc.cp == gc[Dim::cp]);
        CHECK(rc.dp == gc[Dim::dp]);
        CHECK(rc.pp == gc[Dim::pp]);
        CHECK(rank_of(tp2_cp2_dp2_pp2(), rc) == r);
    }
    CHECK_THROWS_AS(g.coord_of(16), InternalError);
    CHECK_THROWS_AS(RankGrid({2, 0, 1, 1, 1}), InternalError);
}

TEST_CASE("parallel groups: TP 2 CP 2 DP 2 PP 2 groups as Megatron-Core's get_ranks lists them") {
    const ParallelGroups pg(tp2_cp2_dp2_pp2());
    const RankGrid& g = pg.dense();
    CHECK(g.groups({Dim::tp}) ==
          Groups{{0, 1}, {2, 3}, {4, 5}, {6, 7}, {8, 9}, {10, 11}, {12, 13}, {14, 15}});
    // Groups numbered by the other coordinates (tp, dp, pp), the first fastest.
    CHECK(g.groups({Dim::cp}) ==
          Groups{{0, 2}, {1, 3}, {4, 6}, {5, 7}, {8, 10}, {9, 11}, {12, 14}, {13, 15}});
    CHECK(g.groups({Dim::dp}) ==
          Groups{{0, 4}, {1, 5}, {2, 6}, {3, 7}, {8, 12}, {9, 13}, {10, 14}, {11, 15}});
    CHECK(g.groups({Dim::cp, Dim::dp}) ==
          Groups{{0, 2, 4, 6}, {1, 3, 5, 7}, {8, 10, 12, 14}, {9, 11, 13, 15}});
    CHECK(g.groups({Dim::pp}) ==
          Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
    CHECK(g.groups({Dim::tp, Dim::cp}) ==
          Groups{{0, 1, 2, 3}, {4, 5, 6, 7}, {8, 9, 10, 11}, {12, 13, 14, 15}});
    // The registry by kind: the group of a rank and its index.
    CHECK(pg.index(GroupKind::tp, 13) == 6);
    CHECK(pg.ranks_of(GroupKind::tp, 13) == std::vector<int>{12, 13});
    CHECK(pg.index(GroupKind::cp, 13) == 7);  // tp 1, dp 1, pp 1: 1 + 2·(1 + 2·1)
    CHECK(pg.ranks_of(GroupKind::cp, 13) == std::vector<int>{13, 15});
    CHECK(pg.index(GroupKind::dp_cp, 13) == 3);
    CHECK(pg.ranks_of(GroupKind::dp_cp, 13) == std::vector<int>{9, 11, 13, 15});
    CHECK(pg.ranks_of(GroupKind::pp, 13) == std::vector<int>{5, 13});
    CHECK(pg.count(GroupKind::tp) == 8);
    CHECK(pg.count(GroupKind::dp_cp) == 4);
    // Without expert parallelism the expert decomposition is etp = tp, ep = 1, edp = cp·dp: EP groups of
    // one rank, expert-DP groups the dense DP x CP groups.
    CHECK(pg.ranks_of(GroupKind::ep, 13) == std::vector<int>{13});
    CHECK(pg.ranks_of(GroupKind::edp, 13) == std::vector<int>{9, 11, 13, 15});
    CHECK(pg.ranks_of(GroupKind::etp, 13) == std::vector<int>{12, 13});
    CHECK_THROWS_AS(g.group_ranks({Dim::tp}, 8), InternalError);
}

TEST_CASE("parallel groups: the embedding group is the pp group's first and last rank") {
    Layout l;
    l.tp = 2;
    l.pp = 4;
    const ParallelGroups pg(l);
    CHECK(pg.ranks_of(GroupKind::pp, 1) == std::vector<int>{1, 3, 5, 7});
    CHECK(pg.ranks_of(GroupKind::embedding, 1) == std::vector<int>{1, 7});
    CHECK(pg.ranks_of(GroupKind::embedding, 6) == std::vector<int>{0, 6});
    Layout one;
    one.tp = 2;
    CHECK(ParallelGroups(one).ranks_of(GroupKind::embedding, 1) == std::vector<int>{1});
}

TEST_CASE("parallel groups: EP groups in rank order, expert-DP groups across them") {
    // Expert decomposition etp 1, ep 8, edp 2 (e.g. TP 1, DP 16, EP 8): rank = ep + 8·edp.
    const RankGrid a({1, 1, 8, 2, 1});
    CHECK(a.groups({Dim::ep}) == Groups{{0, 1, 2, 3, 4, 5, 6, 7}, {8, 9, 10, 11, 12, 13, 14, 15}});
    CHECK(a.groups({Dim::dp}) ==
          Groups{{0, 8}, {1, 9}, {2, 10}, {3, 11}, {4, 12}, {5, 13}, {6, 14}, {7, 15}});
    // etp 2, ep 4, edp 2, pp 2 (TP 2, DP 8, EP 4 on 32 GPUs): rank = etp + 2·(ep + 4·(edp + 2·pp)).
    const RankGrid b({2, 1, 4, 2, 2});
    CHECK(b.group_of({Dim::ep}, 0) == std::vector<int>{0, 2, 4, 6});
    CHECK(b.group_of({Dim::ep}, 1) == std::vector<int>{1, 3, 5, 7});
    CHECK(b.group_of({Dim::ep}, 9) == std::vector<int>{9, 11, 13, 15});
    CHECK(b.group_index({Dim::ep}, 9) == 3);  // etp 1, edp 1, pp 0: 1 + 2·1
    CHECK(b.group_of({Dim::ep}, 17) == std::vector<int>{17, 19, 21, 23});
    CHECK(b.group_of({Dim::dp}, 2) == std::vector<int>{2, 10});  // EDP: same etp, ep and pp
    CHECK(b.group_of({Dim::dp}, 19) == std::vector<int>{19, 27});
    CHECK(b.group_of({Dim::tp, Dim::ep}, 4) == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7});
    // Every rank is in exactly one group of each set.
    for (DimSet d : {DimSet{Dim::ep}, DimSet{Dim::dp}, DimSet{Dim::tp, Dim::ep}}) {
        std::vector<int> seen(static_cast<std::size_t>(b.world()), 0);
        for (const auto& grp : b.groups(d)) {
            CHECK(static_cast<int>(grp.size()) == b.group_size(d));
            for (std::size_t i = 0; i < grp.size(); ++i) {
                ++seen[static_cast<std::size_t>(grp[i])];
                if (i > 0) CHECK(grp[i - 1] < grp[i]);
            }
        }
        for (int n : seen)
            CHECK(n == 1);
    }
}
