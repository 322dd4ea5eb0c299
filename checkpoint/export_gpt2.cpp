#include "checkpoint/export_gpt2.hpp"

#include <string>
#include <vector>

#include "checkpoint/hf_gpt2.hpp"
#include "checkpoint/safetensors.hpp"

namespace troupe::checkpoint {

std::vector<compute::ParameterView> export_views(const compute::GPTConfig& model) {
  const compute::ParameterLayout layout(model);
  std::vector<compute::ParameterView> views;
  const std::string stacked = ".mlp.experts.";
  for (const compute::ParameterView& view : layout.views()) {
    const std::size_t at = view.name.find(stacked);
    if (at == std::string::npos) {
      views.push_back(view);
      continue;
    }
    // (E, rest…) → E tensors of (rest…), expert e's at e · its size.
    compute::ParameterView one = view;
    one.shape.erase(one.shape.begin());
    for (int e = 0; e < model.experts; ++e) {
      one.name =
          view.name.substr(0, at + stacked.size()) + std::to_string(e) + "." + view.name.substr(at + stacked.size());
      one.offset = view.offset + e * one.numel();
      views.push_back(one);
    }
  }
  return views;
}

Status export_gpt2_safetensors(const LoadedCheckpoint& checkpoint, const compute::GPTConfig& model,
                               const std::filesystem::path& path) {
  if (Status same = check_model(checkpoint.manifest(), model); !same)
    return Error{"export of " + checkpoint.dir().string() + ": " + same.error().message};
  const std::vector<compute::ParameterView> views = export_views(model);
  std::vector<std::vector<float>> values;  // owns what `tensors` points at
  std::vector<TensorToWrite> tensors;
  values.reserve(views.size());
  for (const auto& view : views) {
    std::vector<float> v(static_cast<std::size_t>(view.numel()));
    if (Status read = checkpoint.read("param", view.offset, view.offset + view.numel(), v); !read)
      return Error{"export of " + checkpoint.dir().string() + ": " + read.error().message};
    values.push_back(to_hf(view, model, v));
    tensors.push_back({view.name, hf_shape(view, model), values.back()});
  }
  Metadata metadata{{"format", "pt"}};
  if (model.experts > 0)
    metadata.insert({{"experts", std::to_string(model.experts)},
                     {"top_k", std::to_string(model.top_k)},
                     {"moe_every", std::to_string(model.moe_every)},
                     {"shared_experts", std::to_string(model.shared_experts)},
                     {"expert_width", std::to_string(model.expert_hidden())}});
  auto written = write_safetensors(path, tensors, metadata);
  if (!written) return Error{"export: " + written.error().message};
  return Status::success();
}

}  // namespace troupe::checkpoint
