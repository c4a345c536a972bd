// The JSON form of the schema's values and tables (include/trainsim/schema.hpp): what `--set`, the importers
// and the JSON reports write. Kept apart from schema.hpp so that the model and layout headers, which every
// module includes, do not pull nlohmann/json.hpp into every translation unit (it is the costliest header of
// the build: about 2 s per translation unit).
#pragma once

#include <nlohmann/json.hpp>

#include "trainsim/schema.hpp"

namespace trainsim::schema {

/// The value as JSON: what the loader reads back (a quantity as its number in SI base units).
nlohmann::json to_json(const Value& v);
/// A JSON object of the struct's fields (only those marked `summary` when summary_only), by name.
template <class S>
nlohmann::json to_json(const Table<S>& t, const S& s, bool summary_only = false) {
    nlohmann::json j = nlohmann::json::object();
    for (const auto& f : t)
        if (!summary_only || f.summary) j[f.name] = to_json(f.get(s));
    return j;
}

}  // namespace trainsim::schema
