#pragma once
// The device-agnostic compute interface. The GPT model is written only against this class, so
// a backend (CPU on OpenBLAS here, CUDA in compute/cuda) slots in without touching the model.
//
// Conventions, as llm.c:
//  - outputs first, then inputs; shapes are read from the tensors (B, T, C, NH, V, Vp).
//  - parameter gradients are accumulated with += (so micro-batches accumulate for free);
//    activation gradients are written with =, except layernorm_backward's dinp, which is +=
//    because a LayerNorm's input is always the residual stream, whose gradient already holds
//    the skip connection's share. One residual-gradient buffer thus serves the whole backward.
//  - every op works for f32 and f64 (f64 is what the finite-difference checks run in).
//  - shape or dtype mismatches are internal bugs and throw (TROUPE_CHECK).

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>

#include "compute/adamw_step.hpp"
#include "compute/backend_kind.hpp"
#include "compute/expected.hpp"
#include "compute/precision.hpp"
#include "compute/sim/sim_options.hpp"
#include "compute/tensor.hpp"

namespace troupe::compute {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual Device device() const = 0;
  virtual std::string name() const = 0;

  // --- memory -------------------------------------------------------------------------------
  virtual Tensor zeros(Shape shape, DType dtype) = 0;
  virtual void fill_zero(Tensor& t) = 0;
  // A host tensor for values that arrive from or leave for another rank through the comm engine
  // (a pipeline's activations and their gradients): CPU memory, or on the sim backend what its
  // zeros() gives (a token tensor when large).
  virtual Tensor message_buffer(Shape shape, DType dtype) { return Tensor::zeros(std::move(shape), dtype); }
  // dst and src have the same numel and dtype; either may live on this backend's device or cpu.
  virtual void copy(Tensor& dst, const Tensor& src) = 0;
  // A backend whose products multiply copies of their operands (the CPU's under train.precision
  // bf16 rounds both into buffers of its own) keeps one buffer for the first operands and one for
  // the second, grown to the largest it meets: product_operand_bytes is the bytes of an element
  // of those copies (0 where products read their operands as they are), and
  // reserve_product_operands makes them for `first` and `second` elements now, counted as the
  // allocating thread's MemoryScope says, so that the step allocates nothing and the memory
  // estimate can count them.
  virtual std::size_t product_operand_bytes() const { return 0; }
  virtual void reserve_product_operands(std::int64_t first, std::int64_t second) {
    static_cast<void>(first);
    static_cast<void>(second);
  }

  // The dtype a model of `params` dtype stores its activations in, other than the LayerNorm
  // statistics and the attention state (the LayerNorm outputs, qkv, the attention's output, the fc
  // output, the GELU output, and the residual stream's values kept for the LayerNorms' backward):
  // `params`, or bf16 where the products multiply bf16 operands anyway (the CPU's under
  // train.precision bf16). The ops that write such an activation then take a bf16 output, and those
  // that read it a bf16 input; the residual stream itself is summed in `params`, and store() keeps
  // a copy of it.
  virtual DType activation_storage_dtype(DType params) const { return params; }
  // stored = values, in stored's dtype: values' own (a copy), or activation_storage_dtype's bf16
  // for f32 values (each rounded to nearest even).
  virtual void store(Tensor& stored, const Tensor& values) { copy(stored, values); }

