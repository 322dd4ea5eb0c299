// Each op reads its shapes off the tensors, checks every relation the kernel relies on (a
// mismatch is an internal bug and throws), and calls the kernel for the tensors' dtype.
// Token and target ids are range-checked here too: the kernels index with them.

#include "compute/cpu/cpu_backend.hpp"

#include <algorithm>
#include <climits>
#include <limits>
#include <cstring>
#include <initializer_list>
#include <string>
#include <thread>
#include <vector>

#include "compute/backend_checks.hpp"
#include "compute/cpu/cpu_backend_ops.hpp"
#include "compute/cpu/cpu_kernels.hpp"
#include "compute/cpu/openblas_setup.hpp"
#include "compute/cpu/thread_team.hpp"

namespace troupe::compute {

using namespace cpu_backend_ops;

CpuBackend::CpuBackend(int threads, Precision precision)
    : CpuBackend(threads, precision,
                 precision == Precision::bf16 ? cpu::bf16_units_of_this_cpu() : cpu::Bf16Units::emulated) {}

CpuBackend::CpuBackend(int threads, Precision precision, cpu::Bf16Units units)
    : threads_(threads > 0 ? threads : std::max(1, static_cast<int>(std::thread::hardware_concurrency()))),
      precision_(precision),
      team_(std::make_unique<cpu::ThreadTeam>(threads_)),
      bf16_(precision == Precision::bf16 ? std::make_unique<cpu::Bf16Products>(*team_, units) : nullptr) {
  cpu::configure_openblas(threads_);
}

CpuBackend::~CpuBackend() = default;

std::string CpuBackend::name() const {
  if (!bf16_) return "cpu";
  if (bf16_->units() == cpu::Bf16Units::hardware) return "cpu, bf16 products on " + cpu::bf16_isa_name() + " (oneDNN)";
  const std::string reason = cpu::bf16_emulation_reason();
  return "cpu, bf16 products emulated in fp32" + (reason.empty() ? std::string{} : " (" + reason + ")");
}

std::size_t CpuBackend::product_operand_bytes() const { return bf16_ ? bf16_->operand_bytes() : 0; }

void CpuBackend::reserve_product_operands(std::int64_t first, std::int64_t second) {
  if (bf16_) bf16_->reserve(first, second);
}

cpu::Bf16Products* CpuBackend::bf16_for(DType dtype) const { return dtype == DType::f32 ? bf16_.get() : nullptr; }

DType CpuBackend::activation_storage_dtype(DType params) const { return bf16_for(params) ? DType::bf16 : params; }

DType CpuBackend::product_dtype(const char* op, const Tensor& stored, std::initializer_list<const Tensor*> rest) const {
  const DType dtype = check_real(op, rest);
  if (stored.dtype() != DType::bf16) {
    check_dtype(stored, dtype, op);
    checks::on_device(stored, Device::cpu, op);
    return dtype;
  }
  checks::on_device(stored, Device::cpu, op);
  TROUPE_CHECK(bf16_for(dtype) != nullptr, op_prefix(op) + "a bf16 operand " + stored.describe() +
                                               " needs the bf16 products of train.precision bf16");
  return dtype;
}

Tensor CpuBackend::zeros(Shape shape, DType dtype) { return Tensor::zeros(std::move(shape), dtype); }

void CpuBackend::fill_zero(Tensor& t) {
  checks::on_device(t, Device::cpu, "fill_zero");
  auto* bytes = static_cast<unsigned char*>(t.data());
  const bool streaming = static_cast<std::int64_t>(t.nbytes()) >= streaming_bytes;
  team_->run(static_cast<std::int64_t>(t.nbytes()), fill_grain, [&](std::int64_t begin, std::int64_t end) {
    if (streaming)
      cpu::stream_zero(bytes + begin, static_cast<std::size_t>(end - begin));
    else
      std::memset(bytes + begin, 0, static_cast<std::size_t>(end - begin));
  });
}

void CpuBackend::copy(Tensor& dst, const Tensor& src) {
  checks::on_device(dst, Device::cpu, "copy");
  checks::on_device(src, Device::cpu, "copy");
  check_dtype(dst, src.dtype(), "copy");
  checks::numel(dst, src.numel(), "copy");
  std::memmove(dst.data(), src.data(), src.nbytes());
}

void CpuBackend::store(Tensor& stored, const Tensor& values) {
  constexpr const char* op = "store";
  if (stored.dtype() != DType::bf16) {
    copy(stored, values);
    return;
  }
  check_stored(stored, op);
  check_f32(op, {&values});
  checks::numel(stored, values.numel(), op);
  team_->run(values.numel(), element_grain<float>, [&](std::int64_t begin, std::int64_t end) {
    cpu::round_to_bf16_bits(stored.data_as<std::uint16_t>() + begin, values.data_as<float>() + begin, end - begin);
  });
}

void CpuBackend::encoder_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe) {
  constexpr const char* op = "encoder_forward";
  const DType dtype = check_real(op, {&out, &wte, &wpe});
  const auto [B, T, C] = check_encoder_shapes(tokens, wte, wpe, out, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::encoder_forward(out.data_as<Real>(), tokens.data_as<std::int32_t>(), wte.data_as<Real>(), wpe.data_as<Real>(),
                         B, T, C, 0, static_cast<int>(wte.dim(0)));
  });
}

