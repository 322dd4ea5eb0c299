#pragma once
// Sizes of memory as people write and read them: "80GB", "512MiB", "2G" or a number of bytes in,
// "1.5 GiB" out. Shared by the flags that take a size (troupe plan's --device-memory, train's and
// launch's --memory-limit) and the messages that print one.

#include <optional>
#include <string>

namespace troupe::apps {

// A size as "80GB", "80 GB", "512MiB", "1.5e9" (bytes): a decimal number (no hex), then decimal
// kB/MB/GB/TB/PB/EB (and K/M/G/T/P/E), binary KiB/MiB/GiB/TiB/PiB/EiB (every unit
// format_binary_size prints), a bare number or "B" in bytes; nullopt for anything else or a size
// that is not positive.
std::optional<double> parse_byte_size(const std::string& text);

// "512.0 MiB", "1.2 GiB": binary units from MiB up, one decimal, as the memory checks print them.
std::string format_binary_size(double bytes);

}  // namespace troupe::apps
