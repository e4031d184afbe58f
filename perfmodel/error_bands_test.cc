#include "perfmodel/error_bands.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::perfmodel {
namespace {

constexpr const char* kBands = R"(measured_by: "servesweep calibrate --cross-validate"
measured_at: 2026-12-02
bands:
  - {kind: in range, low_pct: -17.2, high_pct: 58.1, figures: 24, cases: 3}
  - {kind: other shape, low_pct: -10.1, high_pct: 25.3, figures: 16, cases: 2}
  - {kind: other hardware, figures: 0, cases: 0}
)";

TEST(ErrorBands, AreKnownFromThreeCasesAndRoundTrip) {
  ErrorBands bands;
  const Status s = ParseErrorBands(kBands, "bands.yaml", &bands);
  ASSERT_TRUE(s.ok()) << s.message();
  const KindBand& in_range = bands.For(ExtrapolationKind::kInRange);
  EXPECT_TRUE(in_range.known());
  EXPECT_DOUBLE_EQ(in_range.low_pct, -17.2);
  EXPECT_FALSE(bands.For(ExtrapolationKind::kOtherShape).known());
  // Kinds the file does not list are unknown too.
  EXPECT_FALSE(bands.For(ExtrapolationKind::kOtherVersion).known());
  EXPECT_TRUE(std::isnan(bands.For(ExtrapolationKind::kOtherVersion).low_pct));

  ErrorBands again;
  ASSERT_TRUE(ParseErrorBands(ErrorBandsYaml(bands, "written\nby a test"), "again", &again).ok());
  EXPECT_EQ(again.measured_by, bands.measured_by);
  EXPECT_DOUBLE_EQ(again.For(ExtrapolationKind::kInRange).high_pct, 58.1);
  EXPECT_EQ(again.For(ExtrapolationKind::kOtherShape).cases, 2u);
  EXPECT_EQ(again.For(ExtrapolationKind::kOtherHardware).figures, 0u);
}

TEST(ErrorBands, BadFilesSayWhereAndWhat) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"measured_by: x\nmeasured_at: y\nbands:\n  - {kind: nearby, figures: 0, cases: 0}\n",
       "bands.yaml:4:"},
      {"measured_by: x\nmeasured_at: y\nbands:\n  - {kind: in range, low_pct: 5, high_pct: 1, "
       "figures: 2, cases: 1}\n",
       "expected low_pct <= high_pct, found 5 > 1"},
      {"measured_by: x\nmeasured_at: y\nbands:\n  - {kind: in range, low_pct: -150, high_pct: 1, "
       "figures: 2, cases: 1}\n",
       "low_pct"},
      {"measured_by: x\nmeasured_at: y\nbands: []\ncolour: red\n", "colour"},
      {"measured_by: x\nmeasured_at: y\nbands:\n  - {kind: in range, figures: 0, cases: 0}\n"
       "  - {kind: in range, figures: 0, cases: 0}\n",
       "bands.yaml:5:5: expected each kind once, found 'in range' again"},
  };
  for (const auto& [text, want] : cases) {
    ErrorBands bands;
    const Status s = ParseErrorBands(text, "bands.yaml", &bands);
    EXPECT_FALSE(s.ok()) << text;
    EXPECT_NE(s.message().find(want), std::string::npos) << s.message();
  }
}

// The shipped file parses (a broken one would silently leave every band unknown).
TEST(ErrorBands, TheShippedFileParses) {
  const ErrorBands& shipped = ShippedErrorBands();
  EXPECT_FALSE(shipped.measured_by.empty());
  EXPECT_FALSE(shipped.measured_at.empty());
}

}  // namespace
}  // namespace servesweep::perfmodel
