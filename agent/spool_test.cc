// The agent's spool: a written result survives, can be listed and read back, and is removed on ack.
#include "agent/spool.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "common/ids.h"
#include "schema/result.capnp.h"

namespace servesweep::agent {
namespace {

TEST(Spool, WriteListReadRemove) {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("servesweep-spool-" + std::to_string(::getpid()) + RandomHex(6)))
                              .string();
  Spool spool(dir);
  ASSERT_TRUE(spool.Init().ok());
  capnp::MallocMessageBuilder message;
  auto result = message.initRoot<schema::RunResult>();
  result.setRunId("sweep-0001-abcd");
  result.setAttempt(3);
  result.initRecord().setCompleted(17);
  ASSERT_TRUE(spool.Write("sweep-0001-abcd", 3, message).ok());

  const auto entries = spool.List();
  ASSERT_EQ(entries.size(), 1u);
  EXPECT_EQ(entries[0].run_id, "sweep-0001-abcd");
  EXPECT_EQ(entries[0].attempt, 3u);
  std::string bytes;
  ASSERT_TRUE(spool.Read(entries[0], &bytes).ok());
  auto words = kj::heapArray<capnp::word>(bytes.size() / sizeof(capnp::word));
  std::memcpy(words.begin(), bytes.data(), bytes.size());
  capnp::FlatArrayMessageReader reader(words);
  EXPECT_EQ(reader.getRoot<schema::RunResult>().getRecord().getCompleted(), 17u);

  spool.Remove("sweep-0001-abcd", 3);
  EXPECT_TRUE(spool.List().empty());
  std::filesystem::remove_all(dir);
}

TEST(Spool, WriteFailureLeavesNoPartialFile) {
  Spool spool("/proc/servesweep-cannot-write-here");
  capnp::MallocMessageBuilder message;
  message.initRoot<schema::RunResult>().setRunId("x");
  Status status = spool.Write("x", 1, message);
  EXPECT_FALSE(status.ok());
  EXPECT_NE(status.message().find("cannot create"), std::string::npos) << status.message();
}

}  // namespace
}  // namespace servesweep::agent
