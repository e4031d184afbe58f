// The report's SVG writer (report/svg_plot.h): escaping, ticks, and what a plot contains.
#include "report/svg_plot.h"

#include <gtest/gtest.h>

#include <cmath>

namespace servesweep::report {
namespace {

size_t Count(const std::string& text, const std::string& part) {
  size_t n = 0;
  for (size_t at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(SvgPlot, EscapesMarkupInText) {
  EXPECT_EQ(EscapeXml("<script>alert('x')</script> & \"q\""),
            "&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; &quot;q&quot;");
}

TEST(SvgPlot, TicksAreRoundAndCoverTheRange) {
  EXPECT_EQ(NiceTicks(0, 950, 5), (std::vector<double>{0, 200, 400, 600, 800, 1000}));
  EXPECT_EQ(NiceTicks(0.1, 0.3, 4), (std::vector<double>{0.1, 0.15, 0.2, 0.25, 0.3}));
  EXPECT_EQ(Log2Ticks(1, 64, 10), (std::vector<double>{1, 2, 4, 8, 16, 32, 64}));
  EXPECT_EQ(Log2Ticks(1, 1024, 5), (std::vector<double>{1, 4, 16, 64, 256, 1024}));
  EXPECT_EQ(TickLabel(1500), "1500");
  EXPECT_EQ(TickLabel(25000), "25k");
  EXPECT_EQ(TickLabel(0.25), "0.25");
}

TEST(SvgPlot, PlotHasItsIdSeriesPathsPointsBarsMarksAndLegend) {
  PlotSpec spec;
  spec.id = "throughput";
  spec.title = "Throughput <tp=2>";
  spec.x_label = "concurrency";
  spec.y_label = "tok/s";
  spec.log_x = true;
  spec.series.push_back({"tp=1 \"a\"",
                         {1, 2, 4, 8},
                         {100, 190, 300, 310},
                         {90, 180, 280, 300},
                         {110, 200, 320, 330},
                         0,
                         false,
                         true,
                         {}});
  spec.series.push_back({"tp=2",
                         {1, 2, 4, 8},
                         {150, 290, 560, 1000},
                         {},
                         {},
                         1,
                         true,
                         true,
                         {"c=1", "", "c<4>", "c=8"}});
  spec.marks.push_back({4, 300, "knee", "knee at 4", 0});
  spec.marks.push_back({2, 290, "slo", "best SLO point", 1});
  const std::string svg = RenderSvg(spec);
  EXPECT_NE(svg.find("id=\"plot-throughput\" data-plot=\"throughput\""), std::string::npos);
  EXPECT_NE(svg.find("Throughput &lt;tp=2&gt;"), std::string::npos);
  EXPECT_EQ(svg.find("<tp=2>"), std::string::npos);
  EXPECT_EQ(Count(svg, "<path class=\"line\" d=\"M"), 2u);
  EXPECT_EQ(Count(svg, "<circle class=\"point\""), 8u);
  EXPECT_EQ(Count(svg, "<line class=\"range\""), 4u);
  EXPECT_EQ(Count(svg, "class=\"mark-knee\""), 1u);
  EXPECT_EQ(Count(svg, "class=\"mark-slo\""), 1u);
  EXPECT_EQ(Count(svg, "<g class=\"legend\">"), 2u);
  EXPECT_NE(svg.find("data-series=\"tp=1 &quot;a&quot;\""), std::string::npos);
  EXPECT_NE(svg.find("stroke-dasharray"), std::string::npos);
  EXPECT_NE(svg.find("concurrency (log scale)"), std::string::npos);
  EXPECT_EQ(svg.find("no data"), std::string::npos);
  EXPECT_EQ(Count(svg, "class=\"point-label\""), 3u);  // the empty label is not drawn
  EXPECT_NE(svg.find(">c&lt;4&gt;</text>"), std::string::npos);
}

TEST(SvgPlot, PlotWithoutFinitePointsSaysNoData) {
  PlotSpec spec;
  spec.id = "empty";
  spec.series.push_back({"s", {1, 2}, {std::nan(""), std::nan("")}, {}, {}, 0, false, true, {}});
  const std::string svg = RenderSvg(spec);
  EXPECT_NE(svg.find("no data"), std::string::npos);
  EXPECT_EQ(svg.find("class=\"line\""), std::string::npos);
  EXPECT_EQ(svg.find("class=\"point\""), std::string::npos);
}

}  // namespace
}  // namespace servesweep::report
