// Gradient compression (comm/gradient_compressor.hpp, powersgd.hpp, bf16_wire.hpp): the PowerSGD
// arithmetic in f64, what a step must preserve (gradient = approximation + new residual; nothing
// changes before the start step; what the compressor represents exactly passes unchanged), and
// real ranks (2 and 4 processes, several bucketings) against a one-process reference that does
// the same arithmetic tensor by tensor.

#include "rank_support.hpp"

#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <memory>

#include "comm/gradient_compressor.hpp"
#include "comm/powersgd.hpp"
#include "compute/cuda/bf16.hpp"
#include "compute/random.hpp"

using namespace troupe::comm;
using namespace troupe::comm::test;
using troupe::Error;
using troupe::Expected;
using troupe::compute::DType;
using troupe::compute::Tensor;

namespace {

// A flat buffer of five tensors: three matrices worth compressing at r = 4, a bias, and a
// matrix too small to be worth it.
std::vector<GradientTensor> test_tensors() {
  std::vector<GradientTensor> tensors{{0, 24, 16},  // a matrix
                                      {0, 24, 1},   // its bias
                                      {0, 16, 40},  // a wide matrix
                                      {0, 3, 2},    // too small to be worth compressing
                                      {0, 32, 8}};  // a tall matrix
  std::int64_t offset = 0;
  for (GradientTensor& t : tensors) {
    t.offset = offset;
    offset += t.rows * t.cols;
  }
  return tensors;
}
constexpr std::int64_t test_total = 24 * 16 + 24 + 16 * 40 + 6 + 32 * 8;

// Bucket boundaries: the whole buffer; one per tensor; groups of tensors; and cuts through
// b.weight, which then travels plain.
const std::vector<std::vector<std::int64_t>> bucketings{
    {0, test_total},
    {0, 384, 408, 1048, 1054, test_total},
    {0, 408, 1054, test_total},
    {0, 500, 900, test_total},
};

double gradient_value(int rank, int step, std::int64_t i) { return input_value(rank * 8 + step, i); }

// The sums of a group of one: nothing to add.
SumChannel alone() {
  return {[](const Tensor&) { return SumChannel::Ticket{0}; }, [](SumChannel::Ticket) {}};
}

// Sums over a Communicator, posted at once and waited for by ticket.
SumChannel over(Communicator& comm) {
  auto futures = std::make_shared<std::map<SumChannel::Ticket, std::future<troupe::Status>>>();
  auto next = std::make_shared<SumChannel::Ticket>(0);
  return {[&comm, futures, next](const Tensor& buffer) {
            auto promise = std::make_shared<std::promise<troupe::Status>>();
            (*futures)[++*next] = promise->get_future();
            comm.post_all_reduce(buffer, [promise](troupe::Status s) { promise->set_value(std::move(s)); });
            return *next;
          },
          [futures](SumChannel::Ticket ticket) {
            auto status = futures->at(ticket).get();
            futures->erase(ticket);
            if (!status) throw std::runtime_error(status.error().message);
          }};
}

template <typename T>
Tensor gradients(int rank, int step) {
  Tensor g = Tensor::zeros({test_total}, sizeof(T) == 8 ? DType::f64 : DType::f32);
  for (std::int64_t i = 0; i < test_total; ++i) g.data_as<T>()[i] = static_cast<T>(gradient_value(rank, step, i));
  return g;
}

void run_step(GradientCompressor& compressor, const Tensor& grads, const std::vector<std::int64_t>& cuts, long step) {
  compressor.begin_step(step);
  for (std::size_t b = 0; b + 1 < cuts.size(); ++b)
    compressor.start(grads.slice(cuts[b], {cuts[b + 1] - cuts[b]}), cuts[b]);
  compressor.finish();
}

// The reference: n ranks' PowerSGD in one process, tensor by tensor, sums in rank order.
struct PowerSgdReference {
  int n, r;
  long start_step;
  std::vector<std::int64_t> cuts;
  std::map<std::int64_t, std::vector<std::vector<double>>> residuals;  // offset → per rank
  std::map<std::int64_t, std::vector<double>> qs;

  bool compressed(const GradientTensor& t) const {
    const std::int64_t end = t.offset + t.rows * t.cols;
    for (std::size_t b = 0; b + 1 < cuts.size(); ++b) {
      if (cuts[b] <= t.offset && end <= cuts[b + 1]) return powersgd::worth_compressing(t.rows, t.cols, r);
    }
    return false;
  }

