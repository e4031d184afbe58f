// Engine processes' provenance (agent/engine_processes.h): version lines and model fingerprints.
#include "agent/engine_processes.h"

#include <gtest/gtest.h>

#include <fstream>

namespace servesweep::agent {
namespace {

TEST(Provenance, ParsesVersionLinesAndFingerprintsFiles) {
  std::string version, commit;
  ParseVersionOutput("load_backend: loaded CPU backend\nversion: 1 (4ba787ec9)\nbuilt with cc\n",
                     &version, &commit);
  EXPECT_EQ(version, "1 (4ba787ec9)");
  EXPECT_EQ(commit, "4ba787ec9");
  ParseVersionOutput("version: 0.6.0-dev (build 0, commit unknown)\nbuilt with GNU 12\n", &version,
                     &commit);
  EXPECT_EQ(version, "0.6.0-dev (build 0, commit unknown)");
  EXPECT_EQ(commit, "unknown");
  ParseVersionOutput("0.33.0\n", &version, &commit);
  EXPECT_EQ(version, "0.33.0");
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/servesweep-provenance-model.gguf";
  std::ofstream(file) << "GGUF....";
  const std::string fingerprint = FingerprintFile(file);
  EXPECT_EQ(fingerprint.rfind("fnv1a64:", 0), 0u) << fingerprint;
  EXPECT_NE(fingerprint.find("8 bytes"), std::string::npos) << fingerprint;
  EXPECT_EQ(FingerprintFile(dir + "/servesweep-provenance-missing"), "");
}

}  // namespace
}  // namespace servesweep::agent
