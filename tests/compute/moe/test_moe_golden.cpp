// Troupe's mixture-of-experts MLP against an independent PyTorch one, as test_golden_gpt2.cpp holds
// the GPT: the fixture tests/compute/golden/moe_block.bin is written by
// scripts/reference/moe_golden.py (format: docs/formats/moe-golden-fixture.md) with the router's
// logits, each token's experts, the output, both routing losses and every gradient of
// sum(out * R) + aux_coef · aux + z_coef · z, in float64; one of its experts receives no token.
// Errors are norm-wise per tensor, ||troupe - reference|| / ||reference||.

#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include "compute/cpu/cpu_backend.hpp"
#include "compute/moe/moe_layer.hpp"

using namespace troupe::compute;

namespace {

static_assert(std::endian::native == std::endian::little, "the fixture is little-endian and read in place");

const char* const kFixturePath = TROUPE_SOURCE_DIR "/tests/compute/golden/moe_block.bin";

struct Fixture {
  std::int32_t tokens = 0, C = 0, H = 0, experts = 0, top_k = 0, shared = 0;
  double aux_coef = 0, z_coef = 0;
  std::map<std::string, std::vector<double>> real;  // float64 arrays
  std::map<std::string, std::vector<std::int32_t>> ints;
  std::map<std::string, Shape> shapes;
};

Fixture read_fixture() {
  std::ifstream in(kFixturePath, std::ios::binary);
  INFO("fixture " << kFixturePath << " (scripts/reference/moe_golden.py writes it)");
  REQUIRE(in.good());
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::size_t at = 0;
  auto take = [&](void* out, std::size_t n) {
    REQUIRE(at + n <= bytes.size());
    std::memcpy(out, bytes.data() + at, n);
    at += n;
  };
  char magic[8];
  take(magic, 8);
  REQUIRE(std::string(magic, 8) == std::string("TRPMOE\0\0", 8));
  std::uint32_t version = 0, count = 0;
  take(&version, 4);
  REQUIRE(version == 1);
  Fixture f;
  std::int32_t dims[6];
  take(dims, sizeof dims);
  f.tokens = dims[0], f.C = dims[1], f.H = dims[2], f.experts = dims[3], f.top_k = dims[4], f.shared = dims[5];
  take(&f.aux_coef, 8);
  take(&f.z_coef, 8);
  take(&count, 4);
  for (std::uint32_t i = 0; i < count; ++i) {
    std::uint32_t length = 0, code = 0, rank = 0;
    take(&length, 4);
    std::string name(length, '\0');
    take(name.data(), length);
    take(&code, 4);
    take(&rank, 4);
    Shape shape(rank);
    for (auto& d : shape) {
      std::uint32_t v = 0;
      take(&v, 4);
      d = v;
    }
    const auto n = static_cast<std::size_t>(shape_numel(shape));
    REQUIRE((code == 0 || code == 3));
    if (code == 0) {
      f.real[name].resize(n);
      take(f.real[name].data(), 8 * n);
    } else {
      f.ints[name].resize(n);
      take(f.ints[name].data(), 4 * n);
    }
    f.shapes[name] = shape;
  }
  REQUIRE(at == bytes.size());
  return f;
}

Tensor tensor_of(const Fixture& f, const std::string& name, DType dtype) {
  INFO("fixture array " << name);
  REQUIRE(f.real.count(name) == 1);
  const std::vector<double>& v = f.real.at(name);
  Tensor t = Tensor::zeros(f.shapes.at(name), dtype);
  for (std::size_t i = 0; i < v.size(); ++i)
    dtype == DType::f64 ? void(t.data_as<double>()[i] = v[i]) : void(t.data_as<float>()[i] = static_cast<float>(v[i]));
  return t;
}

double relative_error(const Tensor& t, const std::vector<double>& reference) {
  REQUIRE(static_cast<std::size_t>(t.numel()) == reference.size());
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < reference.size(); ++i) {
    const double x = t.dtype() == DType::f64 ? t.data_as<double>()[i] : t.data_as<float>()[i];
    diff += (x - reference[i]) * (x - reference[i]);
    norm += reference[i] * reference[i];
  }
  return norm > 0 ? std::sqrt(diff / norm) : std::sqrt(diff);
}

void check_against_reference(DType dtype, double tolerance) {
  const Fixture f = read_fixture();
  REQUIRE(f.shared == 1);
  const MoEShape shape{f.experts, f.top_k, true, f.C, f.H};
  CpuBackend backend(1);
  auto allocate = [dtype](std::int64_t numel) { return Tensor::zeros({numel}, dtype); };
  MoEActivations a = make_moe_activations(shape, f.tokens, allocate);
  MoEScratch scratch = make_moe_scratch(shape, f.tokens, allocate);
  const std::vector<std::string> names = {"router",      "fc_w",        "fc_b",          "proj_w",       "proj_b",
                                          "shared_fc_w", "shared_fc_b", "shared_proj_w", "shared_proj_b"};
  std::vector<Tensor> w, g;
  for (const std::string& name : names) {
    w.push_back(tensor_of(f, name, dtype));
    g.push_back(Tensor::zeros(w.back().shape(), dtype));
  }
  const MoEWeights weights{w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7], w[8]};
  MoEWeights grads{g[0], g[1], g[2], g[3], g[4], g[5], g[6], g[7], g[8]};
  const Tensor x = tensor_of(f, "x", dtype), R = tensor_of(f, "R", dtype);
  Tensor out = Tensor::zeros({f.tokens, f.C}, dtype), dx = Tensor::zeros({f.tokens, f.C}, dtype);
  moe_forward(backend, out, a, x, weights, f.top_k);
  moe_backward(backend, dx, grads, scratch, R, a, x, weights, f.aux_coef, f.z_coef);

  // The same experts for every token, in the same order (torch.topk's, descending), and the idle one.
  const std::vector<std::int32_t>& experts = f.ints.at("experts");
  for (std::size_t s = 0; s < experts.size(); ++s) CHECK(a.plan.expert[s] == experts[s]);
  CHECK(a.plan.count(f.experts - 1) == 0);
  auto check = [&](const std::string& what, const Tensor& t, const std::vector<double>& reference) {
    const double error = relative_error(t, reference);
    INFO(what << ": relative error " << error << " (allowed " << tolerance << ")");
    CHECK(error <= tolerance);
  };
  check("logits", a.logits.slice(0, {f.tokens, f.experts}), f.real.at("logits"));
  check("out", out, f.real.at("out"));
  CHECK(std::abs(a.plan.aux_loss - f.real.at("aux")[0]) <= tolerance * std::abs(f.real.at("aux")[0]));
  CHECK(std::abs(a.plan.z_loss - f.real.at("z")[0]) <= tolerance * std::abs(f.real.at("z")[0]));
  check("d_x", dx, f.real.at("d_x"));
  for (std::size_t i = 0; i < names.size(); ++i) check("d_" + names[i], g[i], f.real.at("d_" + names[i]));
}

}  // namespace

// float64: PyTorch's and Troupe's kernels sum in different orders, about 1e-16 relative per
// operation; 1e-12 leaves that room and fails any formula that is wrong. float32: the same
// arithmetic rounded 2^29 times coarser, a few 1e-7 measured; 1e-5 holds on any CPU.
TEST_CASE("moe block matches the PyTorch reference in float64", "[golden]") {
  check_against_reference(DType::f64, 1e-12);
}

TEST_CASE("moe block matches the PyTorch reference in float32", "[golden]") {
  check_against_reference(DType::f32, 1e-5);
}
