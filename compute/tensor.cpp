#include "compute/tensor.hpp"

#include <sys/mman.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <sstream>

#include "compute/memory_ledger.hpp"

namespace troupe::compute {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::f32: return 4;
    case DType::f64: return 8;
    case DType::bf16: return 2;
    case DType::i32: return 4;
  }
  TROUPE_CHECK(false, "unknown dtype");
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "f32";
    case DType::f64: return "f64";
    case DType::bf16: return "bf16";
    case DType::i32: return "i32";
  }
  TROUPE_CHECK(false, "unknown dtype");
}

std::string_view device_name(Device device) { return device == Device::cpu ? "cpu" : "cuda"; }

std::int64_t shape_numel(const Shape& shape) {
  std::int64_t n = 1;
  for (auto d : shape) {
    TROUPE_CHECK(d >= 0, "negative extent in shape " + shape_string(shape));
    n *= d;
  }
  return n;
}

std::string shape_string(const Shape& shape) {
  std::ostringstream os;
  os << '[';
  for (std::size_t i = 0; i < shape.size(); ++i) os << (i ? ", " : "") << shape[i];
  os << ']';
  return os.str();
}

Tensor Tensor::zeros(Shape shape, DType dtype) {
  std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  std::size_t rounded = (bytes + 63) / 64 * 64;
  void* p = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
  TROUPE_CHECK(p != nullptr, "out of host memory allocating " + std::to_string(bytes) + " bytes");
  std::memset(p, 0, rounded == 0 ? 64 : rounded);
  // Counted as allocated: the rounded size, every page of it touched by the memset.
  const std::uint64_t counted = rounded == 0 ? 64 : rounded;
  const MemoryKind kind = current_memory_kind();
  memory_ledger().add(kind, counted);
  Tensor t;
  t.storage_ = std::shared_ptr<void>(p, [kind, counted](void* q) {
    std::free(q);
    memory_ledger().remove(kind, counted);
  });
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  return t;
}

namespace {

// Every live token tensor's storage, by its first byte: [first, first + bytes).
struct TokenRegions {
  std::mutex mutex;
  std::map<std::uintptr_t, std::size_t> by_first;
};
TokenRegions& token_regions() {
  static auto* regions = new TokenRegions;  // outlives every tensor, whatever the order of exit
  return *regions;
}

}  // namespace

bool is_token_memory(const void* data) {
  const auto at = reinterpret_cast<std::uintptr_t>(data);
  TokenRegions& regions = token_regions();
  std::lock_guard lock(regions.mutex);
  auto it = regions.by_first.upper_bound(at);
  if (it == regions.by_first.begin()) return false;
  --it;
  return at < it->first + it->second;
}

Tensor Tensor::token(Shape shape, DType dtype) {
  const std::size_t bytes = static_cast<std::size_t>(shape_numel(shape)) * dtype_size(dtype);
  const std::size_t mapped = std::max<std::size_t>(bytes, 1);
  // Private anonymous pages are made on first write; a read maps the kernel's one zero page.
  // MAP_NORESERVE: address space of a model that would not fit is no commitment of memory.
  void* p = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  TROUPE_CHECK(p != MAP_FAILED,
               "cannot reserve " + std::to_string(bytes) + " bytes of address space for a token tensor");
  {
    std::lock_guard lock(token_regions().mutex);
    token_regions().by_first[reinterpret_cast<std::uintptr_t>(p)] = mapped;
  }
  Tensor t;
  t.storage_ = std::shared_ptr<void>(p, [mapped](void* q) {
    {
      std::lock_guard lock(token_regions().mutex);
      token_regions().by_first.erase(reinterpret_cast<std::uintptr_t>(q));
    }
    ::munmap(q, mapped);
  });
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.token_ = true;
  return t;
}

Tensor Tensor::adopt(void* data, Shape shape, DType dtype, Device device, void (*deleter)(void*)) {
  const std::uint64_t counted = static_cast<std::uint64_t>(shape_numel(shape)) * dtype_size(dtype);
  const MemoryKind kind = current_memory_kind();
  memory_ledger().add(kind, counted, device);
  Tensor t;
  t.storage_ = std::shared_ptr<void>(data, [deleter, kind, counted, device](void* q) {
    deleter(q);
    memory_ledger().remove(kind, counted, device);
  });
  t.shape_ = std::move(shape);
  t.dtype_ = dtype;
  t.device_ = device;
  return t;
}

std::int64_t Tensor::dim(int axis) const {
  int r = rank();
  int a = axis < 0 ? axis + r : axis;
  TROUPE_CHECK(a >= 0 && a < r, "axis " + std::to_string(axis) + " of " + describe());
  return shape_[static_cast<std::size_t>(a)];
}

Tensor Tensor::reshape(Shape shape) const {
  TROUPE_CHECK(shape_numel(shape) == numel(), "reshape " + describe() + " to " + shape_string(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::slice(std::int64_t offset, Shape shape) const {
  TROUPE_CHECK(offset >= 0 && offset + shape_numel(shape) <= numel(),
               "slice at " + std::to_string(offset) + " of " + shape_string(shape) + " from " + describe());
  Tensor t = *this;
  t.byte_offset_ += static_cast<std::size_t>(offset) * dtype_size(dtype_);
  t.shape_ = std::move(shape);
  return t;
}

Tensor Tensor::rows(std::int64_t begin, std::int64_t end) const {
  TROUPE_CHECK(rank() >= 1 && 0 <= begin && begin <= end && end <= shape_[0],
               "rows [" + std::to_string(begin) + ", " + std::to_string(end) + ") of " + describe());
  Shape s = shape_;
  s[0] = end - begin;
  return slice(begin * (numel() / std::max<std::int64_t>(shape_[0], 1)), std::move(s));
}

std::string Tensor::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype_) << shape_string(shape_) << " on " << device_name(device_) << (token_ ? " (token)" : "");
  return os.str();
}

void check_same_shape(const Tensor& a, const Tensor& b, const char* what) {
  TROUPE_CHECK(a.shape() == b.shape(), std::string(what) + ": " + a.describe() + " vs " + b.describe());
}

void check_dtype(const Tensor& t, DType dtype, const char* what) {
  TROUPE_CHECK(t.dtype() == dtype,
               std::string(what) + ": expected " + std::string(dtype_name(dtype)) + ", got " + t.describe());
}

}  // namespace troupe::compute
