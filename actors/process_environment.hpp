#pragma once
// Every environment variable of a job's processes, declared once: its name, who sets it, what an
// unset variable means, and what it means (docs/environment.md is this table for users, with
// comm/'s TROUPE_COMM_* knobs of comm/knobs.hpp beside it). Whoever sets or reads one names it
// through this table; whoever reads one reads it through the accessors below, which check it:
// an invalid value is one error line naming the variable and its value (compute/environment.hpp),
//
//   environment variable RANK: expected an integer >= 0, got 'abc'
//
// never atoi's 0 and never a silent fall-back to the default. The commands stop with it and exit
// code 2.
//
// Why in actors/: the readers are apps/commands (troupe node, train, shell), actors/worker
// (TROUPE_DRILL_THROW_AT) and actors/supervision (TROUPE_RESTARTS); the writers are apps/launch
// (rank_plan.cpp) and apps/commands (drill, launch). actors/ is the lowest folder every reader
// may include (apps → actors → ...). The table is constexpr in this header, so troupe_launch,
// which links only troupe_compute, names the variables it sets without linking troupe_actors; the
// accessors are in environment.cpp (troupe_actors), for the readers, which all link it.
// TROUPE_RESTARTS keeps its declaration in actors/recovery_counts.hpp (its text
// format lives there); the row here refers to it.

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "actors/recovery_counts.hpp"
#include "compute/expected.hpp"

