#include "monitor/metrics.hpp"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <thread>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "compute/check.hpp"
#include "compute/resident_memory.hpp"

namespace troupe::monitor {
namespace {

using Clock = std::chrono::steady_clock;

// From a 1 ms step (a tiny model) to a slow GPT-2 step on CPU: 1-2.5-5 per decade.
const prometheus::Histogram::BucketBoundaries step_buckets{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25,
                                                           0.5,   1,      2.5,   5,    10,    25,   50,  100};

prometheus::Labels constant_labels(const MetricsIdentity& identity) {
  return {{"job", identity.job}, {"node", std::to_string(identity.node)}};
}

std::vector<prometheus::ClientMetric::Label> label_list(const prometheus::Labels& labels) {
  std::vector<prometheus::ClientMetric::Label> list;
  for (const auto& [name, value] : labels) list.push_back({name, value});
  return list;
}

prometheus::ClientMetric sample(std::vector<prometheus::ClientMetric::Label> labels, double value, bool counter) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  if (counter)
    metric.counter.value = value;
  else
    metric.gauge.value = value;
  return metric;
}

}  // namespace

// The families every worker's series belong to (the registry owns them).
struct MetricFamilies {
  prometheus::Family<prometheus::Histogram>* step_seconds;
  prometheus::Family<prometheus::Counter>* steps;
  prometheus::Family<prometheus::Gauge>* step;
  prometheus::Family<prometheus::Gauge>* tokens_per_second;
  prometheus::Family<prometheus::Gauge>* loss;
  prometheus::Family<prometheus::Gauge>* learning_rate;
  prometheus::Family<prometheus::Gauge>* grad_norm;
  prometheus::Family<prometheus::Gauge>* mfu;
  prometheus::Family<prometheus::Gauge>* peak_flops;
  prometheus::Family<prometheus::Gauge>* bubble_fraction;
  prometheus::Family<prometheus::Histogram>* checkpoint_seconds;
  prometheus::Family<prometheus::Counter>* checkpoint_bytes;
  prometheus::Family<prometheus::Counter>* outer_syncs;
  prometheus::Family<prometheus::Counter>* outer_bytes;
  prometheus::Family<prometheus::Gauge>* islands;
  prometheus::Family<prometheus::Counter>* expert_slots;
  prometheus::Family<prometheus::Gauge>* load_imbalance;
  prometheus::Family<prometheus::Gauge>* batch_share;
  prometheus::Family<prometheus::Gauge>* micro_batch_seconds;
  prometheus::Family<prometheus::Counter>* failures;
  prometheus::Family<prometheus::Counter>* recoveries;
  prometheus::Family<prometheus::Counter>* restarts;

