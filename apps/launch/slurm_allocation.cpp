#include "apps/launch/slurm_allocation.hpp"

#include <charconv>

#include "apps/launch/slurm_nodelist.hpp"

namespace troupe::launch {
namespace {

// A whole number from 1 to max_slots_per_host, or nothing.
std::optional<int> count_of(std::string_view text) {
  int value = 0;
  const char* end = text.data() + text.size();
  const auto [at, error] = std::from_chars(text.data(), end, value);
  if (text.empty() || error != std::errc{} || at != end || value < 1 || value > max_slots_per_host) return std::nullopt;
  return value;
}

}  // namespace

Expected<std::vector<int>> expand_tasks_per_node(std::string_view text, std::size_t nodes) {
  const std::string where = "SLURM_TASKS_PER_NODE '" + std::string(text) + "'";
  std::vector<int> counts;
  std::size_t begin = 0;
  while (begin <= text.size()) {
    const std::size_t end = std::min(text.find(',', begin), text.size());
    std::string_view item = text.substr(begin, end - begin);
    std::size_t repeat = 1;
    if (const std::size_t open = item.find("(x"); open != std::string_view::npos) {
      const auto times = item.ends_with(')') ? count_of(item.substr(open + 2, item.size() - open - 3)) : std::nullopt;
      if (!times) return Error{where + ": '" + std::string(item) + "' is not COUNT or COUNT(xTIMES)"};
      repeat = static_cast<std::size_t>(*times);
      item = item.substr(0, open);
    }
    const auto count = count_of(item);
    if (!count) return Error{where + ": '" + std::string(item) + "' is not a task count"};
    if (counts.size() + repeat > nodes) break;
    counts.insert(counts.end(), repeat, *count);
    begin = end + 1;
  }
  if (counts.size() != nodes || begin <= text.size())
    return Error{where + " does not give one count per node of the " + std::to_string(nodes) + " in the node list"};
  return counts;
}

std::optional<Expected<SlurmAllocation>> slurm_allocation(const VariableLookup& variable) {
  const auto nodelist = variable("SLURM_JOB_NODELIST");
  if (!nodelist) return std::nullopt;
  auto names = expand_slurm_nodelist(*nodelist);
  if (!names) return Expected<SlurmAllocation>(Error{"SLURM_JOB_NODELIST: " + names.error().message});
  SlurmAllocation allocation;
  allocation.source = "SLURM_JOB_NODELIST=" + *nodelist;
  std::vector<int> slots(names->size(), 1);
  if (const auto per_node = variable("SLURM_NTASKS_PER_NODE")) {
    const auto count = count_of(*per_node);
    if (!count)
      return Expected<SlurmAllocation>(
          Error{"SLURM_NTASKS_PER_NODE '" + *per_node + "' is not a task count from 1 to " +
                std::to_string(max_slots_per_host)});
    slots.assign(names->size(), *count);
    allocation.source += ", SLURM_NTASKS_PER_NODE=" + *per_node;
  } else if (const auto tasks = variable("SLURM_TASKS_PER_NODE")) {
    auto counts = expand_tasks_per_node(*tasks, names->size());
    if (!counts) return Expected<SlurmAllocation>(counts.error());
    slots = std::move(*counts);
    allocation.source += ", SLURM_TASKS_PER_NODE=" + *tasks;
  }
  for (std::size_t i = 0; i < names->size(); ++i)
    allocation.hosts.push_back({(*names)[i], slots[i], static_cast<int>(i + 1)});
  return Expected<SlurmAllocation>(std::move(allocation));
}

LaunchTemplate srun_template() {
  auto parsed = LaunchTemplate::parse("srun --nodes=1 --ntasks=1 -w {host} sh -c {command}");
  return *parsed;
}

}  // namespace troupe::launch
