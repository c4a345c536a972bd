#include <doctest/doctest.h>

#include <string>

#include <nlohmann/json.hpp>

#include "test_helpers.hpp"
#include "trainsim/config.hpp"
#include "trainsim/errors.hpp"

using namespace trainsim;
using nlohmann::json;
using trainsim::test::contains;
using trainsim::test::message_of;

namespace {

const std::string kSrc = TRAINSIM_SOURCE_DIR;
const std::string kTopoFile = kSrc + "/topologies/dgx-a100.json";
const std::string kWorkloadFile = kSrc + "/workloads/gpt3-175b.json";

std::string topology_error(const json& j) {
    return message_of<InputError>([&] { parse_topology(j, "t.json"); });
}
std::string workload_error(const json& j) {
    return message_of<InputError>([&] { parse_workload(j, "w.json"); });
}

}  // namespace

TEST_CASE("config: the preset topologies parse") {
    for (const char* name : {"dgx-a100", "dgx-h100"}) {
        CAPTURE(name);
        const std::string file = kSrc + "/topologies/" + name + ".json";
        TopologySpec t;
        REQUIRE_NOTHROW(t = parse_topology(read_json_file(file), file));
        CHECK(t.name == name);
        CHECK(t.nodes > 0);
        CHECK(t.gpus_per_node == 8);
        CHECK(t.nvlink_bandwidth.bytes_per_s > 0);
        CHECK(t.nic_bandwidth.bytes_per_s > 0);
    }
    const TopologySpec a100 = parse_topology(read_json_file(kTopoFile), kTopoFile);
    CHECK(a100.gpu == "A100-SXM4-80GB");
    CHECK(a100.nodes == 128);
    CHECK(a100.nvlink_bandwidth.bytes_per_s == doctest::Approx(300e9));
    CHECK(a100.nvlink_latency == Time::seconds(1e-6));
    CHECK(a100.nic_bandwidth.bytes_per_s == doctest::Approx(25e9));  // 200 Gb/s
    CHECK(a100.pcie_bandwidth.bytes_per_s == doctest::Approx(32e9));
    CHECK(a100.nic_latency == Time::seconds(2e-6));
    CHECK(a100.switch_latency == Time::seconds(0.5e-6));
    CHECK(a100.nodes_per_leaf == 32);
    CHECK(a100.oversubscription == 1.0);
    CHECK(a100.scale_out_kind == "infiniband");
    CHECK(a100.routing == ScaleOutRouting::adaptive);
}

TEST_CASE("config: spine routing defaults by fabric kind and can be named") {
    json t = read_json_file(kTopoFile);
    t["scale_out"].erase("routing");
    CHECK(parse_topology(t, "t.json").routing == ScaleOutRouting::adaptive);  // InfiniBand
    t["scale_out"]["kind"] = "roce";
    CHECK(parse_topology(t, "t.json").routing == ScaleOutRouting::ecmp);
    t["scale_out"]["routing"] = "adaptive";
    CHECK(parse_topology(t, "t.json").routing == ScaleOutRouting::adaptive);
    t["scale_out"]["kind"] = "infiniband";
    t["scale_out"]["routing"] = "ecmp";
    CHECK(parse_topology(t, "t.json").routing == ScaleOutRouting::ecmp);
    t["scale_out"]["routing"] = "random";
    CHECK(contains(topology_error(t), "topology.scale_out.routing"));
}

TEST_CASE("config: the preset workloads parse") {
    for (const char* name : {"gpt3-175b", "llama3-8b", "llama3-70b", "llama3-405b"}) {
        CAPTURE(name);
        const std::string file = kSrc + "/workloads/" + name + ".json";
        Workload w;
        REQUIRE_NOTHROW(w = parse_workload(read_json_file(file), file));
        CHECK(w.name == name);
        CHECK(w.model.layers > 0);
        CHECK(w.layout.gpus() > 0);
    }
    const Workload w = parse_workload(read_json_file(kWorkloadFile), kWorkloadFile);
    CHECK(w.model.layers == 96);
    CHECK(w.model.hidden == 12288);
    CHECK(w.model.mlp == MlpKind::gelu);
    CHECK(w.layout.tp == 8);
    CHECK(w.layout.pp == 16);
    CHECK(w.layout.dp == 8);
    CHECK(w.layout.recompute == Recompute::full);
    CHECK(w.layout.precision == Precision::fp16);
    CHECK(w.layout.attention == AttentionKernel::unfused);
    CHECK(w.layout.dp_bucket_bytes == doctest::Approx(160e6));
    CHECK_FALSE(w.measured.has_value());  // test_presets.cpp: no preset carries one
}