  std::vector<double> step(int s) {
    std::vector<double> out(test_total, 0.0);
    for (int rank = 0; rank < n; ++rank) {
      for (std::int64_t i = 0; i < test_total; ++i) out[i] += gradient_value(rank, s, i);
    }
    if (s < start_step) return out;
    for (const GradientTensor& t : test_tensors()) {
      if (!compressed(t)) continue;
      const std::int64_t numel = t.rows * t.cols;
      auto& e = residuals[t.offset];
      auto& q = qs[t.offset];
      if (e.empty()) {
        e.assign(n, std::vector<double>(numel, 0.0));
        for (std::int64_t i = 0; i < t.cols * r; ++i)
          q.push_back(troupe::compute::counter_normal(7, static_cast<std::uint64_t>(t.offset), i));
      }
      std::vector<std::vector<double>> m(n, std::vector<double>(numel));
      std::vector<double> p(t.rows * r, 0.0), part(t.rows * r), q_sum(t.cols * r, 0.0), q_part(t.cols * r);
      for (int rank = 0; rank < n; ++rank) {
        for (std::int64_t i = 0; i < numel; ++i) m[rank][i] = gradient_value(rank, s, t.offset + i) + e[rank][i];
        powersgd::multiply(m[rank].data(), q.data(), part.data(), t.rows, t.cols, r);
        for (std::size_t i = 0; i < p.size(); ++i) p[i] += part[i];
      }
      powersgd::orthonormalise(p.data(), t.rows, r);
      for (int rank = 0; rank < n; ++rank) {
        powersgd::multiply_transposed(m[rank].data(), p.data(), q_part.data(), t.rows, t.cols, r);
        for (std::size_t i = 0; i < q_sum.size(); ++i) q_sum[i] += q_part[i];
      }
      std::vector<double> approximation(numel);
      powersgd::reconstruct(p.data(), q_sum.data(), approximation.data(), t.rows, t.cols, r);
      for (int rank = 0; rank < n; ++rank) {
        for (std::int64_t i = 0; i < numel; ++i) e[rank][i] = m[rank][i] - approximation[i] / n;
      }
      q = q_sum;
      std::copy(approximation.begin(), approximation.end(), out.begin() + t.offset);
    }
    return out;
  }
};

// The reference for bf16: the ring's order for each segment of each bucket (docs/comm.md), every
// partial sum rounded to bf16; f32 values.
std::vector<float> bf16_reference(int n, int s, const std::vector<std::int64_t>& cuts) {
  using troupe::compute::round_to_bf16;
  std::vector<float> out(test_total);
  for (std::size_t b = 0; b + 1 < cuts.size(); ++b) {
    const std::int64_t count = cuts[b + 1] - cuts[b];
    for (int j = 0; j < n; ++j) {
      const Slice segment = segment_of(count, n, j);
      for (std::int64_t k = 0; k < segment.count; ++k) {
        const std::int64_t i = cuts[b] + segment.offset + k;
        auto value = [&](int rank) { return round_to_bf16(static_cast<float>(gradient_value(rank, s, i))); };
        float sum = value((j + 1) % n);
        for (int hop = 2; hop <= n; ++hop) sum = round_to_bf16(value((j + hop) % n) + sum);
        out[i] = sum;
      }
    }
  }
  return out;
}

double largest_magnitude(const std::vector<double>& values) {
  double m = 0;
  for (double v : values) m = std::max(m, std::abs(v));
  return m;
}

constexpr int steps = 4;
constexpr long start_step = 1;

// Every bucketing's outputs, step after step, on this rank.
template <typename T>
LocalRankBody compress_on_ranks(Compression kind) {
  return [kind](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    auto comm = world(engine);
    if (!comm) return comm.error();
    std::vector<T> outputs;
    for (const auto& cuts : bucketings) {
      GradientCompressor compressor({kind, 4, start_step, 7}, test_tensors(), engine.world_size(), over(**comm),
                                    sizeof(T) == 8 ? DType::f64 : DType::f32);
      for (int s = 0; s < steps; ++s) {
        Tensor g = gradients<T>(engine.rank(), s);
        run_step(compressor, g, cuts, s);
        outputs.insert(outputs.end(), g.data_as<T>(), g.data_as<T>() + test_total);
      }
    }
    return pack(outputs);
  };
}

}  // namespace

