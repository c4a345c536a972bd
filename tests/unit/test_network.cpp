#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <functional>
#include <memory>
#include <vector>

#include "trainsim/cluster.hpp"
#include "trainsim/engine.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/network.hpp"

using namespace trainsim;

namespace {

Route make_route(std::vector<int> links, Time latency = Time{}) {
    Route r;
    r.links = std::move(links);
    r.latency = latency;
    return r;
}

/// |a - b| in picoseconds.
std::int64_t ps_diff(Time a, Time b) {
    return std::llabs(a.picoseconds() - b.picoseconds());
}

}  // namespace

TEST_CASE("network: one flow takes latency + S / B") {
    Simulator sim;
    const double B = 10e9;  // bytes/s
    const double S = 3e8;   // bytes
    const Time L = Time::seconds(5e-6);
    FlowNetwork net(sim, {B});
    Time done{};
    bool finished = false;
    net.start_flow(make_route({0}, L), S, [&] {
        finished = true;
        done = sim.now();
    });
    CHECK(net.active_flows() == 1);
    sim.run();
    CHECK(finished);
    CHECK(ps_diff(done, L + Time::seconds(S / B)) <= 1);
    CHECK(net.active_flows() == 0);
    CHECK(net.flows_started() == 1);
    CHECK(net.link_bytes()[0] == S);
}

TEST_CASE("network: the slowest link of the route sets the rate; latency is added once") {
    Simulator sim;
    FlowNetwork net(sim, {40e9, 10e9, 20e9});
    const double S = 1e9;
    const Time L = Time::seconds(3e-6);
    Time done{};
    net.start_flow(make_route({0, 1, 2}, L), S, [&] { done = sim.now(); });
    sim.run();
    CHECK(ps_diff(done, L + Time::seconds(S / 10e9)) <= 1);
    CHECK(net.link_bytes() == std::vector<double>{S, S, S});
}

TEST_CASE("network: a zero-byte flow completes after the route latency") {
    Simulator sim;
    FlowNetwork net(sim, {1e9});
    Time done = Time::max();
    net.start_flow(make_route({0}, Time::ps(1234)), 0.0, [&] { done = sim.now(); });
    sim.run();
    CHECK(done == Time::ps(1234));
}

TEST_CASE("network: two flows sharing a link each get half of it") {
    Simulator sim;
    const double B = 8e9;
    const double S = 2e8;
    FlowNetwork net(sim, {B});
    std::vector<Time> done(2);
    for (int i = 0; i < 2; ++i)
        net.start_flow(make_route({0}), S, [&, i] { done[static_cast<std::size_t>(i)] = sim.now(); });
    sim.run();
    const Time expected = Time::seconds(2 * S / B);
    CHECK(ps_diff(done[0], expected) <= 1);
    CHECK(ps_diff(done[1], expected) <= 1);
}

TEST_CASE("network: rate updates count the flows and steps they recompute") {
    // Two flows starting together on one link: one update recomputes both (its component: the link), one
    // pick of progressive filling, and each frozen flow updates its one shared link: 1 + 1 + 2 steps. A
    // flow alone on its links is timed in closed form, with no update.
    Simulator sim;
    FlowNetwork net(sim, {8e9, 8e9});
    net.start_flow(make_route({1}), 1e6, [] {});
    sim.run();
    CHECK(net.rate_update_flows() == 0);
    CHECK(net.rate_update_work() == 0);
    for (int i = 0; i < 2; ++i)
        net.start_flow(make_route({0}), 2e8, [] {});
    sim.run();
    CHECK(net.rate_update_flows() >= 2);
    CHECK(net.rate_update_work() >= 4);
}

TEST_CASE("network: flows on disjoint links do not slow each other") {
    Simulator sim;
    const double B = 8e9;
    const double S = 2e8;
    FlowNetwork net(sim, {B, B});
    std::vector<Time> done(2);
    net.start_flow(make_route({0}), S, [&] { done[0] = sim.now(); });
    net.start_flow(make_route({1}), S, [&] { done[1] = sim.now(); });
    sim.run();
    CHECK(ps_diff(done[0], Time::seconds(S / B)) <= 1);
    CHECK(ps_diff(done[1], Time::seconds(S / B)) <= 1);
}

