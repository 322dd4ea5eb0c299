#include "monitor/metrics.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <fstream>
#include <thread>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace troupe::monitor {
namespace {

// From a 1 ms step (a tiny model) to a slow GPT-2 step on CPU: 1-2.5-5 per decade.
const prometheus::Histogram::BucketBoundaries step_buckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                           0.5,   1,      2.5,   5,    10,    25,   50,  100};

prometheus::Labels constant_labels(const MetricsIdentity& identity) {
  return {{"job", identity.job}, {"node", std::to_string(identity.node)}};
}

// Resident pages (statm's second field) times the page size; 0 when /proc is not there.
double resident_memory_bytes() {
  std::ifstream statm("/proc/self/statm");
  long total_pages = 0, resident_pages = 0;
  if (!(statm >> total_pages >> resident_pages)) return 0;
  return static_cast<double>(resident_pages) * static_cast<double>(::sysconf(_SC_PAGESIZE));
}

// Opens and closes a TCP connection to address:port; whether it is accepted does not matter.
void knock(const std::string& address, int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return;
  sockaddr_in target{};
  target.sin_family = AF_INET;
  target.sin_port = htons(static_cast<std::uint16_t>(port));
  ::inet_pton(AF_INET, address.c_str(), &target.sin_addr);
  ::connect(fd, reinterpret_cast<sockaddr*>(&target), sizeof target);
  ::close(fd);
}

}  // namespace

// What the process measures about itself at scrape time.
class NodeMetrics::ProcessCollectable : public prometheus::Collectable {
 public:
  explicit ProcessCollectable(const MetricsIdentity& identity) {
    for (const auto& [name, value] : constant_labels(identity)) labels_.push_back({name, value});
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    prometheus::ClientMetric resident;
    resident.label = labels_;
    resident.gauge.value = resident_memory_bytes();
    return {{"troupe_resident_memory_bytes", "resident set size of the process (/proc/self/statm)",
             prometheus::MetricType::Gauge, {resident}}};
  }

 private:
  std::vector<prometheus::ClientMetric::Label> labels_;
};

WorkerMetrics::WorkerMetrics(prometheus::Histogram& step_seconds, prometheus::Counter& steps, prometheus::Gauge& step,
                             prometheus::Gauge& tokens_per_second, prometheus::Gauge& loss,
                             prometheus::Gauge& learning_rate, prometheus::Gauge& grad_norm)
    : step_seconds_(step_seconds),
      steps_(steps),
      step_(step),
      tokens_per_second_(tokens_per_second),
      loss_(loss),
      learning_rate_(learning_rate),
      grad_norm_(grad_norm) {}

void WorkerMetrics::step_done(long step, double seconds, std::int64_t tokens, double loss, double lr,
                              double grad_norm) {
  step_seconds_.Observe(seconds);
  steps_.Increment();
  step_.Set(static_cast<double>(step));
  if (seconds > 0) tokens_per_second_.Set(static_cast<double>(tokens) / seconds);
  loss_.Set(loss);
  learning_rate_.Set(lr);
  grad_norm_.Set(grad_norm);
}

Expected<std::unique_ptr<NodeMetrics>> NodeMetrics::serve(const MetricsEndpoint& endpoint, MetricsIdentity identity) {
  const std::string address = endpoint.bind + ":" + std::to_string(endpoint.port);
  // civetweb reads any a.b.c.d, wrapping numbers past 255, so the address is checked here.
  in_addr parsed{};
  if (::inet_pton(AF_INET, endpoint.bind.c_str(), &parsed) != 1)
    return Error{"cannot serve metrics on " + address + ": '" + endpoint.bind + "' is not an IPv4 address"};
  if (endpoint.port < 0 || endpoint.port > 65535)
    return Error{"cannot serve metrics on " + address + ": the port is not in 0-65535"};
  std::unique_ptr<prometheus::Exposer> exposer;
  try {
    exposer = std::make_unique<prometheus::Exposer>(address, 1);  // one thread: scrapes are seconds apart
  } catch (const std::exception&) {
    return Error{"cannot serve metrics on " + address + ": the port is in use or the address is not this host's"};
  }
  return std::unique_ptr<NodeMetrics>(new NodeMetrics(std::move(exposer), endpoint.bind, std::move(identity)));
}

NodeMetrics::NodeMetrics(std::unique_ptr<prometheus::Exposer> exposer, std::string bind, MetricsIdentity identity)
    : bind_(std::move(bind)),
      registry_(std::make_shared<prometheus::Registry>()),
      process_(std::make_shared<ProcessCollectable>(identity)),
      exposer_(std::move(exposer)) {
  const std::vector<int> ports = exposer_->GetListeningPorts();
  port_ = ports.empty() ? 0 : ports.front();
  const prometheus::Labels labels = constant_labels(identity);
  step_seconds_ = &prometheus::BuildHistogram()
                       .Name("troupe_step_seconds")
                       .Help("wall time of an optimizer step, gradient sums included")
                       .Labels(labels)
                       .Register(*registry_);
  steps_ = &prometheus::BuildCounter()
                .Name("troupe_steps_total")
                .Help("optimizer steps this process has finished")
                .Labels(labels)
                .Register(*registry_);
  step_ = &prometheus::BuildGauge()
               .Name("troupe_step")
               .Help("the last step finished, counted from the run's start (resumed steps included)")
               .Labels(labels)
               .Register(*registry_);
  tokens_per_second_ = &prometheus::BuildGauge()
                            .Name("troupe_tokens_per_second")
                            .Help("the job's tokens per second over the last step (every rank reports the job's)")
                            .Labels(labels)
                            .Register(*registry_);
  loss_ = &prometheus::BuildGauge()
               .Name("troupe_loss")
               .Help("training loss of the last step")
               .Labels(labels)
               .Register(*registry_);
  learning_rate_ = &prometheus::BuildGauge()
                        .Name("troupe_learning_rate")
                        .Help("learning rate of the last step")
                        .Labels(labels)
                        .Register(*registry_);
  grad_norm_ = &prometheus::BuildGauge()
                    .Name("troupe_grad_norm")
                    .Help("global gradient norm of the last step, before clipping")
                    .Labels(labels)
                    .Register(*registry_);
  exposer_->RegisterCollectable(registry_);
  exposer_->RegisterCollectable(process_);
}

NodeMetrics::~NodeMetrics() {
  // civetweb's accept loop polls in 2 s quanta and its stop waits until the loop looks again,
  // which would hold up every process's exit: connections wake the loop until it has stopped.
  std::atomic<bool> stopped = false;
  std::thread waker([this, &stopped] {
    while (!stopped) {
      knock(bind_ == "0.0.0.0" ? "127.0.0.1" : bind_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  });
  exposer_.reset();
  stopped = true;
  waker.join();
}

std::string NodeMetrics::url() const { return "http://" + bind_ + ":" + std::to_string(port_) + "/metrics"; }

WorkerMetrics& NodeMetrics::add_worker(int rank, const std::string& role) {
  const prometheus::Labels labels{{"rank", std::to_string(rank)}, {"role", role}};
  workers_.push_back(std::unique_ptr<WorkerMetrics>(
      new WorkerMetrics(step_seconds_->Add(labels, step_buckets), steps_->Add(labels), step_->Add(labels),
                        tokens_per_second_->Add(labels), loss_->Add(labels), learning_rate_->Add(labels),
                        grad_norm_->Add(labels))));
  return *workers_.back();
}

}  // namespace troupe::monitor
