// Which ranks `workers` and `top` show (actors/control/rank_rows.hpp): every rank of a small job; past
// every_rank_rows ranks a summary whose rows are the ranks furthest behind, then the most urgent;
// a selection by node or by ranks; and one line naming the word or the rank that is wrong.

#include <catch2/catch.hpp>

#include <regex>

#include "actors/control/monitor_report.hpp"
#include "actors/control/rank_rows.hpp"

using namespace troupe::actors;
using Catch::Contains;

namespace {

// `nodes` node processes of `slots` ranks each, every rank 7 steps done and training step 8.
job_view_msg job_of(int nodes, int slots) {
  job_view_msg view;
  for (int node = 0; node < nodes; ++node) {
    node_view n;
    n.node_index = node;
    for (int slot = 0; slot < slots; ++slot) {
      worker_beat w;
      w.rank = node * slots + slot;
      w.steps_done = 7;
      w.activity = "step 8";
      n.workers.push_back(w);
    }
    view.nodes.push_back(n);
  }
  return view;
}

worker_beat& rank_in(job_view_msg& view, int rank) {
  for (node_view& n : view.nodes)
    for (worker_beat& w : n.workers)
      if (w.rank == rank) return w;
  FAIL("no rank " << rank);
  throw;
}

std::vector<int> ranks_of(const RankRows& rows) {
  std::vector<int> ranks;
  for (const RankRow& row : rows.rows) ranks.push_back(row.worker->rank);
  return ranks;
}

RankSelection selection_of(std::vector<std::string> words) { return parse_rank_selection(words).value(); }

double waiting(const worker_beat& w) { return w.waiting_seconds; }

// Rows of a table: lines that start with a rank number.
std::size_t table_rows(const std::string& text) {
  static const std::regex row("\n[0-9]+ +[0-9]+ ");
  return static_cast<std::size_t>(
      std::distance(std::sregex_iterator(text.begin(), text.end(), row), std::sregex_iterator()));
}

}  // namespace

TEST_CASE("a rank selection is none, all, node N or ranks and ranges, and anything else is one line naming the word",
          "[monitor]") {
  CHECK(selection_of({}).choice == RankChoice::automatic);
  CHECK(selection_of({"all"}).choice == RankChoice::all);
  const RankSelection node = selection_of({"node", "3"});
  CHECK(node.choice == RankChoice::node);
  CHECK(node.node == 3);
  const RankSelection ranks = selection_of({"0-15,32,40-41"});
  CHECK(ranks.choice == RankChoice::ranks);
  CHECK(ranks.ranges == std::vector<std::pair<int, int>>{{0, 15}, {32, 32}, {40, 41}});

  const auto error = [](std::vector<std::string> words) { return parse_rank_selection(words).error().message; };
  CHECK(error({"node"}) == "'' is not one node number (give all, node N, or ranks and ranges such as 0-15,32)");
  CHECK_THAT(error({"node", "x"}), Contains("'x' is not one node number"));
  CHECK_THAT(error({"node", "1", "2"}), Contains("'1 2' is not one node number"));
  CHECK_THAT(error({"fast"}), Contains("fast: 'fast' is not a rank or a range of ranks"));
  CHECK_THAT(error({"0-15,,3"}), Contains("0-15,,3: '' is not a rank"));
  CHECK_THAT(error({"-3"}), Contains("'-3' is not a rank"));
  CHECK_THAT(error({"9-3"}), Contains("9-3: the range 9-3 starts after it ends"));
  CHECK_THAT(error({"0-99999999999"}), Contains("'0-99999999999' is not a rank"));
  CHECK_THAT(error({"0-3", "8"}), Contains("'0-3 8' is more than one word"));
}

TEST_CASE("a job of up to 64 ranks shows every rank, and a selection only the ranks it names, in the job's order",
          "[monitor]") {
  const job_view_msg view = job_of(4, 16);
  const RankRows every = choose_rank_rows(view, {}, "workers", waiting, "those waiting longest").value();
  CHECK(every.rows.size() == 64);
  CHECK(every.heading.empty());
  CHECK(every.left_out.empty());
  CHECK(ranks_of(choose_rank_rows(view, selection_of({"node", "2"}), "workers", waiting, "").value()) ==
        std::vector<int>{32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45, 46, 47});
  CHECK(ranks_of(choose_rank_rows(view, selection_of({"40-41,3"}), "workers", waiting, "").value()) ==
        std::vector<int>{3, 40, 41});
  CHECK(choose_rank_rows(view, selection_of({"node", "4"}), "workers", waiting, "").error().message ==
        "no node 4: the job's are nodes 0, 1, 2 and 3");
  CHECK(choose_rank_rows(view, selection_of({"60-70"}), "workers", waiting, "").error().message ==
        "no rank 64: the job's are ranks 0-63");
  CHECK(choose_rank_rows(job_of(2, 0), selection_of({"3"}), "workers", waiting, "").error().message ==
        "no rank has reported yet: try again once the job has started");
}

