#pragma once
// Errors as values for the lower libraries (compute/, comm/, schedules/, checkpoint/): they
// return Expected<T> or Status and never exit; only apps/ turns an Error into a message and an
// exit code. An Error's message is one line that names the input and what is wrong with it.

#include <string>
#include <utility>
#include <variant>

#include "compute/check.hpp"

namespace troupe {

struct Error {
  std::string message;
};

template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}
  Expected(Error error) : state_(std::move(error)) {}

  bool ok() const { return state_.index() == 0; }
  explicit operator bool() const { return ok(); }

  T& value() & {
    TROUPE_CHECK(ok(), "value() of an Expected holding an error: " + std::get<1>(state_).message);
    return std::get<0>(state_);
  }
  T&& value() && {
    TROUPE_CHECK(ok(), "value() of an Expected holding an error: " + std::get<1>(state_).message);
    return std::get<0>(std::move(state_));
  }
  T& operator*() & { return value(); }
  T* operator->() { return &value(); }
  const Error& error() const {
    TROUPE_CHECK(!ok(), "error() of an Expected holding a value");
    return std::get<1>(state_);
  }

 private:
  std::variant<T, Error> state_;
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(Error error) : error_(std::move(error)), ok_(false) {}
  static Status success() { return {}; }

  bool ok() const { return ok_; }
  explicit operator bool() const { return ok_; }
  const Error& error() const {
    TROUPE_CHECK(!ok_, "error() of a successful Status");
    return error_;
  }

 private:
  Error error_;
  bool ok_ = true;
};

}  // namespace troupe
