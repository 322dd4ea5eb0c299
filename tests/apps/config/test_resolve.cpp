#include <catch2/catch.hpp>

#include <functional>
#include <string>

#include "apps/config/resolve.hpp"

using namespace troupe;
using namespace troupe::apps;
using Catch::Contains;

namespace {

// The error resolve() gives for the defaults changed by edit.
std::string resolve_error(const std::function<void(JobConfig&)>& edit) {
  JobConfig config;
  edit(config);
  const auto job = resolve(config);
  return job.ok() ? "" : job.error().message;
}

}  // namespace

TEST_CASE("the defaults resolve to the small preset with seq_len = block_size", "[config]") {
  auto job = resolve(JobConfig{});
  REQUIRE(job.ok());
  const auto small = *compute::gpt_preset("small");
  CHECK(job->model.n_layer == small.n_layer);
  CHECK(job->model.n_embd == small.n_embd);
  CHECK(job->model.block_size == small.block_size);
  CHECK(job->config.train.seq_len == small.block_size);
}

TEST_CASE("model keys override the preset and the vocabulary is padded", "[config]") {
  JobConfig config;
  config.model.preset = "tiny";
  config.model.n_layer = 2;
  config.model.vocab_size = 50257;
  config.train.seq_len = 64;
  auto job = resolve(config);
  REQUIRE(job.ok());
  CHECK(job->model.n_layer == 2);
  CHECK(job->model.n_embd == compute::gpt_preset("tiny")->n_embd);
  CHECK(job->model.vocab_size == 50257);
  CHECK(job->model.padded_vocab_size == 50304);
  CHECK(job->config.train.seq_len == 64);
}

TEST_CASE("an unknown preset lists the presets", "[config]") {
  const auto message = resolve_error([](JobConfig& c) { c.model.preset = "huge"; });
  CHECK(message ==
        "model.preset 'huge' is not a preset (known: nano, tiny, small, moe-tiny, moe-small, gpt2, gpt2-medium, "
        "gpt2-large, "
        "gpt2-xl, gpt3-1.3b, gpt3-2.7b, gpt3-6.7b, gpt3-13b)");
}

TEST_CASE("model shape errors name the keys and values", "[config]") {
  CHECK(resolve_error([](JobConfig& c) {
          c.model.n_embd = 100;
          c.model.n_head = 3;
        }) == "model.n_embd (100) must be divisible by model.n_head (3)");
  CHECK_THAT(resolve_error([](JobConfig& c) { c.model.n_layer = -1; }),
             Contains("model.n_layer must be positive (or 0 for the preset's value), got -1"));
  CHECK_THAT(resolve_error([](JobConfig& c) { c.model.vocab_size = 100; }),
             Contains("model.vocab_size 100 is too small for the byte tokens"));
}

