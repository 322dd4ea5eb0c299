#include "comm/engine_address.hpp"

#include <string>

namespace troupe::comm {
namespace {

void put_le(std::vector<std::uint8_t>& out, std::uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(value >> (8 * i)));
}

void put_block(std::vector<std::uint8_t>& out, const std::vector<std::uint8_t>& block) {
  put_le(out, block.size(), 4);
  for (std::uint8_t b : block) out.push_back(b);
}

// Reads the fields of an address in order; a field past the end leaves ok() false.
class Reader {
 public:
  explicit Reader(std::span<const std::uint8_t> bytes) : bytes_(bytes) {}
  std::uint64_t le(int width) {
    if (!has(width)) return 0;
    std::uint64_t value = 0;
    for (int i = 0; i < width; ++i) value |= std::uint64_t{bytes_[at_ + i]} << (8 * i);
    at_ += width;
    return value;
  }
  std::vector<std::uint8_t> block(std::uint64_t length) {
    if (!has(length)) return {};
    std::vector<std::uint8_t> out(bytes_.begin() + at_, bytes_.begin() + at_ + length);
    at_ += length;
    return out;
  }
  bool ok() const { return ok_; }
  bool at_end() const { return at_ == bytes_.size(); }

 private:
  bool has(std::uint64_t length) {
    ok_ = ok_ && length <= bytes_.size() - at_;
    return ok_;
  }
  std::span<const std::uint8_t> bytes_;
  std::size_t at_ = 0;
  bool ok_ = true;
};

}  // namespace

std::vector<std::uint8_t> encode_address(const EngineAddress& address) {
  std::vector<std::uint8_t> out;
  put_block(out, address.worker);
  put_block(out, address.region_key);
  put_le(out, address.region_base, 8);
  put_le(out, address.region_bytes, 8);
  return out;
}

Expected<EngineAddress> decode_address(std::span<const std::uint8_t> bytes) {
  Reader in(bytes);
  EngineAddress address;
  address.worker = in.block(in.le(4));
  address.region_key = in.block(in.le(4));
  address.region_base = in.le(8);
  address.region_bytes = in.le(8);
  if (!in.ok() || !in.at_end() || address.worker.empty()) {
    return Error{"comm: a malformed engine address (" + std::to_string(bytes.size()) +
                 " bytes): not a worker address, a region key, a base and a size"};
  }
  return address;
}

}  // namespace troupe::comm
