#include "compute/model/stage_split.hpp"

#include <algorithm>
#include <limits>

namespace troupe::compute {

std::int64_t stage_parameter_count(const GPTConfig& config, int first_layer, int last_layer) {
  TROUPE_CHECK(0 <= first_layer && first_layer < last_layer && last_layer <= config.n_layer,
               "stage layers [" + std::to_string(first_layer) + ", " + std::to_string(last_layer) + ") of " +
                   std::to_string(config.n_layer));
  const std::int64_t C = config.n_embd;
  const std::int64_t per_layer = 12 * C * C + 13 * C;  // a dense block's twelve tensors (parameter_layout.cpp)
  const std::int64_t wte = std::int64_t{config.padded_vocab_size} * C, wpe = std::int64_t{config.block_size} * C;
  std::int64_t n =
      per_layer * (last_layer - first_layer) +
      static_cast<std::int64_t>(config.moe_block_extra_parameters()) * config.moe_layers_in(first_layer, last_layer);
  if (first_layer == 0) n += wte + wpe;
  if (last_layer == config.n_layer) n += 2 * C + (first_layer == 0 ? 0 : wte);
  return n;
}

Expected<std::vector<StageLayers>> split_layers(const GPTConfig& config, int stages) {
  if (Status valid = validate(config); !valid) return valid.error();
  const int L = config.n_layer;
  if (stages < 1) return Error{"pipeline stages must be at least 1, got " + std::to_string(stages)};
  if (stages > L)
    return Error{"cannot split " + std::to_string(L) + " layers into " + std::to_string(stages) +
                 " pipeline stages: every stage needs at least one layer"};

  auto cost = [&](int first, int last) { return stage_parameter_count(config, first, last); };
  // One stage is the whole model; the search below costs stages × layers², which a model of
  // millions of layers (refused by the memory check, which asks for this split) cannot wait for.
  if (stages == 1) return std::vector<StageLayers>{{0, L, cost(0, L)}};
  const auto P = static_cast<std::size_t>(stages), N = static_cast<std::size_t>(L);
  constexpr std::int64_t unreachable = std::numeric_limits<std::int64_t>::max();

  // Step 1: the smallest possible largest stage. worst[s][i] = min over splits of blocks [0, i)
  // into s stages of the largest stage.
  std::vector<std::vector<std::int64_t>> worst(P + 1, std::vector<std::int64_t>(N + 1, unreachable));
  worst[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= L; ++i)
      for (int j = s - 1; j < i; ++j) {
        const std::int64_t before = worst[static_cast<std::size_t>(s - 1)][static_cast<std::size_t>(j)];
        if (before == unreachable) continue;
        auto& w = worst[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)];
        w = std::min(w, std::max(before, cost(j, i)));
      }
  const std::int64_t bound = worst[P][N];

  // Step 2: among splits whose every stage is within that bound, the smallest sum of squared
  // stage sizes. Scanning j upwards with a strict < keeps the earliest boundary on ties, which
  // gives the later stage the extra layer.
  constexpr double none = std::numeric_limits<double>::infinity();
  std::vector<std::vector<double>> squares(P + 1, std::vector<double>(N + 1, none));
  std::vector<std::vector<int>> from(P + 1, std::vector<int>(N + 1, -1));
  squares[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= L; ++i)
      for (int j = s - 1; j < i; ++j) {
        const double before = squares[static_cast<std::size_t>(s - 1)][static_cast<std::size_t>(j)];
        const std::int64_t c = cost(j, i);
        if (before == none || c > bound) continue;
        const double total = before + static_cast<double>(c) * static_cast<double>(c);
        if (total < squares[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)]) {
          squares[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)] = total;
          from[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)] = j;
        }
      }

  std::vector<StageLayers> split(P);
  int last = L;
  for (int s = stages; s >= 1; --s) {
    const int first = from[static_cast<std::size_t>(s)][static_cast<std::size_t>(last)];
    TROUPE_CHECK(first >= 0, "no split within the bound it was computed from");
    split[static_cast<std::size_t>(s - 1)] = {first, last, cost(first, last)};
    last = first;
  }
  return split;
}

Expected<std::vector<StageLayers>> split_layers_interleaved(const GPTConfig& config, int stages, int virtual_stages) {
  if (Status valid = validate(config); !valid) return valid.error();
  if (stages < 1) return Error{"pipeline stages must be at least 1, got " + std::to_string(stages)};
  if (virtual_stages < 1)
    return Error{"virtual stages per pipeline stage must be at least 1, got " + std::to_string(virtual_stages)};
  const std::int64_t chunks = std::int64_t{stages} * virtual_stages;
  if (config.n_layer % chunks != 0)
    return Error{"interleaved pipeline: " + std::to_string(config.n_layer) + " layers do not divide into " +
                 std::to_string(stages) + " stages x " + std::to_string(virtual_stages) +
                 " virtual stages = " + std::to_string(chunks) + " chunks of equal size"};
  const int per_chunk = static_cast<int>(config.n_layer / chunks);
  std::vector<StageLayers> split;
  for (int k = 0; k < static_cast<int>(chunks); ++k) {
    const int first = k * per_chunk, last = first + per_chunk;
    split.push_back({first, last, stage_parameter_count(config, first, last)});
  }
  return split;
}

Expected<std::vector<StageLayers>> split_for_pipeline(const GPTConfig& config, int stages, int virtual_stages) {
  return virtual_stages > 1 ? split_layers_interleaved(config, stages, virtual_stages) : split_layers(config, stages);
}

}  // namespace troupe::compute
