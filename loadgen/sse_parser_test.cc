#include "loadgen/sse_parser.h"

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
    "id: 7\nretry: 10\n\n"  // no data: not dispatched
    "data: [DONE]\n\n";
const std::vector<std::string> kExpected = {"{\"a\":1}", "first\nsecond", "nospace",
                                            "cr only",   "{\"b\":2}",     "[DONE]"};

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

// An OpenAI stream cut into two reads at every byte position, through the sink (the events
// handed on as views, copied only when split): the events never depend on where the cut fell.
TEST(SseParser, OpenAiStreamSplitAtEveryPosition) {
  const std::string body =
      ": ping\r\n\r\n"
      "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\"}}]}\r\n\r\n"
      "data: {\"choices\":[{\"text\":\" a b\",\"logprobs\":{\"tokens\":[\" a\",\" b\"]}}]}\n\n"
      "event: message\ndata: {\"choices\":[{\"text\":\"c\"}]}\n\n"
      "data: {\"choices\":[],\ndata: \"usage\":{\"prompt_tokens\":3,\"completion_tokens\":3}}\n\n"
      "data: [DONE]\n\n";
  struct Recorder final : SseSink {
    std::vector<std::string> data;
    void OnEvent(std::string_view, std::string_view d) override { data.emplace_back(d); }
  };
  Recorder whole;
  SseParser p;
  p.Feed(body, &whole);
  p.Finish(&whole);
  ASSERT_EQ(whole.data.size(), 5u);
  EXPECT_EQ(whole.data[3],
            "{\"choices\":[],\n\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":3}}");
  for (size_t cut = 1; cut < body.size(); ++cut) {
    Recorder split;
    SseParser q;
    // Each piece from its own buffer, overwritten after the call: a view kept past Feed would
    // read the overwritten bytes.
    std::string piece = body.substr(0, cut);
    q.Feed(piece, &split);
    piece.assign(piece.size(), '#');
    piece = body.substr(cut);
    q.Feed(piece, &split);
    piece.assign(piece.size(), '#');
    q.Finish(&split);
    ASSERT_EQ(split.data, whole.data) << "cut at byte " << cut;
  }
}

TEST(SseParser, CrLfSplitBetweenReads) {
  SseParser p;
  std::vector<SseEvent> out;
  p.Feed("data: x\r", &out);
  EXPECT_TRUE(out.empty());
  p.Feed("\n\r", &out);  // the LF ends "data: x"; the CR is the blank line
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].data, "x");
  p.Feed("\ndata: y\r\n\r\n", &out);  // this LF belongs to the CR before it: no extra line
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[1].data, "y");
}

TEST(SseParser, EventsArriveOnlyWhenComplete) {
  SseParser p;
  std::vector<SseEvent> out;
  p.Feed("data: {\"partial\":", &out);
  EXPECT_TRUE(out.empty());
  p.Feed("1}\n", &out);
  EXPECT_TRUE(out.empty());  // no blank line yet
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
