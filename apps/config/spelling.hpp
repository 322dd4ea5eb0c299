#pragma once
// "Did you mean ...?" for misspelt config keys, TOML sections and command-line options, so a typo
// is answered with the likely intended name instead of only a rejection.

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace troupe::apps {

// The candidate the user most likely meant by word, or nullopt when none is close:
//   1. a candidate whose last dotted part equals word's ("model.steps" or "--steps" → "train.steps"),
//   2. else the nearest by edit distance (a swap of neighbours counts as one edit), if within
//      1 edit for words up to 4 characters, 2 up to 12, 3 beyond.
// Leading dashes are ignored when comparing last parts, so option names work as well as keys.
std::optional<std::string> closest_match(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace troupe::apps
