#include "actors/worker/job_data.hpp"

#include "compute/data/bpe_tokenizer.hpp"
#include "compute/data/parallel_encode.hpp"
#include "compute/data/split.hpp"
#include "compute/data/text_corpus.hpp"
#include "compute/data/token_file.hpp"
#include "compute/data/vocab_check.hpp"

namespace troupe::actors {

Expected<JobData> load_job_data(const ResolvedJob& job) {
  const DataOptions& d = job.config.data;
  const std::size_t window = static_cast<std::size_t>(job.config.train.seq_len) + 1;
  JobData data;
  std::string source;
  if (d.train_tokens.empty() && !d.tokenizer.empty()) {
    // The files' texts joined as one, in data.tokenizer's tokens; the split checks the count.
    auto tokenizer = compute::BpeTokenizer::load(d.tokenizer);
    if (!tokenizer) return Error{"data.tokenizer: " + tokenizer.error().message};
    auto corpus = compute::scan_text_corpus(d.corpus);
    if (!corpus) return corpus.error();
    const std::string text(corpus->tokens.begin(), corpus->tokens.end());
    const std::vector<std::int32_t> ids = compute::encode_parallel(*tokenizer, text, 1);
    if (tokenizer->vocab_size() > 65536)
      return Error{"data.tokenizer " + d.tokenizer + ": " + std::to_string(tokenizer->vocab_size()) +
                   " tokens do not fit the 16-bit tokens Troupe trains on"};
    source = d.corpus + " (" + std::to_string(corpus->files.size()) + " text files, " + d.tokenizer + " tokens)";
    data.train_storage.assign(ids.begin(), ids.end());
  } else if (d.train_tokens.empty()) {
    auto corpus = compute::scan_text_corpus(d.corpus, compute::min_tokens_for_split(window, d.val_fraction));
    if (!corpus) return corpus.error();
    source = d.corpus + " (" + std::to_string(corpus->files.size()) + " text files, byte tokens)";
    data.train_storage = std::move(corpus->tokens);
  } else {
    auto tokens = compute::load_token_file(d.train_tokens);
    if (!tokens) return tokens.error();
    source = d.train_tokens;
    data.train_storage = std::move(*tokens);
  }
  if (Status fits = compute::check_tokens_fit(data.train_storage, job.model.vocab_size, source); !fits)
    return fits.error();

  if (d.val_tokens.empty()) {
    auto split = compute::split_train_val(data.train_storage, d.val_fraction, window);
    if (!split) return Error{source + ": " + split.error().message};
    data.train = split->train;
    data.val = split->val;
  } else {
    auto val = compute::load_token_file(d.val_tokens);
    if (!val) return val.error();
    data.val_storage = std::move(*val);
    if (Status fits = compute::check_tokens_fit(data.val_storage, job.model.vocab_size, d.val_tokens); !fits)
      return fits.error();
    data.train = data.train_storage;
    data.val = data.val_storage;
    for (const auto& [part, name] : {std::pair{data.train, d.train_tokens}, std::pair{data.val, d.val_tokens}})
      if (part.size() < window)
        return Error{name + ": " + std::to_string(part.size()) + " tokens, fewer than one window of " +
                     std::to_string(window) + " (train.seq_len + 1)"};
  }
  data.description = source + ": " + std::to_string(data.train.size()) + " training and " +
                     std::to_string(data.val.size()) + " validation tokens";
  return data;
}

}  // namespace troupe::actors