TEST_CASE("network: max-min fairness with a shared bottleneck, and rates recomputed when a flow ends") {
    // link A: capacity 10, flows f1 and f2; link B: capacity 100, flows f2 and f3.
    // Max-min: A is the bottleneck (share 5): f1 = f2 = 5; f3 gets the rest of B: 95.
    // f1 (25 B) ends at t = 5. Then A holds f2 alone: f2 = 10, f3 = 90.
    //   f2 has 100 - 25 = 75 B left -> ends at 5 + 7.5 = 12.5.
    //   f3 has 2000 - 475 = 1525 B left; by 12.5 it moved 675 more, 850 left at rate 100 -> ends at 21.
    // With equal sharing (no max-min) or without recomputation the times would differ.
    // Both link numberings, so that the bottleneck is found by its share, not by its position.
    for (const bool swapped : {false, true}) {
        CAPTURE(swapped);
        const int A = swapped ? 1 : 0;
        const int B = swapped ? 0 : 1;
        Simulator sim;
        FlowNetwork net(sim, swapped ? std::vector<double>{100.0, 10.0} : std::vector<double>{10.0, 100.0});
        Time t1 = Time::max(), t2 = Time::max(), t3 = Time::max();
        net.start_flow(make_route({A}), 25.0, [&] { t1 = sim.now(); });
        net.start_flow(make_route({A, B}), 100.0, [&] { t2 = sim.now(); });
        net.start_flow(make_route({B}), 2000.0, [&] { t3 = sim.now(); });
        sim.run();
        CHECK(ps_diff(t1, Time::seconds(5.0)) <= 2);
        CHECK(ps_diff(t2, Time::seconds(12.5)) <= 2);
        CHECK(ps_diff(t3, Time::seconds(21.0)) <= 2);
    }
}

TEST_CASE("network: a flow that starts later takes its share, and the survivor speeds up when it ends") {
    // f1: 2S bytes from t = 0 on a link of B; f2: S/2 bytes from t = S/B.
    // [0, S/B): f1 alone at B -> S left. Then both at B/2: f2 ends at S/B + (S/2)/(B/2) = 2S/B, when f1 has
    // S/2 left; f1 alone again at B ends at 2S/B + S/(2B) = 2.5 S/B.
    Simulator sim;
    const double B = 1e9;
    const double S = 1e8;
    FlowNetwork net(sim, {B});
    Time t1{}, t2{};
    net.start_flow(make_route({0}), 2 * S, [&] { t1 = sim.now(); });
    sim.schedule(Time::seconds(S / B), Priority::kDefault,
                 [&] { net.start_flow(make_route({0}), S / 2, [&] { t2 = sim.now(); }); });
    sim.run();
    CHECK(ps_diff(t2, Time::seconds(2 * S / B)) <= 2);
    CHECK(ps_diff(t1, Time::seconds(2.5 * S / B)) <= 2);
}

