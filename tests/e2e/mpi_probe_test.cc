// The CPU network probe under a real `mpirun -np 2` (TCP over loopback, as between two nodes).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

TEST(MpiProbe, PingPongBetweenTwoRanksIsCorrectAndMeasured) {
  std::string output;
  const int status = RunShell(
      "OMPI_MCA_btl=self,tcp OMPI_MCA_btl_tcp_if_include=lo mpirun --allow-run-as-root "
      "--oversubscribe -np 2 " SERVESWEEP_MPI_PROBE,
      &output);
  ASSERT_EQ(status, 0) << output;
  std::istringstream lines(output);
  std::string line;
  size_t sizes = 0;
  uint64_t last_bytes = 0;
  while (std::getline(lines, line)) {
    if (line.empty() || line.front() != '{') continue;  // mpirun's own chatter, if any
    const auto j = nlohmann::json::parse(line);
    EXPECT_EQ(j.at("probe"), "mpi.pingpong");
    EXPECT_EQ(j.at("peer"), 1);
    EXPECT_TRUE(j.at("ok").get<bool>());
    EXPECT_GT(j.at("bytes").get<uint64_t>(), last_bytes);
    last_bytes = j.at("bytes").get<uint64_t>();
    EXPECT_GT(j.at("latency_us").get<double>(), 0);
    EXPECT_GT(j.at("bandwidth_gbps").get<double>(), 0);
    ++sizes;
  }
  EXPECT_EQ(sizes, 11u);  // 8 B to 8 MiB, x4
  EXPECT_EQ(last_bytes, 8u << 20);
}

TEST(MpiProbe, RefusesASingleRank) {
  std::string output;
  const int status =
      RunShell("mpirun --allow-run-as-root --oversubscribe -np 1 " SERVESWEEP_MPI_PROBE, &output);
  EXPECT_NE(status, 0);
  EXPECT_NE(output.find("expected at least 2 ranks, found 1"), std::string::npos) << output;
}

}  // namespace
}  // namespace servesweep::testing
