// report.html's pieces (report/report_html.h, report_data.h): Markdown to escaped HTML,
// configuration names, and the roofline estimate the slow-decode rule compares against.
#include "report/report_html.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "report/report_data.h"

namespace servesweep::report {
namespace {

TEST(ReportHtml, MarkdownBecomesEscapedHtml) {
  const std::string html = MarkdownToHtml(
      "## Runs <b>\n\nA **bold** `code` line\nwrapped.\n\n| run | error |\n|---|---|\n"
      "| r<1> | \"x\" & <script>alert(1)</script> |\n\n- one `a<b`\n- two\n");
  EXPECT_NE(html.find("<h2>Runs &lt;b&gt;</h2>"), std::string::npos) << html;
  EXPECT_NE(html.find("<p>A <strong>bold</strong> <code>code</code> line wrapped.</p>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<tr><th>run</th><th>error</th></tr>"), std::string::npos) << html;
  EXPECT_NE(html.find("<tr><td>r&lt;1&gt;</td><td>&quot;x&quot; &amp; "
                      "&lt;script&gt;alert(1)&lt;/script&gt;</td></tr>"),
            std::string::npos)
      << html;
  EXPECT_NE(html.find("<ul>\n<li>one <code>a&lt;b</code></li>\n<li>two</li>\n</ul>"),
            std::string::npos)
      << html;
  EXPECT_EQ(html.find("<script"), std::string::npos);
  EXPECT_EQ(html.find("|---|"), std::string::npos);
}

// The energy plot: per configuration, the levels that spend the least energy per output token
// at their per-user speed as a line, the rest as dominated points; none without energy figures.
TEST(ReportHtml, EnergyFrontierIsTheLeastEnergyAtEachSpeed) {
  ReportData data;
  ConfigCurve cc;
  cc.curve.config = "tp=1";
  // Levels 1, 4, 16: the slowest (16) spends more per token than level 4, so it is dominated.
  const double per_user[] = {100, 50, 25}, joules[] = {0.2, 0.1, 0.15}, levels[] = {1, 4, 16};
  for (int i = 0; i < 3; ++i) {
    CurvePoint p;
    p.level = levels[i];
    p.figures["per_user_tok_per_s"] = {1, per_user[i], per_user[i], per_user[i]};
    p.figures["energy_per_output_tok_j"] = {1, joules[i], joules[i], joules[i]};
    p.figures["output_throughput_per_gpu"] = {1, 10.0 * levels[i], 10.0 * levels[i],
                                              10.0 * levels[i]};
    cc.curve.points.push_back(p);
  }
  cc.frontier = {0, 1, 2};
  cc.energy_frontier = {1, 0};  // as ParetoFrontier orders them: ascending x
  data.curves.push_back(cc);
  const auto plots = ReportPlots(data);
  const auto energy =
      std::find_if(plots.begin(), plots.end(), [](const PlotSpec& p) { return p.id == "energy"; });
  ASSERT_NE(energy, plots.end());
  ASSERT_EQ(energy->series.size(), 1u);
  EXPECT_EQ(energy->series[0].x, (std::vector<double>{50, 100}));
  EXPECT_EQ(energy->series[0].y, (std::vector<double>{0.1, 0.2}));
  EXPECT_EQ(energy->series[0].point_labels, (std::vector<std::string>{"4", "1"}));
  ASSERT_EQ(energy->marks.size(), 1u);
  EXPECT_DOUBLE_EQ(energy->marks[0].y, 0.15);
  EXPECT_EQ(energy->marks[0].label, "tp=1 at 16 (dominated)");

  data.curves[0].energy_frontier.clear();  // no valid energy: no plot
  const auto without = ReportPlots(data);
  EXPECT_TRUE(std::none_of(without.begin(), without.end(),
                           [](const PlotSpec& p) { return p.id == "energy"; }));
}

TEST(ReportHtml, ConfigNameDropsLoadLevelAndRepeat) {
  EXPECT_EQ(ConfigName("tp=2 concurrency=16 repeat=1"), "tp=2");
  EXPECT_EQ(ConfigName("engine=vllm request_rate=4"), "engine=vllm");
  EXPECT_EQ(ConfigName("concurrency=1"), "");
  EXPECT_EQ(ConfigName("tp=1 concurrency=64 num_requests=256"), "tp=1");
}

TEST(ReportHtml, RooflineTpotNeedsKnownModelAndGpu) {
  capnp::MallocMessageBuilder message;
  auto spec = message.initRoot<schema::RunSpec>();
  spec.setModel("meta-llama/Llama-3.1-8B-Instruct");
  spec.getLayout().setTp(1);
  spec.getLayout().setPp(1);
  spec.getWorkload().setInputLenTok(1024);
  spec.getWorkload().setOutputLenTok(128);
  // 8B bf16 weights (16 GB) read once per token at H200's ~4.8 TB/s: several ms, not 100.
  const auto h200 = RooflineTpotMs(spec.asReader(), "NVIDIA H200");
  ASSERT_TRUE(h200.has_value());
  EXPECT_GT(*h200, 2.0);
  EXPECT_LT(*h200, 20.0);
  EXPECT_FALSE(RooflineTpotMs(spec.asReader(), "emulated").has_value());
  spec.setModel("some-unknown-model");
  EXPECT_FALSE(RooflineTpotMs(spec.asReader(), "NVIDIA H200").has_value());
}

}  // namespace
}  // namespace servesweep::report
