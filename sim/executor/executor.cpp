#include "trainsim/executor.hpp"

#include <algorithm>
#include <deque>
#include <memory>
#include <unordered_map>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/network.hpp"

namespace trainsim {

RankCoord coord_of(const Layout& l, int rank) {
    RankCoord c;
    c.tp = rank % l.tp;
    c.dp = (rank / l.tp) % l.dp;
    c.pp = rank / (l.tp * l.dp);
    return c;
}

int rank_of(const Layout& l, RankCoord c) { return c.tp + l.tp * (c.dp + l.dp * c.pp); }

namespace {

enum class Block { none, tp, dp, recv, compute, done };

struct Message {
    bool sent = false;
    bool arrived = false;
    Time sent_at;
};

struct RankState {
    int rank = 0;
    RankCoord coord;
    const StageProgram* program = nullptr;
    std::size_t pc = 0;
    Block block = Block::none;
    Time block_start;
    std::uint64_t waiting_key = 0;
    std::deque<std::size_t> tp_queue;  ///< op indices
    std::deque<std::size_t> dp_queue;
    std::uint32_t tp_seq = 0;
    std::uint32_t dp_seq = 0;
    int dp_completed = 0;
    RankTimes times;
};

class Executor {
public:
    Executor(const Cluster& cluster, const Layout& layout, const Program& program, const std::vector<bool>& traced)
        : cluster_(cluster),
          layout_(layout),
          program_(program),
          traced_(traced),
          net_(sim_, link_capacities(cluster)),
          coll_(sim_, net_, cluster) {
        const int n = layout.gpus();
        ranks_.resize(static_cast<std::size_t>(n));
        for (int r = 0; r < n; ++r) {
            auto& s = ranks_[static_cast<std::size_t>(r)];
            s.rank = r;
            s.coord = coord_of(layout, r);
            s.program = &program.stages[static_cast<std::size_t>(s.coord.pp)];
        }
        vs_count_ = static_cast<std::uint64_t>(layout.pp * layout.vpp);
        mb_count_ = static_cast<std::uint64_t>(std::max<std::int64_t>(1, layout.micro_batches()));
    }

    ExecutionResult run() {
        for (auto& s : ranks_) {
            RankState* sp = &s;
            sim_.schedule(Time{}, Priority::kDefault, [this, sp] { advance(*sp); });
        }
        sim_.run();
        ExecutionResult res;
        double step = 0;
        for (auto& s : ranks_) {
            if (s.block != Block::done)
                throw InternalError(fmt::format("rank {} (stage {}) did not finish: stuck at op {} of {}", s.rank,
                                                s.coord.pp, s.pc, s.program->ops.size()));
            step = std::max(step, s.times.finish_s);
        }
        for (auto& s : ranks_) {
            s.times.idle_s = step - s.times.finish_s;
            res.ranks.push_back(s.times);
        }
        res.step_time_s = step;
        res.trace = std::move(trace_);
        res.events = sim_.events_executed();
        res.flows = net_.flows_started();
        return res;
    }

private:
    static std::vector<double> link_capacities(const Cluster& c) {
        std::vector<double> caps;
        caps.reserve(c.links().size());
        for (const auto& l : c.links()) caps.push_back(l.bandwidth.bytes_per_s);
        return caps;
    }

    bool traced(int rank) const {
        return !traced_.empty() && traced_[static_cast<std::size_t>(rank)];
    }

    void add_slice(int rank, int track, std::string name, Time start, Time end) {
        if (!traced(rank)) return;
        trace_.push_back(TraceSlice{rank, track, std::move(name), start, end - start});
    }

    std::vector<int> tp_group(const RankState& s) const {
        std::vector<int> g;
        for (int i = 0; i < layout_.tp; ++i) g.push_back(rank_of(layout_, {i, s.coord.dp, s.coord.pp}));
        return g;
    }
    std::vector<int> dp_group(const RankState& s) const {
        std::vector<int> g;
        for (int i = 0; i < layout_.dp; ++i) g.push_back(rank_of(layout_, {s.coord.tp, i, s.coord.pp}));
        return g;
    }

