#pragma once
// The token streams a job trains and validates on, from what data.* asks for: a text corpus
// (byte tokens, split train/val) or llm.c token files (validation from its own file or split off).

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "actors/job_options.hpp"
#include "compute/expected.hpp"

namespace troupe::actors {

struct JobData {
  std::vector<std::uint16_t> train_storage, val_storage;  // val_storage empty when split off train
  std::span<const std::uint16_t> train, val;
  std::string description;  // one line for the log: where the tokens came from and how many
};

// Errors name the file or directory and what is wrong: missing, unreadable, not the format,
// too short for one window of train.seq_len + 1 tokens, token ids beyond model.vocab_size.
Expected<JobData> load_job_data(const ResolvedJob& job);

}  // namespace troupe::actors