TEST_CASE("train errors name the key, the value and the problem", "[config]") {
  using Edit = std::function<void(JobConfig&)>;
  const std::vector<std::pair<Edit, std::string>> cases = {
      {[](JobConfig& c) { c.train.steps = 0; }, "train.steps must be positive, got 0"},
      {[](JobConfig& c) { c.train.steps = -5; }, "train.steps must be positive, got -5"},
      {[](JobConfig& c) { c.train.batch_size = 0; }, "train.batch_size must be positive, got 0"},
      {[](JobConfig& c) { c.train.seq_len = 512; }, "train.seq_len 512 exceeds model.block_size 256"},
      {[](JobConfig& c) { c.train.seq_len = -1; },
       "train.seq_len must be positive (or 0 for model.block_size), got -1"},
      {[](JobConfig& c) { c.train.grad_accum = 0; }, "train.grad_accum must be positive, got 0"},
      {[](JobConfig& c) { c.train.lr = 0; }, "train.lr must be positive, got 0.0"},
      {[](JobConfig& c) { c.train.min_lr = -0.1; }, "train.min_lr must not be negative, got -0.1"},
      {[](JobConfig& c) { c.train.min_lr = 0.01; }, "train.min_lr 0.01 exceeds train.lr 0.001"},
      {[](JobConfig& c) { c.train.warmup_steps = -1; }, "train.warmup_steps must not be negative, got -1"},
      {[](JobConfig& c) { c.train.beta1 = 1.0; }, "train.beta1 must be in [0, 1), got 1.0"},
      {[](JobConfig& c) { c.train.beta2 = -0.5; }, "train.beta2 must be in [0, 1), got -0.5"},
      {[](JobConfig& c) { c.train.eps = 0; }, "train.eps must be positive, got 0.0"},
      {[](JobConfig& c) { c.train.weight_decay = -1; }, "train.weight_decay must not be negative, got -1.0"},
      {[](JobConfig& c) { c.train.grad_clip = -1; }, "train.grad_clip must not be negative (0 = off), got -1.0"},
      {[](JobConfig& c) { c.train.threads = -2; }, "train.threads must not be negative (0 = all cores), got -2"},
      {[](JobConfig& c) {
         c.train.backend = compute::BackendKind::sim;
         c.train.precision = compute::Precision::bf16;
       },
       "train.precision bf16 works with train.backend cpu or cuda: the sim backend models fp32 products only"},
      {[](JobConfig& c) {
         c.train.backend = compute::BackendKind::cuda;
         c.train.precision = compute::Precision::bf16;
         c.train.zero = compute::ZeroStage::optimizer_state;
       },
       "train.zero 1 works with train.backend cpu only so far: ZeRO over NCCL is not wired; use 0"},
      {[](JobConfig& c) {
         c.train.backend = compute::BackendKind::cuda;
         c.pipeline.stages = 2;
       },
       "pipeline.stages > 1 works with train.backend cpu only so far: pipeline transfers over NCCL are not wired "
       "(got 'cuda')"},
      {[](JobConfig& c) { c.train.val_every = -1; },
       "train.val_every must not be negative (0 = only at the end), got -1"},
      {[](JobConfig& c) { c.train.val_batches = 0; }, "train.val_batches must be positive, got 0"},
      {[](JobConfig& c) { c.train.log_every = 0; }, "train.log_every must be positive, got 0"},
  };
  for (const auto& [edit, expected] : cases) CHECK(resolve_error(edit) == expected);
}

TEST_CASE("data, sample and fault errors name the key, the value and the problem", "[config]") {
  using Edit = std::function<void(JobConfig&)>;
  const std::vector<std::pair<Edit, std::string>> cases = {
      {[](JobConfig& c) { c.data.corpus = ""; }, "data.corpus is empty and data.train_tokens is not set"},
      {[](JobConfig& c) { c.data.val_tokens = "v.bin"; }, "data.val_tokens 'v.bin' needs data.train_tokens as well"},
      {[](JobConfig& c) { c.data.val_fraction = 0; }, "data.val_fraction must be in (0, 1), got 0.0"},
      {[](JobConfig& c) { c.data.val_fraction = 1; }, "data.val_fraction must be in (0, 1), got 1.0"},
      {[](JobConfig& c) { c.sample.tokens = -1; }, "sample.tokens must not be negative (0 = no sample), got -1"},
      {[](JobConfig& c) { c.sample.temperature = 0; }, "sample.temperature must be positive, got 0.0"},
      {[](JobConfig& c) { c.sample.top_k = -1; }, "sample.top_k must not be negative (0 = all tokens), got -1"},
      {[](JobConfig& c) { c.sample.top_k = 300; }, "sample.top_k 300 exceeds model.vocab_size 256"},
      {[](JobConfig& c) { c.fault.heartbeat_seconds = 0; }, "fault.heartbeat_seconds must be positive, got 0.0"},
      {[](JobConfig& c) { c.fault.heartbeat_timeout = 1.5; },
       "fault.heartbeat_timeout 1.5 must be at least twice fault.heartbeat_seconds 1.0"},
      {[](JobConfig& c) { c.fault.step_timeout = -1; }, "fault.step_timeout must not be negative (0 = off), got -1.0"},
      {[](JobConfig& c) { c.fault.rescue_timeout = 0.5; },
       "fault.rescue_timeout must be between 1 and 3600 seconds, got 0.5"},
      {[](JobConfig& c) { c.fault.rescue_timeout = 7200; },
       "fault.rescue_timeout must be between 1 and 3600 seconds, got 7200.0"},
  };
  for (const auto& [edit, expected] : cases) CHECK(resolve_error(edit) == expected);
}

TEST_CASE("a token file lifts the byte-vocabulary limit", "[config]") {
  JobConfig config;
  config.data.train_tokens = "train.bin";
  config.model.vocab_size = 100;
  CHECK(resolve(config).ok());
}

