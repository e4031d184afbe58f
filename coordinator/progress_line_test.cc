// The live progress line as pure functions: rate over a window of reports, ETA, durations, and
// the line fitted to a terminal width; and the display's output with and without a terminal.
#include "coordinator/progress_line.h"

#include <gtest/gtest.h>

#include <string>

#include "coordinator/progress_display.h"

namespace servesweep::coordinator {
namespace {

constexpr int64_t kSecondNs = 1'000'000'000;

RunProgressView Measuring() {
  RunProgressView view;
  view.position = 3;
  view.runs = 8;
  view.label = "concurrency=4 repeat=1";
  view.phase = "measuring";
  view.completed = 120;
  view.total = 500;
  view.rate_per_s = 38.0;
  return view;
}

size_t Columns(const std::string& text) {
  size_t columns = 0;
  for (unsigned char c : text) columns += (c & 0xC0) != 0x80;
  return columns;
}

TEST(ProgressLine, ShowsCountsRateAndEta) {
  EXPECT_EQ(FormatProgressLine(Measuring(), 0),
            "[3/8] concurrency=4 repeat=1 | measuring 120/500 req | 38.0 req/s | ETA 10 s");
}

TEST(ProgressLine, PhasesReadAsWords) {
  RunProgressView view = Measuring();
  view.phase = "starting";
  view.elapsed_s = 12.4;
  EXPECT_EQ(FormatProgressLine(view, 0), "[3/8] concurrency=4 repeat=1 | starting engine 12 s");
  view.phase = "warmup";
  view.completed = 1;
  view.total = 4;
  view.rate_per_s = -1;
  EXPECT_EQ(FormatProgressLine(view, 0),
            "[3/8] concurrency=4 repeat=1 | warm-up 1/4 req | -- req/s | ETA --");
  view.phase = "draining";
  view.completed = 4;
  EXPECT_EQ(FormatProgressLine(view, 0), "[3/8] concurrency=4 repeat=1 | draining 4/4 req");
  view.attempt = 2;
  view.phase = "assigned";
  view.elapsed_s = 0;
  EXPECT_EQ(FormatProgressLine(view, 0),
            "[3/8] concurrency=4 repeat=1 (attempt 2) | assigned 0.0 s");
}

TEST(ProgressLine, LabelGivesWayToTheFiguresOnANarrowTerminal) {
  const std::string full = FormatProgressLine(Measuring(), 0);
  EXPECT_EQ(FormatProgressLine(Measuring(), full.size()), full);
  const std::string narrow = FormatProgressLine(Measuring(), 60);
  EXPECT_EQ(Columns(narrow), 60u) << narrow;
  EXPECT_EQ(narrow, "[3/8] con... | measuring 120/500 req | 38.0 req/s | ETA 10 s");
  // Too narrow even for the figures: the end is cut, never wider than the terminal.
  const std::string tiny = FormatProgressLine(Measuring(), 20);
  EXPECT_EQ(tiny, full.substr(0, 20));
}

TEST(ProgressLine, TruncationCountsCodePointsNotBytes) {
  RunProgressView view = Measuring();
  view.label = "modèle=ünïcode-naïve-label-that-is-long";
  for (size_t width : {50u, 55u, 61u}) {
    const std::string line = FormatProgressLine(view, width);
    EXPECT_EQ(Columns(line), width) << line;
    // Never a cut inside a character: every lead byte keeps its continuation bytes.
    for (size_t i = 0; i < line.size(); ++i) {
      const auto c = static_cast<unsigned char>(line[i]);
      if (c >= 0xC0) {
        ASSERT_LT(i + 1, line.size()) << line;
        EXPECT_EQ(static_cast<unsigned char>(line[i + 1]) & 0xC0, 0x80) << line;
      }
    }
  }
}

TEST(ProgressLine, EtaAndDurations) {
  EXPECT_DOUBLE_EQ(EtaS(100, 500, 40), 10);
  EXPECT_DOUBLE_EQ(EtaS(500, 500, 40), 0);
  EXPECT_LT(EtaS(100, 500, -1), 0);
  EXPECT_LT(EtaS(100, 500, 0), 0);
  EXPECT_LT(EtaS(100, 0, 10), 0);
  EXPECT_EQ(DurationText(0.42), "0.4 s");
  EXPECT_EQ(DurationText(42), "42 s");
  EXPECT_EQ(DurationText(185), "3 m 05 s");
  EXPECT_EQ(DurationText(3720), "1 h 02 m");
  EXPECT_EQ(DurationText(-1), "--");
}

TEST(RequestRateWindow, RateOverTheLastReports) {
  RequestRateWindow window(5 * kSecondNs);
  EXPECT_LT(window.RatePerS(), 0);
  window.Add(0, 0);
  EXPECT_LT(window.RatePerS(), 0);  // one report: no rate yet
  window.Add(kSecondNs, 10);
  EXPECT_DOUBLE_EQ(window.RatePerS(), 10);
  // The rate follows the recent reports: 10/s for 5 s, then 50/s.
  for (int s = 2; s <= 5; ++s) window.Add(s * kSecondNs, 10 * s);
  for (int s = 6; s <= 12; ++s) window.Add(s * kSecondNs, 50 + 50 * (s - 5));
  EXPECT_NEAR(window.RatePerS(), 50, 1e-9);
  // A count that goes down starts over (a new phase).
  window.Add(13 * kSecondNs, 2);
  EXPECT_LT(window.RatePerS(), 0);
  window.Reset();
  EXPECT_LT(window.RatePerS(), 0);
}

struct Captured {
  std::string text;
  ProgressDisplay::Writer Writer() {
    return [this](std::string_view t) { text.append(t); };
  }
};

void FeedOneRun(ProgressDisplay& display) {
  RunProgressView view;
  view.position = 1;
  view.runs = 2;
  view.label = "concurrency=1";
  view.total = 20;
  display.RunAssigned("r1", view, 0);
  display.RunReported("r1", 1, "starting", 0, 0, kSecondNs / 2);
  display.Tick(kSecondNs);
  display.RunReported("r1", 1, "measuring", 5, 20, 2 * kSecondNs);
  display.RunReported("r1", 1, "measuring", 10, 20, 3 * kSecondNs);
  display.RunReported("r1", 2, "measuring", 19, 20, 3 * kSecondNs);  // another attempt: ignored
  display.Tick(4 * kSecondNs);
  display.RunEnded("r1", "done", 5 * kSecondNs);
  display.Finish();
}

TEST(ProgressDisplay, LiveModeRedrawsInPlace) {
  Captured out;
  ProgressDisplay display(ProgressMode::kLive, out.Writer(), [] { return size_t{100}; });
  FeedOneRun(display);
  EXPECT_NE(out.text.find('\r'), std::string::npos);
  EXPECT_NE(out.text.find("\x1b[K"), std::string::npos);
  EXPECT_NE(out.text.find("measuring 10/20 req | 5.0 req/s | ETA 2.0 s"), std::string::npos)
      << out.text;
  EXPECT_EQ(out.text.find("19/20"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("[1/2] concurrency=1 | done in 5.0 s, 10/20 req\n"), std::string::npos)
      << out.text;
}

TEST(ProgressDisplay, PlainModeWritesLinesWithoutControlCodes) {
  Captured out;
  ProgressDisplay display(
      ProgressMode::kPlain, out.Writer(), [] { return size_t{100}; }, kSecondNs);
  FeedOneRun(display);
  EXPECT_EQ(out.text.find('\r'), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find('\x1b'), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("progress: [1/2] concurrency=1 | assigned 0.0 s\n"), std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("progress: [1/2] concurrency=1 | measuring 10/20 req | 5.0 req/s"),
            std::string::npos)
      << out.text;
  EXPECT_NE(out.text.find("progress: [1/2] concurrency=1 | done in 5.0 s, 10/20 req\n"),
            std::string::npos)
      << out.text;
}

TEST(ProgressDisplay, OtherOutputClearsAndRedrawsTheLiveLines) {
  Captured out;
  ProgressDisplay display(ProgressMode::kLive, out.Writer(), [] { return size_t{100}; });
  RunProgressView a, b;
  a.label = "a";
  b.label = "b";
  display.RunAssigned("ra", a, 0);
  display.RunAssigned("rb", b, 0);
  out.text.clear();
  display.AroundOtherOutput([&] { out.text += "LOG LINE\n"; });
  // Back to the first of the two lines, erase below, the log line, then both lines again.
  EXPECT_EQ(out.text.rfind("\r\x1b[1A\x1b[JLOG LINE\n", 0), 0u) << out.text;
  EXPECT_NE(out.text.find("[0/0] a | assigned", 10), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("[0/0] b | assigned", 10), std::string::npos) << out.text;
}

TEST(ProgressDisplay, LiveLinesStopAtAScreenful) {
  Captured out;
  ProgressDisplay display(ProgressMode::kLive, out.Writer(), [] { return size_t{100}; });
  for (int i = 1; i <= 26; ++i) {
    RunProgressView view;
    view.position = static_cast<uint32_t>(i);
    view.runs = 26;
    view.label = "r";
    display.RunAssigned("r" + std::to_string(i), view, 0);
  }
  out.text.clear();
  display.AroundOtherOutput([] {});
  // 19 runs, then one line for the other 7; the cursor climbs 19 lines, never 25.
  EXPECT_EQ(out.text.rfind("\r\x1b[19A\x1b[J", 0), 0u) << out.text;
  EXPECT_NE(out.text.find("[19/26] r | assigned"), std::string::npos) << out.text;
  EXPECT_EQ(out.text.find("[20/26] r"), std::string::npos) << out.text;
  EXPECT_NE(out.text.find("... and 7 more running"), std::string::npos) << out.text;
}

TEST(ProgressDisplay, ModeParsing) {
  ProgressMode mode = ProgressMode::kOff;
  ASSERT_TRUE(ParseProgressMode("auto", true, &mode).ok());
  EXPECT_EQ(mode, ProgressMode::kLive);
  ASSERT_TRUE(ParseProgressMode("auto", false, &mode).ok());
  EXPECT_EQ(mode, ProgressMode::kPlain);
  ASSERT_TRUE(ParseProgressMode("off", true, &mode).ok());
  EXPECT_EQ(mode, ProgressMode::kOff);
  const Status bad = ParseProgressMode("fancy", true, &mode);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.message().find("expected auto, live, plain or off, found 'fancy'"),
            std::string::npos);
}

}  // namespace
}  // namespace servesweep::coordinator
