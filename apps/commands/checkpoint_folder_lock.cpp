#include "apps/commands/checkpoint_folder_lock.hpp"

#include "monitor/log.hpp"

namespace troupe::apps {

Expected<std::unique_ptr<checkpoint::FolderLock>> lock_checkpoint_folder(const JobConfig& config) {
  if (config.checkpoint.dir.empty()) return std::unique_ptr<checkpoint::FolderLock>();
  auto lock = checkpoint::FolderLock::take(config.checkpoint.dir);
  if (lock && (*lock)->taken_over())
    monitor::logger("checkpoint")->warn("took over {} from a job that is gone ({})",
                                        checkpoint::lock_path(config.checkpoint.dir).string(),
                                        checkpoint::describe(*(*lock)->taken_over()));
  return lock;
}

}  // namespace troupe::apps
