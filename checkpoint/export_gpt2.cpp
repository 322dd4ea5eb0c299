#include "checkpoint/export_gpt2.hpp"

#include <vector>

#include "checkpoint/hf_gpt2.hpp"
#include "checkpoint/safetensors.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::checkpoint {

Status export_gpt2_safetensors(const LoadedCheckpoint& checkpoint, const compute::GPTConfig& model,
                               const std::filesystem::path& path) {
  if (Status same = check_model(checkpoint.manifest(), model); !same)
    return Error{"export of " + checkpoint.dir().string() + ": " + same.error().message};
  if (model.experts > 0)
    return Error{"export of " + checkpoint.dir().string() + ": a model with experts (model.experts " +
                 std::to_string(model.experts) + ") has no Hugging Face GPT-2 form; its checkpoint keeps the experts"};
  const compute::ParameterLayout layout(model);
  std::vector<std::vector<float>> values;  // owns what `tensors` points at
  std::vector<TensorToWrite> tensors;
  values.reserve(layout.views().size());
  for (const auto& view : layout.views()) {
    std::vector<float> v(static_cast<std::size_t>(view.numel()));
    if (Status read = checkpoint.read("param", view.offset, view.offset + view.numel(), v); !read)
      return Error{"export of " + checkpoint.dir().string() + ": " + read.error().message};
    values.push_back(to_hf(view, model, v));
    tensors.push_back({view.name, hf_shape(view, model), values.back()});
  }
  auto written = write_safetensors(path, tensors, {{"format", "pt"}});
  if (!written) return Error{"export: " + written.error().message};
  return Status::success();
}

}  // namespace troupe::checkpoint
