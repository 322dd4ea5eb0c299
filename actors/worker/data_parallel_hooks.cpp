#include "actors/worker/data_parallel_hooks.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <set>
#include <vector>

#include "comm/bf16_wire.hpp"
#include "compute/train/int8_blocks.hpp"

namespace troupe::actors {
namespace {

// 4-byte words one island's int8 payload of `count` values takes (the last word padded).
std::int64_t int8_payload_words(std::int64_t count) { return (compute::int8_blocks_bytes(count) + 3) / 4; }

std::vector<comm::Slice> slices(const std::vector<std::int64_t>& counts) {
  std::vector<comm::Slice> out;
  std::int64_t next = 0;
  for (std::int64_t count : counts) {
    out.push_back({next, count});
    next += count;
  }
  return out;
}

// The gradient sums of `dp` through `compressor`; ZeRO-2's reduce-scatter in bf16 (whose ring
// adds in f32 at each hop as the all-reduce's does), this rank's segment read back.
void compress_sums(compute::DataParallel& dp, MailboxComm& mailbox, comm::Communicator& comm,
                   monitor::WorkProgress& progress, std::shared_ptr<comm::GradientCompressor> compressor) {
  dp.begin_step = [compressor](long step) { compressor->begin_step(step); };
  dp.start_sum = [compressor](compute::Tensor bucket, std::int64_t offset) {
    compressor->start(std::move(bucket), offset);
  };
  dp.wait_sums = [compressor] { compressor->finish(); };
  dp.abandon_sums = [compressor] { compressor->abandon_step(); };
  if (compressor->options().kind == comm::Compression::powersgd) {
    dp.sum_state = {{"powersgd_q", compressor->factors(), true},
                    {"powersgd_residual_dp" + std::to_string(comm.position()), compressor->residuals(), false}};
  }
  if (compressor->options().kind != comm::Compression::bf16) return;
  dp.reduce_scatter_gradients = [compressor, plain = dp.reduce_scatter_gradients, &mailbox, &comm,
                                 &progress](compute::Tensor& grads) {
    if (!compressor->compressing()) return plain(grads);
    compute::Tensor wire = compute::Tensor::zeros({grads.numel()}, compute::DType::bf16);
    comm::encode_bf16(grads.data_as<float>(), wire.data_as<std::uint16_t>(), static_cast<std::size_t>(grads.numel()));
    const MailboxComm::Operation op = mailbox.reduce_scatter(comm, wire);
    {
      auto waiting = progress.wait_for("the gradient reduce-scatter (bf16)");
      check_comm(mailbox.wait(op));
    }
    const comm::Slice own = comm::segment_of(grads.numel(), comm.group().size(), comm.position());
    comm::decode_bf16(wire.data_as<std::uint16_t>() + own.offset, grads.data_as<float>() + own.offset,
                      static_cast<std::size_t>(own.count));
  };
}

}  // namespace

compute::ShardExchange unit_exchange(MailboxComm& mailbox, comm::Communicator& comm, monitor::WorkProgress& progress) {
  auto gathers = std::make_shared<std::set<MailboxComm::Operation>>();
  compute::ShardExchange exchange;
  exchange.start_all_gather = [&mailbox, &comm, gathers](compute::Tensor unit, std::vector<std::int64_t> counts) {
    const MailboxComm::Operation op = mailbox.all_gather(comm, std::move(unit), slices(counts));
    gathers->insert(op);
    return op;
  };
  exchange.start_reduce_scatter = [&mailbox, &comm](compute::Tensor unit, std::vector<std::int64_t> counts) {
    return mailbox.reduce_scatter(comm, std::move(unit), slices(counts));
  };
  exchange.wait = [&mailbox, &progress, gathers](compute::ShardExchange::Ticket op) {
    const bool gather = gathers->erase(op) > 0;
    auto waiting =
        progress.wait_for(gather ? "a block's parameter all-gather (ZeRO-3)" : "a block's gradient reduce-scatter (ZeRO-3)");
    check_comm(mailbox.wait(op));
  };
  return exchange;
}

OuterSum post_outer_sum(MailboxComm& mailbox, comm::Communicator& outer, compute::Tensor pseudo_gradient,
                        compute::OuterPrecision precision) {
  compute::Tensor wire = pseudo_gradient;
  MailboxComm::Operation op;
  if (precision == compute::OuterPrecision::int8) {
    // Every island's payload in its own segment of 4-byte words, gathered; added in read_outer_sum.
    const std::int64_t words = int8_payload_words(pseudo_gradient.numel());
    wire = compute::Tensor::zeros({words * outer.group().size()}, compute::DType::i32);
    compute::encode_int8_blocks(pseudo_gradient.data_as<float>(), pseudo_gradient.numel(),
                                reinterpret_cast<std::byte*>(wire.data_as<std::int32_t>() + words * outer.position()));
    op = mailbox.all_gather(outer, wire);
  } else {
    if (precision == compute::OuterPrecision::bf16) {
      wire = compute::Tensor::zeros({pseudo_gradient.numel()}, compute::DType::bf16);
      comm::encode_bf16(pseudo_gradient.data_as<float>(), wire.data_as<std::uint16_t>(),
                        static_cast<std::size_t>(wire.numel()));
    }
    op = mailbox.all_reduce(outer, wire);
  }
  mailbox.set_apart(op);  // in flight across the island's own sums when the overlap is above 0
  return {op, std::move(pseudo_gradient), std::move(wire)};
}

void read_outer_sum(const OuterSum& sum) {
  if (sum.wire.dtype() == compute::DType::bf16)
    comm::decode_bf16(sum.wire.data_as<std::uint16_t>(), sum.pseudo_gradient.data_as<float>(),
                      static_cast<std::size_t>(sum.wire.numel()));
  if (sum.wire.dtype() == compute::DType::i32) {
    const std::int64_t count = sum.pseudo_gradient.numel(), words = int8_payload_words(count);
    for (std::int64_t i = 0; i * words < sum.wire.numel(); ++i)
      compute::add_int8_blocks(reinterpret_cast<const std::byte*>(sum.wire.data_as<std::int32_t>() + words * i), count,
                               sum.pseudo_gradient.data_as<float>(), i == 0);
  }
}

compute::IslandGroup island_hooks(MailboxComm& mailbox, comm::Communicator& outer, monitor::WorkProgress& progress,
                                  int island, compute::OuterPrecision precision) {
  auto posted = std::make_shared<std::deque<OuterSum>>();
  compute::IslandGroup group{outer.group().size(), island, {}, {}, {}};
  group.start_sum = [&mailbox, &outer, posted, precision](compute::Tensor pseudo_gradient, long) {
    posted->push_back(post_outer_sum(mailbox, outer, std::move(pseudo_gradient), precision));
  };
  group.wait_sum = [&mailbox, &outer, &progress, posted] {
    const OuterSum sum = std::move(posted->front());
    posted->pop_front();
    {
      auto waiting = progress.wait_for(outer_sum_wait);
      check_comm(mailbox.wait(sum.op));
    }
    read_outer_sum(sum);
    return outer.group().size();
  };
  return group;
}

std::vector<std::int64_t> shard_offsets(const comm::Communicator& comm, std::int64_t parameters) {
  const int world = comm.group().size();
  std::vector<std::int64_t> offsets;
  for (int p = 0; p < world; ++p) offsets.push_back(comm::segment_of(parameters, world, p).offset);
  offsets.push_back(parameters);
  return offsets;
}

std::vector<comm::GradientTensor> gradient_tensors(const std::vector<compute::ParameterView>& views) {
  std::vector<comm::GradientTensor> tensors;
  for (const compute::ParameterView& view : views) {
    // Each of an MoE block's stacked experts is a tensor of its own: a rank holding some of them
    // compresses the same matrices as one holding all.
    const std::int64_t stacked = view.expert ? view.shape.front() : 1, numel = view.numel() / stacked;
    const compute::Shape shape(view.shape.begin() + (view.expert ? 1 : 0), view.shape.end());
    const std::int64_t rows = shape.empty() ? 1 : shape.front();
    for (std::int64_t e = 0; e < stacked; ++e)
      tensors.push_back({view.offset + e * numel, shape.size() < 2 ? numel : rows, shape.size() < 2 ? 1 : numel / rows,
                         view.global_offset + e * numel});
  }
  return tensors;
}

std::shared_ptr<comm::GradientCompressor> gradient_compressor(MailboxComm& mailbox, comm::Communicator& comm,
                                                              monitor::WorkProgress& progress,
                                                              const comm::CompressionOptions& options,
                                                              std::vector<comm::GradientTensor> tensors) {
  comm::SumChannel channel{
      [&mailbox, &comm](compute::Tensor wire) { return mailbox.all_reduce(comm, std::move(wire)); },
      [&mailbox, &progress](comm::SumChannel::Ticket op) {
        auto waiting = progress.wait_for("the compressed gradient sums");
        check_comm(mailbox.wait(op));
      }};
  return std::make_shared<comm::GradientCompressor>(options, std::move(tensors), comm.group().size(),
                                                    std::move(channel));
}

compute::DataParallel group_hooks(MailboxComm& mailbox, comm::Communicator& comm, monitor::WorkProgress& progress,
                                  compute::ZeroStage zero_stage, std::shared_ptr<comm::GradientCompressor> compressor) {
  compute::DataParallel dp;
  dp.rank = comm.position();
  dp.size = static_cast<int>(comm.group().ranks.size());
  dp.zero_stage = zero_stage;
  // Posts one operation and waits for it, saying what for.
  auto run = [&mailbox, &progress](const char* what, auto post) {
    post();
    auto waiting = progress.wait_for(what);
    check_comm(mailbox.wait_all());
  };
  // An order that came during the step (a peer failed, the job recovers) is taken between layers,
  // forward and backward, so a rank the recovery needs gives up its step within one layer's compute
  // rather than at the step's first wait.
  dp.between_layers = [&mailbox] { mailbox.take_waiting_orders(); };
  dp.start_sum = [&mailbox, &comm](compute::Tensor bucket, std::int64_t) {
    mailbox.all_reduce(comm, std::move(bucket));
  };
  dp.wait_sums = [&mailbox, &progress] {
    auto waiting = progress.wait_for("the gradient sums");
    check_comm(mailbox.wait_all());
  };
  dp.reduce_scatter_gradients = [run, &mailbox, &comm](compute::Tensor& grads) {
    run("the gradient reduce-scatter", [&] { mailbox.reduce_scatter(comm, grads); });
  };
  dp.all_gather_parameters = [run, &mailbox, &comm](compute::Tensor& params) {
    run("the parameter all-gather", [&] { mailbox.all_gather(comm, params); });
  };
  dp.segment_of = [&comm](std::int64_t numel) {
    const comm::Slice own = comm::segment_of(numel, comm.group().size(), comm.position());
    return std::pair{own.offset, own.offset + own.count};
  };
  dp.shards_of = [&comm](std::int64_t numel) { return shard_offsets(comm, numel); };
  dp.sum = [run, &mailbox, &comm](double x) {
    compute::Tensor t = compute::Tensor::zeros({1}, compute::DType::f64);
    t.data_as<double>()[0] = x;
    run("a scalar sum", [&] { mailbox.all_reduce(comm, t); });
    return t.data_as<double>()[0];
  };
  dp.sum_values = [run, &mailbox, &comm](std::span<double> values) {
    compute::Tensor t = compute::Tensor::zeros({static_cast<std::int64_t>(values.size())}, compute::DType::f64);
    std::copy(values.begin(), values.end(), t.data_as<double>());
    run("a sum of scalars", [&] { mailbox.all_reduce(comm, t); });
    std::copy(t.data_as<double>(), t.data_as<double>() + values.size(), values.begin());
  };
  // Over the group as it is now: a job that grows in place renews it over more ranks.
  dp.mean = [sum = dp.sum, &comm](double x) { return sum(x) / comm.group().size(); };
  if (compressor) compress_sums(dp, mailbox, comm, progress, std::move(compressor));
  return dp;
}

void sum_experts_over(compute::DataParallel& dp, MailboxComm& mailbox, comm::Communicator& expert_data,
                      monitor::WorkProgress& progress, std::shared_ptr<comm::GradientCompressor> compressor) {
  dp.start_expert_sum = [&mailbox, &expert_data](compute::Tensor bucket, std::int64_t) {
    mailbox.all_reduce(expert_data, std::move(bucket));
  };
  if (compressor) {
    // The dense sums' hooks go on, the experts' compressor after them, in the same order on every rank.
    dp.start_expert_sum = [compressor](compute::Tensor bucket, std::int64_t offset) {
      compressor->start(std::move(bucket), offset);
    };
    dp.wait_sums = [dense = dp.wait_sums, compressor] {
      dense();
      compressor->finish();
    };
    dp.begin_step = [dense = dp.begin_step, compressor](long step) {
      if (dense) dense(step);
      compressor->begin_step(step);
    };
    dp.abandon_sums = [dense = dp.abandon_sums, compressor] {
      if (dense) dense();
      compressor->abandon_step();
    };
  }
  if (compute::shards_optimizer_state(dp.zero_stage)) {
    compute::DataParallel experts = group_hooks(mailbox, expert_data, progress, dp.zero_stage, std::move(compressor));
    if (compute::shards_parameters(dp.zero_stage))
      experts.unit_exchange = unit_exchange(mailbox, expert_data, progress);
    dp.expert_data = std::make_shared<compute::DataParallel>(std::move(experts));
  }
}

compute::DataParallel group_data_parallel(MailboxComm& mailbox, comm::Communicator& comm,
                                          monitor::WorkProgress& progress, compute::ZeroStage zero_stage,
                                          std::int64_t parameters,
                                          std::shared_ptr<comm::GradientCompressor> compressor) {
  compute::DataParallel dp = group_hooks(mailbox, comm, progress, zero_stage, std::move(compressor));
  if (compute::shards_optimizer_state(zero_stage)) {
    // The shard is the reduce-scatter's segment, so ZeRO-2's summed gradients land on it.
    const comm::Slice shard = comm::segment_of(parameters, dp.size, dp.rank);
    dp.shard_begin = shard.offset;
    dp.shard_end = shard.offset + shard.count;
  }
  if (compute::shards_parameters(zero_stage)) {
    dp.shard_offsets = dp.shards_of(parameters);
    dp.unit_exchange = unit_exchange(mailbox, comm, progress);
  }
  return dp;
}

}  // namespace troupe::actors
