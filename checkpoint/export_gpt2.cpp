#include "checkpoint/export_gpt2.hpp"

#include <vector>

#include "checkpoint/safetensors.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::checkpoint {
namespace {

// HF's GPT-2 keeps these as Conv1D weights, (in, out).
bool is_conv1d_weight(const std::string& name) {
  for (const char* suffix : {".attn.c_attn.weight", ".attn.c_proj.weight", ".mlp.c_fc.weight", ".mlp.c_proj.weight"})
    if (name.ends_with(suffix)) return true;
  return false;
}

std::vector<float> transposed(const std::vector<float>& values, std::int64_t rows, std::int64_t cols) {
  std::vector<float> out(values.size());
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c) out[c * rows + r] = values[r * cols + c];
  return out;
}

}  // namespace

Status export_gpt2_safetensors(const LoadedCheckpoint& checkpoint, const compute::GPTConfig& model,
                               const std::filesystem::path& path) {
  if (Status same = check_model(checkpoint.manifest(), model); !same)
    return Error{"export of " + checkpoint.dir().string() + ": " + same.error().message};
  const compute::ParameterLayout layout(model);
  std::vector<std::vector<float>> values;  // owns what `tensors` points at
  std::vector<TensorToWrite> tensors;
  values.reserve(layout.views().size());
  for (const auto& view : layout.views()) {
    std::vector<float> v(static_cast<std::size_t>(view.numel()));
    if (Status read = checkpoint.read("param", view.offset, view.offset + view.numel(), v); !read)
      return Error{"export of " + checkpoint.dir().string() + ": " + read.error().message};
    compute::Shape shape = view.shape;
    if (view.name == "wte.weight") {
      shape[0] = model.vocab_size;
      v.resize(static_cast<std::size_t>(model.vocab_size * model.n_embd));
    } else if (is_conv1d_weight(view.name)) {
      v = transposed(v, shape[0], shape[1]);
      std::swap(shape[0], shape[1]);
    }
    values.push_back(std::move(v));
    tensors.push_back({view.name, shape, values.back()});
  }
  auto written = write_safetensors(path, tensors, {{"format", "pt"}});
  if (!written) return Error{"export: " + written.error().message};
  return Status::success();
}

}  // namespace troupe::checkpoint