void CpuBackend::encoder_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens) {
  constexpr const char* op = "encoder_backward";
  const DType dtype = check_real(op, {&dout, &dwte, &dwpe});
  const auto [B, T, C] = check_encoder_shapes(tokens, dwte, dwpe, dout, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::encoder_backward(dwte.data_as<Real>(), dwpe.data_as<Real>(), dout.data_as<Real>(),
                          tokens.data_as<std::int32_t>(), B, T, C, 0, static_cast<int>(dwte.dim(0)));
  });
}

void CpuBackend::layernorm_forward(Tensor& out, Tensor& mean, Tensor& rstd, const Tensor& inp, const Tensor& weight,
                                   const Tensor& bias) {
  constexpr const char* op = "layernorm_forward";
  if (out.dtype() == DType::bf16) {
    check_stored(out, op);
    check_f32(op, {&inp, &mean, &rstd, &weight, &bias});
    const auto [N, C] = checks::layernorm(inp, {&out}, {&mean, &rstd}, {&weight, &bias}, op);
    team_->run(N, row_grain, [&](std::int64_t begin, std::int64_t end) {
      rounded_into(out.data_as<std::uint16_t>(), begin, end, C, row_grain,
                   [&](float* tile, std::int64_t first, std::int64_t rows) {
                     cpu::layernorm_forward(tile, mean.data_as<float>() + first, rstd.data_as<float>() + first,
                                            inp.data_as<float>() + first * C, weight.data_as<float>(),
                                            bias.data_as<float>(), rows, C);
                   });
    });
    return;
  }
  const DType dtype = check_real(op, {&inp, &out, &mean, &rstd, &weight, &bias});
  const auto [N, C] = checks::layernorm(inp, {&out}, {&mean, &rstd}, {&weight, &bias}, op);
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(N, row_grain, [&](std::int64_t begin, std::int64_t end) {
      const std::size_t at = static_cast<std::size_t>(begin) * C;
      cpu::layernorm_forward(out.data_as<Real>() + at, mean.data_as<Real>() + begin, rstd.data_as<Real>() + begin,
                             inp.data_as<Real>() + at, weight.data_as<Real>(), bias.data_as<Real>(), end - begin, C);
    });
  });
}

