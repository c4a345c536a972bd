// --moe-layer-freq as an integer or a list expression -> dense layers first, then every n-th layer MoE.
#include "moe_layer_pattern.hpp"

#include <algorithm>

#include <fmt/format.h>

#include "import_common.hpp"
#include "trainsim/limits.hpp"

namespace trainsim::importers_detail {

namespace {

/// Expands "[a,b,...]" or "[a,b,...]*n" (no blanks) into `out`; false when the term is malformed.
bool expand_term(const std::string& term, std::vector<int>& out) {
    const auto close = term.find(']');
    if (term.empty() || term[0] != '[' || close == std::string::npos) return false;
    std::int64_t repeat = 1;
    if (close + 1 < term.size()) {
        if (term[close + 1] != '*') return false;
        const auto r = parse_integer(term.substr(close + 2));
        if (!r || *r < 0 || *r > limits::kMaxLayers) return false;
        repeat = *r;
    }
    std::vector<int> items;
    const std::string body = term.substr(1, close - 1);
    for (std::size_t start = 0; start <= body.size();) {
        const auto comma = std::min(body.find(',', start), body.size());
        const auto v = parse_integer(body.substr(start, comma - start));
        if (!v || (*v != 0 && *v != 1)) return false;
        items.push_back(static_cast<int>(*v));
        start = comma + 1;
    }
    if (out.size() + items.size() * static_cast<std::size_t>(repeat) >
        static_cast<std::size_t>(limits::kMaxLayers))
        return false;
    for (std::int64_t i = 0; i < repeat; ++i)
        out.insert(out.end(), items.begin(), items.end());
    return true;
}

}  // namespace

MoeLayerPattern pattern_of(const std::vector<int>& is_moe, const std::string& source, const std::string& what,
                           const std::string& text) {
    const auto n = static_cast<std::int64_t>(is_moe.size());
    const auto first = std::find(is_moe.begin(), is_moe.end(), 1) - is_moe.begin();
    if (first == n) bad_value(source, what, text, "has no MoE layer");
    const auto second = std::find(is_moe.begin() + first + 1, is_moe.end(), 1) - is_moe.begin();
    MoeLayerPattern p{first, second < n ? second - first : n - first};
    for (std::int64_t i = first; i < n; ++i)
        if ((is_moe[static_cast<std::size_t>(i)] == 1) != ((i - first) % p.layer_freq == 0))
            bad_value(
                source, what, text,
                "is a layer pattern trainsim cannot hold (dense layers first, then every n-th layer MoE)");
    return p;
}

MoeLayerPattern moe_layer_pattern(const std::string& text, std::int64_t layers, const std::string& source,
                                  const std::string& what) {
    if (const auto n = parse_integer(text)) {
        if (*n < 1) bad_value(source, what, text, "must be at least 1");
        return MoeLayerPattern{0, *n};
    }
    std::string s;
    for (char c : text)
        if (c != ' ' && c != '\t') s += c;
    while (s.size() >= 2 && s.front() == '(' && s.back() == ')')
        s = s.substr(1, s.size() - 2);
    std::vector<int> is_moe;
    for (std::size_t start = 0; start <= s.size();) {
        const auto plus = std::min(s.find('+', start), s.size());
        if (!expand_term(s.substr(start, plus - start), is_moe))
            bad_value(source, what, text, "is neither an integer nor a list such as ([0]*3+[1]*58)");
        start = plus + 1;
    }
    if (static_cast<std::int64_t>(is_moe.size()) != layers)
        bad_value(source, what, text, fmt::format("has {} entries for {} layers", is_moe.size(), layers));
    return pattern_of(is_moe, source, what, text);
}

}  // namespace trainsim::importers_detail
