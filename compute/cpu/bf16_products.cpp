// Each gemm: step 1, round a and b on the team (contiguous ranges of their stored elements) unless
// an operand is stored in bf16 already; step 2, multiply: oneDNN matmuls on the bf16 operands, or
// sgemm on the rounded f32 copies.
//
// oneDNN is not left to thread its own products. Its OpenMP threads spin after each product before
// they sleep, and on few cores that spin takes the time of the OpenBLAS and team threads that run
// next: at 2 threads a small step spent about a third more CPU time than at 1. Instead the team
// splits the rows of c, and each part runs a one-thread oneDNN matmul of its rows (OpenMP's thread
// count is the calling thread's own setting, so each part sets it to 1): no OpenMP team exists.
// The matmuls are cached by the part's shape, up to max_kept_matmuls of them: a dense model's
// products have a few shapes, but a mixture-of-experts layer's have as many as its experts' row
// counts take values (about 85 KiB each; making one costs about 0.2 ms, as much as a product of 64
// rows).

#include "compute/cpu/bf16_products.hpp"

#include <cpuid.h>
#include <omp.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <oneapi/dnnl/dnnl.hpp>
#include <string_view>
#include <tuple>
#include <vector>

#include "compute/check.hpp"
#include "compute/cpu/blas.hpp"
#include "compute/cpu/cpu_kernels.hpp"
#include "compute/cpu/thread_team.hpp"
#include "compute/cpu/vector_math.hpp"
#include "compute/cuda/bf16.hpp"

namespace troupe::compute::cpu {
namespace {

// Elements a thread rounds at the least: 256 bytes of bf16 out, so parts meet the same lanes.
constexpr std::int64_t round_grain = 128;
// Rows of c a part multiplies at the least: fewer leave oneDNN's kernels short of work.
constexpr std::int64_t row_grain = 32;
// Matmuls kept at the most: the cache is emptied at the start of a product (when no part runs).
constexpr std::size_t max_kept_matmuls = 256;

TROUPE_SIMD_CLONES void round_to_bf16_values(float* out, const float* in, std::int64_t n) {
  for (std::int64_t i = 0; i < n; ++i) out[i] = round_to_bf16(in[i]);
}

// Elements of a stored row-major matrix of `rows` rows `ld` apart whose last row holds `cols`.
std::int64_t stored_elements(int rows, int cols, int ld) { return static_cast<std::int64_t>(rows - 1) * ld + cols; }

bool isa_has(dnnl::cpu_isa isa, dnnl::cpu_isa feature) {
  return (static_cast<unsigned>(isa) & static_cast<unsigned>(feature)) == static_cast<unsigned>(feature);
}

// CPUID's vendor is "GenuineIntel".
bool intel_cpu() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(0, &eax, &ebx, &ecx, &edx) == 0) return false;
  char vendor[13] = {};
  std::memcpy(vendor, &ebx, 4);
  std::memcpy(vendor + 4, &edx, 4);
  std::memcpy(vendor + 8, &ecx, 4);
  return std::string_view(vendor) == "GenuineIntel";
}

}  // namespace

bool bf16_units_present() { return isa_has(dnnl::get_effective_cpu_isa(), dnnl::cpu_isa::avx512_core_bf16); }

Bf16Units bf16_units_of_this_cpu() {
  if (isa_has(dnnl::get_effective_cpu_isa(), dnnl::cpu_isa::avx512_core_amx)) return Bf16Units::hardware;
  return bf16_units_present() && !intel_cpu() ? Bf16Units::hardware : Bf16Units::emulated;
}

std::string bf16_emulation_reason() {
  if (!bf16_units_present()) return "no BF16 units on this CPU (best ISA " + bf16_isa_name() + "): no faster than fp32";
  if (bf16_units_of_this_cpu() == Bf16Units::emulated)
    return bf16_isa_name() + " without AMX on an Intel CPU multiplies slower than its fp32 FMAs";
  return "";
}

std::string bf16_isa_name() {
  const dnnl::cpu_isa isa = dnnl::get_effective_cpu_isa();
  for (const auto& [feature, name] :
       {std::pair{dnnl::cpu_isa::avx512_core_amx, "avx512_core_amx"},
        std::pair{dnnl::cpu_isa::avx512_core_bf16, "avx512_core_bf16"},
        std::pair{dnnl::cpu_isa::avx512_core, "avx512_core"}, std::pair{dnnl::cpu_isa::avx2, "avx2"}})
    if (isa_has(isa, feature)) return name;
  return "below avx2";
}

// One engine and stream, the matmuls made so far by shape, and the bf16 operand buffers.
struct Bf16Products::OneDnn {
  using Shape = std::tuple<bool, bool, int, int, int, int, int, int, bool>;

