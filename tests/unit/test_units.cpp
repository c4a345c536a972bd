#include <doctest/doctest.h>

#include "test_helpers.hpp"
#include "trainsim/errors.hpp"
#include "trainsim/units.hpp"

using namespace trainsim;
using trainsim::test::contains;
using trainsim::test::message_of;

TEST_CASE("units: parse_quantity converts each dimension to its SI base") {
    CHECK(parse_quantity("300GBps", Dimension::bandwidth, "f") == doctest::Approx(300e9).epsilon(1e-15));
    // Bits per second are divided by 8.
    CHECK(parse_quantity("200Gbps", Dimension::bandwidth, "f") == doctest::Approx(25e9).epsilon(1e-15));
    CHECK(parse_quantity("2us", Dimension::time, "f") == doctest::Approx(2e-6).epsilon(1e-15));
    CHECK(parse_quantity("0.5us", Dimension::time, "f") == doctest::Approx(0.5e-6).epsilon(1e-15));
    CHECK(parse_quantity("160MB", Dimension::bytes, "f") == doctest::Approx(160e6).epsilon(1e-15));
    CHECK(parse_quantity("80GiB", Dimension::bytes, "f") == 80.0 * 1024 * 1024 * 1024);
    CHECK(parse_quantity("1.5e3MBps", Dimension::bandwidth, "f") == doctest::Approx(1.5e9).epsilon(1e-15));
    // the slash forms, as `trainsim schema` prints the SI unit (B/s) and datasheets write GB/s
    CHECK(parse_quantity("976562500B/s", Dimension::bandwidth, "f") == 976562500.0);
    CHECK(parse_quantity("900GB/s", Dimension::bandwidth, "f") == doctest::Approx(900e9).epsilon(1e-15));
    CHECK(parse_quantity("400Gb/s", Dimension::bandwidth, "f") == doctest::Approx(50e9).epsilon(1e-15));
    CHECK_THROWS_AS(parse_quantity("900GB/s", Dimension::bytes, "f"), InputError);

    CHECK(parse_time("2us", "f") == Time::ps(2'000'000));
    CHECK(parse_time("0us", "f") == Time::ps(0));  // a zero latency is allowed
    CHECK(parse_bandwidth("200Gbps", "f").bytes_per_s == doctest::Approx(25e9).epsilon(1e-15));
    CHECK(parse_bytes("1KiB", "f") == 1024.0);
    // The peta units reach the documented upper bound of 10^15 (bytes, bytes/s) without "1000TB".
    CHECK(parse_bytes("1PB", "f") == 1e15);
    CHECK(parse_bytes("1PiB", "f") == 1125899906842624.0);
    CHECK(parse_bandwidth("1PBps", "f").bytes_per_s == 1e15);
    CHECK(parse_bandwidth("1PB/s", "f").bytes_per_s == 1e15);
    CHECK(parse_bandwidth("8Pbps", "f").bytes_per_s == doctest::Approx(1e15).epsilon(1e-15));
    CHECK(Bandwidth::Gbps(200).bytes_per_s == doctest::Approx(25e9).epsilon(1e-15));
    CHECK(Time::seconds(1.5e-12) == Time::ps(2));  // rounded to the nearest picosecond
}

TEST_CASE("units: parse_quantity refuses malformed quantities and names the field") {
    const std::string field = "topology.scale_out.nic_rate";
    SUBCASE("missing unit") {
        CHECK_THROWS_AS(parse_quantity("300", Dimension::bandwidth, field), InputError);
        const auto msg = message_of<InputError>([&] { parse_quantity("300", Dimension::bandwidth, field); });
        CHECK_MESSAGE(contains(msg, field), msg);
        CHECK_MESSAGE(contains(msg, "no unit"), msg);
    }
    SUBCASE("wrong dimension") {
        CHECK_THROWS_AS(parse_quantity("2us", Dimension::bandwidth, field), InputError);
        const auto msg = message_of<InputError>([&] { parse_quantity("2us", Dimension::bandwidth, field); });
        CHECK_MESSAGE(contains(msg, field), msg);
        CHECK_MESSAGE(contains(msg, "\"us\""), msg);
        CHECK_THROWS_AS(parse_quantity("300GBps", Dimension::time, field), InputError);
        CHECK_THROWS_AS(parse_quantity("160MB", Dimension::bandwidth, field), InputError);
        // Bits per second are not a size.
        CHECK_THROWS_AS(parse_quantity("160Mb", Dimension::bytes, field), InputError);
    }
    SUBCASE("negative") {
        CHECK_THROWS_AS(parse_quantity("-1GBps", Dimension::bandwidth, field), InputError);
        const auto msg =
            message_of<InputError>([&] { parse_quantity("-1GBps", Dimension::bandwidth, field); });
        CHECK_MESSAGE(contains(msg, field), msg);
        CHECK_MESSAGE(contains(msg, "negative"), msg);
        CHECK_THROWS_AS(parse_time("-2us", field), InputError);
    }
    SUBCASE("zero bandwidth") {
        CHECK_THROWS_AS(parse_bandwidth("0GBps", field), InputError);
        const auto msg = message_of<InputError>([&] { parse_bandwidth("0GBps", field); });
        CHECK_MESSAGE(contains(msg, field), msg);
        CHECK_THROWS_AS(parse_quantity("0Gbps", Dimension::bandwidth, field), InputError);
        CHECK(parse_quantity("0Gbps", Dimension::bandwidth, field, /*allow_zero=*/true) == 0.0);
    }
    SUBCASE("not a number") {
        CHECK_THROWS_AS(parse_quantity("GBps", Dimension::bandwidth, field), InputError);
        CHECK_THROWS_AS(parse_quantity("", Dimension::bandwidth, field), InputError);
        CHECK_THROWS_AS(parse_quantity("1.2.3GBps", Dimension::bandwidth, field), InputError);
        const auto msg = message_of<InputError>([&] { parse_quantity("GBps", Dimension::bandwidth, field); });
        CHECK_MESSAGE(contains(msg, field), msg);
    }
}
