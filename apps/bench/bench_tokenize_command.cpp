// troupe bench tokenize: Troupe's byte-level BPE (compute/data/bpe_tokenizer.hpp) on one thread and
// on more (parallel_encode.hpp), and with --vs-python the `tokenizers` library on one thread
// (scripts/bench/tokenizers_encode.py), on the same text and tokenizer.json, in one command. The
// text is --text, or Debian's license texts repeated up to --mb megabytes (written to a temporary
// file the script reads too). Prints tokens per second per row and the ratios.
//
//   troupe bench tokenize --tokenizer gpt2/tokenizer.json --mb 100 --vs-python python3

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "apps/bench/bench_commands.hpp"
#include "apps/bench/pytorch_script.hpp"
#include "apps/exit_codes.hpp"
#include "compute/data/bpe_tokenizer.hpp"
#include "compute/data/parallel_encode.hpp"

namespace troupe::apps {
namespace {

namespace fs = std::filesystem;

Expected<std::string> bench_text(const BenchTokenizeOptions& options) {
  if (!options.text.empty()) {
    std::ifstream in(options.text, std::ios::binary);
    if (!in) return Error{"--text " + options.text + ": cannot be read"};
    return std::string{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  }
  std::string licenses;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator("/usr/share/common-licenses"))
    if (entry.is_regular_file()) files.push_back(entry.path());
  std::sort(files.begin(), files.end());
  for (const auto& file : files) {
    std::ifstream in(file, std::ios::binary);
    licenses.append(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  if (licenses.empty()) return Error{"no --text given and /usr/share/common-licenses holds no text to repeat"};
  const std::size_t want = static_cast<std::size_t>(options.megabytes * 1e6);
  std::string text;
  while (text.size() < want) text += licenses;
  return text;
}

}  // namespace

int run_bench_tokenize(const BenchTokenizeOptions& options) {
  auto tokenizer = compute::BpeTokenizer::load(options.tokenizer);
  if (!tokenizer) return error_exit(ExitCode::bad_input, tokenizer.error().message);
  auto text = bench_text(options);
  if (!text) return error_exit(ExitCode::bad_input, text.error().message);
  std::printf("bench tokenize: %.1f MB of %s, %s (vocabulary %d)\n", static_cast<double>(text->size()) / 1e6,
              options.text.empty() ? "license texts" : options.text.c_str(), options.tokenizer.c_str(),
              tokenizer->vocab_size());
  double one_thread = 0;
  for (int threads : options.threads) {
    const auto started = std::chrono::steady_clock::now();
    const std::vector<std::int32_t> ids = compute::encode_parallel(*tokenizer, *text, threads);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    const double rate = static_cast<double>(ids.size()) / seconds;
    if (threads == 1) one_thread = rate;
    std::printf("  troupe, %d thread%s: %zu tokens in %.2f s, %.3g tokens/s, %.1f MB/s", threads,
                threads == 1 ? "" : "s", ids.size(), seconds, rate, static_cast<double>(text->size()) / 1e6 / seconds);
    if (threads != 1 && one_thread > 0) std::printf(" (%.2fx one thread)", rate / one_thread);
    std::printf("\n");
    std::fflush(stdout);
  }
  if (options.python.empty()) return to_int(ExitCode::success);
  const std::string script = find_bench_script("tokenizers_encode.py");
  if (script.empty())
    return error_exit(ExitCode::bad_input, "scripts/bench/tokenizers_encode.py is not found beside this troupe");
  if (!is_executable_program(options.python))
    return error_exit(ExitCode::bad_input, "--vs-python " + options.python + ": no such program");
  std::string path = options.text;
  const fs::path temporary =
      fs::temp_directory_path() / ("troupe-bench-tokenize-" + std::to_string(::getpid()) + ".txt");
  if (path.empty()) {
    std::ofstream(temporary, std::ios::binary) << *text;
    path = temporary.string();
  }
  const ScriptRun run = run_python_script(options.python, script, {"--tokenizer", options.tokenizer, "--text", path});
  std::error_code ignored;
  fs::remove(temporary, ignored);
  if (run.exit_code == 77) {
    std::printf("  tokenizers: skipped (%s)\n", run.lines.empty() ? "" : run.lines.back().c_str());
    return to_int(ExitCode::success);
  }
  if (run.exit_code != 0 || !run.tokens_per_s)
    return error_exit(ExitCode::failure, "tokenizers_encode.py failed: " +
                                             (run.lines.empty() ? std::string("no output") : run.lines.back()));
  std::printf("  tokenizers (Python), 1 thread: %.3g tokens/s\n", *run.tokens_per_s);
  if (one_thread > 0) std::printf("  troupe / tokenizers at one thread: %.2fx\n", one_thread / *run.tokens_per_s);
  return to_int(ExitCode::success);
}

Command add_bench_tokenize_command(CLI::App& bench) {
  auto options = std::make_shared<BenchTokenizeOptions>();
  CLI::App* command =
      bench.add_subcommand("tokenize", "Tokenizer throughput, against Hugging Face tokenizers with --vs-python.");
  command->add_option("--tokenizer", options->tokenizer, "Hugging Face tokenizer.json (byte-level BPE)")
      ->type_name("FILE")
      ->required();
  command->add_option("--text", options->text, "UTF-8 text; default: license texts repeated to --mb")
      ->type_name("FILE");
  command->add_option("--mb", options->megabytes, "megabytes of license text")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  command->add_option("--threads", options->threads, "thread counts, one row each")
      ->delimiter(',')
      ->capture_default_str();
  command->add_option("--vs-python", options->python, "a python with `tokenizers`: the library on one thread")
      ->type_name("PYTHON");
  return refusing_unknown(*command, [options] { return run_bench_tokenize(*options); });
}

}  // namespace troupe::apps
