#pragma once
// A keyed pseudo-random permutation of [0, n) evaluated one index at a time in O(1) memory, so
// the data order of an epoch with billions of windows needs no shuffled index array and any
// position of it can be computed directly (resume, data-parallel ranks, tests).
//
// Construction: a balanced Feistel network on 2k-bit integers, where 4^k is the smallest power of
// four >= n (so both halves have k bits), with round functions keyed by splitmix64 of the key
// (compute/random.hpp). A Feistel network is a bijection for any round functions; indices that
// land outside [0, n) are walked along their cycle until they land inside ("cycle walking"),
// which keeps the bijection on [0, n). Since 4^k < 4n, a walk takes fewer than 4 steps on average.
//
// Only integer arithmetic: the same (i, n, key) gives the same result on every machine.

#include <cstdint>

namespace troupe::compute {

// The image of i (< n) under the permutation of [0, n) selected by `key`.
std::uint64_t permute_index(std::uint64_t i, std::uint64_t n, std::uint64_t key);

}  // namespace troupe::compute