    std::uint64_t message_key(int dst_rank, int direction, int vs, int mb) const {
        return ((static_cast<std::uint64_t>(dst_rank) * 2 + (direction > 0 ? 1 : 0)) * vs_count_ +
                static_cast<std::uint64_t>(vs)) *
                   mb_count_ +
               static_cast<std::uint64_t>(mb);
    }

    void unblock(RankState& s, double& bucket) {
        bucket += (sim_.now() - s.block_start).to_seconds();
        s.block = Block::none;
        advance(s);
    }

    void advance(RankState& s) {
        const auto& ops = s.program->ops;
        while (true) {
            if (s.pc >= ops.size()) {
                s.block = Block::done;
                s.times.finish_s = sim_.now().to_seconds();
                return;
            }
            const Op& op = ops[s.pc];
            switch (op.kind) {
                case OpKind::compute: {
                    // Consecutive compute ops run back to back: one event for the run.
                    Time t = sim_.now();
                    while (s.pc < ops.size() && ops[s.pc].kind == OpKind::compute) {
                        const Op& c = ops[s.pc];
                        const Segment& seg = program_.segments[static_cast<std::size_t>(c.segment)];
                        const Time end = t + Time::seconds(seg.seconds);
                        const double secs = (end - t).to_seconds();
                        s.times.compute_s += secs;
                        s.times.compute_by_phase_s[static_cast<std::size_t>(c.phase)] += secs;
                        if (traced(s.rank)) add_slice(s.rank, 0, seg.name, t, end);
                        t = end;
                        ++s.pc;
                    }
                    s.block = Block::compute;
                    RankState* sp = &s;
                    sim_.schedule(t, Priority::kDefault, [this, sp] {
                        sp->block = Block::none;
                        advance(*sp);
                    });
                    return;
                }
                case OpKind::tp_launch: {
                    s.tp_queue.push_back(s.pc);
                    ++s.pc;
                    if (s.tp_queue.size() == 1) arrive_tp(s);
                    break;
                }
                case OpKind::tp_wait: {
                    if (s.tp_queue.empty()) {
                        ++s.pc;
                        break;
                    }
                    s.block = Block::tp;
                    s.block_start = sim_.now();
                    return;
                }
                case OpKind::dp_launch: {
                    s.dp_queue.push_back(s.pc);
                    ++s.pc;
                    if (s.dp_queue.size() == 1) arrive_dp(s);
                    break;
                }
                case OpKind::dp_wait: {
                    if (s.dp_completed >= op.dp_target) {
                        ++s.pc;
                        break;
                    }
                    s.block = Block::dp;
                    s.block_start = sim_.now();
                    return;
                }
                case OpKind::send: {
                    RankCoord peer = s.coord;
                    peer.pp = (s.coord.pp + op.direction + layout_.pp) % layout_.pp;
                    const int dst = rank_of(layout_, peer);
                    const std::uint64_t key = message_key(dst, op.direction, op.virtual_stage, op.micro_batch);
                    auto& msg = messages_[key];
                    msg.sent = true;
                    msg.sent_at = sim_.now();
                    const Time start = sim_.now();
                    const int src = s.rank;
                    const int mb = op.micro_batch;
                    const int dir = op.direction;
                    coll_.send(s.rank, dst, op.bytes, [this, key, dst, src, start, mb, dir] {
                        add_slice(src, 3, fmt::format("{} mb{}", dir > 0 ? "send_act" : "send_grad", mb), start,
                                  sim_.now());
                        deliver(key, dst);
                    });
                    ++s.pc;
                    break;
                }
                case OpKind::recv: {
                    const std::uint64_t key = message_key(s.rank, op.direction, op.virtual_stage, op.micro_batch);
                    auto it = messages_.find(key);
                    if (it != messages_.end() && it->second.arrived) {
                        messages_.erase(it);
                        ++s.pc;
                        break;
                    }
                    s.block = Block::recv;
                    s.block_start = sim_.now();
                    s.waiting_key = key;
                    return;
                }
            }
        }
    }

