// GPTStage's attention and embedding calls, which under context shards go through the context
// group (context_shard.hpp) and otherwise straight to the backend; the embedding's lookup is a
// tensor shard's under tensor shards.

#include "compute/model/gpt_stage.hpp"

namespace troupe::compute {

void GPTStage::attend(int layer, Tensor& out, Tensor& att, const Tensor& qkv) {
  if (context_)
    context_->attention_forward(layer - first_layer_, out, qkv);
  else
    backend_.attention_forward(out, att, qkv, heads_);
}

void GPTStage::attend_backward(int layer, Tensor& dqkv, Tensor& datt, const Tensor& dout, const Tensor& qkv,
                               const Tensor& att) {
  if (context_)
    context_->attention_backward(layer - first_layer_, dqkv, dout, qkv);
  else
    backend_.attention_backward(dqkv, datt, dout, qkv, att, heads_);
}

void GPTStage::embed(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
  const Tensor positions = context_ ? context_->positions(backend_, wpe, tokens.dim(1)) : wpe;
  if (shards_.split())
    backend_.encoder_shard_forward(out, tokens, wte, positions, vocab_begin_, shards_.shard.index == 0);
  else
    backend_.encoder_forward(out, tokens, wte, positions);
}

void GPTStage::embed_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) {
  Tensor dpositions = context_ ? context_->position_grads(backend_, dwpe, tokens.dim(1)) : dwpe;
  if (shards_.split())
    backend_.encoder_shard_backward(dwte, dpositions, dout, tokens, vocab_begin_);
  else
    backend_.encoder_backward(dwte, dpositions, dout, tokens);
  if (context_) context_->add_position_grads(backend_, dwpe);
}

}  // namespace troupe::compute
