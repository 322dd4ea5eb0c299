#pragma once
// troupe bench gpu: one GPU's training throughput and MFU for a model preset, against the bf16
// GEMM peak measured in the same run, and the same model in PyTorch (eager and torch.compile)
// when python3 can import torch.

#include <string>

#include <CLI/CLI.hpp>

namespace troupe::apps {

struct BenchGpuOptions {
  std::string model = "gpt2";
  std::string precision = "bf16";  // bf16 (cuda-bf16) or fp32 (cuda)
  int batch = 16;
  int seq = 1024;
  int steps = 10;  // measured steps (figures from the median)
  int warmup = 3;
  std::string torch_script = "scripts/bench/torch_gpt2.py";  // "" = skip PyTorch
};

// Registers `bench gpu` and its options under `bench`.
CLI::App* add_bench_gpu_command(CLI::App& bench, BenchGpuOptions& options);
int run_bench_gpu(const BenchGpuOptions& options);

}  // namespace troupe::apps
