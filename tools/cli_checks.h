#pragma once
// The CLI11 value checks the subcommands share, with plain range texts (CLI11's own ones print
// 300-digit bounds).

#include <CLI/CLI.hpp>

#include <limits>

#include <tapegrad/nn/config_json.h>

namespace tg {

/// An integer >= lo.
CLI::Validator int_at_least(long long lo);
/// A finite number >= lo, and below hi when hi is finite (a half-open range [lo, hi)).
CLI::Validator real_in(double lo, double hi = std::numeric_limits<double>::infinity());
/// A finite number > 0.
CLI::Validator positive_real();
/// One of `names`.
CLI::IsMember member_of(nn::EnumNames names);

}  // namespace tg