TEST_CASE("past 64 ranks, workers summarises: ranks by steps done, then the 16 furthest behind or waiting longest",
          "[monitor]") {
  const MonitorPlan plan{.world_size = 1024, .dp = 1024};
  job_view_msg view = job_of(32, 32);
  for (int rank : {33, 34, 35, 36}) rank_in(view, rank).steps_done = 6;
  rank_in(view, 900).steps_done = 5;
  for (int rank = 100; rank < 130; ++rank) {
    rank_in(view, rank).waiting_for = "the gradient sum's chunk from rank " + std::to_string(rank + 1);
    rank_in(view, rank).waiting_seconds = rank / 100.0;
  }
  const std::string text = workers_text(plan, view).value();
  INFO(text);
  CHECK_THAT(
      text, Contains("1024 ranks in 32 node processes; steps done: 7 by 1019 ranks, 6 by ranks 33, 34, 35 and 36, 5 by "
                     "rank 900\nthe 16 ranks furthest behind, then those waiting longest:\nrank  node"));
  CHECK(table_rows(text) == 16);
  // Rank 900 (5 steps), ranks 33-36 (6), then the 11 waiting longest: ranks 129 down to 119.
  CHECK(std::regex_search(text, std::regex("activity\n900 +28 .*\n33 +1 .*\n34 .*\n35 .*\n36 .*\n129 +4 .*waiting "
                                           "1.3 s for the gradient sum's chunk from rank 130\n128 ")));
  CHECK(std::regex_search(text, std::regex("\n119 .*\n1008 more ranks: `workers all` lists every rank, `workers "
                                           "node 28` a node process's, `workers 0-31` those ranks$")));
  CHECK_FALSE(Contains("\n118 ").match(text));

  CHECK(table_rows(workers_text(plan, view, selection_of({"all"})).value()) == 1024);
  const std::string node = workers_text(plan, view, selection_of({"node", "3"})).value();
  CHECK(table_rows(node) == 32);
  CHECK_FALSE(Contains("more ranks").match(node));
  CHECK(workers_text(plan, view, selection_of({"1020-1030"})).error().message ==
        "no rank 1024: the job's are ranks "
        "0-1023");
}

TEST_CASE("past 64 ranks, top summarises with the slowest last steps after the ranks furthest behind", "[monitor]") {
  const MonitorPlan plan{.total_steps = 10, .world_size = 100, .dp = 100};
  job_view_msg view = job_of(4, 25);
  rank_in(view, 60).steps_done = 6;
  StepHistory history;
  for (int rank = 0; rank < 100; ++rank) history[rank][7] = step_beat{7, 0, 1.0 + (rank == 42) + 2 * (rank == 17)};
  const std::string text = top_text(plan, view, history, {}).value();
  INFO(text);
  CHECK_THAT(text, Contains("100 ranks in 4 node processes; steps done: 7 by 99 ranks, 6 by rank 60\nthe 16 ranks "
                            "furthest behind, then the slowest last steps:\nrank  node"));
  CHECK(table_rows(text) == 16);
  CHECK(std::regex_search(text, std::regex("activity\n60 +2 .*\n17 +0 +7 .* 3000.0 .*\n42 +1 +7 .* 2000.0 ")));
  CHECK_THAT(text, Contains("\n84 more ranks: `top all` lists every rank, `top node 2` a node process's, `top "
                            "0-31` those ranks"));
  CHECK(table_rows(top_text(plan, view, history, {}, selection_of({"all"})).value()) == 100);
}

TEST_CASE("the summary counts the ranks behind the three largest step counts together", "[monitor]") {
  job_view_msg view = job_of(5, 20);
  for (int rank = 0; rank < 5; ++rank) rank_in(view, rank).steps_done = rank;  // 0 to 4 steps done
  const RankRows rows = choose_rank_rows(view, {}, "workers", waiting, "those waiting longest").value();
  CHECK_THAT(rows.heading, Contains("steps done: 7 by 95 ranks, 4 by rank 4, 3 by rank 3, 0 to 2 by 3 ranks\n"));
  CHECK(ranks_of(rows).front() == 0);
}