TEST_CASE("config: unknown keys are refused with the field's path") {
    json t = read_json_file(kTopoFile);
    t["scale_out"]["nic_speed"] = "200Gbps";
    CHECK_THROWS_AS(parse_topology(t, "t.json"), InputError);
    auto msg = topology_error(t);
    CHECK_MESSAGE(contains(msg, "topology.scale_out.nic_speed"), msg);
    CHECK_MESSAGE(contains(msg, "t.json"), msg);

    json t2 = read_json_file(kTopoFile);
    t2["gpu_count"] = 8;
    msg = topology_error(t2);
    CHECK_MESSAGE(contains(msg, "topology.gpu_count"), msg);

    json w = read_json_file(kWorkloadFile);
    w["layout"]["tensor_parallel"] = 8;
    msg = workload_error(w);
    CHECK_MESSAGE(contains(msg, "layout.tensor_parallel"), msg);
    CHECK_MESSAGE(contains(msg, "w.json"), msg);

    json w2 = read_json_file(kWorkloadFile);
    w2["model"]["num_layers"] = 8;
    msg = workload_error(w2);
    CHECK_MESSAGE(contains(msg, "model.num_layers"), msg);
}

TEST_CASE("config: a quantity without its unit is refused") {
    json t = read_json_file(kTopoFile);
    t["scale_up"]["bandwidth_per_gpu"] = "300";
    CHECK_THROWS_AS(parse_topology(t, "t.json"), InputError);
    auto msg = topology_error(t);
    CHECK_MESSAGE(contains(msg, "topology.scale_up.bandwidth_per_gpu"), msg);
    CHECK_MESSAGE(contains(msg, "t.json"), msg);
    // A bare JSON number is refused too.
    t["scale_up"]["bandwidth_per_gpu"] = 300;
    msg = topology_error(t);
    CHECK_MESSAGE(contains(msg, "topology.scale_up.bandwidth_per_gpu"), msg);

    json w = read_json_file(kWorkloadFile);
    w["layout"]["dp_bucket_size"] = "160";
    msg = workload_error(w);
    CHECK_MESSAGE(contains(msg, "layout.dp_bucket_size"), msg);
    // "0B" asks for the framework's default bucket (the field's default), a negative size is refused.
    w["layout"]["dp_bucket_size"] = "0B";
    CHECK(parse_workload(w, "w.json").layout.dp_bucket_bytes == 0);
    w["layout"]["dp_bucket_size"] = "-1MB";
    CHECK(contains(workload_error(w), "must not be negative"));
}

TEST_CASE("config: negative or zero bandwidths and wrong units are refused") {
    json t = read_json_file(kTopoFile);
    t["scale_out"]["nic_rate"] = "-200Gbps";
    CHECK_THROWS_AS(parse_topology(t, "t.json"), InputError);
    CHECK(contains(topology_error(t), "topology.scale_out.nic_rate"));
    t["scale_out"]["nic_rate"] = "0Gbps";
    CHECK(contains(topology_error(t), "topology.scale_out.nic_rate"));
    t["scale_out"]["nic_rate"] = "2us";
    CHECK(contains(topology_error(t), "topology.scale_out.nic_rate"));

    json t2 = read_json_file(kTopoFile);
    t2["scale_out"]["oversubscription"] = 0.5;
    CHECK(contains(topology_error(t2), "topology.scale_out.oversubscription"));
    json t3 = read_json_file(kTopoFile);
    t3["gpu"] = "V100";  // not in the catalog
    CHECK(contains(topology_error(t3), "topology.gpu"));
    json t4 = read_json_file(kTopoFile);
    t4["nodes"] = -4;
    CHECK(contains(topology_error(t4), "topology.nodes"));
    json t5 = read_json_file(kTopoFile);
    t5.erase("gpus_per_node");
    CHECK(contains(topology_error(t5), "topology.gpus_per_node"));

    json w = read_json_file(kWorkloadFile);
    w["layout"]["schedule"] = "zb-v";
    CHECK(contains(workload_error(w), "layout.schedule"));
}