void CpuBackend::layernorm_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& inp, const Tensor& weight,
                                          const Tensor& mean, const Tensor& rstd) {
  constexpr const char* op = "layernorm_backward_input";
  const DType dtype = compute_dtype(op, inp, {&dinp, &dout, &weight, &mean, &rstd});
  const auto [N, C] = checks::layernorm(inp, {&dinp, &dout}, {&mean, &rstd}, {&weight}, op);
  if (inp.dtype() == DType::bf16) {
    // A row at a time widened into the thread's tile, then the f32 kernel on it: its bits exactly.
    team_->run(N, row_grain, [&](std::int64_t begin, std::int64_t end) {
      thread_local std::vector<float> row;
      row.resize(static_cast<std::size_t>(C));
      for (std::int64_t i = begin; i < end; ++i) {
        cpu::widen_bf16_bits(row.data(), inp.data_as<std::uint16_t>() + i * C, C);
        cpu::layernorm_backward_input(dinp.data_as<float>() + i * C, dout.data_as<float>() + i * C, row.data(),
                                      weight.data_as<float>(), mean.data_as<float>() + i, rstd.data_as<float>() + i, 1,
                                      C);
      }
    });
    return;
  }
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(N, row_grain, [&](std::int64_t begin, std::int64_t end) {
      const std::size_t at = static_cast<std::size_t>(begin) * C;
      cpu::layernorm_backward_input(dinp.data_as<Real>() + at, dout.data_as<Real>() + at, inp.data_as<Real>() + at,
                                    weight.data_as<Real>(), mean.data_as<Real>() + begin, rstd.data_as<Real>() + begin,
                                    end - begin, C);
    });
  });
}

void CpuBackend::layernorm_backward_params(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp,
                                           const Tensor& mean, const Tensor& rstd) {
  constexpr const char* op = "layernorm_backward_params";
  const DType dtype = compute_dtype(op, inp, {&dweight, &dbias, &dout, &mean, &rstd});
  const auto [N, C] = checks::layernorm(inp, {&dout}, {&mean, &rstd}, {&dweight, &dbias}, op);
  if (inp.dtype() == DType::bf16) {
    // The thread's columns of a block of rows at a time widened into its tile (rows C apart, as
    // inp's), then the f32 kernel on them: each column still summed over the rows in row order.
    constexpr std::int64_t block_rows = 64;
    team_->run(C, element_grain<float>, [&](std::int64_t begin, std::int64_t end) {
      thread_local std::vector<float> tile;
      tile.resize(static_cast<std::size_t>(std::min(block_rows, N) * C));
      for (std::int64_t first = 0; first < N; first += block_rows) {
        const std::int64_t rows = std::min(block_rows, N - first);
        for (std::int64_t r = 0; r < rows; ++r)
          cpu::widen_bf16_bits(tile.data() + r * C + begin, inp.data_as<std::uint16_t>() + (first + r) * C + begin,
                               end - begin);
        cpu::layernorm_backward_params(dweight.data_as<float>() + begin, dbias.data_as<float>() + begin,
                                       dout.data_as<float>() + first * C + begin, tile.data() + begin,
                                       mean.data_as<float>() + first, rstd.data_as<float>() + first, rows,
                                       static_cast<int>(end - begin), C);
      }
    });
    return;
  }
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(C, element_grain<Real>, [&](std::int64_t begin, std::int64_t end) {
      cpu::layernorm_backward_params(dweight.data_as<Real>() + begin, dbias.data_as<Real>() + begin,
                                     dout.data_as<Real>() + begin, inp.data_as<Real>() + begin, mean.data_as<Real>(),
                                     rstd.data_as<Real>(), N, static_cast<int>(end - begin), C);
    });
  });
}

void CpuBackend::matmul_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias) {
  constexpr const char* op = "matmul_forward";
  const DType dtype = bias.defined() ? product_dtype(op, inp, {&weight, &bias}) : product_dtype(op, inp, {&weight});
  checks::on_device(out, Device::cpu, op);
  if (out.dtype() == DType::bf16)
    TROUPE_CHECK(bf16_for(dtype) != nullptr, op_prefix(op) + "a bf16 output " + out.describe() +
                                                 " needs the bf16 products of train.precision bf16");
  else
    check_dtype(out, dtype, op);
  const auto [N, C, OC] = checks::matmul(out, inp, weight, bias, op);
  linear_forward(out, inp, weight, bias, Tensor{}, N, C, OC, dtype);
}

