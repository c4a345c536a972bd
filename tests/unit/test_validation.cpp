#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "trainsim/frontend.hpp"
#include "trainsim/validation.hpp"

using namespace trainsim;

namespace {

RunValidation simulated_run(const std::string& id, std::optional<double> step_error_pct, bool oom = false,
                            std::optional<double> peak_error_pct = std::nullopt) {
    RunValidation r;
    r.id = id;
    r.status = oom ? RunStatus::oom : RunStatus::ok;
    r.simulatable = true;
    r.predicted_step_s = 1.0;
    r.predicted_peak_gib = 40.0;
    if (step_error_pct) r.measured_step_s = 1.0 / (1.0 + *step_error_pct / 100.0);
    r.step_error_pct = step_error_pct;
    r.peak_error_pct = peak_error_pct;
    r.scored = step_error_pct && !oom;
    return r;
}

RunValidation not_simulated(const std::string& id, RunStatus status) {
    RunValidation r;
    r.id = id;
    r.status = status;
    r.reason = "why";
    return r;
}

/// A hand-made result: errors +10, -20, +5 percent scored; an oom run with -50 (not scored); a run whose step
/// time was not measured; an unsupported and an error row; one collective row of error -30, one malformed.
std::vector<FileValidation> hand_made() {
    FileValidation a;
    a.runs = {simulated_run("a", 10.0, false, 4.0), simulated_run("b", -20.0),
              simulated_run("oom", -50.0, true, 60.0), simulated_run("unmeasured", std::nullopt)};
    FileValidation b;
    b.runs = {simulated_run("c", 5.0), not_simulated("moe", RunStatus::unsupported),
              not_simulated("bad", RunStatus::error)};
    CollectiveValidation ok;
    ok.measured_busbw_GBps = 100;
    ok.error_pct = -30;
    CollectiveValidation malformed;
    malformed.error = "collectives[1].bytes = -1";
    b.collectives = {ok, malformed};
    return {a, b};
}

}  // namespace

TEST_CASE("ErrorStats: MAPE, max |error| and the count within the tolerance") {
    ErrorStats s;
    CHECK(s.mape_pct() == 0.0);
    for (double e : {10.0, -20.0, 5.0})
        s.add(e, 10.0);
    CHECK(s.count == 3);
    CHECK(s.mape_pct() == doctest::Approx(35.0 / 3));
    CHECK(s.max_abs_pct == 20.0);
    CHECK(s.within == 2);  // |10| <= 10 counts, |-20| does not
}

TEST_CASE("summarize_validation: oom counted apart, unmeasured runs not scored, statuses counted") {
    const ValidationSummary s = summarize_validation(hand_made(), 15.0);
    CHECK(s.runs == 7);
    CHECK(s.simulated == 5);
    CHECK(s.scored() == 3);  // a, b, c: not the oom run, not the unmeasured one
    CHECK(s.not_scored == 1);
    CHECK(s.oom == 1);
    CHECK(s.unsupported == 1);
    CHECK(s.errors == 1);
    CHECK(s.step_time.mape_pct() == doctest::Approx(35.0 / 3));
    CHECK(s.step_time.max_abs_pct == 20.0);  // the oom run's -50 is not among them
    CHECK(s.step_time.within == 2);
    // The peak memory of the oom run is compared (it is what the memory model predicts).
    CHECK(s.peak_memory.count == 2);
    CHECK(s.peak_memory.max_abs_pct == 60.0);
    CHECK(s.collectives_busbw.count == 1);
    CHECK(s.collectives_busbw.mape_pct() == 30.0);
    CHECK(s.collective_errors == 1);
}

TEST_CASE("evaluate_gate: MAPE, tolerance, oom and errors") {
    ValidationSummary s = summarize_validation(hand_made(), 25.0);
    ValidationGate gate;
    gate.max_oom = 1;
    CHECK_FALSE(evaluate_gate(s, gate).pass);  // the error row and the collective error fail it
    s.errors = 0;
    s.collective_errors = 0;
    CHECK_FALSE(evaluate_gate(s, gate).pass);  // the oom run's peak memory is 60% off
    s.peak_memory.within = s.peak_memory.count;
    CHECK(evaluate_gate(s, gate).pass);
    gate.max_oom = 0;
    CHECK_FALSE(evaluate_gate(s, gate).pass);
    gate.max_oom = 1;
    gate.max_mape_pct = 11.0;
    const GateVerdict v = evaluate_gate(s, gate);
    CHECK_FALSE(v.pass);
    REQUIRE(v.mape_message);
    CHECK(*v.mape_message == "step-time MAPE 11.67% exceeds --max-mape 11.00%");
    gate.max_mape_pct = 12.0;
    CHECK(evaluate_gate(s, gate).pass);
}

TEST_CASE("validation_json_text: validation_json's value, \"runs\" first, as head + runs + tail") {
    ValidationResult res;
    res.files = hand_made();
    res.files[0].notes = {"a file note"};
    res.summary = summarize_validation(res.files, 15.0);
    const std::string text = validation_json_text(res);
    CHECK(nlohmann::json::parse(text) == validation_json(res));
    CHECK(text.rfind("{\n  \"runs\": [\n    {\n      \"id\": \"a\"", 0) == 0);
    // Printed piece by piece (as `validate --json` streams it): the same text.
    std::string pieces = validation_json_head();
    std::size_t n = 0;
    for (const auto& file : res.files)
        for (const auto& r : file.runs)
            pieces += validation_json_run(r, n++);
    CHECK(pieces + validation_json_tail(res, n) == text);
    // Every member laid out as nlohmann's dump(2) lays out the whole document (only the key order differs).
    CHECK(text.size() == validation_json(res).dump(2).size() + 1);
    // No run: an empty array, as dump(2) writes one.
    ValidationResult empty;
    empty.summary = summarize_validation(empty.files, 15.0);
    const std::string none = validation_json_text(empty);
    CHECK(none.rfind("{\n  \"runs\": [],\n", 0) == 0);
    CHECK(nlohmann::json::parse(none) == validation_json(empty));
}
