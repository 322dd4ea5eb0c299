#pragma once
// Typed reads of JSON fields for the manifest and file records. The first missing or mistyped
// field becomes the error, named by its dotted path ("field 'grid.dp' is missing"), so a
// hand-edited or foreign manifest fails with one line that says what to fix.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "compute/expected.hpp"

namespace troupe::checkpoint {

class JsonFields {
 public:
  // `where` prefixes field names in errors: "" at the top, "grid." inside grid.
  JsonFields(const nlohmann::json& object, std::string where);

  bool has(const std::string& key) const;
  // Each returns a default (0, "", null) once an error is recorded; check error() at the end.
  std::int64_t integer(const std::string& key);
  std::uint64_t unsigned_integer(const std::string& key);
  std::string string(const std::string& key);
  const nlohmann::json& object(const std::string& key);
  const nlohmann::json& array(const std::string& key);
  // An error found by the caller about a field ("field 'files.0.name' must be a plain file name").
  void fail(const std::string& key, const std::string& problem);

  std::string where(const std::string& key) const { return where_ + key; }
  const std::optional<Error>& error() const { return error_; }

 private:
  const nlohmann::json* find(const std::string& key, bool (nlohmann::json::*is)() const noexcept, const char* what);

  const nlohmann::json& object_;
  std::string where_;
  std::optional<Error> error_;
};

}  // namespace troupe::checkpoint
