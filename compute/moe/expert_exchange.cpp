#include "compute/moe/expert_exchange.hpp"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <string>

namespace troupe::compute {
namespace {

// A failed exchange ends the step. (An exchange over a data plane reports a lost peer by its own
// exception, which the runtime recovers from, before a status reaches here.)
void check(const Status& status) {
  if (!status) throw std::runtime_error("expert exchange: " + status.error().message);
}

// Bytes of each rank's run of `counts` (ranks runs of `local` row counts), rows of row_bytes.
std::vector<std::size_t> run_bytes(const std::vector<std::int64_t>& counts, int ranks, int local,
                                   std::size_t row_bytes) {
  std::vector<std::size_t> bytes(static_cast<std::size_t>(ranks));
  for (int j = 0; j < ranks; ++j) {
    const auto first = counts.begin() + std::ptrdiff_t{j} * local;
    bytes[static_cast<std::size_t>(j)] =
        static_cast<std::size_t>(std::accumulate(first, first + local, std::int64_t{0})) * row_bytes;
  }
  return bytes;
}

std::size_t row_bytes_of(const Tensor& t) { return static_cast<std::size_t>(t.dim(1)) * dtype_size(t.dtype()); }

// Rows from source order (source i's run, by local expert within it) to expert order (local expert
// e's run, by source within it), or back.
void regroup(const ExpertCounts& c, const Tensor& from, Tensor& to, bool to_experts) {
  const std::size_t row_bytes = row_bytes_of(from);
  const std::int64_t rows = c.received_rows();
  if (rows == 0) return;
  TROUPE_CHECK(from.dim(0) >= rows && to.dim(0) >= rows, "expert exchange of " + std::to_string(rows) + " rows");
  const auto* src = static_cast<const std::byte*>(from.data());
  auto* dst = static_cast<std::byte*>(to.data());
  // by_source[i·L + e]: where source i's rows for expert e start in source order; by_expert alike.
  const std::size_t L = static_cast<std::size_t>(c.local), S = static_cast<std::size_t>(c.shards);
  std::vector<std::int64_t> by_source(S * L), by_expert(S * L);
  std::int64_t at = 0;
  for (std::size_t i = 0; i < S; ++i)
    for (std::size_t e = 0; e < L; ++e) {
      by_source[i * L + e] = at;
      at += c.received[i * L + e];
    }
  at = 0;
  for (std::size_t e = 0; e < L; ++e)
    for (std::size_t i = 0; i < S; ++i) {
      by_expert[i * L + e] = at;
      at += c.received[i * L + e];
    }
  for (std::size_t b = 0; b < S * L; ++b) {
    const std::int64_t a = to_experts ? by_source[b] : by_expert[b], z = to_experts ? by_expert[b] : by_source[b];
    std::copy_n(src + static_cast<std::size_t>(a) * row_bytes, static_cast<std::size_t>(c.received[b]) * row_bytes,
                dst + static_cast<std::size_t>(z) * row_bytes);
  }
}

std::span<const std::byte> bytes_of(const Tensor& t, std::size_t count) {
  return {static_cast<const std::byte*>(t.data()), count};
}
std::span<std::byte> writable_bytes_of(Tensor& t, std::size_t count) {
  return {static_cast<std::byte*>(t.data()), count};
}

}  // namespace

std::int64_t ExpertCounts::received_rows() const {
  return std::accumulate(received.begin(), received.end(), std::int64_t{0});
}

std::vector<std::int64_t> ExpertCounts::per_local_expert() const {
  std::vector<std::int64_t> rows(static_cast<std::size_t>(local), 0);
  for (std::size_t b = 0; b < received.size(); ++b) rows[b % static_cast<std::size_t>(local)] += received[b];
  return rows;
}

ExpertCounts exchange_expert_counts(const ExpertGroup& group, const RoutingPlan& plan) {
  const int shards = group.shards();
  TROUPE_CHECK(group.sharded() && plan.experts % shards == 0,
               std::to_string(plan.experts) + " experts over " + std::to_string(shards) + " ranks");
  ExpertCounts c{shards, plan.experts / shards, {}, {}};
  c.sent.resize(static_cast<std::size_t>(plan.experts));
  for (int e = 0; e < plan.experts; ++e) c.sent[static_cast<std::size_t>(e)] = plan.count(e);
  Expected<std::vector<std::int64_t>> got = context::exchange_counts(*group.exchange, c.sent);
  if (!got) check(got.error());
  c.received = std::move(got.value());
  return c;
}

void begin_dispatch(const ExpertGroup& group, const ExpertCounts& c, const Tensor& grouped, Tensor& staging) {
  const std::size_t row = row_bytes_of(grouped);
  const std::vector<std::size_t> send = run_bytes(c.sent, c.shards, c.local, row),
                                 recv = run_bytes(c.received, c.shards, c.local, row);
  const std::size_t sent = std::accumulate(send.begin(), send.end(), std::size_t{0}),
                    got = std::accumulate(recv.begin(), recv.end(), std::size_t{0});
  TROUPE_CHECK(sent <= grouped.nbytes() && got <= staging.nbytes(), "expert dispatch of " + grouped.describe());
  check(group.exchange->begin_all_to_all(bytes_of(grouped, sent), send, writable_bytes_of(staging, got), recv));
}

void finish_dispatch(const ExpertGroup& group, const ExpertCounts& c, const Tensor& staging, Tensor& local) {
  check(group.exchange->finish_all_to_all());
  regroup(c, staging, local, true);
}

void combine_from_experts(const ExpertGroup& group, const ExpertCounts& c, const Tensor& local, Tensor& staging,
                          Tensor& grouped) {
  const std::size_t row = row_bytes_of(local);
  const std::vector<std::size_t> back = run_bytes(c.received, c.shards, c.local, row),
                                 home = run_bytes(c.sent, c.shards, c.local, row);
  const std::size_t sent = std::accumulate(back.begin(), back.end(), std::size_t{0}),
                    got = std::accumulate(home.begin(), home.end(), std::size_t{0});
  TROUPE_CHECK(sent <= staging.nbytes() && got <= grouped.nbytes(), "expert combine into " + grouped.describe());
  regroup(c, local, staging, false);
  check(group.exchange->all_to_all_uneven(bytes_of(staging, sent), back, writable_bytes_of(grouped, got), home));
}

}  // namespace troupe::compute
