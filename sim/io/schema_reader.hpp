// Internal to sim/io: reads the fields of an input struct from a JSON object by its schema
// (include/trainsim/schema.hpp), strictly: each value checked for its kind and range, one-line errors naming
// the file, the field, the value and the range (StrictObject's messages).
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "strict_json.hpp"
#include "trainsim/schema.hpp"

namespace trainsim::detail {

/// The key of field `f` within its object: the name after the section ("scale_out.nic_rate" -> "nic_rate").
template <class S>
std::string key_of(const schema::Field<S>& f) {
    const auto dot = f.name.find('.');
    return dot == std::string::npos ? f.name : f.name.substr(dot + 1);
}
/// The section of field `f` ("scale_out"), "" for a top-level field.
template <class S>
std::string section_of(const schema::Field<S>& f) {
    const auto dot = f.name.find('.');
    return dot == std::string::npos ? "" : f.name.substr(0, dot);
}

/// The integer list at `key` of `o` for field `f` (Kind::integer_list): an array of integers each within
/// f.range; null (an empty list) when f.nullable.
template <class S>
std::vector<std::int64_t> read_integer_list(StrictObject& o, const std::string& key,
                                            const schema::Field<S>& f) {
    const auto& v = o.raw(key);
    std::vector<std::int64_t> list;
    if (v.is_null() && f.nullable) return list;
    if (!v.is_array()) o.fail(o.field(key), fmt::format("= {} must be an array", shown(v)));
    for (const auto& x : v) {
        if (!x.is_number_integer()) o.fail(o.field(key), fmt::format("= {} must hold integers", shown(v)));
        const std::int64_t n =
            x.is_number_unsigned() && x.get<std::uint64_t>() > INT64_MAX ? INT64_MAX : x.get<std::int64_t>();
        if (f.range)
            if (const auto problem = schema::range_problem(static_cast<double>(n), *f.range))
                o.fail(o.field(key), fmt::format("holds {}, which {}", shown(x), *problem));
        list.push_back(n);
    }
    return list;
}

/// The choice set at `key` of `o` for field `f` (Kind::choice_set): an array of names of f.choices.
template <class S>
std::vector<std::string> read_choice_set(StrictObject& o, const std::string& key, const schema::Field<S>& f) {
    const auto& v = o.raw(key);
    if (!v.is_array()) o.fail(o.field(key), fmt::format("= {} must be an array", shown(v)));
    std::vector<std::string> list;
    std::string expected;
    for (std::size_t i = 0; i < f.choices.size(); ++i)
        expected += (i == 0 ? "" : i + 1 == f.choices.size() ? " or " : ", ") + f.choices[i];
    for (const auto& x : v) {
        const std::string name = x.is_string() ? x.get<std::string>() : shown(x);
        if (!x.is_string() || std::find(f.choices.begin(), f.choices.end(), name) == f.choices.end())
            o.fail(o.field(key), fmt::format("holds {}; expected {}", shown(x), expected));
        list.push_back(name);
    }
    return list;
}

/// Reads field `f` of `o` (the object that holds its key) into `s` when present (when required and absent:
/// "is missing"). Returns whether the key was present.
template <class S>
bool read_field(StrictObject& o, const schema::Field<S>& f, S& s) {
    using schema::Kind;
    using schema::Value;
    const std::string key = key_of(f);
    if (!f.required && !o.has(key)) return false;
    auto check_range = [&](double v, const std::string& shown_value) {
        if (!f.range) return;
        if (const auto problem = schema::range_problem(v, *f.range))
            o.fail(o.field(key), fmt::format("= {} {}", shown_value, *problem));
    };
    switch (f.kind) {
        case Kind::integer: {
            // The field's own range first: past an int, o.integer's "at most 2147483647" named a limit the
            // field does not have (layout.global_batch = 2^32: its limit is 16777216; round 12).
            if (const auto& raw = o.raw(key); raw.is_number_integer())
                check_range(raw.get<double>(), shown(raw));
            const std::int64_t v = o.integer(key);
            check_range(static_cast<double>(v), std::to_string(v));
            f.set(s, Value{v});
            break;
        }
        case Kind::number: {
            const double v = o.number(key);
            check_range(v, shown(o.raw(key)));
            // A denormal (model.moe_capacity_factor = 5e-324) passed a range from 0 and made a duration of
            // inf s, an error that named no field (round 12).
            if (v != 0 && std::fabs(v) < std::numeric_limits<double>::min())
                o.fail(o.field(key), fmt::format("= {} is too small to compute with (0, or at least {:g})",
                                                 shown(o.raw(key)), std::numeric_limits<double>::min()));
            f.set(s, Value{v});
            break;
        }
        case Kind::boolean:
            f.set(s, Value{o.boolean(key)});
            break;
        case Kind::choice:
            f.set(s, Value{o.choice(key, f.choices)});
            break;
        case Kind::string:
            f.set(s, Value{o.string(key)});
            break;
        case Kind::quantity: {
            const double v = o.quantity(key, f.dimension, f.allow_zero);
            if (f.range)
                check_range(v, fmt::format("\"{}\"", clip_for_message(o.raw(key).get<std::string>())));
            f.set(s, Value{v});
            break;
        }
        case Kind::integer_list:
            f.set(s, Value{read_integer_list(o, key, f)});
            break;
        case Kind::choice_set:
            f.set(s, Value{read_choice_set(o, key, f)});
            break;
    }
    if (f.check) {
        try {
            f.check(f.get(s), o.field(key));
        } catch (const InputError& e) {
            throw InputError(fmt::format("{}: {}", o.file(), e.what()));
        }
    }
    return true;
}

/// Reads every field of `table` from `o` into `s` (fields absent keep s's values; derived defaults applied
/// after all are read). The fields of a section ("scale_out.*", consecutive in the table) are read from the
/// nested object of that name, which is then finished (unknown keys refused). Does not call o.finish().
template <class S>
void read_fields(StrictObject& o, const schema::Table<S>& table, S& s) {
    std::vector<const schema::Field<S>*> absent;
    for (std::size_t i = 0; i < table.size();) {
        const std::string section = section_of(table[i]);
        if (section.empty()) {
            if (!read_field(o, table[i], s) && table[i].derive_default) absent.push_back(&table[i]);
            ++i;
            continue;
        }
        std::size_t end = i;
        while (end < table.size() && section_of(table[end]) == section)
            ++end;
        if (table[i].optional_section && !o.has(section)) {
            for (; i < end; ++i)
                if (table[i].derive_default) absent.push_back(&table[i]);
            continue;
        }
        auto sub = o.object(section);
        for (; i < end; ++i)
            if (!read_field(sub, table[i], s) && table[i].derive_default) absent.push_back(&table[i]);
        sub.finish();
    }
    for (const auto* f : absent)
        f->derive_default(s);
}

/// Reads the fields of `table` named in `names` (in table order), as read_fields.
template <class S>
void read_fields(StrictObject& o, const schema::Table<S>& table, S& s,
                 const std::vector<std::string>& names) {
    for (const auto& f : table)
        if (std::find(names.begin(), names.end(), f.name) != names.end()) read_field(o, f, s);
}

}  // namespace trainsim::detail
