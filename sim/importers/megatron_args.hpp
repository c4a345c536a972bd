// A Megatron-LM command line as argparse reads it (private to sim/importers): `--flag value`, `--flag=value`
// and store_true flags; every value read through Args is marked used, the rest is reported as ignored.
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "import_common.hpp"

namespace trainsim::importers_detail {

class MegatronArgs {
  public:
    /// Splits `args` into flags and values. Flag names are normalised ("--nproc_per_node" ->
    /// "nproc-per-node"); a flag Megatron declares store_true takes no value, one it declares with a value
    /// takes the next word, an unknown one takes the words up to the next flag or *.py / *.sh script
    /// (argparse's nargs), and a word that is not a flag's value is kept as ignored. Later occurrences win
    /// (argparse). Throws InputError for a known flag without its value or a store_true flag given one.
    MegatronArgs(const std::vector<std::string>& args, std::string source);

    /// True when the store_true flag `name` (without "--") was given; marks it used.
    bool flag(const std::string& name);
    /// True when `name` was given (with or without a value); does not mark it used.
    bool given(const std::string& name) const;
    /// The value of `name`, marking it used; nullopt when absent.
    std::optional<std::string> text(const std::string& name);
    /// The integer value of `name` (in min .. max); nullopt when absent. Throws InputError
    /// "SOURCE: --NAME = "VALUE" is not an integer" / "must be at least MIN" / "must be at most MAX".
    std::optional<std::int64_t> integer(const std::string& name, std::int64_t min = 1,
                                        std::int64_t max = kMaxImportInteger);
    /// The number value of `name` (in min .. max); nullopt when absent. Throws InputError.
    std::optional<double> number(const std::string& name, double min = 0,
                                 double max = std::numeric_limits<double>::max());
    /// The value of `name`, one of `choices`; nullopt when absent. Throws InputError listing them.
    std::optional<std::string> choice(const std::string& name, const std::vector<std::string>& choices);

    /// What was not used: each unused flag as "--name", each stray word as itself, in command-line order.
    std::vector<std::string> unused() const;
    const std::string& source() const { return source_; }

  private:
    std::string source_;
    std::map<std::string, std::string> values_;  ///< flag -> its value ("" for store_true flags)
    std::vector<std::string> order_;             ///< flags and stray words in first-seen order
    std::set<std::string> stray_, used_;
};

/// NeMo 1.x Hydra overrides among `words` ("model.num_layers=96", "trainer.num_nodes=128",
/// "trainer.precision=bf16", "model.activation=fast-swiglu", "model.fp8=True"; keys of NeMo's
/// megatron_gpt_config.yaml, a leading + or ++ dropped) replaced by the Megatron-LM flags they configure
/// (nemo_args.cpp lists them); other words, and NeMo keys without a flag, are kept as they are.
std::vector<std::string> translate_nemo_overrides(const std::vector<std::string>& words);

}  // namespace trainsim::importers_detail
