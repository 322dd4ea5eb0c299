#pragma once
// Where a pipeline stage (gpt_stage.hpp) finds its parameters and leaves its gradients, one unit
// at a time. A unit is a contiguous piece of the stage's flat buffer that is used as a whole: the
// embeddings (wte, wpe) on a first stage, each block, and what follows the last block on a last
// stage (ln_f, and a last stage's own copy of wte). They cover [0, num_params) in order.
//
// The stage brackets every use of a unit with use()/done_with() and every unit's gradients with
// gradient()/gradient_done(), in the order its forward and backward walk the units (forward goes
// up: embeddings, blocks, tail; backward down), and names at each use the unit it will use next. So a source may keep everything resident
// (ResidentParameters, the default), or keep only a shard and gather each unit just before it is
// used and reduce its gradient just after it is final (ZeRO-3: compute/train/sharded_parameters).

#include <cstdint>
#include <vector>

#include "compute/backend.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute {

struct ParameterUnit {
  std::int64_t begin = 0, end = 0;  // local [begin, end) of the stage's flat buffer
  std::int64_t size() const { return end - begin; }
};

// What the stage will do with a unit it is done with for now.
enum class Reuse {
  none,               // nothing more this micro-batch
  in_backward,        // this micro-batch's backward uses it again, later
  first_in_backward,  // this micro-batch's backward starts with it
};

class ParameterSource {
 public:
  virtual ~ParameterSource() = default;

  // What this rank keeps between steps of the parameters, and of the gradients the optimizer
  // reads: the local runs kept_runs() names, one after another in these buffers. One run but under
  // ZeRO-3 with expert shards, which keeps a shard of each run of a kind (dense, experts), each over
  // its own group.
  virtual Tensor& kept_parameters() = 0;
  virtual Tensor& kept_gradients() = 0;
  virtual std::vector<ParameterUnit> kept_runs() const = 0;
  // Where the first kept run starts: of a source that keeps one run, what it keeps is local
  // [kept_begin(), kept_begin() + numel).
  std::int64_t kept_begin() const { return kept_runs().front().begin; }

  // Unit u's parameters, u's size, valid until done_with(u). `next` is the unit the stage will
  // use after it in this pass (-1: none), so a source that gathers can start on it now.
  virtual Tensor use(int unit, int next) = 0;
  virtual void done_with(int unit, Reuse reuse) = 0;
  // Where a backward adds unit u's gradients (u's size); gradient_done(u) once they are final.
  virtual Tensor gradient(int unit) = 0;
  virtual void gradient_done(int unit) = 0;
};

// Every parameter and gradient of the stage in two flat buffers, as one process trains.
class ResidentParameters final : public ParameterSource {
 public:
  ResidentParameters(Backend& backend, std::vector<ParameterUnit> units, DType dtype);

  Tensor& kept_parameters() override { return params_; }
  Tensor& kept_gradients() override { return grads_; }
  std::vector<ParameterUnit> kept_runs() const override { return {{0, units_.back().end}}; }
  Tensor use(int unit, int) override;
  void done_with(int, Reuse) override {}
  Tensor gradient(int unit) override;
  void gradient_done(int) override {}

 private:
  std::vector<ParameterUnit> units_;
  Tensor params_, grads_;
};

}  // namespace troupe::compute
