#include "apps/commands/launched_nodes.hpp"

#include "actors/process_environment.hpp"
#include "apps/config/value.hpp"
#include "apps/launch/host_file.hpp"
#include "apps/launch/local_host.hpp"
#include "apps/launch/rank_plan.hpp"
#include "apps/launch/spare_watch.hpp"
#include "monitor/log.hpp"

namespace troupe::apps {
namespace {

// The node program with the job's configuration as overrides: a node given them resolves the same
// configuration (and config hash) as the job, whatever file it reads.
std::vector<std::string> node_argv(const JobConfig& config) {
  std::vector<std::string> argv{launch::this_executable(), "node"};
  for (std::string& argument : override_arguments(config)) argv.push_back(std::move(argument));
  return argv;
}

std::vector<launch::HostEntry> host_entries(const std::vector<actors::NodeShape>& lines) {
  std::vector<launch::HostEntry> entries;
  for (const actors::NodeShape& line : lines) entries.push_back({line.host, line.slots, 0});
  return entries;
}

launch::RankPlan plan_of(const std::vector<actors::NodeShape>& lines) {
  return launch::plan_ranks(host_entries(lines), launch::this_host_name());
}

actors::NodesEnd nodes_end(launch::JobEnd end) {
  switch (end) {
    case launch::JobEnd::success: return actors::NodesEnd::success;
    case launch::JobEnd::node_failed: return actors::NodesEnd::node_failed;
    case launch::JobEnd::start_failed: return actors::NodesEnd::start_failed;
    case launch::JobEnd::interrupted: return actors::NodesEnd::interrupted;
    case launch::JobEnd::terminated: return actors::NodesEnd::terminated;
    case launch::JobEnd::hung_up: return actors::NodesEnd::hung_up;
  }
  return actors::NodesEnd::node_failed;
}

class WatchedSpares final : public actors::SpareLineWatch {
 public:
  explicit WatchedSpares(launch::SpareWatch::Options options) : watch_(std::move(options)) { watch_.start(); }
  ~WatchedSpares() override { watch_.stop(); }
  std::vector<actors::NodeShape> found() override {
    std::vector<actors::NodeShape> lines;
    for (const launch::HostEntry& spare : watch_.found()) lines.push_back({spare.host, spare.slots});
    return lines;
  }

 private:
  launch::SpareWatch watch_;
};

}  // namespace

LaunchedNodes::LaunchedNodes(launch::LauncherOptions options, std::string host_file)
    : options_(std::move(options)), host_file_(std::move(host_file)) {}

std::vector<actors::PlacedNode> LaunchedNodes::place(const std::vector<actors::NodeShape>& lines) const {
  std::vector<actors::PlacedNode> placed;
  for (const launch::NodePlan& node : plan_of(lines).nodes)
    placed.push_back({node.node_index, node.host, node.slots, node.first_rank, node.local});
  return placed;
}

actors::NodesOutcome LaunchedNodes::run(actors::AttemptNodes attempt) {
  launch::LauncherOptions options = options_;
  options.hold_after_failure = attempt.hold_after_failure;
  options.on_signal_stop = attempt.stopping_at_signal;
  options.on_node_exit = [exited = attempt.restarted_exited](const launch::NodeExit& exit) {
    if (exit.started_again && exited) exited(exit.node_index, exit.pid, exit.status.describe());
  };
  std::vector<launch::NodeProcessSpec> specs = launch::node_process_specs(
      plan_of(attempt.lines), {attempt.job_host, attempt.job_port, attempt.token}, node_argv(attempt.config));
  for (launch::NodeProcessSpec& spec : specs) spec.env.insert(spec.env.end(), attempt.env.begin(), attempt.env.end());
  launch::NodeLauncher* launcher = nullptr;
  {
    std::lock_guard lock(mutex_);
    attempt_ = std::move(attempt);
    launcher_ = std::make_unique<launch::NodeLauncher>(std::move(specs), std::move(options));
    launcher = launcher_.get();
  }
  const launch::JobResult result = launcher->run();
  std::lock_guard lock(mutex_);
  launcher_.reset();
  return {nodes_end(result.end), launch::exit_code(result.end), result.message,
          result.exits.empty() ? -1 : result.exits.front().node_index};
}

void LaunchedNodes::stop_all(const std::string& reason) {
  std::lock_guard lock(mutex_);
  if (launcher_) launcher_->stop_all(launch::JobEnd::node_failed, reason);
}

void LaunchedNodes::start_again(int node_index, actors::NodeEnvironment env) {
  std::lock_guard lock(mutex_);
  if (launcher_) launcher_->replace_node(node_index, std::move(env));
}

void LaunchedNodes::move(int node_index, const std::string& host, actors::NodeEnvironment env) {
  std::lock_guard lock(mutex_);
  if (!launcher_) return;
  actors::NodeShape& line = attempt_.lines.at(static_cast<std::size_t>(node_index));
  line.host = host;
  // Alone on its machine, as a spare is meant to be.
  env.emplace_back(actors::env::local_rank.name, "0");
  env.emplace_back(actors::env::local_world_size.name, std::to_string(line.slots));
  launcher_->move_node(node_index, host, launch::is_local_host(host, launch::this_host_name()), std::move(env));
}

void LaunchedNodes::add(const std::vector<actors::NodeShape>& lines, int node_index, const JobConfig& config,
                        actors::NodeEnvironment env) {
  std::lock_guard lock(mutex_);
  if (!launcher_) return;
  for (launch::NodeProcessSpec& spec : launch::node_process_specs(
           plan_of(lines), {attempt_.job_host, attempt_.job_port, attempt_.token}, node_argv(config))) {
    if (spec.node_index != node_index) continue;
    spec.env.insert(spec.env.end(), env.begin(), env.end());
    launcher_->add_node(std::move(spec));
  }
}

void LaunchedNodes::update(int node_index, const JobConfig& config, int world_size) {
  std::lock_guard lock(mutex_);
  if (launcher_)
    launcher_->update_node(node_index, node_argv(config), {{actors::env::world_size.name, std::to_string(world_size)}});
}

std::unique_ptr<actors::SpareLineWatch> LaunchedNodes::watch_spares(const std::vector<actors::NodeShape>& known,
                                                                    const std::vector<int>& left_out_slots,
                                                                    std::function<void()> grow) {
  if (host_file_.empty()) return nullptr;
  launch::SpareWatch::Options options{host_file_, host_entries(known), left_out_slots,
                                      [grow = std::move(grow), file = host_file_](
                                          const std::vector<launch::HostEntry>& found) {
                                        monitor::logger("job")->info(
                                            "{}:{}: a new spare line ({} slots={}) can take a node the job went on "
                                            "without: ordering the job's rejoin",
                                            file, found.front().line, found.front().host, found.front().slots);
                                        grow();
                                      }};
  return std::make_unique<WatchedSpares>(std::move(options));
}

}  // namespace troupe::apps
