// GPTStage's attention and embedding calls, which under context shards go through the context
// group (context_shard.hpp) and otherwise straight to the backend.

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
  if (context_)
    context_->encoder_forward(backend_, out, tokens, wte, wpe);
  else
    backend_.encoder_forward(out, tokens, wte, wpe);
}

void GPTStage::embed_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) {
  if (context_)
    context_->encoder_backward(backend_, dwte, dwpe, dout, tokens);
  else
    backend_.encoder_backward(dwte, dwpe, dout, tokens);
}

}  // namespace troupe::compute
