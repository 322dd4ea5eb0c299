#include "compute/train/outer_fragments.hpp"

#include <algorithm>
#include <string>

#include "compute/check.hpp"

namespace troupe::compute {

std::vector<OuterFragment> outer_fragments(std::span<const ParameterUnit> units, int fragments, long every) {
  const int blocks = static_cast<int>(units.size()) - 2;  // less the embeddings and the tail
  TROUPE_CHECK(fragments >= 1 && fragments <= blocks && every >= 1,
               "outer fragments: " + std::to_string(fragments) + " fragments of " + std::to_string(blocks) +
                   " blocks, every " + std::to_string(every) + " steps");
  std::vector<OuterFragment> out;
  int next_block = 0;
  for (int f = 0; f < fragments; ++f) {
    const int count = blocks / fragments + (f < blocks % fragments ? 1 : 0);
    // Unit 1 + b is block b; unit 0 (the embeddings) opens the first fragment, the tail closes the last.
    const std::size_t first_unit = f == 0 ? 0 : static_cast<std::size_t>(1 + next_block);
    next_block += count;
    const std::size_t last_unit = f + 1 == fragments ? units.size() - 1 : static_cast<std::size_t>(next_block);
    out.push_back({units[first_unit].begin, units[last_unit].end, f * (every / fragments)});
  }
  return out;
}

std::vector<OuterFragment> fragments_within(std::span<const OuterFragment> model, std::int64_t begin,
                                            std::int64_t end) {
  TROUPE_CHECK(!model.empty() && 0 <= begin && begin <= end && end <= model.back().end,
               "outer fragments: a run outside the model's buffer");
  std::vector<OuterFragment> out;
  for (const OuterFragment& f : model) {
    const std::int64_t first = std::clamp(f.begin, begin, end), last = std::clamp(f.end, begin, end);
    out.push_back({first - begin, last - begin, f.offset});
  }
  return out;
}

bool scheduled(const OuterFragment& fragment, long every, long steps_taken) {
  return steps_taken >= 1 && steps_taken >= fragment.offset && (steps_taken - fragment.offset) % every == 0;
}

}  // namespace troupe::compute
