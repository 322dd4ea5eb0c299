#pragma once
// Hugging Face's safetensors format: an 8-byte little-endian header length,
// a JSON header {name: {dtype, shape, data_offsets}, "__metadata__": {string: string}}, then the
// raw little-endian data (https://huggingface.co/docs/safetensors). Our own writer and reader,
// because checkpoint shards and the GPT-2 export need nothing more and a loader must check every
// number in a header before it trusts it: a torn or foreign file is an error naming the file,
// never a read out of bounds. The writer writes F32; the reader also reads BF16 and F16, the
// storage of Hugging Face checkpoints, widening them to float exactly.

#include <bit>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/mapped_file.hpp"
#include "compute/expected.hpp"
#include "compute/tensor.hpp"

namespace troupe::checkpoint {

// Floats go to and come from the file as raw bytes.
static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

using Metadata = std::map<std::string, std::string>;

struct TensorToWrite {
  std::string name;
  compute::Shape shape;
  std::span<const float> values;  // shape_numel(shape) floats
};

struct WrittenFile {
  std::uint64_t bytes = 0;
  std::string hash;  // of every byte of the file (file_hash.hpp)
};

// Writes `path`.partial front to back, hashing as it goes, syncs it and renames it to `path`, so
// no reader ever sees `path` half written (an export replacing an older file stays whole). On
// failure the partial file is removed and `path` is as it was. The data section is 8-byte aligned
// (the header is padded with spaces, as the format allows).
Expected<WrittenFile> write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                                        const Metadata& metadata);

// The element types the reader takes, by their names in a header.
enum class StoredDType { f32, bf16, f16 };
const char* stored_dtype_name(StoredDType dtype);  // "F32", "BF16", "F16"
std::size_t stored_dtype_bytes(StoredDType dtype);

struct StoredTensor {
  std::string name;
  compute::Shape shape;
  std::span<const std::byte> bytes;  // inside the mapped file; not necessarily aligned
  StoredDType dtype = StoredDType::f32;
};

class SafetensorsFile {
 public:
  // Parses and checks a mapped file: header length inside the file, JSON header, dtype F32, BF16 or F16,
  // byte ranges inside the data, matching their shapes, neither overlapping nor leaving holes.
  static Expected<SafetensorsFile> parse(MappedFile file);
  static Expected<SafetensorsFile> open(const std::filesystem::path& path);

  const std::vector<StoredTensor>& tensors() const { return tensors_; }  // in data order
  const Metadata& metadata() const { return metadata_; }
  const std::filesystem::path& path() const { return file_.path(); }

 private:
  SafetensorsFile(MappedFile file, std::vector<StoredTensor> tensors, Metadata metadata)
      : file_(std::move(file)), tensors_(std::move(tensors)), metadata_(std::move(metadata)) {}

  MappedFile file_;
  std::vector<StoredTensor> tensors_;
  Metadata metadata_;
};

// Copies elements [from, from + out.size()) of a stored tensor, widened to float (exact).
void copy_floats(const StoredTensor& tensor, std::int64_t from, std::span<float> out);

}  // namespace troupe::checkpoint