TEST_CASE("network: a flow alone on its link leaves it when drained, not when its latency has passed") {
    // f1: S bytes on a link of B with latency L (its bytes are gone at S/B, it completes at S/B + L); f2: S
    // bytes from t = S/B + L/2, within f1's latency: the link is free, so f2 ends at S/B + L/2 + S/B + L.
    // f3 starts at 0 on the same link as f4 (S bytes each, at t = 0 and t = S/(2B)): f4 joins while f3
    // drains, so both share: f3 has S/2 left at S/(2B), both at B/2 until f3 ends at 1.5 S/B, f4 at 2 S/B.
    Simulator sim;
    const double B = 1e9;
    const double S = 1e8;
    const Time L = Time::seconds(1e-3);
    FlowNetwork net(sim, {B, B});
    Time t1{}, t2{}, t3{}, t4{};
    net.start_flow(make_route({0}, L), S, [&] { t1 = sim.now(); });
    sim.schedule(Time::seconds(S / B) + Time::seconds(0.5e-3), Priority::kDefault,
                 [&] { net.start_flow(make_route({0}, L), S, [&] { t2 = sim.now(); }); });
    net.start_flow(make_route({1}), S, [&] { t3 = sim.now(); });
    sim.schedule(Time::seconds(S / (2 * B)), Priority::kDefault,
                 [&] { net.start_flow(make_route({1}), S, [&] { t4 = sim.now(); }); });
    CHECK(net.active_flows() == 2);
    sim.run();
    CHECK(ps_diff(t1, Time::seconds(S / B) + L) <= 2);
    CHECK(ps_diff(t2, Time::seconds(2 * S / B + 0.5e-3) + L) <= 4);
    CHECK(ps_diff(t3, Time::seconds(1.5 * S / B)) <= 2);
    CHECK(ps_diff(t4, Time::seconds(2 * S / B)) <= 2);
    CHECK(net.active_flows() == 0);
}

TEST_CASE("network: non-positive link capacity is an internal error") {
    Simulator sim;
    CHECK_THROWS_AS(FlowNetwork(sim, {1e9, 0.0}), InternalError);
}

namespace {
/// Reference fluid model: max-min rates by progressive filling with a linear scan for the bottleneck (the
/// textbook algorithm), advanced from completion to completion. Returns each flow's completion time (s).
std::vector<double> reference_completions(const std::vector<double>& cap,
                                          const std::vector<std::vector<int>>& routes,
                                          std::vector<double> bytes) {
    const std::size_t nf = routes.size();
    std::vector<double> done(nf, -1.0);
    std::vector<bool> active(nf, true);
    double now = 0;
    std::size_t left_total = nf;
    while (left_total > 0) {
        std::vector<double> cap_left = cap;
        std::vector<int> count(cap.size(), 0);
        for (std::size_t f = 0; f < nf; ++f)
            if (active[f])
                for (int l : routes[f])
                    ++count[static_cast<std::size_t>(l)];
        std::vector<double> rate(nf, 0.0);
        std::vector<bool> frozen(nf, false);
        std::size_t left = left_total;
        while (left > 0) {
            double best = 1e300;
            std::size_t best_link = 0;
            for (std::size_t l = 0; l < cap.size(); ++l)
                if (count[l] > 0 && cap_left[l] / count[l] < best) {
                    best = cap_left[l] / count[l];
                    best_link = l;
                }
            for (std::size_t f = 0; f < nf; ++f) {
                if (!active[f] || frozen[f]) continue;
                bool uses = false;
                for (int l : routes[f])
                    uses = uses || static_cast<std::size_t>(l) == best_link;
                if (!uses) continue;
                frozen[f] = true;
                rate[f] = best;
                --left;
                for (int l : routes[f]) {
                    cap_left[static_cast<std::size_t>(l)] -= best;
                    --count[static_cast<std::size_t>(l)];
                }
            }
        }
        double dt = 1e300;
        for (std::size_t f = 0; f < nf; ++f)
            if (active[f]) dt = std::min(dt, bytes[f] / rate[f]);
        now += dt;
        for (std::size_t f = 0; f < nf; ++f) {
            if (!active[f]) continue;
            bytes[f] -= rate[f] * dt;
            if (bytes[f] <= 1e-9 * rate[f]) {
                active[f] = false;
                done[f] = now;
                --left_total;
            }
        }
    }
    return done;
}

/// Starts `routes` on `net` at the simulator's present time, runs it to the end, and checks each flow's
/// completion (relative to that start) against reference_completions within 40 ps (completions are rounded up
/// to the picosecond at every rate change).
void check_against_reference(Simulator& sim, FlowNetwork& net, const std::vector<double>& cap,
                             const std::vector<std::vector<int>>& routes, const std::vector<double>& bytes) {
    const auto expected = reference_completions(cap, routes, bytes);
    const Time start = sim.now();
    std::vector<Time> done(routes.size());
    for (std::size_t f = 0; f < routes.size(); ++f)
        net.start_flow(make_route(routes[f]), bytes[f], [&, f] { done[f] = sim.now(); });
    sim.run();
    for (std::size_t f = 0; f < routes.size(); ++f) {
        CAPTURE(f);
        CHECK(ps_diff(done[f] - start, Time::seconds(expected[f])) <= 40);
    }
}

/// A xorshift64 generator: next(n) is uniform-ish in [0, n), the same sequence on every platform.
struct Xorshift {
    std::uint64_t x;
    std::uint64_t operator()(std::uint64_t n) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        return x % n;
    }
};

