// A pipeline rank's instructions as it runs them (schedules/instruction.hpp): each F, B and W on
// its chunk's stage, and the activations and gradients it posts to and takes from its neighbouring
// stages as mailbox transfers, each traced on the rank's track.

#include <chrono>
#include <string>
#include <utility>

#include "actors/worker/pipeline_slots.hpp"
#include "actors/worker/pipeline_trainer.hpp"
#include "monitor/log.hpp"

namespace troupe::actors {
namespace {

using schedules::Op;

}  // namespace

void PipelineTrainer::trace(const char* category, std::string name, double start_us,
                            const schedules::Instruction* ins) {
  if (trace_ == nullptr) return;
  monitor::TraceArgs args{{"step", std::to_string(steps_)}};
  if (ins != nullptr) {
    args.emplace_back("microbatch", std::to_string(ins->microbatch));
    args.emplace_back("chunk", std::to_string(ins->chunk));
  }
  trace_->add_complete(track(), std::move(name), category, start_us, monitor::trace_clock_us() - start_us,
                       std::move(args));
}

int PipelineTrainer::rank_of_stage(int stage) const { return comm::grid_rank(setup_.grid, {replica_, stage, shard_}); }

void PipelineTrainer::wait(MailboxComm::Operation op, const std::string& what) {
  const double start = monitor::trace_clock_us();
  {
    auto waiting = progress_.wait_for(what);
    check_comm(mailbox_.wait(op));
  }
  trace("wait", "wait for " + what, start);
}

void PipelineTrainer::wait_for_input(MailboxComm::Operation op, const std::string& what) {
  const std::vector<schedules::Instruction>& stream = setup_.schedule.streams[static_cast<std::size_t>(stage_)];
  while (fills_waits_with_weights_ && mailbox_.in_flight(op)) {
    const std::optional<std::size_t> next = weights_->next(at_);
    if (!next) break;
    double no_loss = 0;  // a W adds none
    run(stream[*next], no_loss);
    weights_->ran(*next);
  }
  wait(op, what);
}

comm::MessageKey PipelineTrainer::key_of(const schedules::Instruction& instruction) const {
  const auto transfer = schedules::transfer_of(setup_.schedule, stage_, instruction);
  TROUPE_CHECK(transfer.has_value(), "a key for an instruction that is no transfer");
  const int index = transfer->from * setup_.schedule.microbatches + transfer->microbatch;
  return {comm::MessageKind::point_to_point, transfer_group_id_, static_cast<std::uint16_t>(steps_ & 0x7fff),
          static_cast<std::uint16_t>(index | (transfer->gradient ? gradient_index_bit : 0))};
}

int PipelineTrainer::take_slot(Chunk& chunk) {
  TROUPE_CHECK(!chunk.free_slots.empty(), "more micro-batches in flight than the schedule's checked peak");
  const int slot = chunk.free_slots.back();
  chunk.free_slots.pop_back();
  // A send may still read the slot's output or input gradient.
  for (MailboxComm::Operation op : chunk.slot_sends[static_cast<std::size_t>(slot)])
    wait(op, "a send from the activation slot about to be reused");
  chunk.slot_sends[static_cast<std::size_t>(slot)].clear();
  return slot;
}

void PipelineTrainer::release_slot(Chunk& chunk, std::pair<int, int> pair, bool free_now) {
  --in_use_;
  if (!free_now) return;  // its send_grad frees it
  chunk.free_slots.push_back(slot_of_.at(pair));
  slot_of_.erase(pair);
}

// "F3", or "F3.1" for chunk 1: the names troupe schedule gives the simulated ops.
std::string PipelineTrainer::op_name(char kind, const schedules::Instruction& ins) const {
  std::string name = kind + std::to_string(ins.microbatch);
  if (setup_.schedule.chunks > 1) name += "." + std::to_string(ins.chunk);
  return name;
}

// "the gradient of micro-batch 3 for stage 0 chunk 1, from stage 1 (rank 5)": what a stuck
// stage waits for, as the watchdog reports it.
std::string PipelineTrainer::arrival_text(const char* what, const schedules::Instruction& ins, int from_rank) const {
  return std::string("the ") + what + " of micro-batch " + std::to_string(ins.microbatch) + " for stage " +
         std::to_string(stage_) + " chunk " + std::to_string(ins.chunk) + ", from stage " + std::to_string(comm::grid_coord(setup_.grid, from_rank).pp) +
         " (rank " + std::to_string(from_rank) + ")";
}

void PipelineTrainer::post_receive(const schedules::Instruction& ins) {
  const compute::TrainerOptions& o = setup_.options;
  compute::MemoryScope scope(compute::MemoryKind::activations);  // an arriving activation or its gradient
  const compute::GPTStage& stage = *chunks_.front().stage;
  compute::Tensor buffer = backend_.message_buffer(stage.stream_shape(o.batch_size, rows_), compute::DType::f32);
  const int from = rank_of_stage(ins.peer);
  const auto op = mailbox_.recv(groups_.engine, from, key_of(ins), buffer);
  arriving_[{ins.microbatch, ins.chunk * 2 + (ins.op == Op::recv_grad ? 1 : 0)}] = {op, buffer, from};
}

void PipelineTrainer::run(const schedules::Instruction& ins, double& loss_sum) {
  const schedules::Schedule& s = setup_.schedule;
  Chunk& chunk = chunks_[static_cast<std::size_t>(ins.chunk)];
  compute::GPTStage& stage = *chunk.stage;
  const int vs = s.virtual_stage(stage_, ins.chunk);
  const bool last = vs == s.virtual_stages() - 1;
  const std::pair<int, int> here{ins.microbatch, ins.chunk};
  switch (ins.op) {
    case Op::recv_act:
    case Op::recv_grad:
      break;  // posted when the step began
    case Op::forward: {
      const int slot = take_slot(chunk);
      slot_of_[here] = slot;
      compute::Tensor input = inputs_[static_cast<std::size_t>(ins.microbatch)];
      if (vs > 0 && schedules::local_hop(s, vs - 1, vs)) {
        // The bottom of a V: this stage's other chunk made the input, and holds it until its W.
        const int before = s.chunk_of(vs - 1);
        input = chunks_[static_cast<std::size_t>(before)].stage->output(slot_of_.at({ins.microbatch, before}));
      } else if (vs > 0) {
        InFlight arrival = arriving_.extract({ins.microbatch, ins.chunk * 2}).mapped();
        wait_for_input(arrival.op, arrival_text("activations", ins, arrival.from_rank));
        input = arrival.buffer;
      }
      const double start = monitor::trace_clock_us();
      const double loss =
          stage.forward(slot, input, last ? targets_[static_cast<std::size_t>(ins.microbatch)] : compute::Tensor{});
      busy_us_ += monitor::trace_clock_us() - start;
      trace("forward", op_name('F', ins), start, &ins);
      if (last) loss_sum += loss;
      if (setup_.model.experts > 0) {
        // The chunk's blocks' share of the whole model's mean over its MoE blocks and the
        // replica's micro-batches: the pipeline's stages add up to it.
        const int blocks = setup_.model.moe_layers_in(stage.first_layer(), stage.last_layer());
        routing_.add(stage.moe_routing(slot),
                     static_cast<double>(blocks) / (setup_.model.moe_layers() * s.microbatches));
      }
      peak_in_use_ = std::max(peak_in_use_, ++in_use_);
      break;
    }
    case Op::send_act: {
      const int slot = slot_of_.at(here);
      // Timed from before the send: a small message can reach a waiting receiver, which starts
      // its compute, before the send returns here.
      const double posted = monitor::trace_clock_us();
      const auto op = mailbox_.send(groups_.engine, rank_of_stage(ins.peer), key_of(ins), stage.output(slot));
      trace("transfer", "send_act", posted, &ins);
      chunk.slot_sends[static_cast<std::size_t>(slot)].push_back(op);
      break;
    }
    case Op::backward:
    case Op::backward_input: {
      const bool split = ins.op == Op::backward_input;
      const int slot = slot_of_.at(here);
      compute::Tensor output_grad;
      if (!last && schedules::local_hop(s, vs + 1, vs)) {
        output_grad = handed_gradients_.extract(ins.microbatch).mapped();
      } else if (!last) {
        InFlight arrival = arriving_.extract({ins.microbatch, ins.chunk * 2 + 1}).mapped();
        wait_for_input(arrival.op, arrival_text("gradient", ins, arrival.from_rank));
        output_grad = arrival.buffer;
      }
      const bool hands_down = vs > 0 && schedules::local_hop(s, vs, vs - 1);
      // The checker lets no backward of this chunk overwrite a gradient it handed down and the
      // other chunk has not taken.
      TROUPE_CHECK(!hands_down || handed_gradients_.empty(), "a gradient handed down a V's bottom was overwritten");
      const double start = monitor::trace_clock_us();
      const double loss_scale = 1.0 / (static_cast<double>(group_micro_batches_) * group_replicas_ / data_replicas_);
      if (split) {
        stage.backward_input(slot, output_grad, loss_scale);
      } else {
        chunk.micro_batches->before_backward(chunk.backwards++);
        stage.backward(slot, output_grad, loss_scale);
      }
      busy_us_ += monitor::trace_clock_us() - start;
      trace(split ? "backward_input" : "backward", op_name('B', ins), start, &ins);
      // The bottom of a V: the gradient goes to this stage's other chunk as it lies in this slot,
      // until the other chunk's backward copies it in.
      if (hands_down) handed_gradients_[ins.microbatch] = stage.input_grad(slot);
      if (!split) release_slot(chunk, here, vs == 0);
      break;
    }
    case Op::backward_weights: {
      const int slot = slot_of_.at(here);
      const double start = monitor::trace_clock_us();
      chunk.micro_batches->before_backward(chunk.backwards++);
      stage.backward_weights(slot);
      busy_us_ += monitor::trace_clock_us() - start;
      trace("backward_weights", op_name('W', ins), start, &ins);
      release_slot(chunk, here, true);
      break;
    }
    case Op::send_grad: {
      const int slot = slot_of_.at(here);
      double posted = 0;  // as for send_act: from before the send
      if (schedules::splits_backward(s.kind)) {
        posted = monitor::trace_clock_us();
        // The slot waits for its W, and its next forward waits for this send (take_slot): the
        // gradient goes out from where B left it.
        const auto op = mailbox_.send(groups_.engine, rank_of_stage(ins.peer), key_of(ins), stage.input_grad(slot));
        chunk.slot_sends[static_cast<std::size_t>(slot)].push_back(op);
      } else {
        // A copy goes out, so the slot is free at once: a large send completes only once the
        // receiver has posted its receive, which in 1F1B comes after the receiver's next forward,
        // and this stage's next forward needs the slot before then.
        compute::Tensor input_grad = stage.input_grad(slot);
        compute::MemoryScope scope(compute::MemoryKind::activations);
        compute::Tensor outgoing = backend_.zeros(input_grad.shape(), input_grad.dtype());
        backend_.copy(outgoing, input_grad);
        posted = monitor::trace_clock_us();
        mailbox_.send(groups_.engine, rank_of_stage(ins.peer), key_of(ins), outgoing);
        chunk.free_slots.push_back(slot);
        slot_of_.erase(here);
      }
      trace("transfer", "send_grad", posted, &ins);
      break;
    }
    case Op::reduce_grads:
    case Op::optimizer_step:
      TROUPE_CHECK(false, "step() handles " + std::string(schedules::to_string(ins.op)));
  }
}

}  // namespace troupe::actors
