// Megatron-Core's pipeline layout strings (--pipeline-model-parallel-layout): the parser and the per-stage
// layer counts (include/trainsim/layout.hpp, parse_pipeline_layout).
#include <cctype>
#include <string>

#include <fmt/format.h>

#include "trainsim/errors.hpp"
#include "trainsim/layout.hpp"
#include "trainsim/limits.hpp"

namespace trainsim {

namespace {

/// The longest expansion accepted: every layer of the largest model once, with its separators and the
/// embedding, loss and MTP marks, is far below it.
constexpr std::size_t kMaxExpandedLayout = 16 * static_cast<std::size_t>(limits::kMaxLayers);

[[noreturn]] void fail(const std::string& layout, const std::string& why) {
    throw InputError(fmt::format("layout.pipeline_layout = \"{}\": {}", clip_for_message(layout), why));
}

/// Reads the repeat count after a '*' at text[i] (i on the '*'); advances i past the digits.
std::size_t repeat_count(const std::string& layout, const std::string& text, std::size_t& i) {
    std::size_t j = i + 1, n = 0;
    while (j < text.size() && std::isdigit(static_cast<unsigned char>(text[j])) != 0) {
        n = n * 10 + static_cast<std::size_t>(text[j] - '0');
        if (n > static_cast<std::size_t>(limits::kMaxLayers))
            fail(layout, fmt::format("a repeat count is above the limit of {} (trainsim/limits.hpp)",
                                     limits::kMaxLayers));
        ++j;
    }
    if (j == i + 1) fail(layout, "'*' must be followed by a repeat count");
    i = j;
    return n;
}

void append_repeated(const std::string& layout, std::string& out, const std::string& what, std::size_t n) {
    if (what.size() * n + out.size() > kMaxExpandedLayout)
        fail(layout, fmt::format("expands to more than {} characters", kMaxExpandedLayout));
    for (std::size_t k = 0; k < n; ++k)
        out += what;
}

/// "(ab|)*2" -> "ab|ab|" (Megatron: re.sub(r'\(([^)]+)\)\*(\d+)', ...), groups do not nest).
std::string expand_groups(const std::string& layout, const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        if (text[i] == ')') fail(layout, "')' without its '('");
        if (text[i] != '(') {
            out += text[i++];
            continue;
        }
        const std::size_t close = text.find_first_of("()", i + 1);
        if (close == std::string::npos || text[close] == '(')
            fail(layout, "parentheses must close and cannot nest");
        if (close == i + 1) fail(layout, "an empty group \"()\"");
        std::size_t at = close + 1;
        if (at >= text.size() || text[at] != '*') fail(layout, "a group \"(...)\" must be followed by *n");
        const std::size_t n = repeat_count(layout, text, at);
        append_repeated(layout, out, text.substr(i + 1, close - i - 1), n);
        i = at;
    }
    return out;
}

/// "t*3" -> "ttt" (Megatron: re.sub(r'(.)\*(\d+)', ...)).
std::string expand_repeats(const std::string& layout, const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i < text.size();) {
        if (text[i] == '*') fail(layout, "'*' must follow a layer character or a group");
        if (i + 1 < text.size() && text[i + 1] == '*') {
            std::size_t at = i + 1;
            const std::size_t n = repeat_count(layout, text, at);
            append_repeated(layout, out, std::string(1, text[i]), n);
            i = at;
            continue;
        }
        out += text[i++];
    }
    return out;
}

}  // namespace

std::vector<VirtualStageLayout> parse_pipeline_layout(const std::string& layout) {
    // Unexpanded characters are bounded too: 60 M '|' in a workload file made 60 M stages (17 s, 4 GB).
    if (layout.size() > kMaxExpandedLayout)
        fail(layout, fmt::format("is longer than {} characters", kMaxExpandedLayout));
    std::string text;
    for (char c : layout)
        if (c != ',') text += c;
    if (text.empty()) fail(layout, "is empty");
    text = expand_repeats(layout, expand_groups(layout, text));
    std::vector<VirtualStageLayout> stages(1);
    for (char c : text) {
        auto& st = stages.back();
        switch (c) {
            case '|':
                stages.emplace_back();
                continue;
            case 'E':
                st.embedding = true;
                break;
            case 'L':
                st.loss = true;
                break;
            case 't':
                ++st.decoder_layers;
                break;
            case 'm':
                ++st.mtp_layers;
                break;
            default:
                fail(layout, fmt::format("'{}' is not a layer (E embedding, t transformer layer, m MTP "
                                         "layer, L loss; | between stages)",
                                         c));
        }
        st.layers += c;
    }
    return stages;
}

}  // namespace trainsim
