#pragma once
// Simulated hosts for the [cluster] tests: scripts/netns-cluster.sh brought up for one test case
// and taken down when it ends, however it ends (a leftover of a killed earlier run is removed
// first), and the arguments that make `troupe launch` start its nodes on those hosts.

#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "apps/run_troupe.hpp"
#include "support/run_process.hpp"

namespace troupe::test {

inline const std::string cluster_script = TROUPE_SOURCE_DIR "/scripts/netns-cluster.sh";
// The bridge's address: where a job process on this machine listens so every host reaches it.
inline const std::string cluster_bridge = "10.213.7.1";

inline ProcessResult cluster_command(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"/bin/bash", cluster_script};
  argv.insert(argv.end(), args.begin(), args.end());
  return run_process(argv, "/", std::chrono::seconds(60));
}

class Cluster {
 public:
  explicit Cluster(int hosts, const std::vector<std::string>& shaping = {}) {
    cluster_command({"down"});
    std::vector<std::string> up{"up", std::to_string(hosts)};
    up.insert(up.end(), shaping.begin(), shaping.end());
    const ProcessResult made = cluster_command(up);
    INFO(made.out << made.err);
    REQUIRE(made.exit_code == 0);
  }
  ~Cluster() { cluster_command({"down"}); }
  Cluster(const Cluster&) = delete;
  Cluster& operator=(const Cluster&) = delete;

  // `troupe launch` with the host file `hosts` (written in `dir`), its nodes started on the hosts.
  static std::vector<std::string> launch(const TempDir& dir, const std::string& hosts) {
    return {"launch",   "--hostfile", dir.write("hosts", hosts), "--bind", cluster_bridge,
            "--launcher", cluster_script + " exec {host} {command}"};
  }
};

}  // namespace troupe::test
