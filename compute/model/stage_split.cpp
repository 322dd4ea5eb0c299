#include "compute/model/stage_split.hpp"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>

#include "compute/model/flops.hpp"

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

namespace {

Status check_stage_count(const GPTConfig& config, int stages) {
  if (stages < 1) return Error{"pipeline stages must be at least 1, got " + std::to_string(stages)};
  if (stages > config.n_layer)
    return Error{"cannot split " + std::to_string(config.n_layer) + " layers into " + std::to_string(stages) +
                 " pipeline stages: every stage needs at least one layer"};
  return {};
}

// The first layer of each of `stages` contiguous runs over [0, L) (and L last) that makes the
// largest cost(stage, first, last) the smallest it can be; among those, the smallest sum of
// squared costs, so the other stages are as even as possible too; remaining ties give the later
// stages the extra layers.
std::vector<int> minimax_boundaries(int stages, int L, const std::function<double(int, int, int)>& cost) {
  const auto P = static_cast<std::size_t>(stages), N = static_cast<std::size_t>(L);
  constexpr double none = std::numeric_limits<double>::infinity();

  // Step 1: the smallest possible largest stage. worst[s][i] = min over splits of blocks [0, i)
  // into s stages of the largest stage.
  std::vector<std::vector<double>> worst(P + 1, std::vector<double>(N + 1, none));
  worst[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= L; ++i)
      for (int j = s - 1; j < i; ++j) {
        const double before = worst[static_cast<std::size_t>(s - 1)][static_cast<std::size_t>(j)];
        if (before == none) continue;
        auto& w = worst[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)];
        w = std::min(w, std::max(before, cost(s - 1, j, i)));
      }
  const double bound = worst[P][N];

  // Step 2: among splits whose every stage is within that bound, the smallest sum of squared
  // stage costs. Scanning j upwards with a strict < keeps the earliest boundary on ties, which
  // gives the later stage the extra layer.
  std::vector<std::vector<double>> squares(P + 1, std::vector<double>(N + 1, none));
  std::vector<std::vector<int>> from(P + 1, std::vector<int>(N + 1, -1));
  squares[0][0] = 0;
  for (int s = 1; s <= stages; ++s)
    for (int i = s; i <= L; ++i)
      for (int j = s - 1; j < i; ++j) {
        const double before = squares[static_cast<std::size_t>(s - 1)][static_cast<std::size_t>(j)];
        const double c = cost(s - 1, j, i);
        if (before == none || c > bound) continue;
        const double total = before + c * c;
        if (total < squares[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)]) {
          squares[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)] = total;
          from[static_cast<std::size_t>(s)][static_cast<std::size_t>(i)] = j;
        }
      }

  std::vector<int> boundaries(P + 1, L);
  for (int s = stages; s >= 1; --s) {
    const int first = from[static_cast<std::size_t>(s)][static_cast<std::size_t>(boundaries[static_cast<std::size_t>(s)])];
    TROUPE_CHECK(first >= 0, "no split within the bound it was computed from");
    boundaries[static_cast<std::size_t>(s - 1)] = first;
  }
  return boundaries;
}

std::vector<StageLayers> stages_between(const GPTConfig& config, const std::vector<int>& boundaries) {
  std::vector<StageLayers> split;
  for (std::size_t s = 0; s + 1 < boundaries.size(); ++s)
    split.push_back({boundaries[s], boundaries[s + 1], stage_parameter_count(config, boundaries[s], boundaries[s + 1])});
  return split;
}

}  // namespace

Expected<std::vector<StageLayers>> split_layers(const GPTConfig& config, int stages) {
  if (Status valid = validate(config); !valid) return valid.error();
  if (Status count = check_stage_count(config, stages); !count) return count.error();
  const int L = config.n_layer;
  // One stage is the whole model; the search below costs stages × layers², which a model of
  // millions of layers (refused by the memory check, which asks for this split) cannot wait for.
  if (stages == 1) return stages_between(config, {0, L});
  return stages_between(config, minimax_boundaries(stages, L, [&](int, int first, int last) {
                          return static_cast<double>(stage_parameter_count(config, first, last));
                        }));
}

double stage_compute_per_token(const GPTConfig& config, int seq_len, int first_layer, int last_layer) {
  const ModelFlops flops = model_flops(config, seq_len);
  const double moe_block = config.moe_layers() > 0 ? flops.moe_extra / config.moe_layers() : 0.0;
  return (last_layer - first_layer) * flops.block() + config.moe_layers_in(first_layer, last_layer) * moe_block +
         (last_layer == config.n_layer ? flops.head : 0.0);
}

Expected<std::vector<StageLayers>> split_layers_by_speed(const GPTConfig& config, int seq_len,
                                                         const std::vector<double>& speeds) {
  if (Status valid = validate(config); !valid) return valid.error();
  const int stages = static_cast<int>(speeds.size());
  if (Status count = check_stage_count(config, stages); !count) return count.error();
  for (std::size_t s = 0; s < speeds.size(); ++s)
    if (!(speeds[s] > 0 && std::isfinite(speeds[s])))
      return Error{"stage " + std::to_string(s) + "'s speed must be a positive number, got " + std::to_string(speeds[s])};
  return stages_between(config, minimax_boundaries(stages, config.n_layer, [&](int s, int first, int last) {
                          return stage_compute_per_token(config, seq_len, first, last) /
                                 speeds[static_cast<std::size_t>(s)];
                        }));
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

Expected<std::vector<StageLayers>> split_for_pipeline(const GPTConfig& config, int stages, int virtual_stages,
                                                      const std::vector<double>& speeds, int seq_len) {
  if (speeds.empty())
    return virtual_stages > 1 ? split_layers_interleaved(config, stages, virtual_stages) : split_layers(config, stages);
  if (virtual_stages > 1)
    return Error{"a split by speed places one chunk a stage; it does not apply to " + std::to_string(virtual_stages) +
                 " virtual stages"};
  if (static_cast<int>(speeds.size()) != stages)
    return Error{std::to_string(speeds.size()) + " stage speeds for " + std::to_string(stages) + " stages"};
  return split_layers_by_speed(config, seq_len, speeds);
}

}  // namespace troupe::compute