void CpuBackend::matmul_residual_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                         const Tensor& residual) {
  constexpr const char* op = "matmul_residual_forward";
  const DType dtype = bias.defined() ? product_dtype(op, inp, {&out, &weight, &bias, &residual})
                                     : product_dtype(op, inp, {&out, &weight, &residual});
  const auto [N, C, OC] = checks::matmul(out, inp, weight, bias, op);
  check_same_shape(residual, out, op);
  linear_forward(out, inp, weight, bias, residual, N, C, OC, dtype);
}

// The rows the product starts from (the bias, the residual stream or their sum) go into out first,
// by rows on the team, then the product is accumulated onto them: a branch added into the stream
// is never written out on its own.
void CpuBackend::linear_forward(Tensor& out, const Tensor& inp, const Tensor& weight, const Tensor& bias,
                                const Tensor& residual, int N, int C, int OC, DType dtype) {
  if (out.dtype() == DType::bf16) {
    // Stored in bf16: a block of rows at a time into a tile of f32, which starts from the bias,
    // takes the product and is rounded into out. The rows of a product are summed alone, so a
    // block's are those of the whole product.
    constexpr int block_rows = 256;
    thread_local std::vector<float> tile;  // the calling thread's; the team's parts write it through `rows_tile`
    tile.resize(static_cast<std::size_t>(std::min(block_rows, N)) * OC);
    float* const rows_tile = tile.data();
    for (int first = 0; first < N; first += block_rows) {
      const int rows = std::min(block_rows, N - first);
      if (bias.defined())
        team_->run(rows, 1, [&](std::int64_t begin, std::int64_t end) {
          cpu::start_rows(rows_tile + begin * OC, static_cast<const float*>(nullptr), bias.data_as<float>(),
                          static_cast<int>(end - begin), OC, false);
        });
      bf16_->gemm(false, true, rows, OC, C, operand_of(inp, std::int64_t{first} * C), C, operand_of(weight), C,
                  bias.defined(), rows_tile, OC);
      const std::int64_t at = std::int64_t{first} * OC;
      team_->run(std::int64_t{rows} * OC, element_grain<float>, [&](std::int64_t begin, std::int64_t end) {
        cpu::round_to_bf16_bits(out.data_as<std::uint16_t>() + at + begin, rows_tile + begin, end - begin);
      });
    }
    return;
  }
  with_real(dtype, [&]<typename Real>(Real) {
    Real* rows = out.data_as<Real>();
    const Real* stream = residual.defined() ? residual.data_as<Real>() : nullptr;
    const Real* b = bias.defined() ? bias.data_as<Real>() : nullptr;
    const bool start = stream != nullptr || b != nullptr;
    if (start) {
      const bool streaming = static_cast<std::int64_t>(N) * OC * static_cast<std::int64_t>(sizeof(Real)) >=
                             streaming_bytes;
      team_->run(N, 1, [&](std::int64_t begin, std::int64_t end) {
        cpu::start_rows(rows + begin * OC, stream == nullptr ? nullptr : stream + begin * OC, b,
                        static_cast<int>(end - begin), OC, streaming);
      });
    }
    if (cpu::Bf16Products* bf16 = bf16_for(dtype))
      bf16->gemm(false, true, N, OC, C, operand_of(inp), C, operand_of(weight), C, start, out.data_as<float>(), OC);
    else
      cpu::matmul_forward(rows, inp.data_as<Real>(), weight.data_as<Real>(), N, C, OC, start);
  });
}

void CpuBackend::matmul_backward_input(Tensor& dinp, const Tensor& dout, const Tensor& weight) {
  constexpr const char* op = "matmul_backward_input";
  const DType dtype = check_real(op, {&dinp, &dout, &weight});
  const auto [N, C, OC] = checks::matmul(dout, dinp, weight, Tensor{}, op);
  if (cpu::Bf16Products* bf16 = bf16_for(dtype)) {
    bf16->gemm(false, false, N, C, OC, operand_of(dout), OC, operand_of(weight), C, false, dinp.data_as<float>(), C);
    return;
  }
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::matmul_backward_input(dinp.data_as<Real>(), dout.data_as<Real>(), weight.data_as<Real>(), N, C, OC);
  });
}

