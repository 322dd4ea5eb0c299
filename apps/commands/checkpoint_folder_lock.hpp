#pragma once
// The job's hold on its checkpoint.dir (checkpoint/folder_lock.hpp), taken by the process that
// owns the job — `troupe train` alone, or the job process of `troupe launch` — before any work,
// and kept until it exits, through every restart. Its nodes write under the job's hold.

#include <memory>

#include "apps/config/job_config.hpp"
#include "checkpoint/folder_lock.hpp"
#include "compute/expected.hpp"

namespace troupe::apps {

// None without checkpoint.dir; an error naming the live holder when another job has the folder.
// A dead job's leftover lock is taken over with a warning that names it.
Expected<std::unique_ptr<checkpoint::FolderLock>> lock_checkpoint_folder(const JobConfig& config);

}  // namespace troupe::apps
