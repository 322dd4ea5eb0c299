#include "compute/data/parallel_encode.hpp"

#include <atomic>
#include <chrono>
#include <thread>

namespace troupe::compute {
namespace {

bool ascii_non_space(char c) {
  const auto b = static_cast<unsigned char>(c);
  return b < 0x80 && b != ' ' && !(b >= 0x09 && b <= 0x0D);
}

}  // namespace

std::vector<std::string_view> cut_for_encoding(std::string_view text, std::size_t target_bytes,
                                               const BpeTokenizer& tokenizer) {
  std::vector<std::string_view> chunks;
  if (tokenizer.added_tokens_hold_newline()) {
    if (!text.empty()) chunks.push_back(text);
    return chunks;
  }
  std::size_t start = 0;
  while (start < text.size()) {
    std::size_t cut = text.size();
    for (std::size_t nl = text.find('\n', start + std::max<std::size_t>(target_bytes, 1) - 1);
         nl != std::string_view::npos; nl = text.find('\n', nl + 1)) {
      if (nl >= 1 && nl + 1 < text.size() && ascii_non_space(text[nl - 1]) && ascii_non_space(text[nl + 1])) {
        cut = nl + 1;
        break;
      }
    }
    chunks.push_back(text.substr(start, cut - start));
    start = cut;
  }
  return chunks;
}

std::vector<std::int32_t> encode_parallel(const BpeTokenizer& tokenizer, std::string_view text, int threads,
                                          std::size_t chunk_bytes, const std::function<void(std::size_t)>& progress) {
  const std::vector<std::string_view> chunks = cut_for_encoding(text, chunk_bytes, tokenizer);
  std::vector<std::vector<std::int32_t>> ids(chunks.size());
  std::atomic<std::size_t> next{0}, bytes_done{0}, chunks_done{0};
  auto work = [&] {
    for (std::size_t k = next++; k < chunks.size(); k = next++) {
      tokenizer.encode(chunks[k], ids[k]);
      bytes_done += chunks[k].size();
      ++chunks_done;
    }
  };
  // With progress to report this thread reports (asleep between reports) and `threads` others
  // encode; without, it is one of the `threads`.
  const int helpers = std::max(threads, 1) - (progress ? 0 : 1);
  std::vector<std::thread> pool;
  for (int t = 0; t < helpers; ++t) pool.emplace_back(work);
  if (progress) {
    while (chunks_done < chunks.size()) {
      progress(bytes_done);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  } else {
    work();
  }
  for (auto& t : pool) t.join();
  if (progress) progress(bytes_done);
  std::vector<std::int32_t> out;
  std::size_t total = 0;
  for (const auto& part : ids) total += part.size();
  out.reserve(total);
  for (const auto& part : ids) out.insert(out.end(), part.begin(), part.end());
  return out;
}

}  // namespace troupe::compute