void CpuBackend::matmul_backward_weights(Tensor& dweight, Tensor& dbias, const Tensor& dout, const Tensor& inp) {
  constexpr const char* op = "matmul_backward_weights";
  const DType dtype =
      dbias.defined() ? product_dtype(op, inp, {&dweight, &dbias, &dout}) : product_dtype(op, inp, {&dweight, &dout});
  const auto [N, C, OC] = checks::matmul(dout, inp, dweight, dbias, op);
  if (cpu::Bf16Products* bf16 = bf16_for(dtype)) {
    bf16->gemm(true, false, OC, C, N, operand_of(dout), OC, operand_of(inp), C, true, dweight.data_as<float>(), C);
  } else {
    with_real(dtype, [&]<typename Real>(Real) {
      cpu::matmul_backward_weights(dweight.data_as<Real>(), dout.data_as<Real>(), inp.data_as<Real>(), N, C, OC);
    });
  }
  if (dbias.defined()) bias_backward(dbias, dout);
}

// Columns split among the team: each column is one thread's sum over the rows in row order.
void CpuBackend::bias_backward(Tensor& dbias, const Tensor& dout) {
  constexpr const char* op = "bias_backward";
  const DType dtype = check_real(op, {&dout, &dbias});
  const auto [N, width] = checks::column_sums(dbias, dout, op);
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(width, element_grain<Real>, [&](std::int64_t begin, std::int64_t end) {
      cpu::matmul_bias_backward(dbias.data_as<Real>() + begin, dout.data_as<Real>() + begin, N,
                                static_cast<int>(end - begin), width);
    });
  });
}

void CpuBackend::attention_forward(Tensor& out, Tensor& att, const Tensor& qkv, int n_head) {
  constexpr const char* op = "attention_forward";
  if (out.dtype() == DType::bf16 || qkv.dtype() == DType::bf16) {
    check_stored(out, op);
    check_stored(qkv, op);
    check_f32(op, {&att});
    const auto [B, T, C] = check_attention_shapes(qkv, out, att, n_head, op);
    const cpu::OpenblasThreadsWhile one_each(1, threads_, team_->size() > 1);
    team_->run(static_cast<std::int64_t>(B) * n_head, 1, [&](std::int64_t begin, std::int64_t end) {
      cpu::attention_forward_stored(stored_output(out), att.data_as<float>(), operand_of(qkv), T, C, n_head,
                                    static_cast<int>(begin), static_cast<int>(end));
    });
    return;
  }
  const DType dtype = check_real(op, {&qkv, &out, &att});
  const auto [B, T, C] = check_attention_shapes(qkv, out, att, n_head, op);
  with_real(dtype, [&]<typename Real>(Real) {
    const cpu::OpenblasThreadsWhile one_each(1, threads_, team_->size() > 1);
    team_->run(static_cast<std::int64_t>(B) * n_head, 1, [&](std::int64_t begin, std::int64_t end) {
      cpu::attention_forward(out.data_as<Real>(), att.data_as<Real>(), qkv.data_as<Real>(), T, C, n_head,
                             static_cast<int>(begin), static_cast<int>(end));
    });
  });
}

void CpuBackend::attention_backward(Tensor& dqkv, Tensor& datt, const Tensor& dout, const Tensor& qkv,
                                    const Tensor& att, int n_head) {
  constexpr const char* op = "attention_backward";
  if (qkv.dtype() == DType::bf16) {
    check_stored(qkv, op);
    check_f32(op, {&dqkv, &datt, &dout, &att});
    const auto [B, T, C] = check_attention_shapes(qkv, dout, att, n_head, op);
    check_same_shape(dqkv, qkv, op);
    check_same_shape(datt, att, op);
    const cpu::OpenblasThreadsWhile one_each(1, threads_, team_->size() > 1);
    team_->run(static_cast<std::int64_t>(B) * n_head, 1, [&](std::int64_t begin, std::int64_t end) {
      cpu::attention_backward_stored(dqkv.data_as<float>(), datt.data_as<float>(), dout.data_as<float>(),
                                     qkv.data_as<std::uint16_t>(), att.data_as<float>(), T, C, n_head,
                                     static_cast<int>(begin), static_cast<int>(end));
    });
    return;
  }
  const DType dtype = check_real(op, {&qkv, &dqkv, &datt, &dout, &att});
  const auto [B, T, C] = check_attention_shapes(qkv, dout, att, n_head, op);
  check_same_shape(dqkv, qkv, op);
  check_same_shape(datt, att, op);
  with_real(dtype, [&]<typename Real>(Real) {
    const cpu::OpenblasThreadsWhile one_each(1, threads_, team_->size() > 1);
    team_->run(static_cast<std::int64_t>(B) * n_head, 1, [&](std::int64_t begin, std::int64_t end) {
      cpu::attention_backward(dqkv.data_as<Real>(), datt.data_as<Real>(), dout.data_as<Real>(), qkv.data_as<Real>(),
                              att.data_as<Real>(), T, C, n_head, static_cast<int>(begin), static_cast<int>(end));
    });
  });
}