  MetricFamilies(prometheus::Registry& registry, const prometheus::Labels& labels) {
    auto gauge = [&](const char* name, const char* help) {
      return &prometheus::BuildGauge().Name(name).Help(help).Labels(labels).Register(registry);
    };
    auto counter = [&](const char* name, const char* help) {
      return &prometheus::BuildCounter().Name(name).Help(help).Labels(labels).Register(registry);
    };
    auto histogram = [&](const char* name, const char* help) {
      return &prometheus::BuildHistogram().Name(name).Help(help).Labels(labels).Register(registry);
    };
    step_seconds = histogram("troupe_step_seconds", "wall time of an optimizer step, gradient sums included");
    steps = counter("troupe_steps_total", "optimizer steps this process has finished");
    step = gauge("troupe_step", "the last step finished, counted from the run's start (resumed steps included)");
    tokens_per_second =
        gauge("troupe_tokens_per_second", "the job's tokens per second over the last step (every rank reports the job's)");
    loss = gauge("troupe_loss", "training loss of the last step");
    learning_rate = gauge("troupe_learning_rate", "learning rate of the last step");
    grad_norm = gauge("troupe_grad_norm", "global gradient norm of the last step, before clipping");
    mfu = gauge("troupe_mfu",
                "model FLOPs utilisation of the last step: tokens/s x (6N + 12 L C T) / (ranks x troupe_peak_flops)");
    peak_flops = gauge("troupe_peak_flops", "peak FLOP/s of a rank, the MFU's denominator (sgemm measured or configured)");
    bubble_fraction =
        gauge("troupe_pipeline_bubble_fraction", "idle share of the last step's pipeline schedule on this stage");
    checkpoint_seconds = histogram("troupe_checkpoint_save_seconds", "seconds a checkpoint save held training up");
    checkpoint_bytes = counter("troupe_checkpoint_bytes_total", "bytes of this rank's state written to checkpoints");
    outer_syncs = counter("troupe_diloco_outer_syncs_total", "DiLoCo outer syncs landed (one per fragment synced)");
    outer_bytes = counter("troupe_diloco_outer_bytes_total", "bytes this rank sent for DiLoCo's pseudo-gradient sums");
    islands = gauge("troupe_diloco_islands", "DiLoCo islands present in the last outer sync (0 before the first)");
    expert_slots = counter("troupe_moe_expert_slots_total",
                           "token-slots this rank's tokens sent to each expert of each MoE block (block counts the "
                           "model's MoE blocks from 0)");
    load_imbalance = gauge("troupe_moe_load_imbalance",
                           "the last step's most loaded expert's token-slots over the mean, in the worst MoE block "
                           "(1 = even; 0 without experts)");
    batch_share =
        gauge("troupe_batch_share", "share of each step's global batch this rank's data replica takes (train.balance)");
    micro_batch_seconds = gauge("troupe_micro_batch_seconds",
                                "seconds per micro-batch this rank's data replica measured (train.balance dynamic)");
    failures = counter("troupe_failures_total", "failures this node process saw or was told of, by kind");
    recoveries = counter("troupe_recoveries_total",
                         "recoveries of the job, by where the state came from and by path (in_place or restart)");
    restarts = counter("troupe_restarts_total", "times the job restarted its node processes");
  }
};

// What is read when Prometheus scrapes: the process's memory, the heartbeat's age and each
// worker's comm traffic (through the functions the workers registered).
class ScrapeTime : public prometheus::Collectable {
 public:
  explicit ScrapeTime(const prometheus::Labels& labels) : labels_(label_list(labels)) {}

  void heartbeat_sent() { last_heartbeat_ns_ = Clock::now().time_since_epoch().count(); }

  void read_memory_from(std::function<MemoryReading()> read) {
    std::lock_guard lock(mutex_);
    memory_ = std::move(read);
  }

  void add_comm(const prometheus::Labels& worker_labels, std::function<CommReading()> read) {
    std::lock_guard lock(mutex_);
    auto labels = labels_;
    for (const auto& [name, value] : worker_labels) labels.push_back({name, value});
    comm_.push_back({std::move(labels), std::move(read)});
  }

