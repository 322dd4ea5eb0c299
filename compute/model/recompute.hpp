#pragma once
// What a stage keeps of a micro-batch's activations between its forward and its backward, and
// what it recomputes instead (train.recompute; docs/parallelism.md gives what each keeps in bytes).
//   none:       every activation the backward reads is kept.
//   selective:  the GELU output and the attention state (one log-sum-exp per query row) are not
//               kept; backward reruns GELU and the attention forward from what is kept.
//   full:       only each block's input (the residual stream) is kept; backward reruns the block
//               up to its GELU output, all that the block's backward reads.
// A mixture-of-experts block (compute/moe/moe_layer.hpp) keeps its MLP's state in place of the
// dense MLP's: selective drops the experts' GELU outputs too; full keeps only the block's input and
// its routing, and its rerun exchanges the rows again but not the counts.
// Recomputation runs the same kernels on the same inputs, so gradients are bitwise those of none.

#include <string>

namespace troupe::compute {

enum class Recompute { none, selective, full };

// Every mode, in the order train.recompute lists them: the config parser reads a name with these.
inline constexpr Recompute recompute_modes[] = {Recompute::none, Recompute::selective, Recompute::full};
std::string recompute_name(Recompute recompute);

}  // namespace troupe::compute