void CpuBackend::gelu_forward(Tensor& out, const Tensor& inp) {
  constexpr const char* op = "gelu_forward";
  if (out.dtype() == DType::bf16 || inp.dtype() == DType::bf16) {
    check_stored(out, op);
    check_stored(inp, op);
    check_same_shape(out, inp, op);
    auto gelu_of = [&](float* to, std::int64_t first, std::int64_t count) {
      if (inp.dtype() == DType::bf16)
        cpu::gelu_forward(to, inp.data_as<std::uint16_t>() + first, count);
      else
        cpu::gelu_forward(to, inp.data_as<float>() + first, count);
    };
    // Pieces a multiple of the element grain from a part's start: each element meets the lanes it
    // meets in one sweep.
    team_->run(inp.numel(), element_grain<float>, [&](std::int64_t begin, std::int64_t end) {
      if (out.dtype() == DType::bf16)
        rounded_into(out.data_as<std::uint16_t>(), begin, end, 1, 64 * element_grain<float>, gelu_of);
      else
        gelu_of(out.data_as<float>() + begin, begin, end - begin);
    });
    return;
  }
  const DType dtype = check_real(op, {&inp, &out});
  check_same_shape(out, inp, op);
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(inp.numel(), element_grain<Real>, [&](std::int64_t begin, std::int64_t end) {
      cpu::gelu_forward(out.data_as<Real>() + begin, inp.data_as<Real>() + begin, end - begin);
    });
  });
}

void CpuBackend::gelu_backward(Tensor& dinp, const Tensor& inp, const Tensor& dout) {
  constexpr const char* op = "gelu_backward";
  const DType dtype = check_real(op, {&inp, &dinp, &dout});
  check_same_shape(dinp, inp, op);
  check_same_shape(dout, inp, op);
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(inp.numel(), element_grain<Real>, [&](std::int64_t begin, std::int64_t end) {
      cpu::gelu_backward(dinp.data_as<Real>() + begin, inp.data_as<Real>() + begin, dout.data_as<Real>() + begin,
                         end - begin);
    });
  });
}

// Split by columns like bias_backward, each thread running the GELU over its columns of every row and
// summing them as it writes them: the gradient is not read a second time.
void CpuBackend::gelu_bias_backward(Tensor& dinp, Tensor& dbias, const Tensor& inp, const Tensor& dout) {
  constexpr const char* op = "gelu_bias_backward";
  if (inp.dtype() == DType::bf16) {
    check_stored(inp, op);
    check_f32(op, {&dinp, &dout, &dbias});
    check_same_shape(dinp, inp, op);
    check_same_shape(dout, inp, op);
    const auto [N, width] = checks::column_sums(dbias, inp, op);
    team_->run(width, element_grain<float>, [&](std::int64_t begin, std::int64_t end) {
      cpu::gelu_bias_backward(dinp.data_as<float>(), dbias.data_as<float>(), inp.data_as<std::uint16_t>(),
                              dout.data_as<float>(), N, width, static_cast<int>(begin), static_cast<int>(end));
    });
    return;
  }
  const DType dtype = check_real(op, {&inp, &dinp, &dout, &dbias});
  check_same_shape(dinp, inp, op);
  check_same_shape(dout, inp, op);
  const auto [N, width] = checks::column_sums(dbias, inp, op);
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(width, element_grain<Real>, [&](std::int64_t begin, std::int64_t end) {
      cpu::gelu_bias_backward(dinp.data_as<Real>(), dbias.data_as<Real>(), inp.data_as<Real>(), dout.data_as<Real>(),
                              N, width, static_cast<int>(begin), static_cast<int>(end));
    });
  });
}