    void deliver(std::uint64_t key, int dst) {
        auto& msg = messages_[key];
        msg.arrived = true;
        RankState& r = ranks_[static_cast<std::size_t>(dst)];
        if (r.block == Block::recv && r.waiting_key == key) {
            const Time now = sim_.now();
            const Time from = std::max(r.block_start, msg.sent_at);
            r.times.bubble_s += (from - r.block_start).to_seconds();
            r.times.pp_exposed_s += (now - from).to_seconds();
            messages_.erase(key);
            ++r.pc;
            r.block = Block::none;
            advance(r);
        }
    }

    // ---- TP stream ----
    void arrive_tp(RankState& s) {
        const Op& op = s.program->ops[s.tp_queue.front()];
        const std::uint64_t group = static_cast<std::uint64_t>(s.coord.dp + layout_.dp * s.coord.pp);
        const std::uint64_t key = (group << 32) | s.tp_seq++;
        if (++arrivals_tp_[key] < layout_.tp) return;
        arrivals_tp_.erase(key);
        auto members = tp_group(s);
        const Time start = sim_.now();
        const std::string name = collective_name(op.collective, "tp");
        coll_.run(op.collective, members, op.bytes, [this, members, start, name] {
            for (int m : members) {
                RankState& r = ranks_[static_cast<std::size_t>(m)];
                add_slice(m, 1, name, start, sim_.now());
                r.tp_queue.pop_front();
                if (!r.tp_queue.empty()) arrive_tp(r);
                if (r.tp_queue.empty() && r.block == Block::tp) {
                    ++r.pc;
                    unblock(r, r.times.tp_exposed_s);
                }
            }
        });
    }

    // ---- DP stream ----
    void arrive_dp(RankState& s) {
        const Op& op = s.program->ops[s.dp_queue.front()];
        const std::uint64_t group = static_cast<std::uint64_t>(s.coord.tp + layout_.tp * s.coord.pp);
        const std::uint64_t key = (group << 32) | s.dp_seq++;
        if (++arrivals_dp_[key] < layout_.dp) return;
        arrivals_dp_.erase(key);
        auto members = dp_group(s);
        const Time start = sim_.now();
        const std::string name = collective_name(op.collective, "dp");
        coll_.run(op.collective, members, op.bytes, [this, members, start, name] {
            for (int m : members) {
                RankState& r = ranks_[static_cast<std::size_t>(m)];
                add_slice(m, 2, name, start, sim_.now());
                r.dp_queue.pop_front();
                ++r.dp_completed;
                if (!r.dp_queue.empty()) arrive_dp(r);
                if (r.block == Block::dp && r.dp_completed >= r.program->ops[r.pc].dp_target) {
                    ++r.pc;
                    unblock(r, r.times.dp_exposed_s);
                }
            }
        });
    }

    static std::string collective_name(CollectiveKind k, const char* group) {
        const char* n = k == CollectiveKind::all_reduce       ? "all_reduce"
                        : k == CollectiveKind::all_gather     ? "all_gather"
                                                              : "reduce_scatter";
        return fmt::format("{} {}", group, n);
    }

    const Cluster& cluster_;
    const Layout& layout_;
    const Program& program_;
    const std::vector<bool>& traced_;
    Simulator sim_;
    FlowNetwork net_;
    Collectives coll_;
    std::vector<RankState> ranks_;
    std::unordered_map<std::uint64_t, Message> messages_;
    std::unordered_map<std::uint64_t, int> arrivals_tp_;
    std::unordered_map<std::uint64_t, int> arrivals_dp_;
    std::vector<TraceSlice> trace_;
    std::uint64_t vs_count_ = 1;
    std::uint64_t mb_count_ = 1;
};

}  // namespace

ExecutionResult execute(const Cluster& cluster, const Layout& layout, const Program& program,
                        const std::vector<bool>& traced) {
    if (layout.gpus() != cluster.gpus())
        throw InternalError(fmt::format("layout has {} GPUs, cluster {}", layout.gpus(), cluster.gpus()));
    Executor ex(cluster, layout, program, traced);
    return ex.run();
}

}  // namespace trainsim
