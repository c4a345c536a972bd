// The byte encodings of a sweep point's two phases (sim/sweep/sweep_internal.hpp), for spreading the points
// over processes: CBOR (RFC 8949, nlohmann::json::to_cbor), whose doubles are exact, as positional arrays.
#include <cstdint>

#include <nlohmann/json.hpp>

#include "sweep_internal.hpp"
#include "trainsim/errors.hpp"

namespace trainsim::sweep_detail {

namespace {

using nlohmann::json;

std::string to_bytes(const json& j) {
    const std::vector<std::uint8_t> cbor = json::to_cbor(j);
    return std::string(cbor.begin(), cbor.end());
}

json from_bytes(const std::string& bytes) {
    return json::from_cbor(std::vector<std::uint8_t>(bytes.begin(), bytes.end()));
}

/// Every field of a report but its model, layout and memory, in this order.
json report_array(const Report& r) {
    json stages = json::array(), use = json::array();
    for (const auto& s : r.stages)
        stages.push_back(
            {s.stage, s.compute_s, s.tp_exposed_s, s.pp_exposed_s, s.bubble_s, s.dp_exposed_s, s.idle_s});
    for (const auto& u : r.profile_use)
        use.push_back({u.kind, u.from_profile, u.analytic, u.profile_s, u.analytic_s});
    return {r.topology_name,
            r.workload_name,
            r.gpu_name,
            r.gpu_uncalibrated,
            r.gpus,
            {r.step_time_s,
             r.tokens_per_s,
             r.tokens_per_s_per_gpu,
             r.tokens_per_day,
             r.model_flops,
             r.hardware_flops,
             r.model_tflops_per_gpu,
             r.hardware_tflops_per_gpu,
             r.mfu,
             r.hfu,
             r.peak_flops,
             r.bubble_s,
             r.bubble_ratio,
             r.bubble_closed_form,
             r.compute_s,
             r.tp_exposed_s,
             r.pp_exposed_s,
             r.dp_exposed_s,
             r.idle_s,
             r.ep_exposed_s,
             r.gpu_memory_bytes},
            stages,
            r.events,
            r.flows,
            r.profile_file,
            use};
}

Report report_from(const json& a, const ModelSpec& model, const Layout& layout) {
    Report r;
    r.model = model;
    r.layout = layout;
    a.at(0).get_to(r.topology_name);
    a.at(1).get_to(r.workload_name);
    a.at(2).get_to(r.gpu_name);
    a.at(3).get_to(r.gpu_uncalibrated);
    a.at(4).get_to(r.gpus);
    double* const figures[] = {&r.step_time_s,
                               &r.tokens_per_s,
                               &r.tokens_per_s_per_gpu,
                               &r.tokens_per_day,
                               &r.model_flops,
                               &r.hardware_flops,
                               &r.model_tflops_per_gpu,
                               &r.hardware_tflops_per_gpu,
                               &r.mfu,
                               &r.hfu,
                               &r.peak_flops,
                               &r.bubble_s,
                               &r.bubble_ratio,
                               &r.bubble_closed_form,
                               &r.compute_s,
                               &r.tp_exposed_s,
                               &r.pp_exposed_s,
                               &r.dp_exposed_s,
                               &r.idle_s,
                               &r.ep_exposed_s,
                               &r.gpu_memory_bytes};
    const json& f = a.at(5);
    if (f.size() != std::size(figures)) throw InternalError("sweep: a report's encoding has the wrong size");
    for (std::size_t i = 0; i < std::size(figures); ++i)
        f.at(i).get_to(*figures[i]);
    for (const auto& s : a.at(6))
        r.stages.push_back({s.at(0).get<int>(), s.at(1).get<double>(), s.at(2).get<double>(),
                            s.at(3).get<double>(), s.at(4).get<double>(), s.at(5).get<double>(),
                            s.at(6).get<double>()});
    a.at(7).get_to(r.events);
    a.at(8).get_to(r.flows);
    a.at(9).get_to(r.profile_file);
    for (const auto& u : a.at(10))
        r.profile_use.push_back({u.at(0).get<std::string>(), u.at(1).get<long long>(),
                                 u.at(2).get<long long>(), u.at(3).get<double>(), u.at(4).get<double>()});
    return r;
}

/// An error as its kind ("input", "internal") and message; InputError keeps its kind, anything else becomes
/// an InternalError.
json error_array(const std::exception_ptr& error) {
    try {
        std::rethrow_exception(error);
    } catch (const InputError& e) {
        return {"input", e.what()};
    } catch (const std::exception& e) {
        return {"internal", e.what()};
    } catch (...) {
        return {"internal", "unknown exception"};
    }
}

std::exception_ptr error_from(const json& a) {
    const auto message = a.at(1).get<std::string>();
    return a.at(0) == "input" ? std::make_exception_ptr(InputError(message))
                              : std::make_exception_ptr(InternalError(message));
}

}  // namespace

std::string encode_check(const PointCheck& c) {
    return to_bytes({static_cast<int>(c.status), c.reason, c.detail, c.peak_memory_bytes, c.peak_stage,
                     c.cost, c.program_hash, c.lower_bound_s, c.bound_error, c.memory_floor_bytes});
}

PointCheck decode_check(const std::string& bytes) {
    const json a = from_bytes(bytes);
    PointCheck c;
    c.status = static_cast<SweepStatus>(a.at(0).get<int>());
    a.at(1).get_to(c.reason);
    a.at(2).get_to(c.detail);
    a.at(3).get_to(c.peak_memory_bytes);
    a.at(4).get_to(c.peak_stage);
    a.at(5).get_to(c.cost);
    a.at(6).get_to(c.program_hash);
    a.at(7).get_to(c.lower_bound_s);
    a.at(8).get_to(c.bound_error);
    a.at(9).get_to(c.memory_floor_bytes);
    return c;
}

std::string encode_run(const PointRun& r) {
    return to_bytes({static_cast<int>(r.status), r.reason, r.detail, r.limit,
                     r.error ? error_array(r.error) : json(), report_array(r.report)});
}

PointRun decode_run(const std::string& bytes, const ModelSpec& model, const Layout& layout) {
    const json a = from_bytes(bytes);
    PointRun r;
    r.status = static_cast<SweepStatus>(a.at(0).get<int>());
    a.at(1).get_to(r.reason);
    a.at(2).get_to(r.detail);
    a.at(3).get_to(r.limit);
    if (!a.at(4).is_null()) r.error = error_from(a.at(4));
    r.report = report_from(a.at(5), model, layout);
    return r;
}

}  // namespace trainsim::sweep_detail
