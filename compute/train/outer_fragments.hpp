#pragma once
// Streaming DiLoCo's fragments (Douillard et al., 2025, "Streaming DiLoCo with overlapping
// communication"): the model's flat parameter buffer cut into F runs of consecutive blocks, each
// synced over the islands on its own schedule, so that a sync sends 1/F of the model and the syncs
// of the fragments are spread over the H steps instead of falling on the same one:
//
//     fragment f is synced after the steps s ≥ 1 with (s − f·⌊H/F⌋) a multiple of H
//
// F = 1 is plain DiLoCo: the whole buffer after every H-th step. The blocks are shared as evenly as
// F allows (the first L mod F fragments take one block more); the embeddings (wte, wpe) go with the
// first fragment's blocks and the final norm (ln_f) with the last's, so the fragments cover the
// buffer in order. The paper takes blocks strided over the depth; consecutive blocks keep each
// fragment one contiguous run of the buffer (one collective, no gather).

#include <cstdint>
#include <span>
#include <vector>

#include "compute/model/parameter_source.hpp"

namespace troupe::compute {

// One run of a rank's buffer synced on one schedule. A fragment of the model is one run of a whole
// model's buffer; on a pipeline stage it may be several (a last stage's copy of the tied embedding,
// a stage's chunks), each a run with the model fragment's number.
struct OuterFragment {
  std::int64_t begin = 0, end = 0;  // [begin, end) of the flat parameter buffer
  long offset = 0;                  // synced after the steps s ≥ 1 with (s − offset) a multiple of H
  int fragment = 0;                 // which of the model's F fragments the run is part of
  std::int64_t size() const { return end - begin; }
};

// The F fragments of a whole model whose units (parameter_source.hpp) are `units`: the
// embeddings, each block, the tail. Needs 1 ≤ F ≤ the blocks and H ≥ 1.
std::vector<OuterFragment> outer_fragments(std::span<const ParameterUnit> units, int fragments, long every);

// A pipeline stage's part of the whole model's fragments, in its buffer's order. The stage holds
// blocks [first_layer, last_layer) of `layers`; its units are the embeddings when it is the first
// stage, each block, and the tail (ln_f, then on a last stage that is not the first a copy of the
// tied embedding of `copy_elements`) when it is the last. Fragment f (0 ≤ f < F) is the run of its
// units in fragment f, empty where it holds none (placed where it would be); a last stage's copy of
// the embedding, which the first stage's fragment 0 holds, is one more run after them, on fragment
// 0's schedule, so both copies take the same outer steps (with F = 1 the whole buffer is the one
// fragment). The whole model is the stage of every block (outer_fragments).
std::vector<OuterFragment> stage_fragments(std::span<const ParameterUnit> units, int first_layer, int last_layer,
                                           int layers, std::int64_t copy_elements, int fragments, long every);

// Fragments of a buffer (the model's, or a stage's: stage_fragments) as a rank holding only its
// run [begin, end) keeps them (a ZeRO-3 shard): each fragment cut to the run and counted from
// `begin`, on its own schedule; a fragment outside the run is left empty (begin = end), so fragment
// f is the same fragment on every rank. Each element takes the outer step alone, so the shards'
// steps are the whole buffer's.
std::vector<OuterFragment> fragments_within(std::span<const OuterFragment> model, std::int64_t begin, std::int64_t end);

// Whether fragment `fragment`'s schedule syncs it after the step that made `steps_taken` steps.
bool scheduled(const OuterFragment& fragment, long every, long steps_taken);

}  // namespace troupe::compute
