#pragma once
// Which host-file names mean this machine. Node processes for them start directly
// (posix_spawn); every other host goes through the launcher template (ssh, srun). LOCAL_RANK
// counts over all of a machine's lines, so the local aliases count as one machine.

#include <string>
#include <string_view>

namespace troupe::launch {

// This machine's name as gethostname() gives it.
std::string this_host_name();

// The path of the running program (/proc/self/exe's target, less the " (deleted)" the kernel adds
// once a rebuild has replaced or removed the file), the name a child's argv[0], a log line and a
// remote host's command line use; "troupe" (found on PATH) if it cannot be read.
std::string this_executable();

// What to execute for a child whose argv[0] is `program`: where `program` is this_executable(), this
// process's own image (/proc/self/exe, which stays the running build after its file is rebuilt or
// removed), so a job's node processes, a lost node's replacement and a drill's runs are the build
// that started them, never a newer one at the same path; `program` itself otherwise.
std::string executable_to_spawn(const std::string& program);

// True for localhost, 127.0.0.1, ::1, this_host, and this_host's first label (node1 for
// node1.cluster.example).
bool is_local_host(std::string_view host, std::string_view this_host);

}  // namespace troupe::launch
