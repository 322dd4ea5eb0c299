#include "compute/data/token_file.hpp"

#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <limits>
#include <memory>

#include "compute/data/file_kind.hpp"

namespace troupe::compute {
namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

Error file_error(const std::string& path, const std::string& problem) {
  return Error{"token file '" + path + "': " + problem};
}

std::int32_t read_le32(const std::uint8_t* p) {
  return static_cast<std::int32_t>(std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 |
                                   std::uint32_t{p[3]} << 24);
}

void write_le32(std::uint8_t* p, std::int32_t value) {
  const auto v = static_cast<std::uint32_t>(value);
  for (int k = 0; k < 4; ++k) p[k] = static_cast<std::uint8_t>(v >> (8 * k));
}

// The body is stored little-endian; on a big-endian host swap in place after reading and
// before writing.
template <typename Token>
void to_or_from_little_endian(std::span<Token> tokens) {
  if constexpr (std::endian::native == std::endian::big) {
    for (auto& t : tokens) {
      Token swapped = 0;
      for (std::size_t k = 0; k < sizeof(Token); ++k)
        swapped = static_cast<Token>(swapped << 8 | ((t >> (8 * k)) & 0xff));
      t = swapped;
    }
  }
}

// The header, then the tokens as `Token`, via a temporary file and a rename.
template <typename Token>
Status write_tokens(const std::string& path, std::span<const Token> tokens, std::int32_t magic, std::int32_t version) {
  if (tokens.size() > static_cast<std::size_t>(std::numeric_limits<std::int32_t>::max()))
    return file_error(path, std::to_string(tokens.size()) +
                                " tokens do not fit the format's int32 count; split the data into several files");
  const std::string tmp = path + ".tmp";
  File f(std::fopen(tmp.c_str(), "wb"));
  if (!f) return file_error(tmp, std::string("cannot create: ") + std::strerror(errno));

  std::array<std::uint8_t, token_file_header_bytes> header{};
  write_le32(&header[0], magic);
  write_le32(&header[4], version);
  write_le32(&header[8], static_cast<std::int32_t>(tokens.size()));
  std::vector<Token> swapped;
  std::span<const Token> body = tokens;
  if constexpr (std::endian::native == std::endian::big) {
    swapped.assign(tokens.begin(), tokens.end());
    to_or_from_little_endian<Token>(swapped);
    body = swapped;
  }
  const bool written = std::fwrite(header.data(), 1, header.size(), f.get()) == header.size() &&
                       std::fwrite(body.data(), sizeof(Token), body.size(), f.get()) == body.size() &&
                       std::fflush(f.get()) == 0 && ::fsync(::fileno(f.get())) == 0;
  const int write_errno = errno;
  if (!written || std::fclose(f.release()) != 0) {
    const int err = written ? errno : write_errno;
    std::remove(tmp.c_str());
    return file_error(tmp, std::string("cannot write: ") + std::strerror(err));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    return file_error(path, "cannot rename " + tmp + " into place: " + ec.message());
  }
  return Status::success();
}

}  // namespace

Expected<std::vector<std::uint16_t>> load_token_file(const std::string& path) {
  if (auto special = special_file_problem(path)) return file_error(path, *special);
  File f(std::fopen(path.c_str(), "rb"));
  if (!f) return file_error(path, std::string("cannot open: ") + std::strerror(errno));
  std::error_code ec;
  const std::uintmax_t size = std::filesystem::file_size(path, ec);
  if (ec) return file_error(path, "cannot read its size: " + ec.message());
  if (size < token_file_header_bytes)
    return file_error(path, "shorter than the " + std::to_string(token_file_header_bytes) + "-byte header (" +
                                std::to_string(size) + " bytes)");

  std::array<std::uint8_t, token_file_header_bytes> header{};
  if (std::fread(header.data(), 1, header.size(), f.get()) != header.size())
    return file_error(path, "cannot read the header");
  const std::int32_t magic = read_le32(&header[0]);
  const std::int32_t version = read_le32(&header[4]);
  const std::int32_t count = read_le32(&header[8]);
  if (magic == token_file32_magic)
    return file_error(path, "32-bit tokens (magic " + std::to_string(magic) +
                                ", llm.c's LLaMA-3 layout) are not read: Troupe trains vocabularies of up to 65536 "
                                "tokens, stored in 16 bits");
  if (magic != token_file_magic)
    return file_error(path, "wrong magic number: found " + std::to_string(magic) + ", expected " +
                                std::to_string(token_file_magic) + " (not an llm.c .bin token file)");
  if (version != token_file_version)
    return file_error(path, "unsupported version " + std::to_string(version) + " (only version " +
                                std::to_string(token_file_version) + ", uint16 tokens, is supported)");
  if (count < 0) return file_error(path, "negative token count " + std::to_string(count) + " in the header");
  const std::uintmax_t expected_size = token_file_header_bytes + std::uintmax_t{2} * static_cast<std::uint32_t>(count);
  if (size != expected_size)
    return file_error(path, "size does not match the token count: the header says " + std::to_string(count) +
                                " tokens, i.e. " + std::to_string(expected_size) + " bytes, but the file has " +
                                std::to_string(size) + " bytes");

  std::vector<std::uint16_t> tokens(static_cast<std::size_t>(count));
  if (std::fread(tokens.data(), sizeof(std::uint16_t), tokens.size(), f.get()) != tokens.size())
    return file_error(path, "cannot read the " + std::to_string(count) + " tokens");
  to_or_from_little_endian<std::uint16_t>(tokens);
  return tokens;
}

Status write_token_file(const std::string& path, std::span<const std::uint16_t> tokens) {
  return write_tokens(path, tokens, token_file_magic, token_file_version);
}

Status write_token_file32(const std::string& path, std::span<const std::uint32_t> tokens) {
  return write_tokens(path, tokens, token_file32_magic, token_file32_version);
}

}  // namespace troupe::compute
