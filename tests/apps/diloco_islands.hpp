#pragma once
// DiLoCo's islands in one process, for the tests of tests/apps/ that pin a real diloco run against
// them: the job's islands as compute::Trainers (each reading as its island, on the data the job
// loads) stepped by compute::train_islands, and the checkpoints and resumes those tests compare.

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "actors/worker/job_data.hpp"
#include "actors/worker/replica_loop.hpp"
#include "apps/config/config_file.hpp"
#include "apps/config/resolve.hpp"
#include "apps/run_troupe.hpp"
#include "checkpoint/loader.hpp"
#include "checkpoint/store.hpp"
#include "compute/backend.hpp"
#include "compute/model/gpt.hpp"
#include "compute/train/outer_step.hpp"
#include "compute/train/trainer.hpp"
#include "support/temp_dir.hpp"

namespace troupe::test {

// The job of `file` as its islands in this process, one after the other: the trainers the
// ranks make (actors::trainer_options), each reading as its island, on the data the job loads.
struct Simulation {
  actors::ResolvedJob job;
  actors::JobData data;
  std::unique_ptr<compute::Backend> backend;
  std::vector<std::unique_ptr<compute::GPT>> models;
  std::vector<std::unique_ptr<compute::Trainer>> trainers;

  explicit Simulation(const std::string& file) {
    auto config = apps::load_config(file);
    REQUIRE(config.ok());
    auto resolved = apps::resolve(*config);
    REQUIRE(resolved.ok());
    job = *resolved;
    auto loaded = actors::load_job_data(job);
    REQUIRE(loaded.ok());
    data = std::move(*loaded);
    auto made = compute::make_backend(job.config.train.backend, job.config.train.precision, 1, job.config.sim);
    REQUIRE(made.ok());
    backend = std::move(*made);
    for (int i = 0; i < job.config.train.islands; ++i) {
      models.push_back(std::make_unique<compute::GPT>(job.model, *backend, compute::DType::f32));
      models.back()->init_parameters(job.config.train.seed);
      compute::TrainerOptions options = actors::trainer_options(job);
      options.islands = job.config.train.islands;
      options.island = i;
      trainers.push_back(std::make_unique<compute::Trainer>(*models.back(), options, data.train, data.val));
    }
  }