TEST_CASE("gradient compression: the start step defaults to 10% of the steps, and layouts it cannot serve are refused",
          "[config][compression]") {
  JobConfig config;
  config.train.steps = 200;
  config.comm.compress = comm::Compression::powersgd;
  auto job = resolve(config);
  REQUIRE(job.ok());
  CHECK(job->config.comm.compress_start_step == 20);
  config.comm.compress_start_step = 0;
  CHECK(resolve(config)->config.comm.compress_start_step == 0);

  CHECK_THAT(resolve_error([](JobConfig& c) { c.comm.powersgd_rank = 0; }),
             Contains("comm.powersgd_rank must be positive"));
  CHECK_THAT(resolve_error([](JobConfig& c) { c.comm.compress_start_step = -2; }),
             Contains("comm.compress_start_step must not be negative"));
  for (compute::ZeroStage zero : {compute::ZeroStage::gradients, compute::ZeroStage::parameters}) {
    CHECK_THAT(resolve_error([zero](JobConfig& c) {
                 c.comm.compress = comm::Compression::powersgd;
                 c.train.zero = zero;
               }),
               Contains("comm.compress powersgd does not work with " + compute::zero_setting(zero)));
  }
  CHECK(resolve_error([](JobConfig& c) {
          c.comm.compress = comm::Compression::bf16;
          c.train.zero = compute::ZeroStage::gradients;
        }).empty());
  // PowerSGD compresses each pipeline stage's and tensor shard's local matrices.
  CHECK(resolve_error([](JobConfig& c) {
          c.comm.compress = comm::Compression::powersgd;
          c.pipeline.stages = 2;
          c.tensor.shards = 2;
          c.train.zero = compute::ZeroStage::optimizer_state;
        }).empty());
  CHECK_THAT(resolve_error([](JobConfig& c) {
               c.comm.compress = comm::Compression::bf16;
               c.train.zero = compute::ZeroStage::parameters;
             }),
             Contains("comm.compress bf16 does not work with train.zero 3"));
}

TEST_CASE(
    "experts: the MoE keys override a preset, a dense preset given experts takes top-2, and layouts not built "
    "yet are refused in one line",
    "[config][moe]") {
  JobConfig config;
  config.model.preset = "moe-tiny";
  auto job = resolve(config);
  REQUIRE(job.ok());
  CHECK(job->model.experts == 4);
  CHECK(job->model.top_k == 2);
  CHECK(job->model.moe_every == 2);
  config.model.experts = 0;  // -1 keeps the preset's; 0 makes it dense
  REQUIRE(resolve(config).ok());
  CHECK(resolve(config)->model.experts == 0);

  config = JobConfig{};
  config.model.preset = "tiny";
  config.model.experts = 8;
  job = resolve(config);
  REQUIRE(job.ok());
  CHECK(job->model.top_k == 2);
  CHECK(job->model.moe_every == 1);

  auto moe = [](const std::function<void(JobConfig&)>& edit) {
    return resolve_error([&](JobConfig& c) {
      c.model.preset = "moe-tiny";
      edit(c);
    });
  };
  CHECK(moe([](JobConfig& c) { c.model.top_k = 5; }) == "model.top_k 5 must be between 1 and model.experts 4");
  CHECK(moe([](JobConfig& c) { c.model.moe_every = 9; }) == "model.moe_every 9 must be between 1 and model.n_layer 4");
  CHECK(moe([](JobConfig& c) { c.model.experts = -2; }) ==
        "model.experts must not be negative (0 = dense, -1 = the preset's), got -2");
  CHECK(moe([](JobConfig& c) { c.train.moe_aux_coef = -1; }) == "train.moe_aux_coef must not be negative, got -1.0");
  CHECK(moe([](JobConfig& c) { c.train.backend = compute::BackendKind::cuda; }) ==
        "model.experts works with train.backend cpu only so far: the router and the token dispatch run on host "
        "memory (got 'cuda')");
  CHECK(moe([](JobConfig& c) { c.train.recompute = compute::Recompute::selective; }).empty());
  CHECK(moe([](JobConfig& c) {
          c.train.recompute = compute::Recompute::full;
          c.expert.shards = 2;
        }).empty());
  CHECK(moe([](JobConfig& c) { c.pipeline.stages = 2; }).empty());
  CHECK(moe([](JobConfig& c) {
          c.pipeline.stages = 2;
          c.pipeline.schedule = schedules::ScheduleKind::zb_v;
          c.pipeline.virtual_stages = 2;
        }).empty());
  CHECK(moe([](JobConfig& c) {
          c.pipeline.stages = 2;
          c.pipeline.schedule = schedules::ScheduleKind::zb_h1;
          c.expert.shards = 2;
          c.train.recompute = compute::Recompute::full;
        }).empty());
  CHECK(moe([](JobConfig& c) { c.tensor.shards = 2; }).empty());
  CHECK(moe([](JobConfig& c) {
          c.tensor.shards = 2;
          c.tensor.sequence_parallel = true;
        }).empty());
  CHECK(moe([](JobConfig& c) { c.context.shards = 2; }).empty());
  CHECK(moe([](JobConfig& c) {
          c.context.shards = 2;
          c.expert.shards = 2;
        }) ==
        "expert.shards > 1 does not work with context.shards > 1 yet: an expert group is made of data "
        "replicas, not of a replica's context shards (use expert.shards 1: every context shard then holds "
        "every expert)");
  CHECK(moe([](JobConfig& c) { c.train.zero = compute::ZeroStage::parameters; }).empty());
}

