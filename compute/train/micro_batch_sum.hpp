#pragma once
// A step's micro-batch gradients summed as a data-parallel sum adds ranks' gradients: each
// micro-batch's gradient is computed from zero and added whole to the sum of the earlier ones
// ((g0 + g1) + g2 ...). Left to backward, a later micro-batch would accumulate into the earlier
// ones' gradient inside its GEMMs (a beta = 1 GEMM adds its partial sums one by one) and its row
// by row sums, in another order. So one rank of 2 micro-batches gives the bits of 2 ranks of one
// each (a + b == b + a), which is what lets a job that lost one of 2 replicas go on with the same
// weights; the price is a second gradient buffer and one add per micro-batch after the first.

#include <cstdint>

#include "compute/backend.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute {

class MicroBatchSum {
 public:
  // Over `gradients`, the buffer backward accumulates into (a handle to it); keeps nothing and
  // does nothing for fewer than 2 micro-batches.
  MicroBatchSum(Backend& backend, Tensor gradients, int micro_batches);

  // Before the backward of micro-batch `micro` (0-based, in order): from the second on, the
  // gradient so far joins the earlier ones' sum and the buffer starts from zero.
  void before_backward(int micro);
  // After the last backward: the earlier micro-batches' sum added into the gradients in
  // [begin, end) — before anything reads them (a data-parallel sum of that range).
  void add_earlier(std::int64_t begin, std::int64_t end);
  void add_earlier() { add_earlier(0, gradients_.numel()); }

 private:
  Backend* backend_;
  Tensor gradients_;
  Tensor earlier_;  // the earlier micro-batches' sum; undefined for fewer than 2
};

}  // namespace troupe::compute