  std::vector<float> params(int island) const {
    const compute::Tensor& p = models[static_cast<std::size_t>(island)]->params();
    return {p.data_as<float>(), p.data_as<float>() + p.numel()};
  }
};

// The job of `file` as its islands in this process, compute::train_islands with the job's outer
// options over `steps` steps (`present`: the islands in each sync; an island absent restarts its
// AdamW, as a lost island's new process does): island 0's weights before and after, and the syncs.
struct Simulated {
  std::vector<float> start, weights;
  long syncs = 0;
  std::vector<float> momentum;  // island 0's outer momentum at the end
};
inline Simulated simulate(const std::string& file, long steps, const compute::IslandsPresent& present = {}) {
  Simulation sim(file);
  std::vector<compute::SimulatedIsland> islands;
  std::vector<compute::OuterStep> outer;
  for (std::size_t i = 0; i < sim.models.size(); ++i) {
    compute::Trainer* trainer = sim.trainers[i].get();
    islands.push_back({[trainer] { trainer->step(); }, sim.models[i]->params(),
                       [trainer] {
                         for (compute::Tensor* moments :
                              {&trainer->optimizer().first_moments(), &trainer->optimizer().second_moments()})
                           std::memset(moments->data(), 0, moments->nbytes());
                       }});
    outer.emplace_back(sim.models[i]->params(), actors::outer_options(sim.job));
  }
  Simulated simulated{sim.params(0), {}, 0};
  compute::train_islands(islands, outer, 0, steps, present);
  simulated.weights = sim.params(0);
  simulated.syncs = outer[0].syncs();
  const compute::Tensor& m = outer[0].momentum();
  simulated.momentum.assign(m.data_as<float>(), m.data_as<float>() + m.numel());
  return simulated;
}

// The largest difference between two runs' weights, element by element.
inline double max_difference(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double worst = 0;
  for (std::size_t e = 0; e < a.size(); ++e) worst = std::max(worst, double(std::abs(a[e] - b[e])));
  return worst;
}

// tiny in `islands` islands of one replica, 7 steps of H 3 (syncs after 3, 6 and the last, 7), a
// global batch of 8 sequences in micro-batches of `batch_size`: 2 replicas of batch 4, or one of 4
// in 2 micro-batches, or 2 replicas of 2 micro-batches of 2.
inline std::string resume_file(const TempDir& dir, int islands, int batch_size = 4) {
  const int accumulated = 8 / (islands * batch_size);
  return dir.write("resume-" + std::to_string(islands) + "-" + std::to_string(batch_size) + ".toml",
                   "[model]\npreset = \"tiny\"\n[train]\nsteps = 7\nbatch_size = " + std::to_string(batch_size) +
                       "\nseq_len = 64\nthreads = 1\nval_every = 0\nval_batches = 1\nsync = \"diloco\"\nislands = " +
                       std::to_string(islands) + "\ngrad_accum = " + std::to_string(accumulated) +
                       "\ndiloco_steps = 3\n[sample]\ntokens = 0\n");
}

inline std::vector<float> kind_at(const std::filesystem::path& dir, long step, const char* kind) {
  auto loaded = checkpoint::open_checkpoint(checkpoint::step_dir(dir, step));
  REQUIRE(loaded.ok());
  auto values = loaded->read_all(kind);
  REQUIRE(values.ok());
  return std::move(*values);
}

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

inline void copy_into(const std::vector<float>& values, compute::Tensor& t) {
  REQUIRE(static_cast<std::int64_t>(values.size()) == t.numel());
  std::memcpy(t.data(), values.data(), values.size() * sizeof(float));
}

// The job of `file` as its islands in this process, each from the checkpoint of `step` in `from`
// (its one inner state, island 0's) and the outer state saved there, to the last step: its
// final weights.
inline std::vector<float> simulated_from(const std::string& file, const std::filesystem::path& from, long step) {
  Simulation sim(file);
  std::vector<compute::SimulatedIsland> islands;
  std::vector<compute::OuterStep> outer;
  for (std::size_t i = 0; i < sim.models.size(); ++i) {
    copy_into(kind_at(from, step, "param"), sim.models[i]->params());
    copy_into(kind_at(from, step, "adam_m"), sim.trainers[i]->optimizer().first_moments());
    copy_into(kind_at(from, step, "adam_v"), sim.trainers[i]->optimizer().second_moments());
    sim.trainers[i]->resume_at(step);
    islands.push_back({[trainer = sim.trainers[i].get()] { trainer->step(); }, sim.models[i]->params()});
    outer.emplace_back(sim.models[i]->params(), actors::outer_options(sim.job));
    copy_into(kind_at(from, step, "outer_sync"), outer.back().last_sync());
    copy_into(kind_at(from, step, "outer_momentum"), outer.back().momentum());
  }
  compute::train_islands(islands, outer, step, sim.job.config.train.steps);
  return sim.params(0);
}

// Resumes the checkpoints in `from` (its newest, of step `step`) as the job of `file` does, with
// `workers` processes and `every` for checkpoint.every, in `to`.
inline void resume(const TempDir& dir, const std::filesystem::path& from, long step, const std::filesystem::path& to,
                   const std::string& file, int workers, long every) {
  std::filesystem::copy(from, to, std::filesystem::copy_options::recursive);
  for (long later = step + 1; later <= 7; ++later) std::filesystem::remove_all(checkpoint::step_dir(to, later));
  const ProcessResult r = run_troupe(dir,
                                     {"train", "--config", file, "--workers", std::to_string(workers), "--resume",
                                      "--checkpoint.dir", to.string(), "--checkpoint.every", std::to_string(every)},
                                     std::chrono::seconds(180));
  INFO(to.filename() << " stdout: " << r.out << "\nstderr: " << r.err);
  REQUIRE(r.exit_code == 0);
  CHECK_THAT(r.out, Catch::Contains("after step " + std::to_string(step) + " (data position"));
}

}  // namespace troupe::test