namespace troupe::actors::env {

// One row of the table. For an integer variable, `fallback` is its value when unset and `min` the
// least value it takes (its accessor reads it with these); a text variable leaves them 0.
struct Variable {
  const char* name;
  const char* set_by;
  const char* unset;  // what an unset variable means, in words (docs/environment.md)
  const char* meaning;
  std::int64_t fallback = 0;
  std::int64_t min = 0;
};

// Set by troupe launch for every node process (apps/launch/rank_plan.cpp); a node process hosts
// TROUPE_SLOTS workers and the rank variables describe its first one.
inline constexpr Variable rank{
    .name = "RANK",
    .set_by = "troupe launch",
    .unset = "0",
    .meaning = "global rank of the node's first worker; its workers are RANK … RANK + TROUPE_SLOTS − 1",
    .fallback = 0,
    .min = 0};
inline constexpr Variable world_size{.name = "WORLD_SIZE",
                                     .set_by = "troupe launch",
                                     .unset = "1",
                                     .meaning = "workers in the job: the sum of all slots",
                                     .fallback = 1,
                                     .min = 1};
inline constexpr Variable local_rank{.name = "LOCAL_RANK",
                                     .set_by = "troupe launch",
                                     .unset = "0",
                                     .meaning = "rank of the node's first worker among the workers on its machine",
                                     .fallback = 0,
                                     .min = 0};
inline constexpr Variable local_world_size{.name = "LOCAL_WORLD_SIZE",
                                           .set_by = "troupe launch",
                                           .unset = "1",
                                           .meaning = "workers on the node's machine",
                                           .fallback = 1,
                                           .min = 1};
inline constexpr Variable master_addr{
    .name = "MASTER_ADDR",
    .set_by = "troupe launch; the user, for srun; torchrun",
    .unset = "—",
    .meaning = "address the job process listens on, for the user's scripts; a node reads it (with MASTER_PORT) only "
               "when TROUPE_JOIN and --join are unset: started by srun or torchrun, where rank 0 hosts the job there"};
inline constexpr Variable master_port{
    .name = "MASTER_PORT",
    .set_by = "troupe launch; the user, for srun; torchrun",
    .unset = "—",
    .meaning = "port the job process listens on, for the user's scripts; read as MASTER_ADDR's port when "
               "TROUPE_JOIN is unset (the port after it when TORCHELASTIC_USE_AGENT_STORE=True: torchrun's agent "
               "holds it)"};
inline constexpr Variable node_index{.name = "TROUPE_NODE_INDEX",
                                     .set_by = "troupe launch",
                                     .unset = "-1 (none; --node-index sets it)",
                                     .meaning = "the node's host-file line, from 0",
                                     .fallback = -1,
                                     .min = 0};
inline constexpr Variable slots{.name = "TROUPE_SLOTS",
                                .set_by = "troupe launch",
                                .unset = "1",
                                .meaning = "workers of the node process: its host-file line's slots",
                                .fallback = 1,
                                .min = 1};
inline constexpr Variable join{.name = "TROUPE_JOIN",
                               .set_by = "troupe launch",
                               .unset = "empty (--join sets it)",
                               .meaning = "HOST:PORT of the job supervisor the node joins ([addr]:port for IPv6)"};
inline constexpr Variable token{
    .name = "TROUPE_TOKEN",
    .set_by = "troupe launch; the user, for troupe shell, srun, torchrun and troupe launch --external",
    .unset = "empty",
    .meaning = "the job's token: a node presents it to join, troupe shell to attach (docs/shell.md)"};
// Set by troupe launch at every (re)start of the node processes; read by each node process.
inline constexpr Variable restarts{.name = recovery_counts_variable,
                                   .set_by = "troupe launch",
                                   .unset = "restarts=0 (the first attempt)",
                                   .meaning =
                                       "the job's failures by kind and recoveries by source so far, e.g. "
                                       "restarts=1 failure.node_lost=1 recovery.replica=1 (docs/drills.md)"};
// Set by troupe launch at every start of a node process, in place of a lost one too.
inline constexpr Variable attempt{.name = "TROUPE_ATTEMPT",
                                  .set_by = "troupe launch",
                                  .unset = "0",
                                  .meaning =
                                      "the job's attempt when it started this node process: every restart of "
                                      "the job and every in-place replacement of a node begins a new one; the "
                                      "job refuses a node process of an older attempt than it holds for that "
                                      "node",
                                  .fallback = 0,
                                  .min = 0};
// Set by troupe launch when it starts a node process in place of a lost one that measured it.
inline constexpr Variable peak_flops{.name = "TROUPE_PEAK_FLOPS",
                                     .set_by = "troupe launch",
                                     .unset = "0",
                                     .meaning = "a rank's peak FLOP/s as the node process this one replaces measured "
                                                "it (the MFU basis, docs/metrics.md): the new process does not "
                                                "measure it again before it joins; an integer >= 1",
                                     .fallback = 0,
                                     .min = 1};
// Set by troupe drill for the runs it starts (docs/drills.md); a user may set them too.
inline constexpr Variable drill_throw_at{
    .name = "TROUPE_DRILL_THROW_AT",
    .set_by = "troupe drill kill-worker",
    .unset = "none",
    .meaning = "RANK:STEP: the worker of RANK throws in STEP, in a run that did not resume"};
inline constexpr Variable drill_node_gone{.name = "TROUPE_DRILL_NODE_GONE",
                                          .set_by = "troupe drill node-lost",
                                          .unset = "none",
                                          .meaning = "NODE: that node process fails before joining at every restart",
                                          .fallback = -1,
                                          .min = 0};
inline constexpr Variable drill_kill_at{
    .name = "TROUPE_DRILL_KILL_AT",
    .set_by = "the user (a test)",
    .unset = "none",
    .meaning =
        "RANK:STEP or RANK:STEP:sync: the node process of RANK SIGKILLs itself as STEP begins, or (:sync) "
        "once it has posted its DiLoCo outer sum after STEP; not a process started again"};

inline constexpr std::array<Variable, 16> variables{
    rank, world_size, local_rank, local_world_size, master_addr, master_port,    node_index,      slots,
    join, token,      restarts,   attempt,          peak_flops,  drill_throw_at, drill_node_gone, drill_kill_at};

// The accessors: unset gives the table's default, an invalid value the error line. The integer
// ones take the row's fallback and min (and fit an int).
Expected<int> read_rank();                 // an integer >= 0
Expected<int> read_world_size();           // an integer >= 1
Expected<int> read_local_rank();           // an integer >= 0
Expected<int> read_local_world_size();     // an integer >= 1
Expected<int> read_slots();                // an integer >= 1
Expected<int> read_node_index();           // an integer >= 0; -1 when unset
std::optional<std::string> read_join();    // any text; nothing when unset
std::optional<std::string> read_token();   // any text; nothing when unset
Expected<RecoveryCounts> read_restarts();  // RecoveryCounts' text; all zero when unset
Expected<int> read_attempt();              // an integer >= 0; 0 when unset
Expected<std::int64_t> read_peak_flops();  // an integer >= 1; 0 when unset

struct DrillThrowAt {
  int rank = 0;
  long step = 0;
};
Expected<std::optional<DrillThrowAt>> read_drill_throw_at();  // RANK:STEP, both integers >= 0
Expected<std::optional<int>> read_drill_node_gone();          // an integer >= 0
struct DrillKillAt {
  int rank = 0;
  long step = 0;
  bool in_sync = false;  // :sync
};
Expected<std::optional<DrillKillAt>> read_drill_kill_at();  // RANK:STEP or RANK:STEP:sync, integers >= 0

// What every process of a job inherits from the user's shell, checked before the job starts:
// the TROUPE_COMM_* knobs (comm/knobs.hpp) and the drill variables; the launch variables are the
// launcher's to set. The first invalid one's error.
Status check_inherited();

}  // namespace troupe::actors::env
