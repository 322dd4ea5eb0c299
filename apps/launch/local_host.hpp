#pragma once
// Which host-file names mean this machine. Node processes for them start directly
// (posix_spawn); every other host goes through the launcher template (ssh, srun). LOCAL_RANK
// counts over all of a machine's lines, so the local aliases count as one machine.

#include <string>
#include <string_view>

namespace troupe::launch {

// This machine's name as gethostname() gives it.
std::string this_host_name();

// The path of the running program (/proc/self/exe), so a job starts its node processes — and a
// drill its jobs — from the same build; "troupe" (found on PATH) if it cannot be read.
std::string this_executable();

// True for localhost, 127.0.0.1, ::1, this_host, and this_host's first label (node1 for
// node1.cluster.example).
bool is_local_host(std::string_view host, std::string_view this_host);

}  // namespace troupe::launch