void CpuBackend::residual_forward(Tensor& out, const Tensor& a, const Tensor& b) {
  constexpr const char* op = "residual_forward";
  const DType dtype = check_real(op, {&a, &b, &out});
  check_same_shape(a, b, op);
  check_same_shape(out, a, op);
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(a.numel(), element_grain<Real>, [&](std::int64_t begin, std::int64_t end) {
      cpu::residual_forward(out.data_as<Real>() + begin, a.data_as<Real>() + begin, b.data_as<Real>() + begin,
                            end - begin);
    });
  });
}

void CpuBackend::crossentropy_forward(Tensor& losses, Tensor& probs, const Tensor& logits, const Tensor& targets,
                                      int vocab_size) {
  constexpr const char* op = "crossentropy_forward";
  const DType dtype = check_real(op, {&logits, &probs, &losses});
  const auto [N, Vp] = checks::crossentropy_forward(losses, probs, logits, vocab_size, op);
  checks::numel(targets, N, op);
  check_ids(targets, vocab_size, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::crossentropy_forward(losses.data_as<Real>(), probs.data_as<Real>(), logits.data_as<Real>(),
                              targets.data_as<std::int32_t>(), N, vocab_size, Vp);
  });
}

void CpuBackend::crossentropy_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets, float dloss) {
  constexpr const char* op = "crossentropy_backward";
  const DType dtype = check_real(op, {&probs, &dlogits});
  const auto [N, Vp] = checks::crossentropy_backward(dlogits, probs, op);
  checks::numel(targets, N, op);
  check_ids(targets, Vp, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::crossentropy_backward(dlogits.data_as<Real>(), probs.data_as<Real>(), targets.data_as<std::int32_t>(),
                               static_cast<Real>(dloss), N, Vp, 0);
  });
}

void CpuBackend::encoder_shard_forward(Tensor& out, const Tensor& tokens, const Tensor& wte, const Tensor& wpe,
                                       int vocab_begin, bool add_positions) {
  constexpr const char* op = "encoder_shard_forward";
  const DType dtype = check_real(op, {&out, &wte, &wpe});
  const auto [B, T, C] = check_encoder_shapes_of_shard(tokens, wte, wpe, out, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::encoder_forward(out.data_as<Real>(), tokens.data_as<std::int32_t>(), wte.data_as<Real>(),
                         add_positions ? wpe.data_as<Real>() : nullptr, B, T, C, vocab_begin,
                         static_cast<int>(wte.dim(0)));
  });
}

void CpuBackend::encoder_shard_backward(Tensor& dwte, Tensor& dwpe, const Tensor& dout, const Tensor& tokens,
                                        int vocab_begin) {
  constexpr const char* op = "encoder_shard_backward";
  const DType dtype = check_real(op, {&dout, &dwte, &dwpe});
  const auto [B, T, C] = check_encoder_shapes_of_shard(tokens, dwte, dwpe, dout, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::encoder_backward(dwte.data_as<Real>(), dwpe.data_as<Real>(), dout.data_as<Real>(),
                          tokens.data_as<std::int32_t>(), B, T, C, vocab_begin, static_cast<int>(dwte.dim(0)));
  });
}

void CpuBackend::crossentropy_shard_stats(Tensor& stats, const Tensor& logits, const Tensor& targets, int vocab_begin,
                                          int vocab_size) {
  constexpr const char* op = "crossentropy_shard_stats";
  const DType dtype = check_real(op, {&logits, &stats});
  const std::int64_t Vs = logits.dim(logits.rank() - 1), N = logits.numel() / Vs;
  checks::numel(stats, 3 * N, op);
  checks::numel(targets, N, op);
  check_ids(targets, vocab_size, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::crossentropy_shard_stats(stats.data_as<Real>(), logits.data_as<Real>(), targets.data_as<std::int32_t>(), N,
                                  checks::to_int(Vs, op), vocab_begin, vocab_size);
  });
}