TEST_CASE("PowerSGD's products and orthonormalisation match their definitions in f64", "[compression]") {
  const std::int64_t rows = 7, cols = 5;
  const int r = 3;
  std::vector<double> m(rows * cols), q(cols * r), p(rows * r), qt(cols * r), out(rows * cols);
  for (std::int64_t i = 0; i < rows * cols; ++i) m[i] = gradient_value(0, 0, i);
  for (std::int64_t i = 0; i < cols * r; ++i) q[i] = gradient_value(1, 0, i);
  powersgd::multiply(m.data(), q.data(), p.data(), rows, cols, r);
  for (std::int64_t i = 0; i < rows; ++i) {
    for (int k = 0; k < r; ++k) {
      double want = 0;
      for (std::int64_t j = 0; j < cols; ++j) want += m[i * cols + j] * q[j * r + k];
      CHECK(p[i * r + k] == Approx(want).epsilon(1e-14));
    }
  }
  powersgd::orthonormalise(p.data(), rows, r);
  for (int a = 0; a < r; ++a) {
    for (int b = 0; b < r; ++b) {
      double dot = 0;
      for (std::int64_t i = 0; i < rows; ++i) dot += p[i * r + a] * p[i * r + b];
      CHECK(dot == Approx(a == b ? 1.0 : 0.0).margin(1e-14));
    }
  }
  powersgd::multiply_transposed(m.data(), p.data(), qt.data(), rows, cols, r);
  powersgd::reconstruct(p.data(), qt.data(), out.data(), rows, cols, r);
  for (std::int64_t i = 0; i < rows; ++i) {
    for (std::int64_t j = 0; j < cols; ++j) {
      double want = 0;
      for (int k = 0; k < r; ++k) {
        double mtp = 0;
        for (std::int64_t l = 0; l < rows; ++l) mtp += m[l * cols + j] * p[l * r + k];
        want += p[i * r + k] * mtp;
      }
      CHECK(out[i * cols + j] == Approx(want).margin(1e-13));
    }
  }
  CHECK(powersgd::worth_compressing(24, 16, 4));
  CHECK_FALSE(powersgd::worth_compressing(3, 2, 4));
  CHECK_FALSE(powersgd::worth_compressing(1000, 1, 1));
}

TEST_CASE("PowerSGD in f64: the gradient plus the old residual is the approximation plus the new residual",
          "[compression]") {
  GradientCompressor compressor({Compression::powersgd, 4, 0, 7}, test_tensors(), 1, alone(), DType::f64);
  std::vector<double> residual_before(test_total, 0.0);
  for (int s = 0; s < 3; ++s) {
    Tensor g = gradients<double>(0, s);
    run_step(compressor, g, bucketings[1], s);
    const std::vector<double> residual_after(compressor.residuals().data_as<double>(),
                                             compressor.residuals().data_as<double>() + test_total);
    double worst = 0, largest = 0;
    for (std::int64_t i = 0; i < test_total; ++i) {
      const double before = gradient_value(0, s, i) + residual_before[i];
      worst = std::max(worst, std::abs(before - (g.data_as<double>()[i] + residual_after[i])));
      largest = std::max(largest, std::abs(before));
    }
    INFO("step " << s);
    CHECK(worst <= 1e-14 * largest);
    // The approximation is not the gradient: something was left behind.
    CHECK(largest_magnitude(residual_after) > 1e-3 * largest);
    residual_before = residual_after;
  }
}

TEST_CASE("before the start step the sum is plain and the compression state untouched", "[compression]") {
  for (Compression kind : {Compression::bf16, Compression::powersgd}) {
    GradientCompressor compressor({kind, 4, 2, 7}, test_tensors(), 1, alone());
    const GradientCompressor fresh({kind, 4, 2, 7}, test_tensors(), 1, alone());
    auto same_state = [&] {
      if (kind != Compression::powersgd) return !compressor.residuals().defined() && !compressor.factors().defined();
      const float* residuals = compressor.residuals().data_as<float>();
      const float* factors = compressor.factors().data_as<float>();
      return std::all_of(residuals, residuals + test_total, [](float x) { return x == 0.0f; }) &&
             std::equal(factors, factors + test_total, fresh.factors().data_as<float>());
    };
    for (int s = 0; s < 2; ++s) {
      Tensor g = gradients<float>(0, s);
      run_step(compressor, g, bucketings[2], s);
      for (std::int64_t i = 0; i < test_total; ++i)
        REQUIRE(g.data_as<float>()[i] == static_cast<float>(gradient_value(0, s, i)));
      CHECK(same_state());
      CHECK(compressor.totals().wire_bytes == compressor.totals().plain_bytes);
    }
    Tensor g = gradients<float>(0, 2);
    run_step(compressor, g, bucketings[2], 2);
    CHECK(compressor.totals().wire_bytes < compressor.totals().plain_bytes);
    if (kind == Compression::powersgd) CHECK_FALSE(same_state());
  }
}

