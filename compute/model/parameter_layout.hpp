#pragma once
// Where every GPT parameter lives in the one flat buffer (as llm.c keeps them). Layers are laid
// out one after another, each layer's tensors together, so a pipeline stage's parameters are
// one contiguous slice; a data-parallel bucket or a ZeRO shard is any slice. Gradients use the
// same layout in a second buffer. Names follow Hugging Face GPT-2 without the "transformer."
// prefix; weights are stored (out, in) as PyTorch's nn.Linear does. A mixture-of-experts block
// (GPTConfig::is_moe_layer) holds, after ln_2, mlp.router.weight (E, C), the experts stacked as
// mlp.experts.c_fc.weight (E, 4C, C), .c_fc.bias (E, 4C), .c_proj.weight (E, C, 4C), .c_proj.bias
// (E, C), and with a shared expert mlp.shared_expert.* shaped as a dense block's mlp.*.
//
// A rank of an expert shard (expert parallelism: EP ranks split each MoE block's E experts) holds
// a local layout: the same views in the same order, its E/EP experts stacked in place of all E, so
// its flat buffer is the whole model's less (E − E/EP) experts a block. Each view says where its
// first element sits in the whole model's layout (global_offset), which checkpoints read.

#include <cstdint>
#include <string>
#include <vector>

#include "compute/model/gpt_config.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute {

struct ParameterView {
  std::string name;
  std::int64_t offset = 0;  // in elements, into the flat buffer
  Shape shape;
  bool decay = false;       // AdamW weight decay applies (matrices and embeddings only)
  double init_std = 0.0;    // normal(0, init_std); 0 means constant init_value
  double init_value = 0.0;
  bool expert = false;             // one of an MoE block's stacked experts' tensors
  std::int64_t global_offset = 0;  // of its first element in the whole model's layout

  std::int64_t numel() const { return shape_numel(shape); }
};

// Which experts a rank holds: shard `index` of `count`, experts [index·E/count, (index + 1)·E/count)
// of every MoE block; count divides E.
struct ExpertShard {
  int index = 0;
  int count = 1;
};

class ParameterLayout {
 public:
  // The whole model's layout, or the local one of expert shard `experts`.
  explicit ParameterLayout(const GPTConfig& config, ExpertShard experts = {});

  const std::vector<ParameterView>& views() const { return views_; }
  std::int64_t total() const { return total_; }
  ExpertShard expert_shard() const { return experts_; }
  // What one token uses, of the whole model: its parameters less, in each MoE layer, the E - k
  // experts it is not routed to.
  std::int64_t active() const;
  const ParameterView& find(const std::string& name) const;  // throws on an unknown name
  // [begin, end) of layer `layer`'s parameters in the flat buffer.
  std::pair<std::int64_t, std::int64_t> layer_range(int layer) const;

 private:
  void add(std::string name, Shape shape, bool decay, double init_std, double init_value = 0.0);
  // An MoE block's stacked experts' tensor, whole `shape` (E, ...): the shard's (E/EP, ...).
  void add_experts(std::string name, Shape shape, bool decay, double init_std);

  std::vector<ParameterView> views_;
  std::int64_t total_ = 0;
  std::int64_t global_total_ = 0;  // of the whole model
  ExpertShard experts_;
  GPTConfig config_;
  int n_layer_ = 0;
  std::vector<std::int64_t> layer_end_;  // [l] where layer l begins, [l + 1] where it ends
};

}  // namespace troupe::compute
