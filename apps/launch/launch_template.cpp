// Template expansion in one pass over the template, so a substituted value is never scanned again.

#include "apps/launch/launch_template.hpp"

namespace troupe::launch {
namespace {

constexpr std::string_view host_field = "{host}";
constexpr std::string_view command_field = "{command}";

}  // namespace

Expected<LaunchTemplate> LaunchTemplate::parse(std::string text) {
  for (std::string_view field : {host_field, command_field}) {
    if (text.find(field) == std::string::npos) {
      return Error{"launcher template '" + text + "' has no " + std::string(field) +
                   " (for example 'ssh {host} {command}')"};
    }
  }
  return LaunchTemplate(std::move(text));
}

LaunchTemplate LaunchTemplate::ssh() { return LaunchTemplate("ssh -o BatchMode=yes {host} {command}"); }

std::string LaunchTemplate::expand(std::string_view host, std::string_view command) const {
  std::string line;
  std::size_t i = 0;
  while (i < text_.size()) {
    const std::string_view rest = std::string_view(text_).substr(i);
    if (rest.starts_with(host_field)) {
      line += shell_quote(host);
      i += host_field.size();
    } else if (rest.starts_with(command_field)) {
      line += shell_quote(command);
      i += command_field.size();
    } else {
      line += text_[i++];
    }
  }
  return line;
}

std::string shell_quote(std::string_view word) {
  const auto safe = [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
           std::string_view("_@%+=:,./-").find(c) != std::string_view::npos;
  };
  bool plain = !word.empty();
  for (char c : word) plain = plain && safe(c);
  if (plain) return std::string(word);
  std::string quoted = "'";
  for (char c : word) {
    if (c == '\'') {
      quoted += "'\\''";
    } else {
      quoted += c;
    }
  }
  return quoted + "'";
}

std::string remote_command_line(const Environment& env, const std::vector<std::string>& argv) {
  std::string line = "env";
  for (const auto& [name, value] : env) line += " " + shell_quote(name + "=" + value);
  for (const auto& arg : argv) line += " " + shell_quote(arg);
  return line;
}

}  // namespace troupe::launch
