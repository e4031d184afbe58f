#include "agent/loadgen/sse_parser.h"

#include <gtest/gtest.h>

#include <random>

namespace servesweep::loadgen {
namespace {

std::vector<SseEvent> FeedPieces(const std::string& body, const std::vector<size_t>& cuts) {
  SseParser p;
  std::vector<SseEvent> out;
  size_t prev = 0;
  for (size_t c : cuts) {
    p.Feed(std::string_view(body).substr(prev, c - prev), &out);
    prev = c;
  }
  p.Feed(std::string_view(body).substr(prev), &out);
  p.Finish(&out);
  return out;
}

std::vector<std::string> Datas(const std::vector<SseEvent>& evs) {
  std::vector<std::string> d;
  for (const auto& e : evs) d.push_back(e.data);
  return d;
}

const std::string kBody =
    ": ping\n\n"
    "data: {\"a\":1}\n\n"
    "event: message\r\ndata: first\r\ndata: second\r\n\r\n"
    "data:nospace\r\rdata: cr only\r\r"
    ":comment\ndata: {\"b\":2}\n\n"
    "id: 7\nretry: 10\n\n"          // no data: not dispatched
    "data: [DONE]\n\n";
const std::vector<std::string> kExpected = {"{\"a\":1}", "first\nsecond", "nospace", "cr only",
                                            "{\"b\":2}", "[DONE]"};

TEST(SseParser, WholeBody) {
  auto evs = FeedPieces(kBody, {});
  EXPECT_EQ(Datas(evs), kExpected);
  EXPECT_EQ(evs[1].event, "message");
  EXPECT_EQ(evs[0].event, "");
}

TEST(SseParser, ByteByByte) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < kBody.size(); ++i) cuts.push_back(i);
  EXPECT_EQ(Datas(FeedPieces(kBody, cuts)), kExpected);
}

TEST(SseParser, RandomSplits) {
  std::mt19937_64 rng(42);
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < kBody.size(); ++i) {
      if (rng() % 5 == 0) cuts.push_back(i);
    }
    ASSERT_EQ(Datas(FeedPieces(kBody, cuts)), kExpected) << "trial " << trial;
  }
}

TEST(SseParser, CrLfSplitBetweenReads) {
  SseParser p;
  std::vector<SseEvent> out;
  p.Feed("data: x\r", &out);
  EXPECT_TRUE(out.empty());
  p.Feed("\n\r", &out);   // the LF ends "data: x"; the CR is the blank line
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, "x");
  p.Feed("\ndata: y\r\n\r\n", &out);   // this LF belongs to the CR before it: no extra line
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].data, "y");
}

TEST(SseParser, EventsArriveOnlyWhenComplete) {
  SseParser p;
  std::vector<SseEvent> out;
  p.Feed("data: {\"partial\":", &out);
  EXPECT_TRUE(out.empty());
  p.Feed("1}\n", &out);
  EXPECT_TRUE(out.empty());   // no blank line yet
  p.Feed("\n", &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, "{\"partial\":1}");
}

TEST(SseParser, FinishDispatchesUnterminatedTail) {
  SseParser p;
  std::vector<SseEvent> out;
  p.Feed("data: a\n\ndata: [DONE]", &out);
  ASSERT_EQ(out.size(), 1u);
  p.Finish(&out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].data, "[DONE]");
}

TEST(SseParser, EmptyDataLineIsAnEventWithEmptyData) {
  SseParser p;
  std::vector<SseEvent> out;
  p.Feed("data\n\ndata:\ndata:\n\n", &out);
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0].data, "");
  EXPECT_EQ(out[1].data, "\n");
}

}  // namespace
}  // namespace servesweep::loadgen