void CpuBackend::crossentropy_shard_forward(Tensor& losses, Tensor& probs, const Tensor& logits,
                                            const Tensor& all_stats, int vocab_begin, int vocab_size) {
  constexpr const char* op = "crossentropy_shard_forward";
  const DType dtype = check_real(op, {&logits, &probs, &losses, &all_stats});
  const std::int64_t Vs = logits.dim(logits.rank() - 1), N = logits.numel() / Vs;
  checks::numel(probs, logits.numel(), op);
  checks::numel(losses, N, op);
  TROUPE_CHECK(all_stats.numel() % (3 * N) == 0, op_prefix(op) + "stats " + all_stats.describe() + " for " +
                                                     std::to_string(N) + " rows");
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::crossentropy_shard_forward(losses.data_as<Real>(), probs.data_as<Real>(), logits.data_as<Real>(),
                                    all_stats.data_as<Real>(), checks::to_int(all_stats.numel() / (3 * N), op), N,
                                    checks::to_int(Vs, op), vocab_begin, vocab_size);
  });
}

void CpuBackend::crossentropy_shard_backward(Tensor& dlogits, const Tensor& probs, const Tensor& targets,
                                             int vocab_begin, float dloss) {
  constexpr const char* op = "crossentropy_shard_backward";
  const DType dtype = check_real(op, {&probs, &dlogits});
  const auto [N, Vs] = checks::crossentropy_backward(dlogits, probs, op);
  checks::numel(targets, N, op);
  with_real(dtype, [&]<typename Real>(Real) {
    cpu::crossentropy_backward(dlogits.data_as<Real>(), probs.data_as<Real>(), targets.data_as<std::int32_t>(),
                               static_cast<Real>(dloss), N, Vs, vocab_begin);
  });
}

void CpuBackend::adamw_update(Tensor& params, const Tensor& grads, Tensor& m, Tensor& v,
                              std::span<const AdamWSegment> segments, const AdamWHyper& hyper) {
  constexpr const char* op = "adamw_update";
  const DType dtype = check_real(op, {&params, &grads, &m, &v});
  checks::adamw(params, grads, m, v, segments, hyper, op);
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(cpu::adamw_elements(segments), element_grain<Real>, [&](std::int64_t begin, std::int64_t end) {
      cpu::adamw_update(params.data_as<Real>(), grads.data_as<Real>(), m.data_as<Real>(), v.data_as<Real>(), segments,
                        hyper, begin, end);
    });
  });
}

// The sum goes by fixed blocks of sum_block elements, their sums added in block order, so the team's
// size changes which thread sums a block and nothing else.
double CpuBackend::sum_of_squares(const Tensor& t) {
  const DType dtype = check_real("sum_of_squares", {&t});
  const std::int64_t n = t.numel(), blocks = (n + sum_block - 1) / sum_block;
  std::vector<double> block_sums(static_cast<std::size_t>(blocks));
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(blocks, 1, [&](std::int64_t begin, std::int64_t end) {
      for (std::int64_t b = begin; b < end; ++b)
        block_sums[static_cast<std::size_t>(b)] =
            cpu::sum_of_squares(t.data_as<Real>() + b * sum_block, std::min(sum_block, n - b * sum_block));
    });
  });
  double result = 0;
  for (const double s : block_sums) result += s;
  return result;
}

void CpuBackend::scale(Tensor& t, float factor) {
  const DType dtype = check_real("scale", {&t});
  with_real(dtype, [&]<typename Real>(Real) {
    team_->run(t.numel(), element_grain<Real>, [&](std::int64_t begin, std::int64_t end) {
      cpu::scale(t.data_as<Real>() + begin, end - begin, static_cast<Real>(factor));
    });
  });
}

}  // namespace troupe::compute