  void add_compression(const prometheus::Labels& worker_labels, std::function<CompressionReading()> read) {
    std::lock_guard lock(mutex_);
    auto labels = labels_;
    for (const auto& [name, value] : worker_labels) labels.push_back({name, value});
    // A worker that runs again in this process (respawned in place) replaces its source.
    std::erase_if(compression_, [&](const CompressionSource& source) { return source.labels == labels; });
    compression_.push_back({std::move(labels), std::move(read)});
  }

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> families;
    families.push_back({"troupe_resident_memory_bytes", "resident set size of the process (/proc/self/statm)",
                        prometheus::MetricType::Gauge, {sample(labels_, static_cast<double>(compute::resident_bytes()), false)}});
    if (const auto last = last_heartbeat_ns_.load(); last != 0) {
      const double age = std::chrono::duration<double>(Clock::now().time_since_epoch() - Clock::duration(last)).count();
      families.push_back({"troupe_heartbeat_age_seconds", "seconds since this node last sent the job a heartbeat",
                          prometheus::MetricType::Gauge, {sample(labels_, age, false)}});
    }
    std::lock_guard lock(mutex_);
    if (memory_) {
      prometheus::MetricFamily bytes{"troupe_memory_bytes", "bytes this process holds now, by kind (memory ledger)",
                                     prometheus::MetricType::Gauge, {}};
      prometheus::MetricFamily peak{"troupe_memory_peak_bytes",
                                    "the most bytes this process has held of each kind (memory ledger)",
                                    prometheus::MetricType::Gauge, {}};
      for (const MemoryFigure& figure : memory_()) {
        auto labels = labels_;
        labels.push_back({"device", figure.device});
        labels.push_back({"kind", figure.kind});
        bytes.metric.push_back(sample(labels, static_cast<double>(figure.bytes), false));
        peak.metric.push_back(sample(labels, static_cast<double>(figure.peak), false));
      }
      families.push_back(std::move(bytes));
      families.push_back(std::move(peak));
    }
    if (!compression_.empty()) {
      prometheus::MetricFamily wire{"troupe_compress_wire_bytes_total",
                                    "bytes the data-parallel gradient sums carried (compressed where they were)",
                                    prometheus::MetricType::Counter, {}};
      prometheus::MetricFamily plain{"troupe_compress_plain_bytes_total",
                                     "bytes the same gradient sums would have carried uncompressed",
                                     prometheus::MetricType::Counter, {}};
      prometheus::MetricFamily seconds{"troupe_compress_seconds_total",
                                       "seconds spent compressing and decompressing gradients",
                                       prometheus::MetricType::Counter, {}};
      for (const auto& [labels, read] : compression_) {
        const CompressionReading reading = read();
        wire.metric.push_back(sample(labels, static_cast<double>(reading.wire_bytes), true));
        plain.metric.push_back(sample(labels, static_cast<double>(reading.plain_bytes), true));
        seconds.metric.push_back(sample(labels, reading.seconds, true));
      }
      families.push_back(std::move(wire));
      families.push_back(std::move(plain));
      families.push_back(std::move(seconds));
    }
    if (comm_.empty()) return families;
    prometheus::MetricFamily operations{"troupe_comm_operations_total",
                                        "comm operations finished, by op (collective kind, or send/recv)",
                                        prometheus::MetricType::Counter,
                                        {}};
    prometheus::MetricFamily bytes{"troupe_comm_bytes_total",
                                   "bytes of finished comm operations: a collective's buffer, a message's payload",
                                   prometheus::MetricType::Counter,
                                   {}};
    prometheus::MetricFamily seconds{"troupe_comm_seconds_total",
                                     "seconds from post to completion of finished comm operations, by op",
                                     prometheus::MetricType::Counter,
                                     {}};
    prometheus::MetricFamily tp_operations{"troupe_comm_tp_operations_total",
                                           "of troupe_comm_operations_total, the collectives over the tensor shards' group",
                                           prometheus::MetricType::Counter,
                                           {}};
    prometheus::MetricFamily tp_bytes{"troupe_comm_tp_bytes_total",
                                      "of troupe_comm_bytes_total, the collectives over the tensor shards' group",
                                      prometheus::MetricType::Counter,
                                      {}};
    prometheus::MetricFamily tp_seconds{"troupe_comm_tp_seconds_total",
                                        "of troupe_comm_seconds_total, the collectives over the tensor shards' group",
                                        prometheus::MetricType::Counter,
                                        {}};
    prometheus::MetricFamily cp_operations{"troupe_comm_cp_operations_total",
                                           "a context group's ring shifts and all-to-alls, by op",
                                           prometheus::MetricType::Counter,
                                           {}};
    prometheus::MetricFamily cp_bytes{"troupe_comm_cp_bytes_total",
                                      "bytes this rank sent in a context group's ring shifts and all-to-alls",
                                      prometheus::MetricType::Counter,
                                      {}};
    prometheus::MetricFamily cp_seconds{"troupe_comm_cp_seconds_total",
                                        "seconds this rank spent posting and waiting for a context group's exchanges",
                                        prometheus::MetricType::Counter,
                                        {}};
    prometheus::MetricFamily moe_operations{"troupe_moe_all_to_all_operations_total",
                                            "an expert group's all-to-alls: counts, dispatches and combines",
                                            prometheus::MetricType::Counter,
                                            {}};
    prometheus::MetricFamily moe_bytes{"troupe_moe_all_to_all_bytes_total",
                                       "bytes this rank sent in an expert group's all-to-alls",
                                       prometheus::MetricType::Counter,
                                       {}};
    prometheus::MetricFamily moe_seconds{
        "troupe_moe_all_to_all_seconds_total",
        "seconds this rank spent posting and waiting for an expert group's all-to-alls",
        prometheus::MetricType::Counter,
        {}};
    prometheus::MetricFamily requests{"troupe_comm_requests_in_flight",
                                      "sends and receives posted to the comm engine and not complete",
                                      prometheus::MetricType::Gauge,
                                      {}};
    prometheus::MetricFamily collectives{"troupe_comm_collectives_in_flight",
                                         "collectives posted to the comm engine and not finished",
                                         prometheus::MetricType::Gauge,
                                         {}};
    for (const auto& [labels, read] : comm_) {
      const CommReading reading = read();
      for (const TrafficReading& op : reading.ops) {
        auto op_labels = labels;
        op_labels.push_back({"op", op.op});
        operations.metric.push_back(sample(op_labels, static_cast<double>(op.operations), true));
        bytes.metric.push_back(sample(op_labels, static_cast<double>(op.bytes), true));
        seconds.metric.push_back(sample(op_labels, op.seconds, true));
      }
      for (const TrafficReading& op : reading.tensor_parallel_ops) {
        auto op_labels = labels;
        op_labels.push_back({"op", op.op});
        tp_operations.metric.push_back(sample(op_labels, static_cast<double>(op.operations), true));
        tp_bytes.metric.push_back(sample(op_labels, static_cast<double>(op.bytes), true));
        tp_seconds.metric.push_back(sample(op_labels, op.seconds, true));
      }
      for (const TrafficReading& op : reading.context_ops) {
        auto op_labels = labels;
        op_labels.push_back({"op", op.op});
        cp_operations.metric.push_back(sample(op_labels, static_cast<double>(op.operations), true));
        cp_bytes.metric.push_back(sample(op_labels, static_cast<double>(op.bytes), true));
        cp_seconds.metric.push_back(sample(op_labels, op.seconds, true));
      }
      const TrafficReading& moe = reading.expert_all_to_all;
      moe_operations.metric.push_back(sample(labels, static_cast<double>(moe.operations), true));
      moe_bytes.metric.push_back(sample(labels, static_cast<double>(moe.bytes), true));
      moe_seconds.metric.push_back(sample(labels, moe.seconds, true));
      requests.metric.push_back(sample(labels, static_cast<double>(reading.requests_in_flight), false));
      collectives.metric.push_back(sample(labels, static_cast<double>(reading.collectives_in_flight), false));
    }
    for (auto* family : {&operations, &bytes, &seconds, &tp_operations, &tp_bytes, &tp_seconds, &cp_operations,
                         &cp_bytes, &cp_seconds, &moe_operations, &moe_bytes, &moe_seconds, &requests, &collectives})
      if (!family->metric.empty()) families.push_back(std::move(*family));
    return families;
  }

 private:
  struct CommSource {
    std::vector<prometheus::ClientMetric::Label> labels;
    std::function<CommReading()> read;
  };

  std::vector<prometheus::ClientMetric::Label> labels_;
  std::atomic<Clock::rep> last_heartbeat_ns_{0};
  mutable std::mutex mutex_;
  std::function<MemoryReading()> memory_;
  std::vector<CommSource> comm_;
  struct CompressionSource {
    std::vector<prometheus::ClientMetric::Label> labels;
    std::function<CompressionReading()> read;
  };
  std::vector<CompressionSource> compression_;
};

