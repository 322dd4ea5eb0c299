#include "compute/model/tensor_shard.hpp"

#include <string>

namespace troupe::compute {
namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Rows [first, first + rows) of a (·, width) matrix (or a vector, width 1) as one run.
GlobalRun row_run(std::int64_t local, std::int64_t global, std::int64_t first, std::int64_t rows, std::int64_t width) {
  return {local, global + first * width, rows * width};
}

}  // namespace

Status check_tensor_shards(const GPTConfig& c, int shards) {
  auto bad = [&](const std::string& what, int n) {
    return Status(Error{"tensor.shards " + std::to_string(shards) + " does not divide " + what + " (" +
                        std::to_string(n) + ")"});
  };
  if (shards < 1) return Error{"tensor.shards must be at least 1, got " + std::to_string(shards)};
  if (c.n_head % shards != 0) return bad("model.n_head", c.n_head);
  if ((4 * c.n_embd) % shards != 0) return bad("the MLP width 4·model.n_embd", 4 * c.n_embd);
  if (c.padded_vocab_size % shards != 0) return bad("the padded vocabulary", c.padded_vocab_size);
  return Status::success();
}

ShardedView shard_view(const ParameterView& view, const GPTConfig& c, TensorShard shard) {
  const std::int64_t T = shard.count, s = shard.index, C = c.n_embd, g = view.offset;
  const std::string& name = view.name;
  ShardedView out;
  if (T == 1 || !(name == "wte.weight" || ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_attn.bias") ||
                  ends_with(name, "attn.c_proj.weight") || ends_with(name, "mlp.c_fc.weight") ||
                  ends_with(name, "mlp.c_fc.bias") || ends_with(name, "mlp.c_proj.weight"))) {
    out.shape = view.shape;
    out.replicated = T > 1;
    out.runs.push_back({0, g, view.numel()});
    return out;
  }
  const bool matrix = view.shape.size() == 2;
  const std::int64_t width = matrix ? view.shape[1] : 1;
  if (name == "wte.weight") {
    const std::int64_t rows = view.shape[0] / T;
    out.shape = {rows, width};
    out.runs.push_back(row_run(0, g, s * rows, rows, width));
  } else if (ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_attn.bias")) {
    const std::int64_t rows = C / T;  // of each of q, k and v
    out.shape = matrix ? Shape{3 * rows, width} : Shape{3 * rows};
    for (std::int64_t part = 0; part < 3; ++part)
      out.runs.push_back(row_run(part * rows * width, g, part * C + s * rows, rows, width));
  } else if (ends_with(name, "mlp.c_fc.weight") || ends_with(name, "mlp.c_fc.bias")) {
    const std::int64_t rows = view.shape[0] / T;
    out.shape = matrix ? Shape{rows, width} : Shape{rows};
    out.runs.push_back(row_run(0, g, s * rows, rows, width));
  } else {  // a row-parallel weight: each output row keeps its columns [s·w, (s+1)·w)
    const std::int64_t rows = view.shape[0], w = width / T;
    out.shape = {rows, w};
    for (std::int64_t r = 0; r < rows; ++r) out.runs.push_back({r * w, g + r * width + s * w, w});
  }
  return out;
}

}  // namespace troupe::compute
