// troupe tokenize: text files to an llm.c token file with a Hugging Face byte-level BPE tokenizer
// (compute/data/bpe_tokenizer.hpp): the files in the order given, each tokenized on its own (no
// piece spans two files), on --threads threads over chunks of each file (parallel_encode.hpp),
// progress on stderr. 16-bit tokens where the vocabulary fits them, else llm.c's 32-bit layout
// (docs/formats/token-file.md).
//
//   troupe tokenize --tokenizer gpt2/tokenizer.json --in a.txt b.txt --out tokens.bin

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <span>
#include <thread>

#include "apps/commands/commands.hpp"
#include "apps/exit_codes.hpp"
#include "compute/data/bpe_tokenizer.hpp"
#include "compute/data/file_kind.hpp"
#include "compute/data/parallel_encode.hpp"
#include "compute/data/token_file.hpp"
#include "compute/data/utf8.hpp"

namespace troupe::apps {
namespace {

namespace fs = std::filesystem;

Expected<std::string> read_text(const std::string& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) return Error{"--in " + path + ": no such file"};
  if (fs::is_directory(path, ec)) return Error{"--in " + path + " is a directory; name its files"};
  if (auto special = compute::special_file_problem(path)) return Error{"--in " + path + ": " + *special};
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error{"--in " + path + ": cannot be read"};
  std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  const auto bytes = std::span(reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
  if (const std::size_t bad = compute::utf8_first_invalid(bytes); bad != text.size())
    return Error{"--in " + path + ": not UTF-8 text (byte " + std::to_string(bad) + " starts no valid sequence)"};
  return text;
}

}  // namespace

int run_tokenize(const TokenizeOptions& options) {
  auto tokenizer = compute::BpeTokenizer::load(options.tokenizer);
  if (!tokenizer) return error_exit(ExitCode::bad_input, tokenizer.error().message);
  const int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  std::vector<std::int32_t> ids;
  std::size_t total_bytes = 0;
  const auto started = std::chrono::steady_clock::now();
  for (const std::string& path : options.in) {
    auto text = read_text(path);
    if (!text) return error_exit(ExitCode::bad_input, text.error().message);
    const double megabytes = static_cast<double>(text->size()) / 1e6;
    auto progress = [&](std::size_t done) {
      std::fprintf(stderr, "\rtokenize: %s: %.1f of %.1f MB", path.c_str(), static_cast<double>(done) / 1e6, megabytes);
    };
    const std::vector<std::int32_t> file_ids =
        compute::encode_parallel(*tokenizer, *text, threads, std::size_t{1} << 20, progress);
    std::fprintf(stderr, ", %zu tokens\n", file_ids.size());
    ids.insert(ids.end(), file_ids.begin(), file_ids.end());
    total_bytes += text->size();
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  const bool wide = tokenizer->vocab_size() > 65536;
  Status written = Status::success();
  if (wide) {
    written = compute::write_token_file32(options.out, std::vector<std::uint32_t>(ids.begin(), ids.end()));
  } else {
    written = compute::write_token_file(options.out, std::vector<std::uint16_t>(ids.begin(), ids.end()));
  }
  if (!written) return error_exit(ExitCode::failure, written.error().message);
  std::printf("wrote %s: %zu tokens (%s), vocabulary %d, from %zu files, %zu bytes, %.2f s on %d threads (%.1f MB/s)\n",
              options.out.c_str(), ids.size(), wide ? "32-bit" : "16-bit", tokenizer->vocab_size(), options.in.size(),
              total_bytes, seconds, threads, static_cast<double>(total_bytes) / 1e6 / std::max(seconds, 1e-9));
  return to_int(ExitCode::success);
}

Command add_tokenize_command(CLI::App& app) {
  auto options = std::make_shared<TokenizeOptions>();
  CLI::App* command =
      app.add_subcommand("tokenize", "Tokenize text files with a Hugging Face tokenizer.json into an llm.c .bin file.");
  command->add_option("--tokenizer", options->tokenizer, "Hugging Face tokenizer.json (byte-level BPE)")
      ->type_name("FILE")
      ->required();
  command->add_option("--in", options->in, "UTF-8 text files, in stream order")->type_name("TEXT...")->required();
  command->add_option("--out", options->out, "token file to write")->type_name("FILE")->required();
  command->add_option("--threads", options->threads, "threads; 0 = all cores")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  return refusing_unknown(*command, [options] { return run_tokenize(*options); });
}

}  // namespace troupe::apps