  // --- layers -------------------------------------------------------------------------------
  // out (B,T,C) = wte[tokens] + wpe[t];  tokens i32 (B,T), wte (Vp,C), wpe (maxT,C), T <= maxT.
  virtual void encoder_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) = 0;
  // dwte += scatter of dout by token, dwpe[t] += sum over b of dout.
  virtual void encoder_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) = 0;

  // Normalizes over the last axis C of inp (…, C); mean and rstd hold one value per row.
  virtual void layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& inp, const Tensor& weight,
                                 const Tensor& bias) = 0;
  // dinp += …, dweight += …, dbias += …: layernorm_backward_input, then layernorm_backward_params.
  void layernorm_backward(Tensor& dinp, Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                          const Tensor& weight, const Tensor& mean, const Tensor& rstd);
  // The two halves, which a split backward (B, then W later) runs apart: dinp += …, and
  // dweight += …, dbias += …. Each writes what the whole writes, bit for bit.
  virtual void layernorm_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& inp, const Tensor& weight,
                                        const Tensor& mean, const Tensor& rstd) = 0;
  virtual void layernorm_backward_params(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                         const Tensor& mean, const Tensor& rstd) = 0;

  // out (rows, OC) = inp (rows, C) · weight (OC, C)ᵀ + bias (OC); bias may be undefined.
  virtual void matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) = 0;
  // out = residual + inp · weightᵀ + bias, for a linear layer whose output is only added into the
  // residual stream: one call, so a backend can accumulate the product straight onto the stream
  // instead of writing it out and adding it in a second pass. out is shaped as residual and overlaps
  // neither it nor inp. The default is matmul_forward into out, then residual_forward in place.
  virtual void matmul_residual_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                       const Tensor& residual);
  // dinp = dout · weight;  dweight += doutᵀ · inp;  dbias += column sums of dout (if defined):
  // matmul_backward_input, then matmul_backward_weights.
  void matmul_backward(Tensor& dinp, Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                       const Tensor& weight);
  // The input-gradient product alone (B), and the weight-gradient product with the bias's column
  // sums (W): separate GEMMs, so the halves give the whole's bits in either order.
  virtual void matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight) = 0;
  virtual void matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp) = 0;

  // The same three products for experts stacked in one tensor, over rows grouped by expert: expert
  // e's rows_of[e] rows one after the other (none for an expert with none), which multiply weight
  // (E, OC, C)'s e-th slice and take bias (E, OC)'s e-th row (bias and dbias may be undefined).
  // inp, out, dinp and dout hold exactly the sum of rows_of rows. One call for all the experts, so a
  // backend can run them as one grouped GEMM (the CPU's threads take equal shares of every expert's
  // rows, or of their weight gradients, together); the default is one product per expert with rows.
  virtual void grouped_matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                      std::span<const std::int64_t> rows_of);
  virtual void grouped_matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight,
                                             std::span<const std::int64_t> rows_of);
  virtual void grouped_matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                               std::span<const std::int64_t> rows_of);

  // Causal multi-head self-attention. qkv (B,T,3C) holds q, k, v side by side; out is (B,T,C).
  // att is what the backward needs, shaped attention_state_shape(B, NH, T). Both backends are
  // flash-style: att holds one log-sum-exp of the scaled scores per query row, (B,NH,T), and the
  // backward recomputes the probabilities block by block; a backend that kept more would say so
  // here by overriding the shape.
  virtual Shape attention_state_shape(std::int64_t B, std::int64_t n_head, std::int64_t T) const {
    return {B, n_head, T};
  }
  virtual void attention_forward(Tensor& out, Tensor& att, const Tensor& qkv, int n_head) = 0;
  // dqkv = …; datt, shaped as att, is scratch.
  virtual void attention_backward(Tensor& dqkv, Tensor& datt, const Tensor& dout, const Tensor& qkv, const Tensor& att,
                                  int n_head) = 0;

  // GELU, tanh approximation (GPT-2's).
  virtual void gelu_forward(Tensor& out, const Tensor& inp) = 0;
  // dinp = …; dinp may be dout itself (each element is read before it is written).
  virtual void gelu_backward(Tensor& dinp, const Tensor& inp, const Tensor& dout) = 0;
  // gelu_backward, and dbias += the column sums of the dinp it writes: the bias gradient of the
  // linear layer whose output went into the GELU, in the same sweep where a backend can. The
  // default is gelu_backward, then bias_backward.
  virtual void gelu_bias_backward(Tensor& dinp, Tensor& dbias, const Tensor& inp, const Tensor& dout);
  // dbias += the column sums of dout (…, width) over its rows: a linear layer's bias gradient, for a
  // caller that leaves it out of matmul_backward.
  virtual void bias_backward(Tensor& dbias, const Tensor& dout) = 0;

  virtual void residual_forward(Tensor& out, const Tensor& a, const Tensor& b) = 0;  // out = a + b

  // Softmax over the first V of Vp logit columns and the loss -log p[target] per position.
  // logits (B,T,Vp), targets i32 (B,T), probs (B,T,Vp) with padded columns 0, losses (B,T).
  virtual void crossentropy_forward(Tensor& losses, Tensor& probs, const Tensor& logits, const Tensor& targets,
                                    int vocab_size) = 0;
  // dlogits = (probs - onehot(target)) * dloss; padded columns 0.
  virtual void crossentropy_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, float dloss) = 0;

  // --- vocabulary shards (model/tensor_shard.hpp) -------------------------------------------
  // A tensor shard holds the embedding rows and logit columns [vocab_begin, vocab_begin + Vs) of
  // the padded vocabulary, the first vocab_size of which are real. Only the CPU backend has these
  // kernels; the others throw, and a job refuses tensor shards on them before it trains.
  //
  // out (B,T,C) = the shard's wte row of each token it holds, else 0; + wpe[t] with add_positions
  // (one shard adds them, so the sum over the shards holds them once).
  virtual void encoder_shard_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                                     int vocab_begin, bool add_positions);
  // dwte += the scatter of dout by the tokens the shard holds; dwpe[t] += sum over b of dout.
  virtual void encoder_shard_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                                      int vocab_begin);
  // stats (B,T,3) per row of the shard's logits (B,T,Vs): max, sum of exp(x - max) over its real
  // columns (-inf and 0 when it has none), and the target's logit when the shard holds it, else 0.
  virtual void crossentropy_shard_stats(Tensor& stats, const Tensor& logits, const Tensor& targets, int vocab_begin,
                                        int vocab_size);
  // From every shard's stats (S,B,T,3): losses (B,T) = -log p[target] of the whole row, and the
  // shard's probabilities (B,T,Vs), 0 in padded columns.
  virtual void crossentropy_shard_forward(Tensor& losses, Tensor& probs, const Tensor& logits, const Tensor& all_stats,
                                          int vocab_begin, int vocab_size);
  // dlogits = (probs - onehot(target - vocab_begin)) * dloss over the shard's columns.
  virtual void crossentropy_shard_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, int vocab_begin,
                                           float dloss);

  // --- optimizer and reductions -------------------------------------------------------------
  // One AdamW step over every segment (adamw_step.hpp) of the flat buffers, in one call so a
  // device backend can sweep them all in a few launches: params and grads are shaped alike, m and
  // v are shaped alike, and segments are disjoint in both. Segments that decay take
  // hyper.weight_decay, the others none; elements outside every segment are left alone.
  virtual void adamw_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                            std::span<const AdamWSegment> segments, const AdamWHyper& hyper) = 0;
  virtual double sum_of_squares(const Tensor& t) = 0;  // accumulated in double
  virtual void scale(Tensor& t, float factor) = 0;       // t *= factor

 private:
  [[noreturn]] void no_shard_kernels(const char* op) const;
};

// cpu and sim (the device `sim` describes; threads unused) always; cuda when the build has the
// CUDA backend and a device is present. precision (precision.hpp) is the products' on cpu and cuda;
// sim models fp32 only and refuses bf16.
Expected<std::unique_ptr<Backend>> make_backend(BackendKind kind, Precision precision, int threads,
                                                const SimOptions& sim = {});

}  // namespace troupe::compute
