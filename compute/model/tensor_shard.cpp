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

// How shard_view splits a view, by its name.
enum class Split { whole, vocabulary, qkv, column, row, expert_column, expert_row };

Split split_of(const std::string& name) {
  if (name == "wte.weight") return Split::vocabulary;
  if (ends_with(name, "attn.c_attn.weight") || ends_with(name, "attn.c_attn.bias")) return Split::qkv;
  if (ends_with(name, "mlp.experts.c_fc.weight") || ends_with(name, "mlp.experts.c_fc.bias"))
    return Split::expert_column;
  if (ends_with(name, "mlp.experts.c_proj.weight")) return Split::expert_row;
  // A dense block's MLP, or an MoE block's shared expert: both one MLP, split by its shape.
  if (ends_with(name, "mlp.c_fc.weight") || ends_with(name, "mlp.c_fc.bias") ||
      ends_with(name, "shared_expert.c_fc.weight") || ends_with(name, "shared_expert.c_fc.bias"))
    return Split::column;
  if (ends_with(name, "attn.c_proj.weight") || ends_with(name, "mlp.c_proj.weight") ||
      ends_with(name, "shared_expert.c_proj.weight"))
    return Split::row;
  return Split::whole;
}

// Each output row of a (rows, width) matrix keeps its columns [s·w, (s+1)·w), w = width / T: one
// run a row, appended from local offset `local`.
void add_row_parallel(ShardedView& out, std::int64_t local, std::int64_t global, std::int64_t rows, std::int64_t width,
                      std::int64_t T, std::int64_t s) {
  const std::int64_t w = width / T;
  for (std::int64_t r = 0; r < rows; ++r) out.runs.push_back({local + r * w, global + r * width + s * w, w});
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
  if (c.experts > 0 && c.expert_hidden() % shards != 0)
    return bad("an expert's width model.expert_width", static_cast<int>(c.expert_hidden()));
  if (c.padded_vocab_size % shards != 0) return bad("the padded vocabulary", c.padded_vocab_size);
  return Status::success();
}

ShardedView shard_view(const ParameterView& view, const GPTConfig& c, TensorShard shard) {
  const std::int64_t T = shard.count, s = shard.index, C = c.n_embd, g = view.offset;
  const Split split = T == 1 ? Split::whole : split_of(view.name);
  ShardedView out;
  if (split == Split::whole) {
    out.shape = view.shape;
    out.replicated = T > 1;
    out.runs.push_back({0, g, view.numel()});
    return out;
  }
  const bool matrix = view.shape.size() == 2;
  const std::int64_t width = matrix ? view.shape[1] : 1;
  switch (split) {
    case Split::vocabulary: {
      const std::int64_t rows = view.shape[0] / T;
      out.shape = {rows, width};
      out.runs.push_back(row_run(0, g, s * rows, rows, width));
      break;
    }
    case Split::qkv: {
      const std::int64_t rows = C / T;  // of each of q, k and v
      out.shape = matrix ? Shape{3 * rows, width} : Shape{3 * rows};
      for (std::int64_t part = 0; part < 3; ++part)
        out.runs.push_back(row_run(part * rows * width, g, part * C + s * rows, rows, width));
      break;
    }
    case Split::column: {
      const std::int64_t rows = view.shape[0] / T;
      out.shape = matrix ? Shape{rows, width} : Shape{rows};
      out.runs.push_back(row_run(0, g, s * rows, rows, width));
      break;
    }
    case Split::row:
      out.shape = {view.shape[0], width / T};
      add_row_parallel(out, 0, g, view.shape[0], width, T, s);
      break;
    case Split::expert_column: {  // (E, H, C) or (E, H): each expert's rows [s·H/T, (s+1)·H/T)
      const std::int64_t E = view.shape[0], H = view.shape[1], rows = H / T;
      const std::int64_t row_width = view.shape.size() == 3 ? view.shape[2] : 1;
      out.shape = view.shape.size() == 3 ? Shape{E, rows, row_width} : Shape{E, rows};
      for (std::int64_t e = 0; e < E; ++e)
        out.runs.push_back(row_run(e * rows * row_width, g + e * H * row_width, s * rows, rows, row_width));
      break;
    }
    case Split::expert_row: {  // (E, C, H): each expert's output rows keep their columns of its slice
      const std::int64_t E = view.shape[0], rows = view.shape[1], H = view.shape[2];
      out.shape = {E, rows, H / T};
      for (std::int64_t e = 0; e < E; ++e) add_row_parallel(out, e * rows * (H / T), g + e * rows * H, rows, H, T, s);
      break;
    }
    case Split::whole: break;
  }
  return out;
}

}  // namespace troupe::compute
