// What the importers share (private to sim/importers): the workload document written from a model and a
// layout, DP from the GPU count, and strict conversions of the source's values with one-line errors.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "trainsim/importers.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/model.hpp"

namespace trainsim::importers_detail {

/// The workload document of `m` and `l`: name, description, and of "model" and "layout" the required
/// fields, the fields whose default is derived from others, and every field that differs from the default
/// (ModelSpec{} / Layout{}), in the schema's order.
nlohmann::json workload_document(const std::string& name, const std::string& description, const ModelSpec& m,
                                 const Layout& l);

/// DP = gpus / (tp * pp * cp). Throws InputError "SOURCE: GPUS GPUs are not a multiple of TP x PP x CP = N"
/// when it does not divide, or when gpus is not positive ("give --gpus N").
int derive_dp(int gpus, const Layout& l, const std::string& source);

/// The GPU count: target.gpus, else `stated` (from the source) when positive, else target.cluster_gpus.
int import_gpus(const ImportTarget& target, int stated);

/// The largest integer an importer takes for a size without a tighter limit (trainsim/limits.hpp bounds the
/// result later): small enough that the importers' products (4 x hidden, micro-batch x DP) cannot overflow.
inline constexpr std::int64_t kMaxImportInteger = std::int64_t{1} << 40;

/// `text` as an integer (decimal, the whole text, within int64). nullopt when it is not one.
std::optional<std::int64_t> parse_integer(const std::string& text);
/// `text` as a finite number (the whole text). nullopt when it is not one.
std::optional<double> parse_number(const std::string& text);

/// Throws InputError "SOURCE: WHAT = "VALUE" PROBLEM" (value clipped for the message).
[[noreturn]] void bad_value(const std::string& source, const std::string& what, const std::string& value,
                            const std::string& problem);

/// Throws InputError "SOURCE: WHAT = JSON PROBLEM": a value of a JSON or TOML file as written there.
[[noreturn]] void bad_written_value(const std::string& source, const std::string& what,
                                    const std::string& written, const std::string& problem);

/// YaRN's concentration factor as Megatron-Core computes it (yarn_rotary_pos_embedding.py
/// _yarn_get_concentration_factor): mscale(s, m) / mscale(s, m_all) when both mscales are given, else
/// mscale(s, 1), with mscale(s, x) = 0.1 x ln s + 1 for scaling factor s > 1, else 1.
double yarn_concentration_factor(double s, std::optional<double> mscale,
                                 std::optional<double> mscale_all_dim);

}  // namespace trainsim::importers_detail
