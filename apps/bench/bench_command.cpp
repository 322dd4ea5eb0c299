// troupe bench: the group of the bench commands. `troupe bench` alone, or with an argument that
// names no bench, is refused naming them (run_chosen).

#include <utility>
#include <vector>

#include "apps/bench/bench_commands.hpp"

namespace troupe::apps {

Command add_bench_command(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "Measure throughput.");
  bench->require_subcommand(0, 1);
  bench->allow_extras();
  std::vector<Command> benches{
      add_bench_compute_command(*bench),  add_bench_allreduce_command(*bench),  add_bench_dp_command(*bench),
      add_bench_compress_command(*bench), add_bench_diloco_command(*bench),     add_bench_zero3_command(*bench),
      add_bench_tp_command(*bench),       add_bench_cp_command(*bench),         add_bench_moe_command(*bench),
      add_bench_pipeline_command(*bench), add_bench_checkpoint_command(*bench), add_bench_gpu_command(*bench),
      add_bench_scale_command(*bench),    add_bench_sim_check_command(*bench),  add_bench_tokenize_command(*bench),
      add_bench_balance_command(*bench)};
  return {bench, [bench, benches = std::move(benches)] { return run_chosen(*bench, benches); }};
}

}  // namespace troupe::apps
