#pragma once
// One rank's checkpoint file: the flat ranges it holds, each kind (param, adam_m, ...) cut at
// parameter borders into safetensors tensors named by global parameter name plus the slice held
// (tensor_name.hpp). Names, not offsets, make a shard readable by any later grid, and by tools
// that know nothing of the flat layout.

#include <cstdint>
#include <filesystem>
#include <span>
#include <string>
#include <vector>

#include "checkpoint/file_record.hpp"
#include "checkpoint/safetensors.hpp"
#include "compute/expected.hpp"
#include "compute/model/parameter_layout.hpp"

namespace troupe::checkpoint {

// Elements [begin, end) of the flat order of one kind, with their values.
struct Piece {
  std::string kind;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::span<const float> values;  // end - begin floats
};

// A piece whose values are a token tensor's (compute::is_token_memory: a sim rank's) stores no
// bytes: the shard records, per kind, the smallest range holding all such pieces of the kind as a
// token piece in its metadata ("token_pieces"), so a checkpoint of a simulated 13B model is
// kilobytes a rank. One range a kind, not one a piece: a tensor shard holds a run a row of a
// split matrix, hundreds of thousands at a 13B model's width, and the ranges between them belong
// to the other shards, whose state is token tensors alike. A stored piece wins over a token piece
// where they overlap (the loader).
//
// Writes `path` (synced) and then its sidecar record (record_path(path)), so a committer that
// sees the sidecar knows the shard is complete; the shard itself appears whole or not at all
// (write_safetensors). The record's name is path's file name. Pieces
// must lie inside the layout and must not store one tensor twice (checked: a violation is a bug
// in the caller).
Expected<FileRecord> write_shard(const std::filesystem::path& path, const compute::ParameterLayout& layout, int rank,
                                 std::span<const Piece> pieces);

// A stored tensor placed back in the flat order.
struct StoredPiece {
  std::string kind;
  std::int64_t begin = 0;
  std::int64_t end = 0;
  std::span<const std::byte> bytes;  // (end - begin) floats inside the mapped file; empty for a token piece
  bool token = false;                // a token tensor's range (no values; reads as zeros)
};

struct Shard {
  SafetensorsFile file;
  std::vector<StoredPiece> pieces;
};

// Parses a shard and places every tensor in `layout`'s flat order; a tensor whose name, shape or
// slice does not fit the layout is an error naming the file and the tensor.
Expected<Shard> read_shard(MappedFile file, const compute::ParameterLayout& layout);
Expected<Shard> read_shard(const std::filesystem::path& path, const compute::ParameterLayout& layout);

}  // namespace troupe::checkpoint
