// Trace readers on samples of the real traces (tests/data: Azure 2023 conversation, CC-BY;
// Mooncake FAST'25 conversation, Apache-2.0), and trace expansion in the matrix.
#include "workload/trace_reader.h"

#include <gtest/gtest.h>

#include "testing/scratch_dir.h"

namespace servesweep::workload {
namespace {

const std::string kData = SERVESWEEP_SOURCE_DIR "/tests/data/";

TEST(TraceReader, ReadsTheAzureConversationTrace) {
  std::vector<TraceRequest> requests;
  ASSERT_TRUE(
      ReadTrace(kData + "azure_conv_sample.csv", TraceFormat::kAzureCsv, 0, &requests).ok());
  ASSERT_EQ(requests.size(), 20u);
  EXPECT_EQ(requests[0].offset_ns, 0);
  EXPECT_EQ(requests[0].input_len_tok, 374u);
  EXPECT_EQ(requests[0].output_len_tok, 44u);
  // 18:15:50.9951690 - 18:15:46.6805900
  EXPECT_EQ(requests[1].offset_ns, 4'314'579'000);
  EXPECT_EQ(requests[1].input_len_tok, 396u);
  EXPECT_EQ(requests[19].input_len_tok, 1353u);
  EXPECT_TRUE(requests[0].hash_ids.empty());
  ASSERT_TRUE(
      ReadTrace(kData + "azure_conv_sample.csv", TraceFormat::kAzureCsv, 3, &requests).ok());
  EXPECT_EQ(requests.size(), 3u);
}

TEST(TraceReader, ReadsTheMooncakeTraceWithPrefixBlocks) {
  std::vector<TraceRequest> requests;
  ASSERT_TRUE(ReadTrace(kData + "mooncake_conversation_sample.jsonl", TraceFormat::kMooncakeJsonl,
                        0, &requests)
                  .ok());
  ASSERT_EQ(requests.size(), 20u);
  EXPECT_EQ(requests[0].input_len_tok, 6758u);
  EXPECT_EQ(requests[0].output_len_tok, 500u);
  EXPECT_EQ(requests[0].hash_ids.size(), 14u);
  EXPECT_EQ(requests[1].hash_ids[0], 0u);  // shares its first 512-token block with request 0
  EXPECT_EQ(requests[19].offset_ns, 3'000'000'000);
}

TEST(TraceReader, ErrorsNameTheFileLineAndWhatWasFound) {
  testing::ScratchDir h("trace");
  const std::string bad_csv =
      h.WriteFile("bad.csv",
                  "TIMESTAMP,ContextTokens,GeneratedTokens\n"
                  "2023-11-16 18:15:46.68,374,44\n2023-11-16 18:15:47,many,44\n");
  std::vector<TraceRequest> requests;
  Status s = ReadTrace(bad_csv, TraceFormat::kAzureCsv, 0, &requests);
  EXPECT_NE(s.message().find("bad.csv:3: expected 'YYYY-MM-DD HH:MM:SS.fraction,<context tokens>,"
                             "<generated tokens>', found '2023-11-16 18:15:47,many,44'"),
            std::string::npos)
      << s.message();
  const std::string bad_jsonl = h.WriteFile("bad.jsonl", "{\"timestamp\": 0}\n");
  s = ReadTrace(bad_jsonl, TraceFormat::kMooncakeJsonl, 0, &requests);
  EXPECT_NE(s.message().find("bad.jsonl:1: expected a JSON object with timestamp, input_length"),
            std::string::npos)
      << s.message();
  TraceFormat format;
  EXPECT_NE(ParseTraceFormat("", "x.parquet", &format).message().find("expected trace_format"),
            std::string::npos);
}

TEST(TraceReader, ParsesTimestampsToTheNanosecond) {
  int64_t a = 0, b = 0;
  ASSERT_TRUE(ParseTimestampNs("2023-11-16 18:15:46.6805900", &a));
  ASSERT_TRUE(ParseTimestampNs("2023-11-16 18:15:47", &b));
  EXPECT_EQ(b - a, 319'410'000);
  EXPECT_FALSE(ParseTimestampNs("16/11/2023 18:15", &a));
}

// Found by fuzzing (fuzz/regressions/trace): timestamps whose nanoseconds do not fit in int64
// (year 9441, 1e300 ms) and numbers that are not whole were converted with undefined behaviour.
TEST(TraceReader, OutOfRangeTimestampsAndNumbersAreErrorsNotOverflows) {
  int64_t ns = 0;
  EXPECT_FALSE(ParseTimestampNs("9441-11-16 18:15:46.68", &ns));
  EXPECT_FALSE(ParseTimestampNs("1969-12-31 23:59:59", &ns));
  EXPECT_FALSE(ParseTimestampNs("2023-11-16 -1:15:46", &ns));
  EXPECT_TRUE(ParseTimestampNs("2200-01-01 00:00:00", &ns));
  testing::ScratchDir h("trace-range");
  std::vector<TraceRequest> requests;
  const std::string csv = h.WriteFile(
      "far.csv", "TIMESTAMP,ContextTokens,GeneratedTokens\n9441-11-16 18:15:46.68,1,1\n");
  EXPECT_FALSE(ReadTrace(csv, TraceFormat::kAzureCsv, 0, &requests).ok());
  for (const char* line : {
           R"({"timestamp": 1e300, "input_length": 1, "output_length": 1})",
           R"({"timestamp": 9223372036854775807, "input_length": 1, "output_length": 1})",
           R"({"timestamp": -1, "input_length": 1, "output_length": 1})",
           R"({"timestamp": 0, "input_length": 1e20, "output_length": 1})",
           R"({"timestamp": 0, "input_length": -3, "output_length": 1})",
           R"({"timestamp": 0, "input_length": 1, "output_length": 1, "hash_ids": [1.5]})",
       }) {
    const std::string jsonl = h.WriteFile("bad.jsonl", std::string(line) + "\n");
    Status s = ReadTrace(jsonl, TraceFormat::kMooncakeJsonl, 0, &requests);
    EXPECT_FALSE(s.ok()) << line;
    EXPECT_NE(s.message().find("bad.jsonl:1: expected"), std::string::npos) << s.message();
  }
  const std::string ok = h.WriteFile(
      "ok.jsonl", R"({"timestamp": 0, "input_length": 5.0, "output_length": 2, "hash_ids": [3]})"
                  "\n"
                  R"({"timestamp": 8999999999999, "input_length": 1, "output_length": 1})"
                  "\n");
  requests.clear();
  ASSERT_TRUE(ReadTrace(ok, TraceFormat::kMooncakeJsonl, 0, &requests).ok());
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].input_len_tok, 5u);
  EXPECT_EQ(requests[1].offset_ns, 8'999'999'999'999'000'000);
}

}  // namespace
}  // namespace servesweep::workload