/// `links` capacities of 1-4 GB/s.
std::vector<double> random_capacities(Xorshift& next, std::size_t links) {
    std::vector<double> cap;
    for (std::size_t l = 0; l < links; ++l)
        cap.push_back(1e9 * static_cast<double>(1 + next(4)));
    return cap;
}

/// A route of 1 .. max_len links drawn from `links` (a link may come twice, as in a ring's coupled flow).
std::vector<int> random_route(Xorshift& next, std::size_t links, std::uint64_t max_len) {
    std::vector<int> r;
    const auto len = 1 + next(max_len);
    for (std::uint64_t k = 0; k < len; ++k)
        r.push_back(static_cast<int>(next(links)));
    return r;
}
}  // namespace

TEST_CASE("network: max-min rates over many flows and links match a reference progressive filling") {
    // Random routes (some using a link twice, as a ring's coupled flow does) over links of a few capacities:
    // the bottleneck is found from a heap in FlowNetwork, by a linear scan in the reference.
    Xorshift next{0x9e3779b97f4a7c15ULL};
    for (int trial = 0; trial < 5; ++trial) {
        CAPTURE(trial);
        const std::size_t links = 12;
        const std::vector<double> cap = random_capacities(next, links);
        std::vector<std::vector<int>> routes;
        std::vector<double> bytes;
        for (int f = 0; f < 30; ++f) {
            routes.push_back(random_route(next, links, 4));
            bytes.push_back(1e6 * static_cast<double>(1 + next(100)));
        }
        Simulator sim;
        FlowNetwork net(sim, cap);
        check_against_reference(sim, net, cap, routes, bytes);
    }
}

TEST_CASE(
    "network: long routes sharing thousands of links match the reference, and reuse finished flows' slots") {
    // Routes of 4,100-4,600 links (a DP ring's coupled flow crosses tens of thousands), most links shared,
    // beside short flows: a freeze raises the share of thousands of links at once, which the heap picks up
    // lazily (FlowNetwork::next_bottleneck). Then a second wave, started once the first has ended, reuses the
    // finished flows' slots (a long route takes a long route's slot): its completions must not depend on
    // them.
    Xorshift next{0x2545f4914f6cdd1dULL};
    const std::size_t links = 5000;
    const std::vector<double> cap = random_capacities(next, links);
    auto wave = [&] {
        std::vector<std::vector<int>> routes;
        std::vector<double> bytes;
        for (int f = 0; f < 14; ++f) {
            const bool long_route = f % 2 == 0;
            std::vector<int> r;
            const auto len = long_route ? 4100 + next(500) : 1 + next(4);
            for (std::uint64_t k = 0; k < len; ++k)
                r.push_back(static_cast<int>(next(links)));
            routes.push_back(r);
            bytes.push_back(1e6 * static_cast<double>(1 + next(100)));
        }
        return std::pair{routes, bytes};
    };
    Simulator sim;
    FlowNetwork net(sim, cap);
    for (int w = 0; w < 2; ++w) {
        CAPTURE(w);
        const auto [routes, bytes] = wave();
        check_against_reference(sim, net, cap, routes, bytes);
    }
}