  struct Product {
    dnnl::matmul matmul;
    dnnl::memory::desc a, b, c, scratchpad;
  };

  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  std::mutex matmuls_mutex;  // the team's parts look up and make matmuls at once
  std::map<Shape, Product> matmuls;
  std::vector<std::uint16_t> a, b;

  // op(a) (m, k) bf16, op(b) (k, n) bf16, c (m, n) f32; with accumulate, c += through a sum post-op.
  // A reference into the map stays valid as it grows.
  const Product& product(const Shape& shape) {
    const std::lock_guard<std::mutex> lock(matmuls_mutex);
    auto found = matmuls.find(shape);
    if (found != matmuls.end()) return found->second;
    const auto [transpose_a, transpose_b, m, n, k, lda, ldb, ldc, accumulate] = shape;
    using dims = dnnl::memory::dims;
    using dt = dnnl::memory::data_type;
    const dnnl::memory::desc a_md(dims{m, k}, dt::bf16, transpose_a ? dims{1, lda} : dims{lda, 1});
    const dnnl::memory::desc b_md(dims{k, n}, dt::bf16, transpose_b ? dims{1, ldb} : dims{ldb, 1});
    const dnnl::memory::desc c_md(dims{m, n}, dt::f32, dims{ldc, 1});
    dnnl::primitive_attr attr;
    // The caller gives each execution its own scratchpad: the library's own is one per process
    // (Debian's oneDNN is built without concurrent execution), which two parts running the same
    // matmul at once would both write.
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    if (accumulate) {
      dnnl::post_ops sum;
      sum.append_sum(1.0f);
      attr.set_post_ops(sum);
    }
    const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_md, c_md), attr, engine);
    return matmuls.emplace(shape, Product{dnnl::matmul(pd), a_md, b_md, c_md, pd.scratchpad_desc()}).first->second;
  }
};

Bf16Products::Bf16Products(ThreadTeam& team, Bf16Units units)
    : team_(team), units_(units), onednn_(units == Bf16Units::hardware ? std::make_unique<OneDnn>() : nullptr) {}

Bf16Products::~Bf16Products() {
  for (const auto& [kind, bytes] : counted_) memory_ledger().remove(kind, bytes);
}

std::size_t Bf16Products::matmuls_kept() const { return onednn_ ? onednn_->matmuls.size() : 0; }

std::int64_t Bf16Products::reserved_first() const {
  return static_cast<std::int64_t>(onednn_ ? onednn_->a.size() : a_values_.size());
}

std::int64_t Bf16Products::reserved_second() const {
  return static_cast<std::int64_t>(onednn_ ? onednn_->b.size() : b_values_.size());
}

void Bf16Products::grow(bool first, std::int64_t elements) {
  const std::int64_t held = first ? reserved_first() : reserved_second();
  if (elements <= held) return;
  const auto size = static_cast<std::size_t>(elements);
  if (onednn_)
    (first ? onednn_->a : onednn_->b).resize(size);
  else
    (first ? a_values_ : b_values_).resize(size);
  const auto added = static_cast<std::uint64_t>(elements - held) * operand_bytes();
  memory_ledger().add(current_memory_kind(), added);
  counted_.emplace_back(current_memory_kind(), added);
}

void Bf16Products::reserve(std::int64_t first, std::int64_t second) {
  grow(true, first);
  grow(false, second);
}

Bf16Products::Rounded Bf16Products::round(Operand a, std::int64_t a_count, Operand b, std::int64_t b_count) {
  TROUPE_CHECK((a.f32 == nullptr) != (a.bf16 == nullptr) && (b.f32 == nullptr) != (b.bf16 == nullptr),
               "a bf16 product's operand is f32 or bf16, exactly one");
  // With BF16 units only an f32 operand needs a copy, one already in bf16 is read where it lies;
  // emulated, a bf16 operand is widened into the copy too, since sgemm multiplies f32.
  const bool copies_all = units_ == Bf16Units::emulated;
  reserve(copies_all || a.f32 != nullptr ? a_count : 0, copies_all || b.f32 != nullptr ? b_count : 0);
  Rounded rounded;
  if (units_ == Bf16Units::emulated) {
    auto values = [&](Operand x, std::int64_t count, std::vector<float>& copy) {
      team_.run(count, round_grain, [&](std::int64_t begin, std::int64_t end) {
        if (x.f32 != nullptr)
          round_to_bf16_values(copy.data() + begin, x.f32 + begin, end - begin);
        else
          widen_bf16_bits(copy.data() + begin, x.bf16 + begin, end - begin);
      });
      return copy.data();
    };
    rounded.a_values = values(a, a_count, a_values_);
    rounded.b_values = values(b, b_count, b_values_);
    return rounded;
  }
  OneDnn& d = *onednn_;
  auto bits = [&](Operand x, std::int64_t count, std::vector<std::uint16_t>& copy) -> const std::uint16_t* {
    if (x.bf16 != nullptr) return x.bf16;
    team_.run(count, round_grain, [&](std::int64_t begin, std::int64_t end) {
      round_to_bf16_bits(copy.data() + begin, x.f32 + begin, end - begin);
    });
    return copy.data();
  };
  rounded.a_bits = bits(a, a_count, d.a);
  rounded.b_bits = bits(b, b_count, d.b);
  return rounded;
}

