#include "trainsim/schema.hpp"
#include "trainsim/schema_json.hpp"

#include <cmath>

namespace trainsim::schema {

std::string bound_text(double v) {
    if (std::isfinite(v) && v == std::floor(v) && std::fabs(v) < 1e15)
        return fmt::format("{}", std::int64_t(v));
    return fmt::format("{:g}", v);
}

std::string text(const Value& v) {
    struct Visitor {
        std::string operator()(std::int64_t x) const { return fmt::format("{}", x); }
        std::string operator()(double x) const { return fmt::format("{:g}", x); }
        std::string operator()(bool x) const { return x ? "true" : "false"; }
        std::string operator()(const std::string& x) const { return x; }
        std::string operator()(const std::vector<std::int64_t>& x) const {
            std::string o = "[";
            for (std::size_t i = 0; i < x.size(); ++i)
                o += fmt::format("{}{}", i ? ", " : "", x[i]);
            return o + "]";
        }
        std::string operator()(const std::vector<std::string>& x) const {
            std::string o = "[";
            for (std::size_t i = 0; i < x.size(); ++i)
                o += (i ? ", " : "") + x[i];
            return o + "]";
        }
    };
    return std::visit(Visitor{}, v);
}

nlohmann::json to_json(const Value& v) {
    return std::visit([](const auto& x) { return nlohmann::json(x); }, v);
}

std::string kind_name(Kind k) {
    switch (k) {
        case Kind::integer:
            return "integer";
        case Kind::number:
            return "number";
        case Kind::boolean:
            return "boolean";
        case Kind::choice:
            return "string (choice)";
        case Kind::quantity:
            return "quantity";
        case Kind::string:
            return "string";
        case Kind::integer_list:
            return "integer list";
        case Kind::choice_set:
            return "list of strings";
    }
    return "?";
}

std::optional<std::string> range_problem(double v, const Range& r) {
    const std::string range = fmt::format("range {} .. {}", bound_text(r.lo), bound_text(r.hi));
    if (!(v == v)) return fmt::format("is not a number ({})", range);
    if (v < r.lo) {
        if (r.lo == 1 && v <= 0) return fmt::format("must be positive ({})", range);
        return fmt::format("is below the minimum of {} ({})", bound_text(r.lo), range);
    }
    if (v > r.hi) {
        if (!r.hi_source.empty())
            return fmt::format("is above the limit of {} ({})", bound_text(r.hi), r.hi_source);
        return fmt::format("is above the maximum of {} ({})", bound_text(r.hi), range);
    }
    return std::nullopt;
}

}  // namespace trainsim::schema
