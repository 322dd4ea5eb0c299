#include "checkpoint/json_fields.hpp"

namespace troupe::checkpoint {
namespace {

const nlohmann::json& null_json() {
  static const nlohmann::json null;
  return null;
}

}  // namespace

JsonFields::JsonFields(const nlohmann::json& object, std::string where) : object_(object), where_(std::move(where)) {
  if (!object_.is_object()) error_ = Error{where_.empty() ? "the top level is not a JSON object"
                                                          : "field '" + where_.substr(0, where_.size() - 1) + "' must be an object"};
}

bool JsonFields::has(const std::string& key) const { return object_.is_object() && object_.contains(key); }

void JsonFields::fail(const std::string& key, const std::string& problem) {
  if (!error_) error_ = Error{"field '" + where(key) + "' " + problem};
}

const nlohmann::json* JsonFields::find(const std::string& key, bool (nlohmann::json::*is)() const noexcept,
                                       const char* what) {
  if (error_) return nullptr;
  if (!has(key)) {
    fail(key, "is missing");
    return nullptr;
  }
  const nlohmann::json& value = object_[key];
  if (!(value.*is)()) {
    fail(key, std::string("must be ") + what + ", got " + value.dump());
    return nullptr;
  }
  return &value;
}

std::int64_t JsonFields::integer(const std::string& key) {
  const auto* v = find(key, &nlohmann::json::is_number_integer, "an integer");
  if (v && v->is_number_unsigned() && v->get<std::uint64_t>() > std::uint64_t{INT64_MAX}) {
    fail(key, "is out of range: " + v->dump());
    return 0;
  }
  return v ? v->get<std::int64_t>() : 0;
}

std::uint64_t JsonFields::unsigned_integer(const std::string& key) {
  const auto* v = find(key, &nlohmann::json::is_number_unsigned, "a non-negative integer");
  return v ? v->get<std::uint64_t>() : 0;
}

std::string JsonFields::string(const std::string& key) {
  const auto* v = find(key, &nlohmann::json::is_string, "a string");
  return v ? v->get<std::string>() : std::string();
}

const nlohmann::json& JsonFields::object(const std::string& key) {
  const auto* v = find(key, &nlohmann::json::is_object, "an object");
  return v ? *v : null_json();
}

const nlohmann::json& JsonFields::array(const std::string& key) {
  const auto* v = find(key, &nlohmann::json::is_array, "a list");
  return v ? *v : null_json();
}

}  // namespace troupe::checkpoint
