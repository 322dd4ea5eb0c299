#include "compute/moe/moe_layer.hpp"

#include <algorithm>
#include <numeric>
#include <span>
#include <stdexcept>
#include <vector>

namespace troupe::compute {
namespace {

// The weights a slice's forward adds (expert_exchange.hpp): the output biases on the first slice
// alone, as the slices' outputs are summed.
MoEWeights output_biases_once(const MoEWeights& w, const ExpertGroup& experts) {
  if (experts.slice == 0) return w;
  MoEWeights once = w;
  once.proj_b = Tensor{};
  once.shared_proj_b = Tensor{};
  return once;
}

// Rows [begin, end) of a (rows, width) buffer.
Tensor rows(const Tensor& buffer, std::int64_t begin, std::int64_t end, std::int64_t width) {
  return buffer.slice(begin * width, {end - begin, width});
}

// The rows of all the experts together.
std::int64_t rows_in_all(const std::vector<std::int64_t>& rows_of) {
  return std::accumulate(rows_of.begin(), rows_of.end(), std::int64_t{0});
}

// The first half of the stacked experts of `w` over `in`'s rows grouped by expert (rows_of[e] each):
// hidden = c_fc(in) as one grouped product, hidden_gelu = GELU(hidden). The rows of all of them
// together.
std::int64_t experts_hidden(Backend& be, const MoEWeights& w, const std::vector<std::int64_t>& rows_of,
                            const Tensor& in, Tensor& hidden, Tensor& hidden_gelu) {
  const std::int64_t C = in.dim(1), H = w.fc_w.dim(1), total = rows_in_all(rows_of);
  if (total == 0) return 0;
  Tensor h = rows(hidden, 0, total, H), g = rows(hidden_gelu, 0, total, H);
  be.grouped_matmul_forward(h, rows(in, 0, total, C), w.fc_w, w.fc_b, rows_of);
  be.gelu_forward(g, h);
  return total;
}

// The stacked experts: out = c_proj(GELU(c_fc(in))), two grouped products.
void experts_forward(Backend& be, const MoEWeights& w, const std::vector<std::int64_t>& rows_of, const Tensor& in,
                     Tensor& hidden, Tensor& hidden_gelu, Tensor& out) {
  const std::int64_t C = in.dim(1), H = w.fc_w.dim(1);
  const std::int64_t total = experts_hidden(be, w, rows_of, in, hidden, hidden_gelu);
  if (total == 0) return;
  Tensor o = rows(out, 0, total, C);
  be.grouped_matmul_forward(o, rows(hidden_gelu, 0, total, H), w.proj_w, w.proj_b, rows_of);
}

// Their backward's input half: din written from dout (neither aliasing the other: W reads dout),
// dhidden the c_fc outputs' gradients, which W reads too.
void experts_backward_input(Backend& be, const MoEWeights& w, const std::vector<std::int64_t>& rows_of,
                            const Tensor& dout, const Tensor& hidden, Tensor& dhidden, Tensor& din) {
  const std::int64_t C = dout.dim(1), H = w.fc_w.dim(1), total = rows_in_all(rows_of);
  if (total == 0) return;
  Tensor dh = rows(dhidden, 0, total, H), dg = rows(din, 0, total, C);
  be.grouped_matmul_backward_input(dh, rows(dout, 0, total, C), w.proj_w, rows_of);
  be.gelu_backward(dh, rows(hidden, 0, total, H), dh);
  be.grouped_matmul_backward_input(dg, dh, w.fc_w, rows_of);
}

// Their weight half: the experts' gradient slices accumulated from what the input half left.
void experts_backward_weights(Backend& be, MoEWeights& grads, const std::vector<std::int64_t>& rows_of,
                              const Tensor& dout, const Tensor& in, const Tensor& hidden_gelu, const Tensor& dhidden) {
  const std::int64_t C = in.dim(1), H = grads.fc_w.dim(1), total = rows_in_all(rows_of);
  if (total == 0) return;
  be.grouped_matmul_backward_weights(grads.proj_w, grads.proj_b, rows(dout, 0, total, C),
                                     rows(hidden_gelu, 0, total, H), rows_of);
  be.grouped_matmul_backward_weights(grads.fc_w, grads.fc_b, rows(dhidden, 0, total, H), rows(in, 0, total, C),
                                     rows_of);
}

// The shared expert's first half over x's N rows: shared_hidden = c_fc(x), shared_gelu = GELU of it.
void shared_hidden_forward(Backend& be, const MoEActivations& a, const Tensor& x, const MoEWeights& w) {
  const std::int64_t N = x.dim(0), H = w.shared_fc_w.dim(0);
  Tensor sh = a.shared_hidden.slice(0, {N, H}), sg = a.shared_gelu.slice(0, {N, H});
  be.matmul_forward(sh, x, w.shared_fc_w, w.shared_fc_b);
  be.gelu_forward(sg, sh);
}

// `sums` added over the ranks of `group`, in rank order on every rank (one all-to-all of equal
// blocks: each rank sends its sums to every rank).
RoutingSums group_sums(context::ContextExchange& group, const RoutingSums& sums, int experts) {
  const std::vector<double> mine = sums.flat();
  const auto shards = static_cast<std::size_t>(group.shards()), width = mine.size();
  std::vector<double> sent(shards * width), got(shards * width);
  for (std::size_t j = 0; j < shards; ++j)
    std::copy(mine.begin(), mine.end(), sent.begin() + static_cast<std::ptrdiff_t>(j * width));
  // A failed exchange ends the step, as the expert exchange's do (expert_exchange.cpp).
  if (Status s = group.all_to_all(std::as_bytes(std::span(sent)), std::as_writable_bytes(std::span(got))); !s)
    throw std::runtime_error("routing sums over the context group: " + s.error().message);
  std::vector<double> total(width, 0.0);
  for (std::size_t i = 0; i < shards; ++i)
    for (std::size_t v = 0; v < width; ++v) total[v] += got[i * width + v];
  return RoutingSums::from_flat(total, experts);
}

std::vector<std::int64_t> plan_rows(const RoutingPlan& plan) {
  std::vector<std::int64_t> r(static_cast<std::size_t>(plan.experts));
  for (int e = 0; e < plan.experts; ++e) r[static_cast<std::size_t>(e)] = plan.count(e);
  return r;
}

// The rows of each expert this rank runs, grouped as its buffers hold them: its local experts' over
// every rank's tokens under expert shards, else every expert's over its own.
std::vector<std::int64_t> expert_rows_of(const MoEActivations& a, const ExpertGroup& experts) {
  return experts.sharded() ? a.counts.per_local_expert() : plan_rows(a.plan);
}

}  // namespace

std::int64_t MoEShape::expert_rows(std::int64_t N) const {
  if (expert_shards <= 1) return N * top_k;
  return expert_shards * N * std::min(top_k, experts / expert_shards);
}

std::int64_t moe_activation_elements(const MoEShape& s, std::int64_t N) {
  const std::int64_t Nk = N * s.top_k, R = s.expert_rows(N);
  return 2 * N * s.experts + N + Nk + 2 * Nk * s.C + 2 * R * s.H + (s.expert_shards > 1 ? 3 * R * s.C : 0) +
         (s.shared_expert ? 2 * N * s.H : 0);
}

std::int64_t moe_scratch_elements(const MoEShape& s, std::int64_t N) {
  const std::int64_t Nk = N * s.top_k, R = s.expert_rows(N);
  return N * s.experts + Nk + 2 * Nk * s.C + R * s.H + (s.expert_shards > 1 ? 3 * R * s.C : 0) +
         (s.shared_expert ? N * s.H : 0) + N * s.C;
}

std::int64_t moe_weight_input_elements(const MoEShape& s, std::int64_t N, bool expert_rows) {
  const std::int64_t R = s.expert_rows(N);
  return N * s.experts + R * s.C + R * s.H + (s.shared_expert ? N * s.C + N * s.H : 0) + (expert_rows ? R * s.C : 0);
}

std::int64_t moe_gelu_elements(const MoEShape& s, std::int64_t N) {
  return s.expert_rows(N) * s.H + (s.shared_expert ? N * s.H : 0);
}

MoEActivations make_moe_activations(const MoEShape& s, std::int64_t N, const MoEAllocate& allocate,
                                    const MoEActivations& shared) {
  const std::int64_t Nk = N * s.top_k, R = s.expert_rows(N);
  auto own = [&](const Tensor& t, std::int64_t numel) { return t.defined() ? t : allocate(numel); };
  const MoEActivations& h = shared;
  MoEActivations a;
  a.logits = own(h.logits, N * s.experts);
  a.probs = own(h.probs, N * s.experts);
  a.lse = own(h.lse, N);
  a.gates = own(h.gates, Nk);
  a.grouped_in = own(h.grouped_in, Nk * s.C);
  a.hidden = own(h.hidden, R * s.H);
  a.hidden_gelu = own(h.hidden_gelu, R * s.H);
  a.expert_out = own(h.expert_out, Nk * s.C);
  if (s.expert_shards > 1) {
    a.local_in = own(h.local_in, R * s.C);
    a.local_out = own(h.local_out, R * s.C);
    a.staging = own(h.staging, R * s.C);
  }
  if (s.shared_expert) {
    a.shared_hidden = own(h.shared_hidden, N * s.H);
    a.shared_gelu = own(h.shared_gelu, N * s.H);
  }
  return a;
}

MoEActivations make_moe_gelu_outputs(const MoEShape& s, std::int64_t N, const MoEAllocate& allocate) {
  MoEActivations a;
  a.hidden_gelu = allocate(s.expert_rows(N) * s.H);
  if (s.shared_expert) a.shared_gelu = allocate(N * s.H);
  return a;
}

MoEScratch make_moe_scratch(const MoEShape& s, std::int64_t N, const MoEAllocate& allocate) {
  const std::int64_t Nk = N * s.top_k, R = s.expert_rows(N);
  MoEScratch m;
  m.dlogits = allocate(N * s.experts);
  m.dgates = allocate(Nk);
  m.dexpert_out = allocate(Nk * s.C);
  m.dhidden = allocate(R * s.H);
  m.dgrouped = allocate(Nk * s.C);
  if (s.expert_shards > 1) {
    m.dlocal = allocate(R * s.C);
    m.dlocal_in = allocate(R * s.C);
    m.staging = allocate(R * s.C);
  }
  if (s.shared_expert) m.dshared_hidden = allocate(N * s.H);
  m.dpart = allocate(N * s.C);
  return m;
}

MoEWeightInputs make_moe_weight_inputs(const MoEShape& s, std::int64_t N, const MoEAllocate& allocate,
                                       bool expert_rows) {
  const std::int64_t R = s.expert_rows(N);
  MoEWeightInputs k;
  k.dlogits = allocate(N * s.experts);
  k.dexpert_out = allocate(R * s.C);
  k.dhidden = allocate(R * s.H);
  if (s.shared_expert) {
    k.dout = allocate(N * s.C);
    k.dshared_hidden = allocate(N * s.H);
  }
  if (expert_rows) k.expert_in = allocate(R * s.C);
  return k;
}

void moe_forward(Backend& be, Tensor& out, MoEActivations& a, const Tensor& inp, const MoEWeights& w, int top_k,
                 const ExpertGroup& experts, MoEPass pass) {
  TROUPE_CHECK(inp.device() == Device::cpu && out.device() == Device::cpu, "the MoE layer runs on host tensors");
  const std::int64_t E = w.router.dim(0), C = w.router.dim(1), H = w.fc_w.dim(1), k = top_k;
  const std::int64_t N = inp.numel() / C, Nk = N * k;
  TROUPE_CHECK(out.numel() == N * C && w.fc_w.dim(0) == E / experts.shards(),
               "MoE forward of " + inp.describe() + " with " + std::to_string(w.fc_w.dim(0)) + " of " +
                   std::to_string(E) + " experts over " + std::to_string(experts.shards()) + " expert shards");
  const Tensor x = inp.slice(0, {N, C});
  Tensor y = out.slice(0, {N, C});
  // 1. Router.
  Tensor logits = a.logits.slice(0, {N, E}), gates = a.gates.slice(0, {N, k});
  be.matmul_forward(logits, x, w.router, Tensor{});
  // A rerun's router sees the forward's input and weights through the same kernels: any other
  // routing would send rows the forward's counts do not announce.
  // A rerun keeps the forward's losses and load: under context shards they are the group's.
  // Only what the rerun must keep or check is copied, not the whole plan (its rows are remade alike).
  struct Kept {
    std::vector<int> expert;
    double aux_loss = 0, z_loss = 0;
    std::vector<double> load;
  };
  const Kept before =
      pass == MoEPass::rerun ? Kept{a.plan.expert, a.plan.aux_loss, a.plan.z_loss, a.plan.load} : Kept{};
  const RoutingSums sums = route(a.plan, a.probs, a.lse, gates, logits, top_k);
  if (pass == MoEPass::rerun) {
    TROUPE_CHECK(a.plan.expert == before.expert,
                 "an MoE block's recompute routed its tokens differently from its forward");
    a.plan.aux_loss = before.aux_loss;
    a.plan.z_loss = before.z_loss;
    a.plan.load = before.load;
  } else if (experts.token_group != nullptr) {
    set_losses(a.plan, group_sums(*experts.token_group, sums, static_cast<int>(E)));
  }
  const RoutingPlan& plan = a.plan;
  Tensor grouped_in = a.grouped_in.slice(0, {Nk, C}), expert_out = a.expert_out.slice(0, {Nk, C});
  Tensor hidden = a.hidden.reshape({a.hidden.numel() / H, H}),
         hidden_gelu = a.hidden_gelu.reshape({a.hidden.numel() / H, H});
  with_moe_real(inp.dtype(), [&]<typename Real>(Real) {
    // 2. Dispatch: each slot's row is its token's.
    for (std::int64_t s = 0; s < Nk; ++s)
      std::copy_n(x.data_as<Real>() + (s / k) * C, C, grouped_in.data_as<Real>() + plan.row[s] * C);
  });
  // 3. Under expert shards the rows leave for their experts' ranks now, and travel while step 4 runs.
  Tensor local_in, local_out, staging;
  if (experts.sharded()) {
    const std::int64_t R = a.local_in.numel() / C;
    local_in = a.local_in.reshape({R, C});
    local_out = a.local_out.reshape({R, C});
    staging = a.staging.reshape({R, C});
    if (pass == MoEPass::forward) a.counts = exchange_expert_counts(experts, plan);
    begin_dispatch(experts, a.counts, grouped_in, staging);
  }
  // 4. The shared expert writes out; else out starts at 0. It needs none of the rows in flight.
  const MoEWeights once = output_biases_once(w, experts);
  if (w.has_shared()) {
    shared_hidden_forward(be, a, x, w);
    be.matmul_forward(y, a.shared_gelu.slice(0, {N, H}), w.shared_proj_w, once.shared_proj_b);
  } else {
    be.fill_zero(y);
  }
  // 3, continued. The experts, each over its rows: here, or at their ranks under expert shards.
  if (experts.sharded()) {
    finish_dispatch(experts, a.counts, staging, local_in);
    experts_forward(be, once, expert_rows_of(a, experts), local_in, hidden, hidden_gelu, local_out);
    combine_from_experts(experts, a.counts, local_out, staging, expert_out);
  } else {
    experts_forward(be, once, expert_rows_of(a, experts), grouped_in, hidden, hidden_gelu, expert_out);
  }
  // 5. Combine.
  with_moe_real(inp.dtype(), [&]<typename Real>(Real) {
    const Real* g = gates.data_as<Real>();
    for (std::int64_t t = 0; t < N; ++t) {
      Real* yt = y.data_as<Real>() + t * C;
      for (std::int64_t j = 0; j < k; ++j) {
        const Real gate = g[t * k + j];
        const Real* o = expert_out.data_as<Real>() + plan.row[t * k + j] * C;
        for (std::int64_t c = 0; c < C; ++c) yt[c] += gate * o[c];
      }
    }
  });
}

void moe_backward(Backend& be, Tensor& dinp, MoEWeights& grads, MoEScratch& m, const Tensor& dout,
                  const MoEActivations& a, const Tensor& inp, const MoEWeights& w, double aux_scale, double z_scale,
                  const ExpertGroup& experts) {
  // What W reads stays in the scratch (and in dout itself) from B to W.
  MoEWeightInputs keep{m.dlogits, experts.sharded() ? m.dlocal : m.dexpert_out, m.dhidden, dout, m.dshared_hidden};
  moe_backward_input(be, dinp, keep, m, dout, a, w, aux_scale, z_scale, experts);
  moe_backward_weights(be, grads, keep, a, inp, experts);
}

void moe_backward_input(Backend& be, Tensor& dinp, MoEWeightInputs& keep, MoEScratch& m, const Tensor& dout,
                        const MoEActivations& a, const MoEWeights& w, double aux_scale, double z_scale,
                        const ExpertGroup& experts) {
  const RoutingPlan& plan = a.plan;
  const std::int64_t E = plan.experts, k = plan.top_k, C = w.router.dim(1), H = w.fc_w.dim(1);
  const std::int64_t N = plan.tokens, Nk = N * k;
  TROUPE_CHECK(dout.numel() == N * C && dinp.numel() == N * C,
               "MoE backward of " + dout.describe() + " after a forward of " + std::to_string(N) + " rows");
  const Tensor dy = dout.slice(0, {N, C});
  Tensor dx = dinp.slice(0, {N, C}), dpart = m.dpart.slice(0, {N, C});
  Tensor dgates = m.dgates.slice(0, {N, k}), dlogits = keep.dlogits.slice(0, {N, E});
  // The outputs' gradients by slot: straight where W finds them on one rank; under expert shards
  // W finds them where they arrive.
  Tensor dexpert_out = (experts.sharded() ? m.dexpert_out : keep.dexpert_out).slice(0, {Nk, C}),
         dgrouped = m.dgrouped.slice(0, {Nk, C});
  Tensor dhidden = keep.dhidden.reshape({keep.dhidden.numel() / H, H});
  const Tensor gates = a.gates.slice(0, {N, k}), expert_out = a.expert_out.slice(0, {Nk, C}),
               hidden = a.hidden.reshape({a.hidden.numel() / H, H});
  // 5. Combine: d(expert_out) of slot (t, j) = g_tj · dout_t; d(g_tj) = dout_t · expert_out.
  with_moe_real(dout.dtype(), [&]<typename Real>(Real) {
    for (std::int64_t s = 0; s < Nk; ++s) {
      const Real* d = dy.data_as<Real>() + (s / k) * C;
      const Real* o = expert_out.data_as<Real>() + plan.row[s] * C;
      Real* de = dexpert_out.data_as<Real>() + plan.row[s] * C;
      const Real gate = gates.data_as<Real>()[s];
      double dot = 0;
      for (std::int64_t c = 0; c < C; ++c) {
        de[c] = gate * d[c];
        dot += double(d[c]) * double(o[c]);
      }
      dgates.data_as<Real>()[s] = static_cast<Real>(dot);
    }
  });
  // Under tensor shards each slice's dot is over its partial outputs: their sum is the gates' gradient.
  if (experts.slices > 1) experts.slice_sum(dgates);
  // 3. Under expert shards the outputs' gradients leave for the experts' ranks, and travel while the
  // router's and the shared expert's backward run, which need none of them.
  Tensor dlocal, dlocal_in, staging;
  if (experts.sharded()) {
    const std::int64_t R = a.local_in.numel() / C;
    dlocal = keep.dexpert_out.reshape({R, C});
    dlocal_in = m.dlocal_in.reshape({R, C});
    staging = m.staging.reshape({R, C});
    begin_dispatch(experts, a.counts, dexpert_out, staging);
  }
  // 1. Router: its input gradient is written to dinp, which the other branches then add to.
  route_backward(dlogits, dgates, a.probs, a.lse, plan, aux_scale, z_scale);
  be.matmul_backward_input(dx, dlogits, w.router);
  // The router's share, the same on every slice, enters the block's sum over them once.
  if (experts.slice > 0) be.fill_zero(dx);
  // 4. The shared expert; W reads its output's gradient, kept unless it is dout itself.
  if (w.has_shared()) {
    Tensor dsh = keep.dshared_hidden.slice(0, {N, H});
    be.matmul_backward_input(dsh, dy, w.shared_proj_w);
    be.gelu_backward(dsh, a.shared_hidden.slice(0, {N, H}), dsh);
    be.matmul_backward_input(dpart, dsh, w.shared_fc_w);
    be.residual_forward(dx, dx, dpart);
    if (keep.dout.data() != dout.data()) {
      Tensor kept_dy = keep.dout.slice(0, {N, C});
      be.copy(kept_dy, dy);
    }
  }
  // 3, continued. The experts, each over its own rows: the outputs' gradients went where the
  // outputs came from, the inputs' come back. A W after a recompute finds the rows kept.
  const std::vector<std::int64_t> rows_of = expert_rows_of(a, experts);
  const Tensor expert_in = experts.sharded() ? a.local_in : a.grouped_in;
  if (keep.expert_in.defined()) {
    const std::int64_t total = std::accumulate(rows_of.begin(), rows_of.end(), std::int64_t{0});
    Tensor to = keep.expert_in.slice(0, {total, C});
    be.copy(to, expert_in.slice(0, {total, C}));
  }
  if (experts.sharded()) {
    finish_dispatch(experts, a.counts, staging, dlocal);
    experts_backward_input(be, w, rows_of, dlocal, hidden, dhidden, dlocal_in);
    combine_from_experts(experts, a.counts, dlocal_in, staging, dgrouped);
  } else {
    experts_backward_input(be, w, rows_of, dexpert_out, hidden, dhidden, dgrouped);
  }
  // 2. Dispatch's backward: each token gathers its k slots' gradients, j in order.
  with_moe_real(dout.dtype(), [&]<typename Real>(Real) {
    for (std::int64_t t = 0; t < N; ++t) {
      Real* d = dx.data_as<Real>() + t * C;
      for (std::int64_t j = 0; j < k; ++j) {
        const Real* g = dgrouped.data_as<Real>() + plan.row[t * k + j] * C;
        for (std::int64_t c = 0; c < C; ++c) d[c] += g[c];
      }
    }
  });
}

void moe_backward_weights(Backend& be, MoEWeights& grads, const MoEWeightInputs& kept, const MoEActivations& a,
                          const Tensor& inp, const ExpertGroup& experts) {
  const RoutingPlan& plan = a.plan;
  const std::int64_t E = plan.experts, C = grads.router.dim(1), H = grads.fc_w.dim(1), N = plan.tokens;
  TROUPE_CHECK(inp.numel() == N * C,
               "MoE weight gradients of " + inp.describe() + " after a forward of " + std::to_string(N) + " rows");
  const Tensor x = inp.slice(0, {N, C});
  Tensor no_bias;
  be.matmul_backward_weights(grads.router, no_bias, kept.dlogits.slice(0, {N, E}), x);
  if (grads.has_shared()) {
    be.matmul_backward_weights(grads.shared_proj_w, grads.shared_proj_b, kept.dout.slice(0, {N, C}),
                               a.shared_gelu.slice(0, {N, H}));
    be.matmul_backward_weights(grads.shared_fc_w, grads.shared_fc_b, kept.dshared_hidden.slice(0, {N, H}), x);
  }
  const Tensor& in = kept.expert_in.defined() ? kept.expert_in : experts.sharded() ? a.local_in : a.grouped_in;
  const std::int64_t R = kept.dexpert_out.numel() / C;
  experts_backward_weights(be, grads, expert_rows_of(a, experts), kept.dexpert_out.reshape({R, C}),
                           in.reshape({in.numel() / C, C}), a.hidden_gelu.reshape({a.hidden_gelu.numel() / H, H}),
                           kept.dhidden.reshape({kept.dhidden.numel() / H, H}));
}

void moe_rerun_for_weights(Backend& be, MoEActivations& a, const MoEWeightInputs& kept, const Tensor& inp,
                           const MoEWeights& w, const ExpertGroup& experts) {
  const std::int64_t C = w.router.dim(1), H = w.fc_w.dim(1);
  TROUPE_CHECK(kept.expert_in.defined(), "an MoE block's weight half reran without the rows its experts ran");
  Tensor hidden = a.hidden.reshape({a.hidden.numel() / H, H}),
         hidden_gelu = a.hidden_gelu.reshape({a.hidden_gelu.numel() / H, H});
  experts_hidden(be, w, expert_rows_of(a, experts), kept.expert_in.reshape({kept.expert_in.numel() / C, C}), hidden,
                 hidden_gelu);
  if (w.has_shared()) shared_hidden_forward(be, a, inp.slice(0, {a.plan.tokens, C}), w);
}

void moe_refill_gelu(Backend& be, MoEActivations& a, std::int64_t H, const ExpertGroup& experts) {
  const std::vector<std::int64_t> rows_of = expert_rows_of(a, experts);
  const std::int64_t total = std::accumulate(rows_of.begin(), rows_of.end(), std::int64_t{0}), N = a.plan.tokens;
  if (total > 0) {
    Tensor g = rows(a.hidden_gelu, 0, total, H);
    be.gelu_forward(g, rows(a.hidden, 0, total, H));
  }
  if (a.shared_gelu.defined()) {
    Tensor sg = a.shared_gelu.slice(0, {N, H});
    be.gelu_forward(sg, a.shared_hidden.slice(0, {N, H}));
  }
}

}  // namespace troupe::compute