void Bf16Products::prepare_matmuls(int parts) {
  // Each part may make one: a cache that could pass the bound in this product is emptied first.
  if (onednn_ && onednn_->matmuls.size() + static_cast<std::size_t>(parts) > max_kept_matmuls) onednn_->matmuls.clear();
}

void Bf16Products::multiply_here(const Rounded& r, bool transpose_a, bool transpose_b, int m, int n, int k,
                                 std::int64_t a_at, int lda, std::int64_t b_at, int ldb, bool accumulate, float* c,
                                 int ldc) {
  if (m == 0 || n == 0) return;
  if (units_ == Bf16Units::emulated) {
    cpu::gemm(transpose_a ? CblasTrans : CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, m, n, k, 1.0f,
              r.a_values + a_at, lda, r.b_values + b_at, ldb, accumulate ? 1.0f : 0.0f, c, ldc);
    return;
  }
  OneDnn& d = *onednn_;
  // One OpenMP thread from before the matmul is made: oneDNN picks its kernel, and how it splits
  // the sums, for the thread count at creation, and whichever part first meets a shape makes it.
  omp_set_num_threads(1);
  const OneDnn::Product& product = d.product({transpose_a, transpose_b, m, n, k, lda, ldb, ldc, accumulate});
  // oneDNN's memory objects take non-const handles; a matmul only reads its sources.
  dnnl::memory a_mem(product.a, d.engine, const_cast<std::uint16_t*>(r.a_bits + a_at));
  dnnl::memory b_mem(product.b, d.engine, const_cast<std::uint16_t*>(r.b_bits + b_at));
  dnnl::memory c_mem(product.c, d.engine, c);
  thread_local std::vector<std::uint8_t> scratchpad;
  scratchpad.resize(product.scratchpad.get_size());
  dnnl::memory scratchpad_mem(product.scratchpad, d.engine, scratchpad.data());
  dnnl::stream stream(d.engine);  // a stream is one thread's; a CPU stream costs next to nothing
  product.matmul.execute(
      stream,
      {{DNNL_ARG_SRC, a_mem}, {DNNL_ARG_WEIGHTS, b_mem}, {DNNL_ARG_DST, c_mem}, {DNNL_ARG_SCRATCHPAD, scratchpad_mem}});
  stream.wait();
}

void Bf16Products::gemm(bool transpose_a, bool transpose_b, int m, int n, int k, Operand a, int lda, Operand b, int ldb,
                        bool accumulate, float* c, int ldc) {
  if (m == 0 || n == 0) return;
  if (k == 0) {  // no terms: c stays what it holds, or becomes 0
    if (!accumulate)
      for (int i = 0; i < m; ++i) std::fill_n(c + static_cast<std::ptrdiff_t>(i) * ldc, n, 0.0f);
    return;
  }
  const std::int64_t a_count = transpose_a ? stored_elements(k, m, lda) : stored_elements(m, k, lda);
  const std::int64_t b_count = transpose_b ? stored_elements(n, k, ldb) : stored_elements(k, n, ldb);
  const Rounded r = round(a, a_count, b, b_count);
  if (units_ == Bf16Units::emulated) {  // one sgemm on OpenBLAS' threads
    multiply_here(r, transpose_a, transpose_b, m, n, k, 0, lda, 0, ldb, accumulate, c, ldc);
    return;
  }
  prepare_matmuls(team_.size());
  // Rows [begin, end) of c take rows [begin, end) of op(a): rows of a, or columns of the stored aᵀ.
  team_.run(m, row_grain, [&](std::int64_t begin, std::int64_t end) {
    multiply_here(r, transpose_a, transpose_b, static_cast<int>(end - begin), n, k, transpose_a ? begin : begin * lda,
                  lda, 0, ldb, accumulate, c + begin * ldc, ldc);
  });
}

}  // namespace troupe::compute::cpu
