#pragma once
// The job runner's node starter for `troupe launch` (actors/supervision/node_starter.hpp): node
// processes on the hosts of the host file, started by the Boost.Asio launcher
// (apps/launch/node_launcher.hpp) — local ones by fork/exec, remote ones through the launcher
// template — each with the job's configuration spelled out as overrides, so that its config hash
// equals the job's; and the watch of the host file for new spare lines.

#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/supervision/node_starter.hpp"
#include "apps/launch/node_launcher.hpp"

namespace troupe::apps {

class LaunchedNodes final : public actors::NodeStarter {
 public:
  // `host_file`: where spare lines may appear (empty: none, as inside a Slurm allocation).
  LaunchedNodes(launch::LauncherOptions options, std::string host_file);

  std::vector<actors::PlacedNode> place(const std::vector<actors::NodeShape>& lines) const override;
  actors::NodesOutcome run(actors::AttemptNodes attempt) override;
  void stop_all(const std::string& reason) override;
  void start_again(int node_index, actors::NodeEnvironment env) override;
  void move(int node_index, const std::string& host, actors::NodeEnvironment env) override;
  void add(const std::vector<actors::NodeShape>& lines, int node_index, const actors::JobConfig& config,
           actors::NodeEnvironment env) override;
  void update(int node_index, const actors::JobConfig& config, int world_size) override;
  std::unique_ptr<actors::SpareLineWatch> watch_spares(const std::vector<actors::NodeShape>& known,
                                                       const std::vector<int>& left_out_slots,
                                                       std::function<void()> grow) override;

 private:
  launch::LauncherOptions options_;
  std::string host_file_;
  std::mutex mutex_;  // the running attempt's launcher, asked from the job supervisor's thread
  std::unique_ptr<launch::NodeLauncher> launcher_;
  actors::AttemptNodes attempt_;  // the running attempt's, for the nodes added to it
};

}  // namespace troupe::apps
