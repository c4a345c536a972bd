// Input schemas: each field of an input struct (the training layout, the model, the topology) declared once,
// with its JSON name, type, unit, default, valid range or choices and a one-line documentation, and the
// accessors that read and write it. The table drives the loaders (sim/io: strict reading, range checks, one
// error per bad field), `--set` (which edits the JSON before the loader reads it), the JSON and text output
// of the structs, the sweep's axes, and the reference page docs/inputs.md (`trainsim schema --markdown`).
//
// A table is a std::vector<Field<S>> in declaration order: the order the loader reads the fields in (the
// first bad field is the one reported) and the order docs/inputs.md lists them.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include <fmt/format.h>

#include "trainsim/units.hpp"

namespace trainsim::schema {

/// How a field is written in JSON:
///   integer       a JSON integer within `range` (and within int, as every count is held in one)
///   number        a finite JSON number within `range`
///   boolean       true or false
///   choice        a string, one of `choices`
///   quantity      a string with its unit ("160MB", "300GBps", "2us") of dimension `dimension`, in SI base
///                 units (B, B/s, s) once read
///   string        any string
///   integer_list  an array of integers each within `range`; null (when `nullable`) is the empty list
///   choice_set    an array of strings, each one of `choices`
enum class Kind { integer, number, boolean, choice, quantity, string, integer_list, choice_set };

/// A field's value, as read from or written to JSON: integer -> int64, number and quantity -> double,
/// boolean -> bool, choice and string -> string, integer_list -> vector<int64>, choice_set ->
/// vector<string>.
using Value = std::variant<std::int64_t, double, bool, std::string, std::vector<std::int64_t>,
                           std::vector<std::string>>;

/// The closed range [lo, hi] of an integer, number or quantity field (of each entry of an integer list).
/// `hi_source` names where the upper bound is declared and why ("trainsim/limits.hpp"), or is empty.
struct Range {
    double lo = 0;
    double hi = 0;
    std::string hi_source;
};

template <class S>
struct Field {
    std::string name;  ///< JSON key; "section.key" for a key of a nested object (the topology's "scale_out")
    Kind kind = Kind::integer;
    std::string unit;  ///< unit of the value as written ("GPUs", "sequences", "layers", "B"); "" for none
    std::string doc;   ///< one line
    bool required = false;
    std::optional<Range> range;              ///< integer, number, quantity, integer_list
    std::vector<std::string> choices;        ///< choice, choice_set
    Dimension dimension = Dimension::bytes;  ///< quantity
    bool nullable = false;                   ///< integer_list: null is accepted (the empty list)
    bool allow_zero = false;                 ///< quantity: zero is accepted (latencies)
    /// A field of a nested object ("host.memory_bandwidth"): the object may be absent altogether (its fields
    /// then keep their defaults, `required` applying only when it is present).
    bool optional_section = false;
    bool summary = false;  ///< part of the struct's summary in `trainsim run --json` ("layout": {...})
    std::function<Value(const S&)> get;
    std::function<void(S&, const Value&)> set;
    /// When the default is not a constant: it is derived from other fields once all are read (e.g.
    /// model.kv_heads defaults to model.heads). `default_doc` then says so in docs/inputs.md.
    std::function<void(S&)> derive_default;
    std::string default_doc;
    /// A further check of the value once read (e.g. a GPU name in the catalog); throws InputError naming
    /// `field` (the field's path), which the loader prefixes with the file.
    std::function<void(const Value&, const std::string& field)> check;
};

template <class S>
using Table = std::vector<Field<S>>;

/// The field named `name`, or nullptr.
template <class S>
const Field<S>* find(const Table<S>& t, const std::string& name) {
    for (const auto& f : t)
        if (f.name == name) return &f;
    return nullptr;
}

/// The field's value as plain text: integers in decimal, numbers as {:g}, booleans true / false, strings
/// unquoted, lists comma-separated in brackets. Used for CSV cells and messages.
std::string text(const Value& v);
/// The kind's name in docs/inputs.md ("integer", "number", "boolean", "string", "quantity", "integer
/// list", "list of strings").
std::string kind_name(Kind k);
/// A number as written in the range column and messages: integers without a decimal point, powers of two
/// above 2^16 as 2^N.
std::string bound_text(double v);

/// The message tail for an integer or number `v` outside `r`, e.g. "must be positive (range 1 .. 2^17)",
/// "is above the limit of 4096 (trainsim/limits.hpp)", "must be in 0 .. 3"; nullopt when within. The
/// caller prefixes "file: field = value ".
std::optional<std::string> range_problem(double v, const Range& r);

// Field builders for the common member types: the accessors go through a member pointer.

template <class S, class T>
Field<S> integer_field(std::string name, T S::*member, Range range, std::string unit, std::string doc,
                       bool required = false) {
    Field<S> f;
    f.name = std::move(name);
    f.kind = Kind::integer;
    f.unit = std::move(unit);
    f.doc = std::move(doc);
    f.required = required;
    f.range = std::move(range);
    f.get = [member](const S& s) { return Value{static_cast<std::int64_t>(s.*member)}; };
    f.set = [member](S& s, const Value& v) { s.*member = static_cast<T>(std::get<std::int64_t>(v)); };
    return f;
}

template <class S>
Field<S> boolean_field(std::string name, bool S::*member, std::string doc) {
    Field<S> f;
    f.name = std::move(name);
    f.kind = Kind::boolean;
    f.doc = std::move(doc);
    f.get = [member](const S& s) { return Value{s.*member}; };
    f.set = [member](S& s, const Value& v) { s.*member = std::get<bool>(v); };
    return f;
}

template <class S>
Field<S> string_field(std::string name, std::string S::*member, std::string doc, bool required = false) {
    Field<S> f;
    f.name = std::move(name);
    f.kind = Kind::string;
    f.doc = std::move(doc);
    f.required = required;
    f.get = [member](const S& s) { return Value{s.*member}; };
    f.set = [member](S& s, const Value& v) { s.*member = std::get<std::string>(v); };
    return f;
}

/// A quantity held in SI base units as a double (B, B/s, s).
template <class S>
Field<S> quantity_field(std::string name, double S::*member, Dimension dim, std::string doc) {
    Field<S> f;
    f.name = std::move(name);
    f.kind = Kind::quantity;
    f.dimension = dim;
    f.unit = std::string(dim == Dimension::time ? "s" : dim == Dimension::bandwidth ? "B/s" : "B");
    f.doc = std::move(doc);
    f.get = [member](const S& s) { return Value{s.*member}; };
    f.set = [member](S& s, const Value& v) { s.*member = std::get<double>(v); };
    return f;
}

/// An enum held as E, written as one of `names` (indexed by the enum's value, which runs 0 .. n-1).
template <class S, class E>
Field<S> enum_field(std::string name, E S::*member, const std::vector<std::string>& names, std::string doc,
                    bool required = false) {
    Field<S> f;
    f.name = std::move(name);
    f.kind = Kind::choice;
    f.doc = std::move(doc);
    f.required = required;
    f.choices = names;
    f.get = [member, names](const S& s) { return Value{names.at(static_cast<std::size_t>(s.*member))}; };
    f.set = [member, names](S& s, const Value& v) {
        const auto& x = std::get<std::string>(v);
        for (std::size_t i = 0; i < names.size(); ++i)
            if (names[i] == x) s.*member = static_cast<E>(i);
    };
    return f;
}

}  // namespace trainsim::schema