TEST_CASE("pipeline.split speed splits the layers by pipeline.stage_speeds, and speeds that cannot work are refused",
          "[config]") {
  JobConfig config;
  config.model.n_layer = 12;
  config.pipeline.stages = 2;
  config.pipeline.split = compute::SplitMethod::speed;
  config.pipeline.stage_speeds = "1,0.5";
  auto job = resolve(config);
  REQUIRE(job.ok());
  REQUIRE(job->pipeline_split.size() == 2);
  const auto by_speed = compute::split_layers_by_speed(job->model, job->config.train.seq_len, {1, 0.5}).value();
  CHECK(job->pipeline_split[0].last_layer == by_speed[0].last_layer);
  config.pipeline.split = compute::SplitMethod::balanced;
  config.pipeline.stage_speeds = "";
  const int balanced_cut = resolve(config)->pipeline_split[0].last_layer;
  CHECK(job->pipeline_split[0].last_layer > balanced_cut);  // the fast first stage takes more blocks

  auto refused = [](const std::string& speeds, int stages, int virtual_stages = 1) {
    return resolve_error([&](JobConfig& c) {
      c.pipeline.stages = stages;
      c.pipeline.virtual_stages = virtual_stages;
      if (virtual_stages > 1) c.pipeline.schedule = schedules::ScheduleKind::interleaved;
      c.pipeline.split = compute::SplitMethod::speed;
      c.pipeline.stage_speeds = speeds;
    });
  };
  CHECK(refused("", 2) ==
        "pipeline.split speed needs pipeline.stage_speeds, one relative speed a stage (1,0.5: the second at half "
        "speed)");
  CHECK(resolve_error([](JobConfig& c) {
          c.pipeline.stages = 2;
          c.pipeline.stage_speeds = "1,0.5";
        }) ==
        "pipeline.stage_speeds '1,0.5' is read only with pipeline.split speed (balanced splits the layers by "
        "parameters)");
  CHECK(refused("1,fast", 2) ==
        "pipeline.stage_speeds: 'fast' in '1,fast' is not a number (write one speed a stage, comma-separated: 1,0.5)");
  CHECK(refused("1,0.5x", 2) ==
        "pipeline.stage_speeds: '0.5x' in '1,0.5x' is not a number (write one speed a stage, comma-separated: 1,0.5)");
  CHECK(refused("1,", 2) ==
        "pipeline.stage_speeds: '' in '1,' is not a number (write one speed a stage, comma-separated: 1,0.5)");
  CHECK(refused("1", 1) == "pipeline.stage_speeds '1' needs pipeline.stages > 1 (one speed a stage)");
  CHECK(refused("1,0.5,1", 2) == "pipeline: 3 stage speeds for 2 stages");
  CHECK(refused("1,-1", 2) == "pipeline: stage 1's speed must be a positive number, got -1.000000");
  CHECK(refused("1,0.5", 2, 3) ==
        "pipeline: a split by speed places one chunk a stage; it does not apply to 3 virtual stages");
}

