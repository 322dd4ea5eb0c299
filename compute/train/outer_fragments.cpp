#include "compute/train/outer_fragments.hpp"

#include <algorithm>
#include <string>

#include "compute/check.hpp"

namespace troupe::compute {

std::vector<OuterFragment> outer_fragments(std::span<const ParameterUnit> units, int fragments, long every) {
  const int blocks = static_cast<int>(units.size()) - 2;  // less the embeddings and the tail
  return stage_fragments(units, 0, blocks, blocks, 0, fragments, every);
}

std::vector<OuterFragment> stage_fragments(std::span<const ParameterUnit> units, int first_layer, int last_layer,
                                           int layers, std::int64_t copy_elements, int fragments, long every) {
  TROUPE_CHECK(fragments >= 1 && fragments <= layers && every >= 1,
               "outer fragments: " + std::to_string(fragments) + " fragments of " + std::to_string(layers) +
                   " blocks, every " + std::to_string(every) + " steps");
  const bool front = first_layer == 0, tail = last_layer == layers;
  TROUPE_CHECK(0 <= first_layer && first_layer < last_layer && last_layer <= layers &&
                   units.size() == static_cast<std::size_t>(last_layer - first_layer + front + tail) &&
                   (copy_elements == 0 || (tail && !front && copy_elements < units.back().size())),
               "outer fragments: units that are not a stage's");
  // Fragment f takes blocks [starts[f], starts[f + 1]): as evenly as F allows, the first L mod F one more.
  std::vector<int> starts{0};
  for (int f = 0; f < fragments; ++f) starts.push_back(starts.back() + layers / fragments + (f < layers % fragments));
  const std::int64_t copy_begin = units.back().end - copy_elements;
  std::vector<OuterFragment> out;
  std::int64_t at = units.front().begin;
  for (int f = 0; f < fragments; ++f) {
    // The stage's blocks in fragment f, then the embeddings before the first fragment's and the
    // tail (less the copy) after the last's.
    const int first = std::max(starts[f], first_layer), last = std::min(starts[f + 1], last_layer);
    std::int64_t begin = at, end = at;
    if (first < last) {
      begin = units[static_cast<std::size_t>(first - first_layer + front)].begin;
      end = units[static_cast<std::size_t>(last - 1 - first_layer + front)].end;
    }
    if (f == 0 && front) begin = units.front().begin, end = std::max(end, units.front().end);
    if (f + 1 == fragments && tail) end = copy_begin;
    out.push_back({begin, end, f * (every / fragments), f});
    at = end;
  }
  // One fragment: the copy goes with it, the whole buffer one run.
  if (copy_elements > 0 && fragments == 1) out.back().end = units.back().end;
  if (copy_elements > 0 && fragments > 1) out.push_back({copy_begin, units.back().end, 0, 0});
  return out;
}

std::vector<OuterFragment> fragments_within(std::span<const OuterFragment> model, std::int64_t begin,
                                            std::int64_t end) {
  TROUPE_CHECK(!model.empty() && 0 <= begin && begin <= end && end <= model.back().end,
               "outer fragments: a run outside the buffer");
  std::int64_t next = model.front().begin;
  for (const OuterFragment& f : model) {
    TROUPE_CHECK(f.begin == next && f.end >= f.begin, "outer fragments: not covering the buffer in order");
    next = f.end;
  }
  std::vector<OuterFragment> out;
  for (const OuterFragment& f : model) {
    const std::int64_t first = std::clamp(f.begin, begin, end), last = std::clamp(f.end, begin, end);
    out.push_back({first - begin, last - begin, f.offset, f.fragment});
  }
  return out;
}

bool scheduled(const OuterFragment& fragment, long every, long steps_taken) {
  return steps_taken >= 1 && steps_taken >= fragment.offset && (steps_taken - fragment.offset) % every == 0;
}

}  // namespace troupe::compute
