#pragma once
// Sets (or unsets) an environment variable while it lives, for this process and the processes it
// starts meanwhile; restores what was there before, set or not.

#include <cstdlib>
#include <optional>
#include <string>

namespace troupe::test {

class ScopedEnv {
 public:
  // value nullptr: the variable is unset while this lives.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value != nullptr)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (old_)
      ::setenv(name_.c_str(), old_->c_str(), 1);
    else
      ::unsetenv(name_.c_str());
  }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

 private:
  std::string name_;
  std::optional<std::string> old_;
};

}  // namespace troupe::test