WorkerMetrics::WorkerMetrics(MetricFamilies& f, int rank, const std::string& role, ScrapeTime& scrape_time)
    : labels_{{"rank", std::to_string(rank)}, {"role", role}},
      scrape_time_(scrape_time),
      step_seconds_(f.step_seconds->Add(labels_, step_buckets)),
      steps_(f.steps->Add(labels_)),
      step_(f.step->Add(labels_)),
      tokens_per_second_(f.tokens_per_second->Add(labels_)),
      loss_(f.loss->Add(labels_)),
      learning_rate_(f.learning_rate->Add(labels_)),
      grad_norm_(f.grad_norm->Add(labels_)),
      mfu_(f.mfu->Add(labels_)),
      peak_flops_(f.peak_flops->Add(labels_)),
      bubble_fraction_(f.bubble_fraction->Add(labels_)),
      checkpoint_seconds_(f.checkpoint_seconds->Add(labels_, step_buckets)),
      checkpoint_bytes_(f.checkpoint_bytes->Add(labels_)),
      outer_syncs_(f.outer_syncs->Add(labels_)),
      outer_bytes_(f.outer_bytes->Add(labels_)),
      islands_(f.islands->Add(labels_)),
      expert_slots_family_(*f.expert_slots),
      load_imbalance_(f.load_imbalance->Add(labels_)),
      batch_share_(f.batch_share->Add(labels_)),
      micro_batch_seconds_(f.micro_batch_seconds->Add(labels_)) {}

