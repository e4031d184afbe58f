// Virtual runs (agent/virtual_run.h): what the model cannot simulate is refused.
#include "agent/virtual_run.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

namespace servesweep::agent {
namespace {

TEST(VirtualRun, RefusesTimedWindowsAndSessions) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setModel("meta-llama/Llama-3.1-8B-Instruct");
  spec.getSim().setHardware("h200");
  spec.getWorkload().setDurationS(30);
  SimulatedRun run;
  Status s = SimulateRun(spec.asReader(), "", &run);
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.message().find("cannot simulate duration_s"), std::string::npos) << s.message();
  spec.getWorkload().setDurationS(0);
  spec.getWorkload().setSessions(4);
  s = SimulateRun(spec.asReader(), "", &run);
  EXPECT_NE(s.message().find("cannot simulate sessions"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace servesweep::agent