TEST_CASE("network: start_flow_after starts the flow after the delay, as a scheduled start_flow would") {
    Simulator sim;
    const double B = 1e9;
    FlowNetwork net(sim, {B, B});
    Time a{}, b{};
    net.start_flow_after(Time::ps(500), make_route({0, 1}, Time::ps(7)), 1e6, [&] { a = sim.now(); });
    sim.schedule(Time::ps(500), Priority::kDefault,
                 [&] { net.start_flow(make_route({1}, Time::ps(7)), 1e6, [&] { b = sim.now(); }); });
    CHECK(net.flows_started() == 0);
    sim.run();
    CHECK(net.flows_started() == 2);
    // Both share link 1 from t = 500 ps: each at B / 2.
    CHECK(ps_diff(a, Time::ps(500 + 7) + Time::seconds(2e6 / B)) <= 1);
    CHECK(ps_diff(b, Time::ps(500 + 7) + Time::seconds(2e6 / B)) <= 1);
}

TEST_CASE("network: count_link_uses lists a route's links once, in order of first use, with their uses") {
    Route r = make_route({4, 2, 4, 7, 2, 4});
    count_link_uses(r);
    REQUIRE(r.link_uses);
    CHECK(r.link_uses->links == std::vector<int>{4, 2, 7});
    CHECK(r.link_uses->uses == std::vector<int>{3, 2, 1});
    Route empty = make_route({});
    count_link_uses(empty);
    REQUIRE(empty.link_uses);
    CHECK(empty.link_uses->links.empty());
}

TEST_CASE("network: flows on routes with counted link uses finish when the same flows without them do") {
    // Coupled routes that list links many times (an all-to-all's), started at staggered instants: the
    // network takes the counts from the route (Route::link_uses) or counts them itself; every completion
    // and every link's byte count must be the same.
    Xorshift next{0x51ed270b2c7f4a3dULL};
    const std::size_t links = 40;
    const std::vector<double> cap = random_capacities(next, links);
    std::vector<Route> plain, counted;
    for (int f = 0; f < 25; ++f) {
        std::vector<int> r;
        const auto len = 1 + next(60);
        for (std::uint64_t k = 0; k < len; ++k)
            r.push_back(static_cast<int>(next(links)));
        plain.push_back(make_route(r, Time::ps(static_cast<std::int64_t>(next(1000)))));
        counted.push_back(plain.back());
        count_link_uses(counted.back());
    }
    auto run = [&](const std::vector<Route>& routes) {
        Simulator sim;
        FlowNetwork net(sim, cap);
        std::vector<Time> done(routes.size());
        for (std::size_t f = 0; f < routes.size(); ++f)
            net.start_flow_after(Time::ps(static_cast<std::int64_t>(1000 * (f % 7))), routes[f],
                                 1e6 * static_cast<double>(1 + f), [&done, &sim, f] { done[f] = sim.now(); });
        sim.run();
        return std::pair{done, net.link_bytes()};
    };
    const auto [done_plain, bytes_plain] = run(plain);
    const auto [done_counted, bytes_counted] = run(counted);
    CHECK(done_plain == done_counted);
    CHECK(bytes_plain == bytes_counted);
    CHECK(std::any_of(done_plain.begin(), done_plain.end(), [](Time t) { return t > Time::ps(6000); }));
}

