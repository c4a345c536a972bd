#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <string>

#include "trainsim/fingerprint.hpp"

using namespace trainsim;

TEST_CASE("fingerprint: FNV-1a 64 matches the published test vectors") {
    // draft-eastlake-fnv, test vectors for FNV-1a 64.
    CHECK(fnv1a64("", 0) == 0xcbf29ce484222325ULL);
    CHECK(fnv1a64("a", 1) == 0xaf63dc4c8601ec8cULL);
    CHECK(fnv1a64("foobar", 6) == 0x85944171f73967e8ULL);
    // Continuing a hash is hashing the concatenation.
    CHECK(fnv1a64("bar", 3, fnv1a64("foo", 3)) == 0x85944171f73967e8ULL);
}

TEST_CASE("fingerprint: any bit of any rank's accounts changes the hash; the line is stable") {
    ExecutionResult r;
    r.step_time_s = 1.25;
    r.events = 1000;
    r.flows = 40;
    r.ranks.resize(3);
    for (std::size_t i = 0; i < r.ranks.size(); ++i) {
        r.ranks[i].compute_s = 1.0;
        r.ranks[i].bubble_s = 0.25;
        r.ranks[i].finish_s = 1.25;
        r.ranks[i].compute_by_phase_s = {0.4, 0.6, 0, 0};
    }
    const Fingerprint a = fingerprint(r);
    CHECK(a.events == 1000u);
    CHECK(a.flows == 40u);
    CHECK(a.ranks == 3u);
    CHECK(fingerprint(r).hash == a.hash);
    const std::string line = to_string(a);
    CHECK(line.rfind("events=1000 flows=40 ranks=3 step_time_s=1.25 hash=", 0) == 0);
    CHECK(line.size() == std::string("events=1000 flows=40 ranks=3 step_time_s=1.25 hash=").size() + 16);
    CHECK(to_json(a)["hash"] == line.substr(line.size() - 16));

    ExecutionResult b = r;  // one ulp on the last rank's DP account
    b.ranks[2].dp_exposed_s = std::nextafter(0.0, 1.0);
    CHECK(fingerprint(b).hash != a.hash);
    ExecutionResult c = r;  // the same time booked to another account
    c.ranks[1].bubble_s = 0;
    c.ranks[1].idle_s = 0.25;
    CHECK(fingerprint(c).hash != a.hash);
    ExecutionResult d = r;  // one event more
    d.events = 1001;
    CHECK(fingerprint(d).hash != a.hash);
}
