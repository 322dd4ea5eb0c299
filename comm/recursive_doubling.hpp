#pragma once
// All-reduce by recursive doubling (internal to comm/; Communicator chooses it, see
// all_reduce_algorithm): log2 n rounds in which each rank swaps its whole partial sum with the
// rank 2^k positions away and adds. Latency-optimal where the ring is not: the ring walks
// 2(n-1) hops one after another, which at hundreds of ranks and small buffers is the whole sum;
// doubling takes log2 n hops but sends the whole buffer in each.
//
// Every rank ends with the same bits: in each round both partners add the same two partial
// sums, and IEEE addition is commutative (a + b == b + a, bit for bit), so after round k the
// 2^(k+1) ranks of a block hold one value. The sum's order is another than the ring's, so the
// two algorithms round differently.

#include <cstdint>
#include <memory>

#include "comm/collective_op.hpp"

namespace troupe::comm {

enum class AllReduceAlgorithm : std::uint8_t { ring, recursive_doubling };

// What Communicator::post_all_reduce runs for `ranks` ranks and a buffer of `bytes` (when the
// options do not fix it): recursive doubling for groups of at least 32 ranks where its modelled
// time is below the ring's, by one message's latency (10 us) and a link's bandwidth (10 GB/s):
//   ring      2 (n - 1) (latency + bytes / n / bandwidth)
//   doubling  (log2 n' + 2 [n > n']) (latency + bytes / bandwidth),   n' = 2^floor(log2 n)
// The ring below 32 ranks whatever the figures say: its fixed order is the one the layouts'
// equality tests pin, and its hops are cheap there.
AllReduceAlgorithm all_reduce_algorithm(int ranks, std::size_t bytes);

// The messages one after another on each rank's path: the ring's 2 (n - 1), each of about
// bytes / n; doubling's log2 n' (+ 2 to fold the others in and out), each of the whole buffer.
int all_reduce_hops(AllReduceAlgorithm algorithm, int ranks);

// Every rank of the group posts it with the same key and a buffer of the same shape and dtype
// (f32, f64 or bf16).
std::shared_ptr<CollectiveOp> make_recursive_doubling_op(Engine& engine, const Group& group, MessageKey key,
                                                         compute::Tensor buffer, Callback done);

}  // namespace troupe::comm