void WorkerMetrics::step_done(long step, double seconds, std::int64_t tokens, double loss, double lr,
                              double grad_norm) {
  step_seconds_.Observe(seconds);
  steps_.Increment();
  step_.Set(static_cast<double>(step));
  if (seconds > 0) {
    const double tokens_per_second = static_cast<double>(tokens) / seconds;
    tokens_per_second_.Set(tokens_per_second);
    if (job_peak_flops_ > 0) mfu_.Set(mfu(tokens_per_second));
  }
  loss_.Set(loss);
  learning_rate_.Set(lr);
  grad_norm_.Set(grad_norm);
}

void WorkerMetrics::set_mfu_basis(double flops_per_token, int ranks, double peak_flops) {
  flops_per_token_ = flops_per_token;
  job_peak_flops_ = ranks * peak_flops;
  peak_flops_.Set(peak_flops);
}

double WorkerMetrics::mfu(double tokens_per_second) const {
  return job_peak_flops_ > 0 ? tokens_per_second * flops_per_token_ / job_peak_flops_ : 0;
}

void WorkerMetrics::set_bubble_fraction(double fraction) { bubble_fraction_.Set(fraction); }

void WorkerMetrics::checkpoint_saved(double seconds, std::uint64_t bytes) {
  checkpoint_seconds_.Observe(seconds);
  checkpoint_bytes_.Increment(static_cast<double>(bytes));
}

void WorkerMetrics::outer_synced(std::uint64_t bytes, int islands) {
  outer_syncs_.Increment();
  outer_bytes_.Increment(static_cast<double>(bytes));
  islands_.Set(islands);
}

void WorkerMetrics::experts_routed(const std::vector<std::int64_t>& slots, int experts, double load_imbalance) {
  if (expert_slots_.empty())
    for (std::size_t i = 0; i < slots.size(); ++i) {
      auto labels = labels_;
      labels["block"] = std::to_string(i / static_cast<std::size_t>(experts));
      labels["expert"] = std::to_string(i % static_cast<std::size_t>(experts));
      expert_slots_.push_back(&expert_slots_family_.Add(labels));
    }
  TROUPE_CHECK(slots.size() == expert_slots_.size(), "a step routed to another count of experts");
  for (std::size_t i = 0; i < slots.size(); ++i) expert_slots_[i]->Increment(static_cast<double>(slots[i]));
  load_imbalance_.Set(load_imbalance);
}

