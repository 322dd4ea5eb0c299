#pragma once
// A tensor is a typed, shaped view of bytes on one device. Storage is always owned: allocated
// by zeros() or handed over to adopt() with its deleter, and freed when the last view goes, so
// no view can outlive its bytes. Views and slices share storage; nothing here copies data.
// Row-major, contiguous. Every allocation counts in the process's memory ledger
// (compute/memory_ledger.hpp) under the allocating thread's MemoryScope until its storage goes.

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "compute/check.hpp"

namespace troupe::compute {

enum class DType : std::uint8_t { f32, f64, bf16, i32 };
enum class Device : std::uint8_t { cpu, cuda };

std::size_t dtype_size(DType dtype);
std::string_view dtype_name(DType dtype);
std::string_view device_name(Device device);

using Shape = std::vector<std::int64_t>;
std::int64_t shape_numel(const Shape& shape);
std::string shape_string(const Shape& shape);

class Tensor {
 public:
  Tensor() = default;

  // Owned CPU storage, 64-byte aligned and zero-filled.
  static Tensor zeros(Shape shape, DType dtype);
  // Takes ownership of memory freed by `deleter` (backends use this for device memory).
  static Tensor adopt(void* data, Shape shape, DType dtype, Device device, void (*deleter)(void*));
  // A token tensor stands for a device tensor by its shape and dtype alone (the sim backend's,
  // train.backend sim): its storage is address space with no memory behind it until written, so
  // it reads as zeros and a model of any size costs a rank kilobytes. Its values are not kept:
  // the sim backend's copies and fills leave it, a message of it carries only its size (the comm
  // engine's token messages), and nothing computes on it. The memory ledger, which counts what a
  // process holds, does not count it.
  static Tensor token(Shape shape, DType dtype);

  bool defined() const { return static_cast<bool>(storage_); }
  // Whether this view alone holds its storage: no other view, slice or transfer does, so nothing
  // else reads it or may still write it.
  bool sole_holder() const { return storage_.use_count() == 1; }
  bool is_token() const { return token_; }
  // Token tensors of this many bytes or more move as token messages (comm/engine.hpp); a smaller
  // one (a view into a larger) moves as bytes, which read as zeros, so that the two ends of a
  // message agree whatever their tensors are views of. The sim backend makes its floating-point
  // tensors of this size and more token tensors.
  static constexpr std::size_t token_bytes_from = 64 * 1024;
  bool moves_as_token() const { return token_ && nbytes() >= token_bytes_from; }
  DType dtype() const { return dtype_; }
  Device device() const { return device_; }
  const Shape& shape() const { return shape_; }
  int rank() const { return static_cast<int>(shape_.size()); }
  std::int64_t dim(int axis) const;  // negative axes count from the end
  std::int64_t numel() const { return shape_numel(shape_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }

  void* data() const { return static_cast<char*>(storage_.get()) + byte_offset_; }
  template <typename T>
  T* data_as() const {
    return static_cast<T*>(data());
  }

  // Same elements, another shape (numel must match).
  Tensor reshape(Shape shape) const;
  // `shape`-shaped view of the elements starting at flat element `offset`.
  Tensor slice(std::int64_t offset, Shape shape) const;
  // Rows [begin, end) along the first axis.
  Tensor rows(std::int64_t begin, std::int64_t end) const;

  std::string describe() const;  // "f32[8, 256, 384] on cpu"

 private:
  std::shared_ptr<void> storage_;
  std::size_t byte_offset_ = 0;
  Shape shape_;
  DType dtype_ = DType::f32;
  Device device_ = Device::cpu;
  bool token_ = false;
};

// Whether `data` points into a live token tensor's storage: for code that holds a tensor's
// elements by address (a checkpoint's held ranges), which then moves and saves their size alone.
bool is_token_memory(const void* data);

// Checks used by every backend op: a mismatch is an internal bug, reported with both tensors.
void check_same_shape(const Tensor& a, const Tensor& b, const char* what);
void check_dtype(const Tensor& t, DType dtype, const char* what);

}  // namespace troupe::compute
