#include "comm/bench/allreduce_bench.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <future>
#include <optional>
#include <sstream>
#include <thread>

#include "comm/bootstrap.hpp"
#include "comm/collectives.hpp"
#include "comm/grid.hpp"

namespace troupe::comm {
namespace {

using clock = std::chrono::steady_clock;

std::vector<std::uint8_t> pack(const std::vector<double>& values) {
  std::vector<std::uint8_t> bytes(values.size() * sizeof(double));
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

std::vector<double> unpack(const std::vector<std::uint8_t>& bytes) {
  std::vector<double> values(bytes.size() / sizeof(double));
  std::memcpy(values.data(), bytes.data(), values.size() * sizeof(double));
  return values;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

// Every iteration's time on every rank (the report holds `ways` series of `iterations`), then
// each iteration's slowest rank, per way.
Expected<std::vector<std::vector<double>>> slowest_per_iteration(const std::vector<LocalRankResult>& results,
                                                                 int ways, int iterations, const std::string& what) {
  std::vector<std::vector<double>> slowest(ways, std::vector<double>(static_cast<std::size_t>(iterations), 0.0));
  for (std::size_t rank = 0; rank < results.size(); ++rank) {
    const LocalRankResult& r = results[rank];
    if (!r.ok) return Error{"bench allreduce: " + what + ": rank " + std::to_string(rank) + ": " + r.error};
    const std::vector<double> times = unpack(r.report);
    if (times.size() != static_cast<std::size_t>(ways * iterations)) {
      return Error{"bench allreduce: " + what + ": short report"};
    }
    for (int w = 0; w < ways; ++w) {
      for (int i = 0; i < iterations; ++i) {
        slowest[w][i] = std::max(slowest[w][i], times[static_cast<std::size_t>(w * iterations + i)]);
      }
    }
  }
  return slowest;
}

// How many messages of `bytes` a one-way stream sends: about 256 MiB, 4 to 64 of them.
int stream_messages(std::int64_t bytes) { return static_cast<int>(std::clamp<std::int64_t>((256 << 20) / bytes, 4, 64)); }

// Rank 0 streams stream_messages(bytes) messages from `buffer` to rank 1, all posted at once as
// ucx_perftest's tag_bw does; rank 1 answers the last with an empty message; other ranks wait.
// With `inbox`, rank 1 streams as many back into rank 0's inbox at the same time (both ways at
// once, as a ring's neighbours send and receive), and answers once it has all of rank 0's.
// Rank 0's time from the first post to the answer and, both ways, to its last receive; `round`
// keeps rounds' keys apart.
Expected<double> time_stream(Engine& engine, Communicator& world, compute::Tensor& buffer, std::int64_t bytes,
                             std::uint16_t round, compute::Tensor* inbox = nullptr) {
  const int messages = stream_messages(bytes);
  if (Status s = world.barrier(); !s) return s.error();
  if (engine.rank() > 1) return 0.0;
  const auto start = clock::now();
  std::vector<std::future<Status>> pending;
  auto wait = [&] {
    auto promise = std::make_shared<std::promise<Status>>();
    pending.push_back(promise->get_future());
    return [promise](Status s) { promise->set_value(std::move(s)); };
  };
  const int peer = 1 - engine.rank();
  const MessageKey ack{MessageKind::point_to_point, 0, round, static_cast<std::uint16_t>(messages)};
  for (int m = 0; m < messages; ++m) {
    const MessageKey key{MessageKind::point_to_point, 0, round, static_cast<std::uint16_t>(m)};
    if (engine.rank() == 0 || inbox) engine.post_send(peer, key, buffer.data(), static_cast<std::size_t>(bytes), wait());
    if (engine.rank() == 1) engine.post_recv(0, key, buffer.data(), static_cast<std::size_t>(bytes), wait());
    if (engine.rank() == 0 && inbox) engine.post_recv(1, key, inbox->data(), static_cast<std::size_t>(bytes), wait());
  }
  if (engine.rank() == 0) {
    engine.post_recv(1, ack, nullptr, 0, wait());
  } else {
    for (auto& f : pending) {
      if (Status s = f.get(); !s) return s.error();
    }
    pending.clear();
    engine.post_send(0, ack, nullptr, 0, wait());
  }
  for (auto& f : pending) {
    if (Status s = f.get(); !s) return s.error();
  }
  return std::chrono::duration<double>(clock::now() - start).count();
}

// Where each of `processes` ranks runs: nowhere else on one host; else host r·hosts/processes.
RankPlacement placement(int processes, const AllReduceBenchOptions& o) {
  if (o.hosts <= 1) return {};
  return [processes, &o](int rank) { return o.enter_host(rank * o.hosts / processes); };
}

// The ring with chunks through mapped blocks and with every chunk as a message, in the same
// processes, iteration by iteration (which goes first alternates): the VM's speed drifts by 2x
// within seconds, and this way the drift falls on both alike. Streams of the same size between
// ranks 0 and 1, one way and both ways at once, run in each iteration too, as the references of
// the same moment.
Expected<AllReduceBenchRow> time_allreduce(int processes, std::int64_t bytes, const AllReduceBenchOptions& o) {
  const auto body = [&](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    CollectiveOptions as_messages = CollectiveOptions::from_environment();
    as_messages.mapped_blocks = false;
    Group messages_group = world_group(Grid{processes, 1, 1});
    messages_group.id = first_free_group_id;
    auto mapped = Communicator::create(engine, world_group(Grid{processes, 1, 1}));
    if (!mapped) return mapped.error();
    auto messages = Communicator::create(engine, messages_group, as_messages);
    if (!messages) return messages.error();
    Communicator* ways[2] = {mapped->get(), messages->get()};
    compute::Tensor buffer = compute::Tensor::zeros({bytes / 4}, compute::DType::f32);
    compute::Tensor inbox = compute::Tensor::zeros({bytes / 4}, compute::DType::f32);
    std::fill_n(buffer.data_as<float>(), buffer.numel(), 1e-3f);
    std::vector<double> times(static_cast<std::size_t>(4 * o.iterations));
    for (int i = 0; i < o.warmup + o.iterations; ++i) {
      // Iterations stay below 0x8000 (the command's bound): the two-way rounds' keys are their own.
      auto streamed = time_stream(engine, **mapped, buffer, bytes, static_cast<std::uint16_t>(i));
      if (!streamed) return streamed.error();
      auto both_ways = time_stream(engine, **mapped, buffer, bytes, static_cast<std::uint16_t>(0x8000 | i), &inbox);
      if (!both_ways) return both_ways.error();
      if (i >= o.warmup) {
        times[static_cast<std::size_t>(2 * o.iterations + i - o.warmup)] = *streamed;
        times[static_cast<std::size_t>(3 * o.iterations + i - o.warmup)] = *both_ways;
      }
      for (int k = 0; k < 2; ++k) {
        const int way = (i + k) % 2;
        if (Status s = ways[way]->barrier(); !s) return s.error();
        const auto start = clock::now();
        if (Status s = ways[way]->all_reduce(buffer); !s) return s.error();
        if (i >= o.warmup) {
          times[static_cast<std::size_t>(way * o.iterations + i - o.warmup)] =
              std::chrono::duration<double>(clock::now() - start).count();
        }
      }
    }
    return pack(times);
  };
  auto results = run_local_ranks(processes, body, o.timeout, placement(processes, o));
  if (!results) return results.error();
  const std::string what = std::to_string(processes) + " processes, " + std::to_string(bytes) + " bytes";
  auto slowest = slowest_per_iteration(*results, 4, o.iterations, what);
  if (!slowest) return slowest.error();
  const auto& mapped = (*slowest)[0];
  const auto& messages = (*slowest)[1];
  const auto& stream = (*slowest)[2];  // rank 0's: the others report 0
  const auto& two_way = (*slowest)[3];  // rank 0's, its bytes each way
  const double bus_bytes = 2.0 * (processes - 1) / processes * static_cast<double>(bytes);
  const double stream_bytes = stream_messages(bytes) * static_cast<double>(bytes);
  std::vector<double> speedups, stream_ratios, two_way_ratios;
  for (std::size_t i = 0; i < mapped.size(); ++i) {
    speedups.push_back(messages[i] / mapped[i]);
    stream_ratios.push_back((bus_bytes / mapped[i]) / (stream_bytes / stream[i]));
    two_way_ratios.push_back((bus_bytes / mapped[i]) / (stream_bytes / two_way[i]));
  }
  AllReduceBenchRow row{processes,        bytes, median(mapped), bus_bytes / median(mapped), median(messages),
                        median(speedups), median(stream_ratios), median(two_way_ratios)};
  return row;
}

// Our engine's one-way stream between two processes alone (time_stream), the median over rounds.
Expected<PointToPointRow> time_point_to_point(std::int64_t bytes, const AllReduceBenchOptions& o) {
  const auto body = [&](Engine& engine) -> Expected<std::vector<std::uint8_t>> {
    auto comm = Communicator::create(engine, world_group(Grid{2, 1, 1}));
    if (!comm) return comm.error();
    // One buffer for every message: the reference measures transport, not memory footprint.
    compute::Tensor buffer = compute::Tensor::zeros({bytes / 4}, compute::DType::f32);
    std::vector<double> times;
    for (int i = 0; i < o.warmup + o.iterations; ++i) {
      auto seconds = time_stream(engine, **comm, buffer, bytes, static_cast<std::uint16_t>(i));
      if (!seconds) return seconds.error();
      if (i >= o.warmup) times.push_back(*seconds);
    }
    return pack(times);
  };
  auto results = run_local_ranks(2, body, o.timeout, placement(2, o));
  if (!results) return results.error();
  for (const LocalRankResult& r : *results) {
    if (!r.ok) return Error{"bench allreduce: point-to-point: " + r.error};
  }
  const double seconds = median(unpack((*results)[0].report));
  return PointToPointRow{"troupe engine", bytes, stream_messages(bytes) * static_cast<double>(bytes) / seconds};
}

// A child whose stdout and stderr go to a pipe.
struct CapturedChild {
  pid_t pid = -1;
  int output = -1;
};

// Starts argv in a child (on `host` when the bench spans hosts), its output to a pipe.
CapturedChild start_captured(const std::vector<std::string>& argv, int host, const AllReduceBenchOptions& o) {
  int out[2];
  if (pipe(out) != 0) return {};
  const pid_t child = fork();
  if (child < 0) {
    close(out[0]);
    close(out[1]);
    return {};
  }
  if (child == 0) {
    dup2(out[1], STDOUT_FILENO);
    dup2(out[1], STDERR_FILENO);
    close(out[0]);
    close(out[1]);
    if (o.hosts > 1 && !o.enter_host(host)) _exit(126);
    std::vector<char*> args;
    for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
    args.push_back(nullptr);
    execvp(args[0], args.data());
    _exit(127);
  }
  close(out[1]);
  return {child, out[0]};
}

// What the child printed, once it has exited.
std::string finish_captured(const CapturedChild& child) {
  if (child.pid < 0) return {};
  std::string output;
  char chunk[512];
  for (ssize_t n; (n = read(child.output, chunk, sizeof chunk)) > 0;) output.append(chunk, static_cast<std::size_t>(n));
  close(child.output);
  waitpid(child.pid, nullptr, 0);
  return output;
}

// A ucx_perftest tag_bw server of `bytes` on `host` (this one on a single host), output dropped.
pid_t start_perftest_server(int host, const std::string& size, const std::string& iterations, const std::string& port,
                            const AllReduceBenchOptions& o) {
  const pid_t server = fork();
  if (server != 0) return server;
  std::freopen("/dev/null", "w", stdout);
  std::freopen("/dev/null", "w", stderr);
  if (o.hosts > 1 && !o.enter_host(host)) _exit(126);
  execlp("ucx_perftest", "ucx_perftest", "-t", "tag_bw", "-s", size.c_str(), "-n", iterations.c_str(), "-w", "3", "-p",
         port.c_str(), static_cast<char*>(nullptr));
  _exit(127);
}

// The overall bandwidth of ucx_perftest's "Final:" line in bytes per second; its "MB/s" are MiB/s.
std::optional<double> perftest_bandwidth(const std::string& output) {
  const auto at = output.find("Final:");
  if (at == std::string::npos) return std::nullopt;
  // Final: iterations, latency 50%ile / average / overall (us), bandwidth average / overall.
  std::istringstream fields(output.substr(at + 6));
  double values[6] = {};
  for (double& v : values) fields >> v;
  if (!fields) return std::nullopt;
  return values[5] * 1024.0 * 1024.0;
}

// ucx_perftest tag_bw between a server and a client on 127.0.0.1, or with hosts from host 0 to
// host 1; with `both_ways` (hosts only) a second pair from host 1 to host 0 at the same time, and
// the mean of the two directions' bandwidths. Nothing when it is not installed or fails.
std::optional<PointToPointRow> time_ucx_perftest(std::int64_t bytes, const AllReduceBenchOptions& o, bool both_ways) {
  if (std::system("command -v ucx_perftest > /dev/null 2>&1") != 0) return std::nullopt;
  const std::string size = std::to_string(bytes);
  const std::string iterations = std::to_string(std::clamp<std::int64_t>((1024ll << 20) / bytes, o.iterations, 1000));
  const int base_port = 20000 + static_cast<int>((getpid() + bytes / 4096) % 20000) / 2 * 2;
  struct Stream {
    int server_host, client_host;
  };
  std::vector<Stream> streams{{1, 0}};
  if (both_ways) streams.push_back({0, 1});
  // A server answers one run: a try where any client missed its server starts every pair afresh.
  std::vector<double> rates;
  for (int attempt = 1; attempt <= 5 && rates.size() != streams.size(); ++attempt) {
    rates.clear();
    std::vector<pid_t> servers;
    for (std::size_t k = 0; k < streams.size(); ++k)
      servers.push_back(start_perftest_server(streams[k].server_host, size, iterations,
                                              std::to_string(base_port + static_cast<int>(k)), o));
    std::this_thread::sleep_for(std::chrono::milliseconds(300 * attempt));
    std::vector<CapturedChild> clients;
    for (std::size_t k = 0; k < streams.size(); ++k) {
      const std::string address = o.hosts > 1 ? o.host_name(streams[k].server_host) : "127.0.0.1";
      clients.push_back(start_captured({"timeout", "60", "ucx_perftest", address, "-t", "tag_bw", "-s", size, "-n",
                                        iterations, "-w", "3", "-p", std::to_string(base_port + static_cast<int>(k))},
                                       streams[k].client_host, o));
    }
    for (const CapturedChild& client : clients)
      if (auto rate = perftest_bandwidth(finish_captured(client))) rates.push_back(*rate);
    for (pid_t server : servers) {
      if (server < 0) continue;
      kill(server, SIGKILL);
      waitpid(server, nullptr, 0);
    }
  }
  if (rates.size() != streams.size()) return std::nullopt;
  double sum = 0;
  for (double rate : rates) sum += rate;
  return PointToPointRow{both_ways ? "perftest 2-way" : "ucx_perftest", bytes, sum / static_cast<double>(rates.size())};
}

std::string mib(std::int64_t bytes) { return std::to_string(bytes >> 20) + " MiB"; }

std::string fixed(double value, int digits) {
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", digits, value);
  return text;
}

}  // namespace

Expected<AllReduceBenchReport> bench_allreduce(const AllReduceBenchOptions& options) {
  AllReduceBenchReport report;
  report.hosts = options.hosts;
  for (std::int64_t bytes : options.bytes) {
    auto ours = time_point_to_point(bytes, options);
    if (!ours) return ours.error();
    report.point_to_point.push_back(*ours);
    if (auto theirs = time_ucx_perftest(bytes, options, false)) report.point_to_point.push_back(*theirs);
    if (options.hosts > 1)
      if (auto both = time_ucx_perftest(bytes, options, true)) report.point_to_point.push_back(*both);
  }
  for (int processes : options.processes) {
    for (std::int64_t bytes : options.bytes) {
      auto row = time_allreduce(processes, bytes, options);
      if (!row) return row.error();
      report.rows.push_back(*row);
    }
  }
  return report;
}

std::string format_allreduce_report(const AllReduceBenchReport& report) {
  std::vector<std::string> methods;
  for (const auto& p : report.point_to_point) {
    if (std::find(methods.begin(), methods.end(), p.method) == methods.end()) methods.push_back(p.method);
  }
  const auto bandwidth = [&](const std::string& method, std::int64_t bytes) {
    for (const auto& p : report.point_to_point) {
      if (p.method == method && p.bytes == bytes) return p.bandwidth;
    }
    return 0.0;
  };
  std::ostringstream out;
  char line[160];
  out << (report.hosts > 1 ? "point-to-point bandwidth, one way, from a process on host 0 to one on host 1 (GB/s):\n"
                           : "point-to-point bandwidth, one way, two processes on this host (GB/s):\n");
  if (std::find(methods.begin(), methods.end(), "perftest 2-way") != methods.end())
    out << "  (perftest 2-way: host 0 to host 1 and host 1 to host 0 at the same time, each way's, as a ring's\n"
        << "  neighbours send and receive at once)\n";
  std::snprintf(line, sizeof line, "  %8s", "message");
  out << line;
  for (const auto& m : methods) {
    std::snprintf(line, sizeof line, " %15s", m.c_str());
    out << line;
  }
  out << "\n";
  std::vector<std::int64_t> sizes;
  for (const auto& p : report.point_to_point) {
    if (std::find(sizes.begin(), sizes.end(), p.bytes) == sizes.end()) sizes.push_back(p.bytes);
  }
  for (std::int64_t bytes : sizes) {
    std::snprintf(line, sizeof line, "  %8s", mib(bytes).c_str());
    out << line;
    for (const auto& m : methods) {
      std::snprintf(line, sizeof line, " %15s", fixed(bandwidth(m, bytes) / 1e9, 2).c_str());
      out << line;
    }
    out << "\n";
  }
  if (report.hosts > 1)
    out << "ranks on " << report.hosts << " hosts, in blocks (rank r of n on host r*hosts/n):\n";
  out << "all-reduce, f32 sum, busbw = 2(n-1)/n * bytes / median time; interleaved with each iteration, in the\n"
      << "  same processes: the ring with every chunk as a message, and streams of the same size between ranks 0\n"
      << "  and 1, one way and both ways at once (ratios to each way's rate per iteration); last columns:\n"
      << "  busbw / the separate runs' p2p of that size:\n";
  std::snprintf(line, sizeof line, "  %5s %8s %9s %11s %12s %9s %10s %9s", "procs", "size", "time ms", "busbw GB/s",
                "messages ms", "x faster", "/ stream", "/ 2-way");
  out << line;
  for (const auto& m : methods) {
    std::snprintf(line, sizeof line, " %15s", ("/ " + m).c_str());
    out << line;
  }
  out << "\n";
  for (const auto& r : report.rows) {
    std::snprintf(line, sizeof line, "  %5d %8s %9.3f %11.2f %12.3f %9.2f %10.2f %9.2f", r.processes,
                  mib(r.bytes).c_str(), r.seconds * 1e3, r.busbw / 1e9, r.messages_seconds * 1e3, r.speedup,
                  r.stream_ratio, r.two_way_ratio);
    out << line;
    for (const auto& m : methods) {
      const double p2p = bandwidth(m, r.bytes);
      std::snprintf(line, sizeof line, " %15s", p2p > 0 ? fixed(r.busbw / p2p, 2).c_str() : "-");
      out << line;
    }
    out << "\n";
  }
  return out.str();
}

}  // namespace troupe::comm
