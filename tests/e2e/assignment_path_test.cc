// The assignment path of a run placed on two agents, as the processes meet: the coordinator fills
// the Assign, the transport carries it as one frame, the agent reads its launch context from it,
// and the engine adapter plans each rank's processes. Golden text:
// tests/golden/engine_argv_two_agent_pd.txt (SERVESWEEP_UPDATE_GOLDEN=1 rewrites it).
#include <capnp/message.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <memory>

#include "agent/run_executor.h"
#include "coordinator/placement.h"
#include "engines/engine_adapter.h"
#include "engines/launch_plan.h"
#include "matrix/matrix_loader.h"
#include "testing/process_helpers.h"
#include "transport/envelope_codec.h"

namespace servesweep {
namespace {

// Disaggregated layouts over two agents, through the whole assignment path: the coordinator's
// FillAssign (placement order, each agent's announced address) -> the Assign envelope encoded as
// the wire frame the agent receives -> decoded -> the agent's LaunchContextFor -> the adapter. The
// router on the head must reach the instances on the other agent at that agent's own address.
// `old_coordinator`: the assignment carries the head's address only, as before peerAddresses.
std::string RenderTwoAgentPd(const std::vector<std::string>& addresses, bool old_coordinator) {
  std::string out;
  const std::vector<std::string> agent_ids = {"node-a", "node-b"};
  for (const char* engine : {"vllm", "sglang"}) {
    matrix::LoadedMatrix m;
    const std::string text = fmt::format(R"(name: golden
engine: {}
model: llama-70b
engine_config: {{dist_port: 30000}}
layout: {{tp: 4, prefill_instances: 2, decode_instances: 2, gpus_per_node: 8}}
workload: {{input_len: 16, output_len: 16, num_requests: 4, concurrency: 1}}
)",
                                         engine);
    Status s = matrix::ExpandMatrix("golden.yaml", text, &m);
    EXPECT_TRUE(s.ok()) << s.message();
    if (!s.ok()) return out;
    const auto spec = m.matrix().getRuns()[0];
    EXPECT_EQ(spec.getNodesNeeded(), 2u);
    out += fmt::format("== {} 2P2D tp 4 on agents {} at {}\n", engine, fmt::join(agent_ids, ", "),
                       fmt::join(addresses, ", "));
    for (uint32_t rank = 0; rank < agent_ids.size(); ++rank) {
      capnp::MallocMessageBuilder message;
      auto assign = NewEnvelope(message).initAssign();
      coordinator::FillAssign(spec, 1, rank, agent_ids, addresses, assign);
      if (old_coordinator) assign.initPeerAddresses(0);
      const zmq::message_t frame = EncodeFrame(message);
      std::unique_ptr<DecodedEnvelope> received;
      s = DecodeFrame(frame, &received);
      EXPECT_TRUE(s.ok()) << s.message();
      if (!s.ok()) return out;
      engines::LaunchContext context = agent::LaunchContextFor(received->envelope().getAssign());
      context.port = 8000;
      out += fmt::format(" {} rank {}:\n", rank == 0 ? "head" : "worker", rank);
      engines::EngineLaunch launch;
      const Status planned = engines::MakeEngineAdapter(engine)->Plan(context, &launch);
      out += engines::DescribeLaunch(launch, planned);
    }
  }
  return out;
}

TEST(AssignmentPath, TwoAgentDisaggregationGetsEveryAgentsAddressFromTheAssignment) {
  const std::string actual = RenderTwoAgentPd({"192.168.7.21", "192.168.7.22"}, false);
  const std::string path =
      std::string(SERVESWEEP_SOURCE_DIR) + "/tests/golden/engine_argv_two_agent_pd.txt";
  if (std::getenv("SERVESWEEP_UPDATE_GOLDEN") != nullptr) std::ofstream(path) << actual;
  EXPECT_EQ(actual, testing::ReadSourceFile("tests/golden/engine_argv_two_agent_pd.txt"))
      << "regenerate with SERVESWEEP_UPDATE_GOLDEN=1 and review the diff";
  // The decode instances are on the second agent, and the router says so.
  EXPECT_NE(actual.find("--decode http://192.168.7.22:30003"), std::string::npos) << actual;
  EXPECT_NE(actual.find("--prefill http://192.168.7.21:30001"), std::string::npos) << actual;
}

TEST(AssignmentPath, AnAssignmentWithoutAddressesFailsTheDisaggregatedRunWithItsReason) {
  const std::string actual = RenderTwoAgentPd({"192.168.7.21", "192.168.7.22"}, true);
  EXPECT_NE(actual.find("the router needs the address of agent rank 1"), std::string::npos)
      << actual;
}

}  // namespace
}  // namespace servesweep
