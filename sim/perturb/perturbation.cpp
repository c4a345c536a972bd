// Parsing of the what-if options and the counter-based random numbers (include/trainsim/perturbation.hpp).
#include "trainsim/perturbation.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <numbers>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <boost/math/special_functions/erf.hpp>

#include "trainsim/errors.hpp"

namespace trainsim {

std::uint64_t splitmix64(std::uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

namespace {
/// The top 53 bits as a double in (0, 1): never 0 (log is taken).
double to_unit(std::uint64_t h) {
    return (static_cast<double>(h >> 11) + 0.5) * 0x1.0p-53;
}
}  // namespace

std::uint64_t counter_prefix(std::uint64_t seed, std::uint64_t stream, std::uint64_t a) {
    return splitmix64(splitmix64(splitmix64(seed) ^ stream) ^ a);
}

double counter_uniform(std::uint64_t seed, std::uint64_t stream, std::uint64_t a, std::uint64_t b) {
    return to_unit(splitmix64(counter_prefix(seed, stream, a) ^ b));
}

double counter_normal(std::uint64_t seed, std::uint64_t stream, std::uint64_t a, std::uint64_t b) {
    return counter_normal_at(counter_prefix(seed, stream, a), b);
}

double counter_normal_at(std::uint64_t prefix, std::uint64_t b) {
    const std::uint64_t h = splitmix64(prefix ^ b);
    const double u1 = to_unit(h);
    const double u2 = to_unit(splitmix64(h));
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

double normal_quantile(double u) {
    if (!(u > 0 && u < 1)) throw InternalError(fmt::format("normal_quantile({}): u must be in (0, 1)", u));
    return -std::numbers::sqrt2 * boost::math::erfc_inv(2 * u);
}

LognormalJitter::LognormalJitter(double sigma) : sigma_(sigma) {
    if (!(sigma > 0)) throw InternalError(fmt::format("LognormalJitter: sigma = {} must be > 0", sigma));
    table_.reserve(kCells - 2 * kExactCells + 1);
    for (std::uint64_t j = kExactCells; j <= kCells - kExactCells; ++j)
        table_.push_back(
            std::exp(sigma * normal_quantile(static_cast<double>(j) / static_cast<double>(kCells)) -
                     0.5 * sigma * sigma));
}

double LognormalJitter::exact(std::uint64_t h) const {
    // The top 52 bits and a half: in [2^-53, 1 - 2^-53], never 0 or 1 (to_unit's top 53 bits plus a half
    // round to 1 for the largest hashes), and floor(u·4096) is the cell factor() reads.
    const double u = (static_cast<double>(h >> 12) + 0.5) * 0x1.0p-52;
    return std::exp(sigma_ * normal_quantile(u) - 0.5 * sigma_ * sigma_);
}

namespace {

/// "a,b=c,d" -> {("a",""), ("b","c"), ("d","")}. Throws InputError naming `option` and the key when a key
/// is given twice ("gpu=1,slowdown=2,gpu=3": which GPU was meant is not for us to guess).
std::vector<std::pair<std::string, std::string>> split_fields(const std::string& option,
                                                              const std::string& value) {
    std::vector<std::pair<std::string, std::string>> out;
    std::set<std::string> seen;
    std::size_t pos = 0;
    while (true) {
        const std::size_t comma = value.find(',', pos);
        const std::string field =
            value.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
        const std::size_t eq = field.find('=');
        if (eq == std::string::npos)
            out.emplace_back(field, "");
        else
            out.emplace_back(field.substr(0, eq), field.substr(eq + 1));
        if (!seen.insert(out.back().first).second)
            throw InputError(fmt::format("{} {}: field \"{}\" is given twice", option,
                                         clip_for_message(value), clip_for_message(out.back().first)));
        if (comma == std::string::npos) break;
        pos = comma + 1;
    }
    return out;
}

double number(const std::string& option, const std::string& value, const std::string& key,
              const std::string& text) {
    double v = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size() || text.empty() || !std::isfinite(v))
        throw InputError(fmt::format("{} {}: {} = \"{}\" is not a number", option, clip_for_message(value),
                                     clip_for_message(key), clip_for_message(text)));
    return v;
}

long long integer(const std::string& option, const std::string& value, const std::string& key,
                  const std::string& text) {
    long long v = 0;
    const auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec != std::errc{} || p != text.data() + text.size() || text.empty() || v < 0)
        throw InputError(fmt::format("{} {}: {} = \"{}\" is not a non-negative integer", option,
                                     clip_for_message(value), clip_for_message(key), clip_for_message(text)));
    return v;
}

[[noreturn]] void unknown_key(const std::string& option, const std::string& value, const std::string& key,
                              const char* allowed) {
    throw InputError(fmt::format("{} {}: unknown field \"{}\" (expected {})", option, clip_for_message(value),
                                 clip_for_message(key), allowed));
}

}  // namespace

Straggler parse_straggler(const std::string& value) {
    const std::string opt = "--straggler";
    const std::string shown = clip_for_message(value);  // in messages: a value of 100,000 characters is cut
    Straggler s;
    s.text = value;
    bool have_gpu = false, have_fraction = false, have_slowdown = false;
    for (const auto& [k, v] : split_fields(opt, value)) {
        if (k == "gpu") {
            const long long g = integer(opt, value, k, v);
            if (g > 1'000'000'000)
                throw InputError(fmt::format("{} {}: gpu = {} is out of range", opt, shown, g));
            s.gpu = static_cast<int>(g);
            have_gpu = true;
        } else if (k == "fraction") {
            s.fraction = number(opt, value, k, v);
            if (!(s.fraction > 0 && s.fraction <= 1))
                throw InputError(
                    fmt::format("{} {}: fraction = {} must be in (0, 1]", opt, shown, clip_for_message(v)));
            have_fraction = true;
        } else if (k == "slowdown") {
            s.slowdown = number(opt, value, k, v);
            if (!(s.slowdown >= 1 && s.slowdown <= 1000))
                throw InputError(fmt::format("{} {}: slowdown = {} must be in [1, 1000]", opt, shown,
                                             clip_for_message(v)));
            have_slowdown = true;
        } else {
            unknown_key(opt, value, k, "gpu=G or fraction=X, and slowdown=F");
        }
    }
    if (have_gpu == have_fraction)
        throw InputError(fmt::format("{} {}: give exactly one of gpu=G and fraction=X", opt, shown));
    if (!have_slowdown) throw InputError(fmt::format("{} {}: slowdown=F is missing", opt, shown));
    return s;
}

Jitter parse_jitter(const std::string& value) {
    const std::string opt = "--jitter";
    const std::string shown = clip_for_message(value);
    Jitter j;
    j.text = value;
    const auto fields = split_fields(opt, value);
    if (fields.front().first != "lognormal" || !fields.front().second.empty())
        throw InputError(fmt::format("{} {}: distribution \"{}\" is not one of lognormal", opt, shown,
                                     clip_for_message(fields.front().first)));
    bool have_sigma = false;
    for (std::size_t i = 1; i < fields.size(); ++i) {
        const auto& [k, v] = fields[i];
        if (k != "sigma") unknown_key(opt, value, k, "sigma=S");
        j.sigma = number(opt, value, k, v);
        if (!(j.sigma > 0 && j.sigma <= 2))
            throw InputError(
                fmt::format("{} {}: sigma = {} must be in (0, 2]", opt, shown, clip_for_message(v)));
        have_sigma = true;
    }
    if (!have_sigma) throw InputError(fmt::format("{} {}: sigma=S is missing", opt, shown));
    return j;
}

LinkName parse_link_name(const std::string& name, const std::string& option) {
    auto bad = [&]() -> InputError {
        return InputError(fmt::format(
            "{}: unknown link name \"{}\" (expected node<N>.nic<K>, node<N>.nvlink, gpu<G>.nvlink, "
            "leaf<L>.uplink or rail<K>)",
            option, clip_for_message(name)));
    };
    // prefix<digits>[.suffix[<digits>]]
    auto digits = [&](std::size_t& pos, int& out) {
        const std::size_t start = pos;
        while (pos < name.size() && name[pos] >= '0' && name[pos] <= '9')
            ++pos;
        if (pos == start || pos - start > 9) throw bad();
        out = std::stoi(name.substr(start, pos - start));
    };
    auto eat = [&](std::size_t& pos, const std::string& word) {
        if (name.compare(pos, word.size(), word) != 0) return false;
        pos += word.size();
        return true;
    };
    LinkName n;
    std::size_t pos = 0;
    if (eat(pos, "node")) {
        digits(pos, n.a);
        if (eat(pos, ".nic")) {
            n.kind = LinkName::Kind::node_nic;
            digits(pos, n.b);
        } else if (eat(pos, ".nvlink")) {
            n.kind = LinkName::Kind::node_nvlink;
        } else {
            throw bad();
        }
    } else if (eat(pos, "gpu")) {
        digits(pos, n.a);
        if (!eat(pos, ".nvlink")) throw bad();
        n.kind = LinkName::Kind::gpu_nvlink;
    } else if (eat(pos, "leaf")) {
        digits(pos, n.a);
        if (!eat(pos, ".uplink")) throw bad();
        n.kind = LinkName::Kind::leaf_uplink;
    } else if (eat(pos, "rail")) {
        digits(pos, n.a);
        n.kind = LinkName::Kind::rail;
    } else {
        throw bad();
    }
    if (pos != name.size()) throw bad();
    return n;
}

namespace {
/// --link bandwidth=F: the smallest factor of the link's rate (1/1000; `down` for none).
constexpr double kMinLinkBandwidthFactor = 1e-3;
/// --link latency=T: the largest added latency, as a topology latency's range (limits.hpp).
constexpr double kMaxLinkExtraLatencyS = 1.0;
}  // namespace

LinkPerturbation parse_link(const std::string& value) {
    const std::string opt = "--link";
    LinkPerturbation p;
    p.text = value;
    const auto fields = split_fields(opt, value);
    p.name = fields.front().first;
    const std::string option = fmt::format("{} {}", opt, clip_for_message(value));
    if (!fields.front().second.empty())
        throw InputError(
            fmt::format("{}: the link name comes first (e.g. node3.nic2,bandwidth=0.5)", option));
    const LinkName n = parse_link_name(p.name, option);
    if (fields.size() == 1) throw InputError(fmt::format("{}: give bandwidth=F, latency=T or down", option));
    for (std::size_t i = 1; i < fields.size(); ++i) {
        const auto& [k, v] = fields[i];
        if (k == "bandwidth") {
            p.bandwidth_factor = number(opt, value, k, v);
            // At least 1/1000 of the link's rate: below it a flow's time passes the simulated range (a factor
            // of 1e-300 overflowed it); such a link is down.
            if (!(p.bandwidth_factor >= kMinLinkBandwidthFactor && p.bandwidth_factor <= 1))
                throw InputError(
                    fmt::format("{}: bandwidth = {} must be in [{}, 1] (use down for a link that "
                                "carries nothing)",
                                option, clip_for_message(v), kMinLinkBandwidthFactor));
        } else if (k == "latency") {
            const double s = parse_quantity(v, Dimension::time, option + ": latency", true);
            // As the topology's latencies (0 .. 1 s, limits.hpp): 1e300 s passed the simulated range.
            if (!(s >= 0 && s <= kMaxLinkExtraLatencyS))
                throw InputError(fmt::format("{}: latency = {} must be between 0 and {} s", option,
                                             clip_for_message(v), kMaxLinkExtraLatencyS));
            p.extra_latency = Time::seconds(s);
        } else if (k == "down" && v.empty()) {
            if (n.kind != LinkName::Kind::node_nic && n.kind != LinkName::Kind::rail)
                throw InputError(fmt::format("{}: down is modelled for NICs and rails only", option));
            p.down = true;
        } else {
            unknown_key(opt, value, k, "bandwidth=F, latency=T or down");
        }
    }
    if (p.down && (p.bandwidth_factor != 1 || p.extra_latency > Time{}))
        throw InputError(
            fmt::format("{}: down carries nothing; bandwidth and latency do not go with it", option));
    return p;
}

std::vector<double> compute_factors(const std::vector<Straggler>& stragglers, int gpus, std::uint64_t seed) {
    std::vector<double> f(static_cast<std::size_t>(gpus), 1.0);
    // One GPU slowed once: the named GPUs first, then each fraction drawn among the GPUs no other --straggler
    // slows (`gpu=0,slowdown=2 --straggler fraction=1,slowdown=3` slowed GPU 0 by 6).
    std::vector<char> slowed(static_cast<std::size_t>(gpus), 0);
    for (const Straggler& s : stragglers) {
        if (s.gpu < 0) continue;
        if (s.gpu >= gpus)
            throw InputError(fmt::format("--straggler {}: gpu = {} is not one of the cluster's {} GPUs",
                                         clip_for_message(s.text), s.gpu, gpus));
        f[static_cast<std::size_t>(s.gpu)] *= s.slowdown;
        slowed[static_cast<std::size_t>(s.gpu)] = 1;
    }
    for (std::size_t i = 0; i < stragglers.size(); ++i) {
        const Straggler& s = stragglers[i];
        if (s.gpu >= 0) continue;
        const auto k = static_cast<std::size_t>(
            std::clamp<long long>(std::llround(s.fraction * gpus), 1, static_cast<long long>(gpus)));
        std::vector<std::pair<double, int>> order;
        order.reserve(static_cast<std::size_t>(gpus));
        for (int g = 0; g < gpus; ++g)
            if (!slowed[static_cast<std::size_t>(g)])
                order.emplace_back(counter_uniform(seed, kStragglerStream, static_cast<std::uint64_t>(g), i),
                                   g);
        if (k > order.size())
            throw InputError(
                fmt::format("--straggler {}: {} GPUs to slow, but {} of the cluster's {} are slowed by the "
                            "other --straggler options (one GPU is slowed once)",
                            clip_for_message(s.text), k, gpus - static_cast<int>(order.size()), gpus));
        std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end());
        for (std::size_t j = 0; j < k; ++j) {
            f[static_cast<std::size_t>(order[j].second)] *= s.slowdown;
            slowed[static_cast<std::size_t>(order[j].second)] = 1;
        }
    }
    return f;
}

}  // namespace trainsim