void WorkerMetrics::set_batch_share(double share) { batch_share_.Set(share); }

void WorkerMetrics::set_micro_batch_seconds(double seconds) { micro_batch_seconds_.Set(seconds); }

void WorkerMetrics::read_comm_from(std::function<CommReading()> read) { scrape_time_.add_comm(labels_, std::move(read)); }

void WorkerMetrics::read_compression_from(std::function<CompressionReading()> read) {
  scrape_time_.add_compression(labels_, std::move(read));
}

Expected<std::unique_ptr<NodeMetrics>> NodeMetrics::serve(const MetricsEndpoint& endpoint, MetricsIdentity identity) {
  const std::string address = endpoint.bind + ":" + std::to_string(endpoint.port);
  // inet_pton refuses what a lax parser would wrap (numbers past 255): checked here for the message.
  in_addr parsed{};
  if (::inet_pton(AF_INET, endpoint.bind.c_str(), &parsed) != 1)
    return Error{"cannot serve metrics on " + address + ": '" + endpoint.bind + "' is not an IPv4 address"};
  if (endpoint.port < 0 || endpoint.port > 65535)
    return Error{"cannot serve metrics on " + address + ": the port is not in 0-65535"};
  // Every family exists before the server listens, so the first scrape finds them all.
  std::unique_ptr<NodeMetrics> metrics(new NodeMetrics(endpoint.bind, std::move(identity)));
  NodeMetrics* self = metrics.get();
  auto server = MetricsHttpServer::start(endpoint.bind, endpoint.port, [self] {
    std::vector<prometheus::MetricFamily> families = self->registry_->Collect();
    for (prometheus::MetricFamily& family : self->scrape_time_->Collect()) families.push_back(std::move(family));
    return prometheus::TextSerializer().Serialize(families);
  });
  if (!server)
    return Error{"cannot serve metrics on " + address + ": the port is in use or the address is not this host's"};
  metrics->port_ = (*server)->port();
  metrics->server_ = std::move(*server);
  return metrics;
}

NodeMetrics::NodeMetrics(std::string bind, MetricsIdentity identity)
    : bind_(std::move(bind)),
      registry_(std::make_shared<prometheus::Registry>()),
      scrape_time_(std::make_shared<ScrapeTime>(constant_labels(identity))),
      families_(std::make_unique<MetricFamilies>(*registry_, constant_labels(identity))) {
  families_->restarts->Add({});  // 0 until told otherwise: present from the start
}

NodeMetrics::~NodeMetrics() = default;

std::string NodeMetrics::url() const { return "http://" + bind_ + ":" + std::to_string(port_) + "/metrics"; }

WorkerMetrics& NodeMetrics::add_worker(int rank, const std::string& role) {
  workers_.push_back(std::unique_ptr<WorkerMetrics>(new WorkerMetrics(*families_, rank, role, *scrape_time_)));
  return *workers_.back();
}

void NodeMetrics::heartbeat_sent() { scrape_time_->heartbeat_sent(); }

void NodeMetrics::count_failure(const std::string& kind, long count) {
  families_->failures->Add({{"kind", kind}}).Increment(static_cast<double>(count));
}

void NodeMetrics::count_recovery(const std::string& source, const std::string& path, long count) {
  families_->recoveries->Add({{"source", source}, {"path", path}}).Increment(static_cast<double>(count));
}

void NodeMetrics::count_restarts(long restarts) {
  families_->restarts->Add({}).Increment(static_cast<double>(restarts));
}

void NodeMetrics::read_memory_from(std::function<MemoryReading()> read) { scrape_time_->read_memory_from(std::move(read)); }

}  // namespace troupe::monitor
