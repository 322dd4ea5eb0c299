#include "checkpoint/safetensors.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

#include "checkpoint/durable_file.hpp"
#include "checkpoint/file_hash.hpp"

namespace troupe::checkpoint {
namespace {

using nlohmann::json;

// The reference implementation's limit; real headers are a few MB at most.
constexpr std::uint64_t max_header_bytes = 100u << 20;

Error file_error(const std::filesystem::path& path, const std::string& problem) {
  return Error{"safetensors file '" + path.string() + "': " + problem};
}

std::string header_text(std::span<const TensorToWrite> tensors, const Metadata& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const auto& t : tensors) {
    TROUPE_CHECK(!header.contains(t.name), "tensor name written twice: " + t.name);
    TROUPE_CHECK(static_cast<std::int64_t>(t.values.size()) == compute::shape_numel(t.shape), t.name);
    const std::uint64_t bytes = t.values.size() * sizeof(float);
    header[t.name] = {{"dtype", "F32"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.resize((text.size() + 7) / 8 * 8, ' ');
  return text;
}

Status write_all(DurableWriter& writer, StreamingHash& hash, const void* data, std::size_t size) {
  hash.update(data, size);
  return writer.write(data, size);
}

std::optional<StoredDType> parse_dtype(const json& name) {
  for (StoredDType dtype : {StoredDType::f32, StoredDType::bf16, StoredDType::f16})
    if (name == stored_dtype_name(dtype)) return dtype;
  return std::nullopt;
}

// IEEE half: 1 sign, 5 exponent, 10 mantissa bits; every value is a float exactly.
float half_to_float(std::uint16_t bits) {
  const float sign = (bits & 0x8000u) ? -1.0f : 1.0f;
  const int exponent = (bits >> 10) & 0x1f;
  const int mantissa = bits & 0x3ff;
  if (exponent == 0) return sign * std::ldexp(static_cast<float>(mantissa), -24);
  if (exponent == 31) return mantissa == 0 ? sign * INFINITY : NAN;
  return sign * std::ldexp(static_cast<float>(mantissa | 0x400), exponent - 25);
}

}  // namespace

const char* stored_dtype_name(StoredDType dtype) {
  switch (dtype) {
    case StoredDType::f32: return "F32";
    case StoredDType::bf16: return "BF16";
    case StoredDType::f16: return "F16";
  }
  return "?";
}

std::size_t stored_dtype_bytes(StoredDType dtype) { return dtype == StoredDType::f32 ? 4 : 2; }

Expected<WrittenFile> write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                                        const Metadata& metadata) {
  const std::string header = header_text(tensors, metadata);
  std::byte length[8];
  for (int k = 0; k < 8; ++k) length[k] = static_cast<std::byte>(std::uint64_t{header.size()} >> (8 * k));

  std::filesystem::path partial = path;
  partial += ".partial";
  auto writer = DurableWriter::create(partial);
  if (!writer) return Error{"safetensors file " + writer.error().message};
  StreamingHash hash;
  WrittenFile written{8 + header.size(), ""};
  Status status = write_all(*writer, hash, length, sizeof length);
  if (status) status = write_all(*writer, hash, header.data(), header.size());
  for (const auto& t : tensors) {
    if (!status) break;
    status = write_all(*writer, hash, t.values.data(), t.values.size_bytes());
    written.bytes += t.values.size_bytes();
  }
  if (status) status = writer->finish();
  std::error_code ignored;
  if (!status) {
    std::filesystem::remove(partial, ignored);
    return Error{"safetensors file " + status.error().message};
  }
  std::error_code renamed;
  std::filesystem::rename(partial, path, renamed);
  if (renamed) {
    std::filesystem::remove(partial, ignored);
    return Error{"safetensors file '" + path.string() + "': cannot rename " + partial.filename().string() +
                 " into place: " + renamed.message()};
  }
  written.hash = hash.hex();
  return written;
}

Expected<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path) {
  auto file = MappedFile::open(path);
  if (!file) return Error{"safetensors file " + file.error().message};
  return parse(std::move(*file));
}

Expected<SafetensorsFile> SafetensorsFile::parse(MappedFile file) {
  const auto& path = file.path();
  const std::span<const std::byte> bytes = file.bytes();
  if (bytes.size() < 8) return file_error(path, "shorter than the 8-byte header length (" + std::to_string(bytes.size()) + " bytes)");
  std::uint64_t header_bytes = 0;
  for (int k = 0; k < 8; ++k) header_bytes |= std::uint64_t{std::to_integer<std::uint8_t>(bytes[k])} << (8 * k);
  if (header_bytes > max_header_bytes)
    return file_error(path, "header length " + std::to_string(header_bytes) + " is over the 100 MiB limit (not a safetensors file?)");
  if (header_bytes > bytes.size() - 8)
    return file_error(path, "header length " + std::to_string(header_bytes) + " runs past the end of the file (" +
                                std::to_string(bytes.size()) + " bytes)");
  const auto* header_begin = reinterpret_cast<const char*>(bytes.data() + 8);
  const json header = json::parse(header_begin, header_begin + header_bytes, nullptr, false);
  if (header.is_discarded() || !header.is_object()) return file_error(path, "the header is not a JSON object");
  const std::span<const std::byte> data = bytes.subspan(8 + header_bytes);

  Metadata metadata;
  std::vector<StoredTensor> tensors;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) return file_error(path, "__metadata__ is not an object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string()) return file_error(path, "__metadata__ value of '" + key + "' is not a string");
        metadata[key] = value.get<std::string>();
      }
      continue;
    }
    auto bad = [&](const std::string& problem) { return file_error(path, "tensor '" + name + "' " + problem); };
    if (!entry.is_object() || !entry.contains("dtype") || !entry.contains("shape") || !entry.contains("data_offsets"))
      return bad("needs dtype, shape and data_offsets");
    const std::optional<StoredDType> dtype = parse_dtype(entry["dtype"]);
    if (!dtype) return bad("has dtype " + entry["dtype"].dump() + "; only F32, BF16 and F16 are read");
    const std::uint64_t element_bytes = stored_dtype_bytes(*dtype);
    const json& shape_json = entry["shape"];
    const json& offsets = entry["data_offsets"];
    if (!shape_json.is_array()) return bad("has a shape that is not a list");
    compute::Shape shape;
    std::uint64_t numel = 1;
    for (const auto& d : shape_json) {
      if (!d.is_number_unsigned() || d.get<std::uint64_t>() > (std::uint64_t{1} << 40))
        return bad("has a bad dimension " + d.dump());
      shape.push_back(d.get<std::int64_t>());
      numel *= d.get<std::uint64_t>();
      if (numel > (std::uint64_t{1} << 40)) return bad("is implausibly large");
    }
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      return bad("needs data_offsets [begin, end]");
    const auto begin = offsets[0].get<std::uint64_t>();
    const auto end = offsets[1].get<std::uint64_t>();
    if (begin > end) return bad("has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) + "] backwards");
    if (end > data.size())
      return bad("ends at data byte " + std::to_string(end) + ", past the end of the data (" +
                 std::to_string(data.size()) + " bytes; the file is truncated?)");
    if (end - begin != numel * element_bytes)
      return bad("has " + std::to_string(end - begin) + " data bytes, its shape " + compute::shape_string(shape) +
                 " needs " + std::to_string(numel * element_bytes));
    tensors.push_back(StoredTensor{name, std::move(shape), data.subspan(begin, end - begin), *dtype});
    ranges.emplace_back(begin, end);
  }

  // The format allows neither overlaps nor holes: every data byte belongs to exactly one tensor.
  std::vector<std::size_t> order(tensors.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return ranges[a] < ranges[b]; });
  std::uint64_t covered = 0;
  for (std::size_t k = 0; k < order.size(); ++k) {
    const auto [begin, end] = ranges[order[k]];
    if (begin < covered)
      return file_error(path, "tensors '" + tensors[order[k - 1]].name + "' and '" + tensors[order[k]].name +
                                  "' overlap in the data");
    if (begin > covered)
      return file_error(path, "data bytes [" + std::to_string(covered) + ", " + std::to_string(begin) +
                                  ") belong to no tensor");
    covered = end;
  }
  if (covered != data.size())
    return file_error(path, std::to_string(data.size() - covered) + " data bytes after the last tensor belong to no tensor");
  std::vector<StoredTensor> in_data_order;
  for (std::size_t i : order) in_data_order.push_back(std::move(tensors[i]));
  return SafetensorsFile(std::move(file), std::move(in_data_order), std::move(metadata));
}

void copy_floats(const StoredTensor& tensor, std::int64_t from, std::span<float> out) {
  const auto element_bytes = static_cast<std::int64_t>(stored_dtype_bytes(tensor.dtype));
  TROUPE_CHECK(from >= 0 && (from + static_cast<std::int64_t>(out.size())) * element_bytes <=
                                static_cast<std::int64_t>(tensor.bytes.size()),
               tensor.name);
  const std::byte* first = tensor.bytes.data() + from * element_bytes;
  if (tensor.dtype == StoredDType::f32) {
    std::memcpy(out.data(), first, out.size_bytes());
    return;
  }
  for (std::size_t i = 0; i < out.size(); ++i) {
    std::uint16_t bits;
    std::memcpy(&bits, first + 2 * i, 2);
    out[i] = tensor.dtype == StoredDType::bf16 ? std::bit_cast<float>(std::uint32_t{bits} << 16) : half_to_float(bits);
  }
}

}  // namespace troupe::checkpoint