TEST_CASE("a gradient the compressor represents exactly passes through unchanged", "[compression]") {
  SECTION("PowerSGD, matrices of rank 2 at r = 4, f64") {
    GradientCompressor compressor({Compression::powersgd, 4, 0, 7}, test_tensors(), 1, alone(), DType::f64);
    Tensor g = Tensor::zeros({test_total}, DType::f64);
    std::vector<double> want(test_total);
    for (const GradientTensor& t : test_tensors()) {
      for (std::int64_t i = 0; i < t.rows; ++i) {
        for (std::int64_t j = 0; j < t.cols; ++j) {
          want[t.offset + i * t.cols + j] =
              gradient_value(0, 0, i) * gradient_value(1, 0, j) + gradient_value(2, 0, i) * gradient_value(3, 0, j);
        }
      }
    }
    std::copy(want.begin(), want.end(), g.data_as<double>());
    run_step(compressor, g, bucketings[0], 0);
    const double largest = largest_magnitude(want);
    for (std::int64_t i = 0; i < test_total; ++i)
      REQUIRE(std::abs(g.data_as<double>()[i] - want[i]) <= 1e-13 * largest);
    for (std::int64_t i = 0; i < test_total; ++i)
      REQUIRE(std::abs(compressor.residuals().data_as<double>()[i]) <= 1e-13 * largest);
  }
  SECTION("bf16, values that are bf16 already") {
    GradientCompressor compressor({Compression::bf16, 4, 0, 7}, test_tensors(), 1, alone());
    Tensor g = gradients<float>(0, 0);
    for (std::int64_t i = 0; i < test_total; ++i)
      g.data_as<float>()[i] = troupe::compute::round_to_bf16(g.data_as<float>()[i]);
    const std::vector<float> want(g.data_as<float>(), g.data_as<float>() + test_total);
    run_step(compressor, g, bucketings[3], 0);
    CHECK(std::equal(want.begin(), want.end(), g.data_as<float>()));
  }
}

TEST_CASE("PowerSGD sums on 2 and 4 processes equal the one-process reference at every bucketing",
          "[compression][collectives]") {
  for (int n : {2, 4}) {
    INFO(n << " processes");
    const auto reports = run_ranks(n, compress_on_ranks<double>(Compression::powersgd));
    for (const auto& report : reports) REQUIRE(report == reports.front());
    const std::vector<double> got = unpack<double>(reports.front());
    std::size_t at = 0;
    for (const auto& cuts : bucketings) {
      PowerSgdReference reference{n, 4, start_step, cuts, {}, {}};
      for (int s = 0; s < steps; ++s) {
        const std::vector<double> want = reference.step(s);
        const double largest = largest_magnitude(want);
        double worst = 0;
        for (std::int64_t i = 0; i < test_total; ++i) worst = std::max(worst, std::abs(got[at + i] - want[i]));
        INFO(cuts.size() - 1 << " buckets, step " << s);
        CHECK(worst <= 1e-10 * largest);
        at += test_total;
      }
    }
  }
}

TEST_CASE("bf16 sums on 2 and 4 processes equal the one-process reference of the ring's order at every bucketing",
          "[compression][collectives]") {
  for (int n : {2, 4}) {
    INFO(n << " processes");
    const auto reports = run_ranks(n, compress_on_ranks<float>(Compression::bf16));
    for (const auto& report : reports) REQUIRE(report == reports.front());
    const std::vector<float> got = unpack<float>(reports.front());
    std::size_t at = 0;
    for (const auto& cuts : bucketings) {
      for (int s = start_step; s < steps; ++s) {
        INFO(cuts.size() - 1 << " buckets, step " << s);
        const std::vector<float> want = bf16_reference(n, s, cuts);
        CHECK(std::equal(want.begin(), want.end(), got.begin() + static_cast<std::ptrdiff_t>(at + s * test_total)));
      }
      at += steps * test_total;
    }
  }
}