TEST_CASE("network: local rate updates give the completions a recomputation of every component gives") {
    // Flows of random routes (some using a link twice) over a few links of a few capacities, started at
    // random times: flows join and leave at many instants, one or several at once, on links saturated or
    // not, so update_locally both succeeds and declines. Each flow's completion time with local updates
    // equals the one with every component recomputed (FlowNetwork::set_local_updates_for_testing(false)),
    // up to the picosecond roundings of the rescheduled completions.
    Xorshift next{0x853c49e6748fea9bULL};
    std::uint64_t local_steps = 0, full_steps = 0;
    for (int trial = 0; trial < 20; ++trial) {
        CAPTURE(trial);
        const std::size_t links = 3 + next(6);
        const std::vector<double> cap = random_capacities(next, links);
        struct Start {
            std::vector<int> route;
            double bytes;
            Time at;
        };
        std::vector<Start> starts;
        for (int f = 0; f < 60; ++f) {
            std::vector<int> r = random_route(next, links, 3);
            // Starts on a coarse grid (several flows at one instant) over about ten flow durations.
            starts.push_back(
                {std::move(r), 1e6 * static_cast<double>(1 + next(20)), Time::ps(1'000'000'000 * next(40))});
        }
        auto run = [&](bool local, std::uint64_t& steps) {
            Simulator sim;
            FlowNetwork net(sim, cap);
            net.set_local_updates_for_testing(local);
            std::vector<Time> done(starts.size());
            for (std::size_t i = 0; i < starts.size(); ++i)
                net.start_flow_after(starts[i].at, make_route(starts[i].route), starts[i].bytes,
                                     [&sim, &done, i] { done[i] = sim.now(); });
            sim.run();
            steps += net.rate_update_flows();
            return done;
        };
        const std::vector<Time> a = run(true, local_steps), b = run(false, full_steps);
        for (std::size_t i = 0; i < starts.size(); ++i) {
            CAPTURE(i);
            CHECK(ps_diff(a[i], b[i]) <= 64);
        }
    }
    // The local updates recomputed fewer flows (else the test checks nothing).
    CHECK(local_steps < full_steps);
}

TEST_CASE("network: flows started together complete as when started one by one, with fewer events") {
    // start_flows_after runs the start_flow_after calls of several flows as one event: the same calls at the
    // same instant in the same order. Random groups of 2-8 flows (some of 0 bytes or more than eight: one by
    // one) start at random instants beside each other over shared links; every completion time and the
    // order of the completions must be the same as with start_flow_after one by one.
    Xorshift next{0x5851f42d4c957f2dULL};
    for (int trial = 0; trial < 10; ++trial) {
        CAPTURE(trial);
        const std::size_t links = 10;
        const std::vector<double> cap = random_capacities(next, links);
        struct Group {
            Time at, delay;
            std::vector<Route> routes;
            std::vector<double> bytes;
        };
        std::vector<Group> groups;
        for (int g = 0; g < 12; ++g) {
            Group grp;
            grp.at = Time::seconds(1e-4 * static_cast<double>(next(20)));
            grp.delay = Time::seconds(1e-6 * static_cast<double>(next(5)));
            const auto n = 1 + next(10);
            for (std::uint64_t k = 0; k < n; ++k) {
                grp.routes.push_back(make_route(random_route(next, links, 3), Time::seconds(2e-6)));
                grp.bytes.push_back(next(8) == 0 ? 0.0 : 1e5 * static_cast<double>(1 + next(100)));
            }
            groups.push_back(std::move(grp));
        }
        auto run = [&](bool together, std::uint64_t& events) {
            Simulator sim;
            FlowNetwork net(sim, cap);
            std::vector<std::pair<Time, int>> done;  // (completion, flow) in completion order
            int id = 0;
            for (const Group& grp : groups) {
                const int first = id;
                id += static_cast<int>(grp.routes.size());
                sim.schedule(grp.at, Priority::kDefault, [&, first, together, g = &grp] {
                    std::vector<Simulator::Callback> cbs;
                    for (std::size_t k = 0; k < g->routes.size(); ++k)
                        cbs.emplace_back(
                            [&, f = first + static_cast<int>(k)] { done.emplace_back(sim.now(), f); });
                    if (together) {
                        std::vector<const Route*> routes;
                        for (const Route& r : g->routes)
                            routes.push_back(&r);
                        net.start_flows_after(g->delay, routes, g->bytes, cbs);
                    } else {
                        for (std::size_t k = 0; k < g->routes.size(); ++k)
                            net.start_flow_after(g->delay, g->routes[k], g->bytes[k], std::move(cbs[k]));
                    }
                });
            }
            sim.run();
            events = sim.events_executed();
            CHECK(net.flows_started() == static_cast<std::uint64_t>(id));
            return done;
        };
        std::uint64_t events_one = 0, events_together = 0;
        const auto one_by_one = run(false, events_one);
        const auto together = run(true, events_together);
        CHECK(together == one_by_one);
        CHECK(events_together < events_one);
    }
}

namespace {

/// Starts a transfer's flows with one callback `arrived`: joined (start_joined_flows_after), or each flow
/// with a counting callback that runs `arrived` at zero (start_flow_after / start_flows_after), the
/// reference.
void start_transfer(FlowNetwork& net, Time delay, const std::vector<Route>& transfer_routes,
                    const std::vector<double>& bytes, bool joined, const std::function<void()>& arrived) {
    std::vector<const Route*> routes;
    for (const Route& r : transfer_routes)
        routes.push_back(&r);
    if (joined) {
        net.start_joined_flows_after(delay, routes, bytes, arrived);
        return;
    }
    auto left = std::make_shared<int>(static_cast<int>(routes.size()));
    std::vector<Simulator::Callback> cbs;
    for (std::size_t k = 0; k < routes.size(); ++k)
        cbs.emplace_back([left, arrived] {
            if (--*left == 0) arrived();
        });
    if (routes.size() == 1)
        net.start_flow_after(delay, *routes[0], bytes[0], std::move(cbs[0]));
    else
        net.start_flows_after(delay, routes, bytes, cbs);
}

}  // namespace

TEST_CASE("network: a joined transfer arrives as its flows' counting callbacks would, with fewer events") {
    // start_joined_flows_after gives a transfer of several flows one callback, run where the last of per-flow
    // callbacks that count down would run it (start_flows_after), without the arrival events of the listed
    // flows that are not the last. Random transfers of 1-10 flows (some of 0 bytes, more than eight, or of
    // routes with another latency: each flow then keeps its event) start at random instants over shared
    // links; each arrival starts one more flow, so that an arrival out of place would move later times. The
    // arrivals (time and order) and the flows' completions must be the same both ways.
    Xorshift next{0x2545f4914f6cdd1dULL};
    std::uint64_t saved = 0;
    for (int trial = 0; trial < 20; ++trial) {
        CAPTURE(trial);
        const std::size_t links = 8 + next(12);  // fewer shared links: more flows alone on theirs
        const std::vector<double> cap = random_capacities(next, links);
        struct Group {
            Time at, delay;
            std::vector<Route> routes;
            std::vector<double> bytes;
            Route extra;
        };
        std::vector<Group> groups;
        for (int g = 0; g < 14; ++g) {
            Group grp;
            grp.at = Time::seconds(1e-4 * static_cast<double>(next(10)));
            grp.delay = Time::seconds(1e-6 * static_cast<double>(next(3)));
            const auto n = 1 + next(next(4) == 0 ? 10 : 5);
            const bool mixed_latency = next(6) == 0;
            for (std::uint64_t k = 0; k < n; ++k) {
                // Latencies as long as the drains: a flow's drain may end after another's and before that
                // one's arrival (the case where the arrival of the flow alone on its links comes last).
                const double latency_s = mixed_latency && k == 1 ? 6e-5 : 5e-5;
                grp.routes.push_back(make_route(random_route(next, links, 3), Time::seconds(latency_s)));
                grp.bytes.push_back(next(12) == 0 ? 0.0 : 1e5 * static_cast<double>(1 + next(2)));
            }
            grp.extra = make_route(random_route(next, links, 2), Time::seconds(1e-6));
            groups.push_back(std::move(grp));
        }
        auto run = [&](bool joined, std::uint64_t& events) {
            Simulator sim;
            FlowNetwork net(sim, cap);
            std::vector<std::pair<Time, int>>
                log;  // (time, what) in order: g = arrival, 100 + g = extra flow
            for (int g = 0; g < static_cast<int>(groups.size()); ++g) {
                sim.schedule(groups[static_cast<std::size_t>(g)].at, Priority::kDefault, [&, g, joined] {
                    const Group& grp = groups[static_cast<std::size_t>(g)];
                    auto arrived = [&, g] {
                        log.emplace_back(sim.now(), g);
                        net.start_flow_after(Time{}, groups[static_cast<std::size_t>(g)].extra, 2e5,
                                             [&, g] { log.emplace_back(sim.now(), 100 + g); });
                    };
                    start_transfer(net, grp.delay, grp.routes, grp.bytes, joined, arrived);
                });
            }
            sim.run();
            events = sim.events_executed();
            return log;
        };
        std::uint64_t events_counting = 0, events_joined = 0;
        const auto counting = run(false, events_counting);
        const auto joined = run(true, events_joined);
        CHECK(joined.size() == 2 * groups.size());
        CHECK(joined == counting);
        CHECK(events_joined <= events_counting);
        saved += events_counting - events_joined;
    }
    CHECK(saved > 0);  // some arrivals needed no event (else the test checks nothing)
}

TEST_CASE("network: a joined transfer's flows alone on their links and ending together arrive in one event") {
    // Like a P2P message of a TP group: one flow per rail, equal bytes and capacities, so the flows alone on
    // their links end at the same instant and their finish_alone events would be consecutive; one event runs
    // them (FlowNetwork::AloneGroup). Other transfers and single flows start on the same rails at random
    // instants, so that some flows of a group enter the per-link lists before their end (another flow came)
    // and leave the group. Arrivals (time and order) must be those of per-flow counting callbacks.
    Xorshift next{0x9e3779b97f4a7c15ULL};
    std::uint64_t saved = 0;
    for (int trial = 0; trial < 20; ++trial) {
        CAPTURE(trial);
        const std::size_t rails = 4 + next(5);
        const std::vector<double> cap(2 * rails, 25e9);  // rail k: links k (send side) and rails + k
        struct Transfer {
            Time at;
            std::vector<Route> routes;
            std::vector<double> bytes;
        };
        std::vector<Transfer> transfers;
        for (int t = 0; t < 24; ++t) {
            Transfer tr;
            tr.at = Time::seconds(2e-6 * static_cast<double>(next(40)));
            const bool single = next(4) == 0;  // a lone flow (joins a rail of a transfer under way)
            const std::size_t n = single ? 1 : 2 + next(rails - 1);
            const std::size_t first = next(rails);
            const double bytes = 1e5 * static_cast<double>(1 + next(3));
            for (std::size_t k = 0; k < n; ++k) {
                const auto rail = static_cast<int>((first + k) % rails);
                tr.routes.push_back(make_route({rail, static_cast<int>(rails) + rail}, Time::seconds(3e-6)));
                tr.bytes.push_back(bytes);
            }
            transfers.push_back(std::move(tr));
        }
        auto run = [&](bool joined, std::uint64_t& events) {
            Simulator sim;
            FlowNetwork net(sim, cap);
            std::vector<std::pair<Time, int>> log;
            for (int t = 0; t < static_cast<int>(transfers.size()); ++t) {
                sim.schedule(transfers[static_cast<std::size_t>(t)].at, Priority::kDefault, [&, t, joined] {
                    const Transfer& tr = transfers[static_cast<std::size_t>(t)];
                    auto arrived = [&, t] { log.emplace_back(sim.now(), t); };
                    start_transfer(net, Time::seconds(1e-6), tr.routes, tr.bytes, joined, arrived);
                });
            }
            sim.run();
            events = sim.events_executed();
            return log;
        };
        std::uint64_t events_counting = 0, events_joined = 0;
        const auto counting = run(false, events_counting);
        const auto joined = run(true, events_joined);
        CHECK(joined.size() == transfers.size());
        CHECK(joined == counting);
        CHECK(events_joined <= events_counting);
        saved += events_counting - events_joined;
    }
    CHECK(saved > 100);  // groups of alone flows took one event (else the test checks nothing)
}
