// The what-if options of the CLI (tools/trainsim/scenario_options.hpp).
#include "scenario_options.hpp"

#include <fmt/format.h>

#include "trainsim/errors.hpp"

namespace po = boost::program_options;

namespace trainsim::cli {

void add_scenario_options(po::options_description& desc, ScenarioOptions& o, bool study) {
    desc.add_options()(
        "straggler", po::value(&o.stragglers)->composing(),
        "what-if: slow GPUs' compute, gpu=G,slowdown=F or fraction=X,slowdown=F (drawn from the "
        "seed); repeatable, one GPU once (docs/what-if.md)")(
        "jitter", po::value(&o.jitters)->composing(),
        "what-if: per-kernel random slowdown, lognormal,sigma=S (mean 1)")(
        "link", po::value(&o.links)->composing(),
        "what-if: a degraded link, NAME,bandwidth=F | NAME,latency=T | NAME,down; NAME is node<N>.nic<K>, "
        "node<N>.nvlink, gpu<G>.nvlink, leaf<L>.uplink or rail<K>; repeatable")(
        "seed", po::value(&o.seed), "what-if: the seed of the random draws (default 1)");
    if (study)
        desc.add_options()(
            "seeds", po::value(&o.seeds),
            "what-if: run the scenario over seeds seed .. seed+K-1 and print median, p90, p99");
}

Perturbations scenario_perturbations(const ScenarioOptions& o) {
    Perturbations p;
    for (const auto& s : o.stragglers) {
        p.stragglers.push_back(parse_straggler(s));
        // One GPU slowed by two options: their slowdowns would multiply unasked (refused, as --link).
        const Straggler& added = p.stragglers.back();
        for (std::size_t i = 0; i + 1 < p.stragglers.size() && added.gpu >= 0; ++i)
            if (p.stragglers[i].gpu == added.gpu)
                throw InputError(fmt::format("--straggler {}: GPU {} is also slowed by --straggler {}",
                                             clip_for_message(s), added.gpu,
                                             clip_for_message(p.stragglers[i].text)));
    }
    if (o.jitters.size() > 1)
        throw InputError(fmt::format("--jitter {}: --jitter is given twice", clip_for_message(o.jitters[1])));
    if (!o.jitters.empty()) p.jitter = parse_jitter(o.jitters.front());
    // One link however written: node03.nic1 is node3.nic1.
    const auto same_link = [](const LinkPerturbation& x, const LinkPerturbation& y) {
        const LinkName a = parse_link_name(x.name, x.text), b = parse_link_name(y.name, y.text);
        return a.kind == b.kind && a.a == b.a && a.b == b.b;
    };
    for (const auto& l : o.links) {
        p.links.push_back(parse_link(l));
        // Two degradations of one link: which one holds would depend on the order (refused, as --jitter).
        for (std::size_t i = 0; i + 1 < p.links.size(); ++i)
            if (same_link(p.links[i], p.links.back()))
                throw InputError(fmt::format("--link {}: link {} is also degraded by --link {}",
                                             clip_for_message(l), clip_for_message(p.links.back().name),
                                             clip_for_message(p.links[i].text)));
    }
    if (o.seeds < 1) throw InputError(fmt::format("--seeds {}: must be at least 1", o.seeds));
    if (o.seeds > 100000) throw InputError(fmt::format("--seeds {}: at most 100000", o.seeds));
    return p;
}

}  // namespace trainsim::cli