TEST_CASE(
    "expert.shards: refused without experts, when it does not divide them, with ZeRO-3 on pipeline stages or DiLoCo",
    "[config][moe]") {
  auto moe = [](const std::function<void(JobConfig&)>& edit) {
    return resolve_error([&](JobConfig& c) {
      c.model.preset = "moe-tiny";
      edit(c);
    });
  };
  CHECK(moe([](JobConfig& c) { c.expert.shards = 2; }).empty());
  CHECK(moe([](JobConfig& c) { c.expert.shards = 4; }).empty());
  CHECK(moe([](JobConfig& c) { c.expert.shards = 0; }) == "expert.shards must be at least 1 (1 = none), got 0");
  CHECK(moe([](JobConfig& c) { c.expert.shards = 3; }) ==
        "expert.shards 3 does not divide model.experts 4 (each rank holds as many experts)");
  CHECK(moe([](JobConfig& c) {
          c.expert.shards = 2;
          c.model.experts = 0;
        }) == "expert.shards 2 needs a model with experts (model.experts > 0)");
  for (compute::ZeroStage zero :
       {compute::ZeroStage::optimizer_state, compute::ZeroStage::gradients, compute::ZeroStage::parameters})
    CHECK(moe([zero](JobConfig& c) {
            c.expert.shards = 2;
            c.train.zero = zero;
          }).empty());
  for (comm::Compression compress : {comm::Compression::bf16, comm::Compression::powersgd})
    CHECK(moe([compress](JobConfig& c) {
            c.expert.shards = 2;
            c.comm.compress = compress;
          }).empty());
  CHECK(moe([](JobConfig& c) {
          c.expert.shards = 2;
          c.fault.elastic = true;
        }) == "expert.shards > 1 does not work with fault.elastic yet: an expert group keeps its 2 ranks, and a "
              "shrink or grow moves single ranks");
  // On pipeline stages expert shards take every ZeRO stage.
  for (compute::ZeroStage zero :
       {compute::ZeroStage::none, compute::ZeroStage::gradients, compute::ZeroStage::parameters})
    CHECK(moe([zero](JobConfig& c) {
            c.expert.shards = 2;
            c.pipeline.stages = 2;
            c.train.zero = zero;
          }).empty());
  for (const comm::Compression compress : {comm::Compression::bf16, comm::Compression::powersgd})
    CHECK(moe([compress](JobConfig& c) {
            c.expert.shards = 2;
            c.pipeline.stages = 2;
            c.comm.compress = compress;
          }).empty());
  // Tensor groups inside expert groups: each rank's experts split over its tensor group.
  CHECK(moe([](JobConfig& c) {
          c.expert.shards = 2;
          c.tensor.shards = 2;
          c.train.zero = compute::ZeroStage::parameters;
        }).empty());
  CHECK(moe([](JobConfig& c) {
          c.expert.shards = 2;
          c.train.sync = compute::SyncMode::diloco;
        }) ==
        "train.sync diloco does not work with expert.shards > 1 yet: an island is data-parallel replicas (of "
        "pipeline stages, tensor shards and context shards) summing plain gradients");
}