TEST_CASE("config: apply_override") {
    json t = read_json_file(kTopoFile);
    json w = read_json_file(kWorkloadFile);
    apply_override(t, w, "layout.tp=4");
    CHECK(w["layout"]["tp"] == 4);
    CHECK(parse_workload(w, "w.json").layout.tp == 4);

    apply_override(t, w, "layout.schedule=gpipe");  // not JSON: taken as a string
    CHECK(parse_workload(w, "w.json").layout.schedule == Schedule::gpipe);

    apply_override(t, w, "model.layers=48");
    CHECK(parse_workload(w, "w.json").model.layers == 48);

    apply_override(t, w, "topology.nodes=2");
    CHECK(t["nodes"] == 2);
    CHECK(parse_topology(t, "t.json").nodes == 2);
    CHECK(w.find("topology") == w.end());  // the workload was not touched

    apply_override(t, w, "topology.scale_out.nic_rate=400Gbps");
    CHECK(parse_topology(t, "t.json").nic_bandwidth.bytes_per_s == doctest::Approx(50e9));

    CHECK_THROWS_AS(apply_override(t, w, "layout.tp"), InputError);      // no '='
    CHECK_THROWS_AS(apply_override(t, w, "=4"), InputError);             // no key
    CHECK_THROWS_AS(apply_override(t, w, "layout.tp.x=4"), InputError);  // through a number
    CHECK_THROWS_AS(apply_override(t, w, "layout..tp=4"), InputError);   // empty component
    CHECK(contains(message_of<InputError>([&] { apply_override(t, w, "layout.tp"); }), "layout.tp"));

    // an unknown field is refused by the --set, not left for the loader to blame the file
    CHECK(contains(message_of<InputError>([&] { apply_override(t, w, "layout.colour=1"); }),
                   "--set \"layout.colour=1\": \"layout.colour\" is not a known field"));
    CHECK(contains(message_of<InputError>([&] { apply_override(t, w, "topology.storage.x=1"); }),
                   "\"topology.storage.x\" is not a known field"));
    CHECK(w["layout"].find("colour") == w["layout"].end());

    // a field of an optional section the file leaves out creates the section
    t.erase("storage");
    apply_override(t, w, "topology.storage.write_bandwidth_per_node=2GB/s");
    CHECK(parse_topology(t, "t.json").storage_write_bandwidth_per_node.bytes_per_s == doctest::Approx(2e9));
}

TEST_CASE("config: blame_set names the --set that gave a refused value, not the file") {
    const std::vector<std::string> sets = {"layout.tp=3", "layout.tp=0", "topology.nodes=2"};
    auto rethrown = [&](const std::string& what, const std::string& file) {
        try {
            blame_set(InputError(what), sets, file);
        } catch (const InputError& e) {
            return std::string(e.what());
        }
        return std::string("(returned)");
    };
    // the last --set of the field is blamed: its value is the one the loader saw
    CHECK(rethrown("w.json: layout.tp = 0 must be positive", "w.json") ==
          "--set \"layout.tp=0\": layout.tp = 0 must be positive");
    // another file's error, or a field no --set gave: left to the caller
    CHECK(rethrown("t.json: layout.tp = 0 must be positive", "w.json") == "(returned)");
    CHECK(rethrown("w.json: layout.pp = 0 must be positive", "w.json") == "(returned)");
    // a message over several fields, one of them from a --set: the file and the --set are both named
    CHECK(rethrown("t.json: topology.nodes * topology.gpus_per_node = 9 is above", "t.json") ==
          "t.json with --set \"topology.nodes=2\": topology.nodes * topology.gpus_per_node = 9 is above");
    CHECK(rethrown("w.json: layout.pp * layout.tpx = 9", "w.json") == "(returned)");
    // a key that only begins another's name ("layout.tp" in "layout.tpx") is not that field
    CHECK(rethrown("w.json: layout.tpx = 1 is not a known field", "w.json") == "(returned)");
}

TEST_CASE("config: the embedded defaults parse and are the preset files") {
    const json t = default_topology_json();
    const json w = default_workload_json();
    TopologySpec ts;
    Workload ws;
    REQUIRE_NOTHROW(ts = parse_topology(t, "<default>"));
    REQUIRE_NOTHROW(ws = parse_workload(w, "<default>"));
    CHECK(ts.gpus() == ws.layout.gpus());
    CHECK(t == read_json_file(kTopoFile));
    CHECK(w == read_json_file(kWorkloadFile));
}

TEST_CASE("config: read_json_file names the file on errors") {
    const std::string missing = kSrc + "/no/such/file.json";
    CHECK_THROWS_AS(read_json_file(missing), InputError);
    CHECK(contains(message_of<InputError>([&] { read_json_file(missing); }), missing));
    // Not JSON: this source file.
    const std::string not_json = kSrc + "/CMakeLists.txt";
    CHECK_THROWS_AS(read_json_file(not_json), InputError);
    CHECK(contains(message_of<InputError>([&] { read_json_file(not_json); }), "CMakeLists.txt"));
}