TEST_CASE("train.balance static reads the replica speeds and refuses the layouts it cannot serve yet",
          "[config][balance]") {
  JobConfig config;
  config.train.balance = compute::BalanceMode::fixed;
  config.train.replica_speeds = "1,0.5,2";
  auto job = resolve(config);
  REQUIRE(job.ok());
  CHECK(job->replica_speeds == std::vector<double>{1, 0.5, 2});
  config.train.replica_speeds = "";
  CHECK(resolve(config)->replica_speeds.empty());
  auto refused = [](const std::function<void(JobConfig&)>& change) {
    return resolve_error([&](JobConfig& c) {
      c.train.balance = compute::BalanceMode::fixed;
      change(c);
    });
  };
  const std::string not_yet =
      " yet: uneven shares are data-parallel replicas (of pipeline stages, tensor or context shards too) summing "
      "their gradients every step";
  CHECK(refused([](JobConfig& c) { c.tensor.shards = 2; }).empty());
  CHECK(refused([](JobConfig& c) { c.context.shards = 2; }).empty());
  CHECK(refused([](JobConfig& c) {
          c.model.preset = "moe-tiny";
          c.expert.shards = 2;
        }) == "train.balance static does not work with expert.shards > 1" + not_yet);
  CHECK(refused([](JobConfig& c) {
          c.pipeline.stages = 2;
          c.pipeline.microbatches = 4;
        }).empty());
  // Shares 3, 1 of 4: interleaving over 2 stages takes neither.
  CHECK(refused([](JobConfig& c) {
          c.train.replica_speeds = "1,0.2";
          c.pipeline.stages = 2;
          c.pipeline.virtual_stages = 3;  // the default model's 6 layers as 6 chunks
          c.pipeline.schedule = schedules::ScheduleKind::interleaved;
          c.pipeline.microbatches = 2;
        }).rfind("train.balance static: replica 0's share of 3 micro-batches: pipeline schedule ", 0) == 0);
  CHECK(refused([](JobConfig& c) { c.fault.elastic = true; }).empty());
  CHECK(refused([](JobConfig& c) { c.train.zero = compute::ZeroStage::parameters; }).empty());
  CHECK(refused([](JobConfig& c) {
          c.train.zero = compute::ZeroStage::parameters;
          c.pipeline.stages = 2;
          c.pipeline.microbatches = 4;
        }).empty());
  CHECK(refused([](JobConfig& c) {
          c.train.zero = compute::ZeroStage::parameters;
          c.tensor.shards = 2;
        }).empty());
  // On stages each micro-batch keeps its own routing losses: experts are refused only on whole models.
  CHECK(refused([](JobConfig& c) {
          c.train.zero = compute::ZeroStage::parameters;
          c.model.preset = "moe-tiny";
          c.pipeline.stages = 2;
          c.pipeline.microbatches = 4;
        }).empty());
  CHECK(refused([](JobConfig& c) {
          c.train.zero = compute::ZeroStage::parameters;
          c.model.preset = "moe-tiny";
        }) ==
        "train.balance static does not work with train.zero 3 on a model with experts: a replica runs its "
        "share as one batch, whose routing losses would not be its micro-batches'");
  CHECK(refused([](JobConfig& c) { c.train.sync = compute::SyncMode::diloco; }).empty());
  CHECK(refused([](JobConfig& c) { c.train.replica_speeds = "1,-2"; }) ==
        "train.replica_speeds '1,-2': every speed must be a positive number");
  CHECK(refused([](JobConfig& c) { c.train.zero = compute::ZeroStage::gradients; }).empty());
  CHECK(resolve_error([](JobConfig& c) { c.train.replica_speeds = "1,2"; }) ==
        "train.replica_speeds '1,2' needs train.balance static or dynamic");
}

TEST_CASE("train.balance dynamic refuses what static refuses, and a window below one step", "[config][balance]") {
  JobConfig config;
  config.train.balance = compute::BalanceMode::dynamic;
  config.train.replica_speeds = "1,0.5";
  REQUIRE(resolve(config).ok());
  CHECK(resolve_error([](JobConfig& c) {
          c.train.balance = compute::BalanceMode::dynamic;
          c.train.zero = compute::ZeroStage::parameters;
          c.model.preset = "moe-tiny";
        }).rfind("train.balance dynamic does not work with train.zero 3 on a model with experts", 0) == 0);
  CHECK(resolve_error([](JobConfig& c) {
          c.train.balance = compute::BalanceMode::dynamic;
          c.context.shards = 2;
        }).empty());
  CHECK(resolve_error([](JobConfig& c) {
          c.train.balance = compute::BalanceMode::dynamic;
          c.pipeline.stages = 2;
          c.pipeline.microbatches = 4;
        }).empty());
  CHECK(resolve_error([](JobConfig& c) {
          c.train.balance = compute::BalanceMode::dynamic;
          c.tensor.shards = 2;
        }).empty());
  CHECK(resolve_error([](JobConfig& c) {
          c.train.balance = compute::BalanceMode::dynamic;
          c.pipeline.stages = 2;
          c.pipeline.virtual_stages = 3;
          c.pipeline.schedule = schedules::ScheduleKind::interleaved;
          c.pipeline.microbatches = 2;
        })
            .rfind("train.balance dynamic does not work with pipeline.schedule interleaved: its shares move by one "
                   "micro-batch",
                   0) == 0);
  CHECK(resolve_error([](JobConfig& c) {
          c.train.balance = compute::BalanceMode::dynamic;
          c.train.balance_window = 0;
        }) == "train.balance_window must be at least 1, got 0");
}
