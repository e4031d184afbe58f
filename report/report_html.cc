#include "report/report_html.h"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

namespace servesweep::report {
namespace {

// Inline Markdown on already-escaped text: **bold** and `code`.
std::string Inline(const std::string& escaped) {
  std::string out;
  bool bold = false, code = false;
  for (size_t i = 0; i < escaped.size(); ++i) {
    if (!code && escaped.compare(i, 2, "**") == 0) {
      out += bold ? "</strong>" : "<strong>";
      bold = !bold;
      ++i;
    } else if (escaped[i] == '`') {
      out += code ? "</code>" : "<code>";
      code = !code;
    } else {
      out += escaped[i];
    }
  }
  if (code) out += "</code>";
  if (bold) out += "</strong>";
  return out;
}

std::vector<std::string> Cells(const std::string& line) {
  std::vector<std::string> cells;
  std::string trimmed = line;
  while (!trimmed.empty() && (trimmed.back() == ' ' || trimmed.back() == '\r')) trimmed.pop_back();
  if (!trimmed.empty() && trimmed.front() == '|') trimmed.erase(0, 1);
  if (!trimmed.empty() && trimmed.back() == '|') trimmed.pop_back();
  std::string cell;
  std::istringstream in(trimmed);
  while (std::getline(in, cell, '|')) {
    const size_t a = cell.find_first_not_of(' '), b = cell.find_last_not_of(' ');
    cells.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
  }
  return cells;
}

bool IsRule(const std::string& line) { return line.rfind("|---", 0) == 0; }

// The x axis of the curves: concurrency, or a request rate for open-loop runs.
std::string XLabel(bool open_loop) {
  return open_loop ? "load (concurrency or req/s)" : "concurrency";
}

// One configuration's frontier on `plot`: the levels on it as a line (labelled), the levels it
// dominates as hollow points; y is the figure `y_figure` against the per-user speed.
void AddFrontier(const ConfigCurve& cc, size_t colour, const std::vector<size_t>& frontier,
                 const std::string& y_figure, PlotSpec* plot) {
  const auto& points = cc.curve.points;
  const std::string& name = cc.curve.config;
  PlotSeries line{name, {}, {}, {}, {}, colour, false, true, {}};
  std::vector<bool> on_frontier(points.size(), false);
  for (size_t i : frontier) {
    on_frontier[i] = true;
    line.x.push_back(points[i].Median("per_user_tok_per_s"));
    line.y.push_back(points[i].Median(y_figure));
    line.point_labels.push_back(fmt::format("{:g}", points[i].level));
  }
  plot->series.push_back(std::move(line));
  for (size_t i = 0; i < points.size(); ++i) {
    const double y = points[i].Median(y_figure);
    if (on_frontier[i] || !std::isfinite(y)) continue;
    plot->marks.push_back({points[i].Median("per_user_tok_per_s"), y, "point",
                           fmt::format("{} at {:g} (dominated)", name, points[i].level), colour});
  }
}

}  // namespace

std::string MarkdownToHtml(std::string_view markdown) {
  std::string html;
  std::vector<std::string> lines;
  std::istringstream in{std::string(markdown)};
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  std::string paragraph;
  auto flush = [&] {
    if (!paragraph.empty()) html += "<p>" + Inline(EscapeXml(paragraph)) + "</p>\n";
    paragraph.clear();
  };
  for (size_t i = 0; i < lines.size(); ++i) {
    const std::string& line = lines[i];
    if (line.empty()) {
      flush();
    } else if (line.rfind("#", 0) == 0) {
      flush();
      size_t level = line.find_first_not_of('#');
      if (level == std::string::npos || level > 6) level = 6;
      html += fmt::format("<h{0}>{1}</h{0}>\n", level,
                          Inline(EscapeXml(line.substr(line.find_first_not_of("# ")))));
    } else if (line.front() == '|') {
      flush();
      html += "<table>\n";
      bool header = i + 1 < lines.size() && IsRule(lines[i + 1]);
      for (; i < lines.size() && !lines[i].empty() && lines[i].front() == '|'; ++i) {
        if (IsRule(lines[i])) continue;
        const char* tag = header ? "th" : "td";
        html += "<tr>";
        for (const auto& cell : Cells(lines[i])) {
          html += fmt::format("<{0}>{1}</{0}>", tag, Inline(EscapeXml(cell)));
        }
        html += "</tr>\n";
        header = false;
      }
      --i;
      html += "</table>\n";
    } else if (line.rfind("- ", 0) == 0) {
      flush();
      html += "<ul>\n";
      for (; i < lines.size() && lines[i].rfind("- ", 0) == 0; ++i) {
        html += "<li>" + Inline(EscapeXml(lines[i].substr(2))) + "</li>\n";
      }
      --i;
      html += "</ul>\n";
    } else {
      paragraph += (paragraph.empty() ? "" : " ") + line;
    }
  }
  flush();
  return html;
}

std::vector<PlotSpec> ReportPlots(const ReportData& data) {
  std::vector<PlotSpec> plots;
  const std::string x_label = XLabel(data.open_loop);

  PlotSpec pareto;
  pareto.id = "pareto";
  pareto.title = "Throughput per GPU vs speed per user (Pareto frontier; levels labelled)";
  pareto.zero_x = true;
  pareto.x_label = "output tokens/s per user (1000 / median TPOT)";
  pareto.y_label = "output tokens/s per GPU";
  PlotSpec ttft, e2el, throughput;
  ttft.id = "ttft";
  ttft.title = "TTFT p50 (solid) and p95 (dashed)";
  ttft.y_label = "TTFT (ms)";
  e2el.id = "e2el";
  e2el.title = "End-to-end latency p50 (solid) and p95 (dashed)";
  e2el.y_label = "E2E latency (ms)";
  throughput.id = "throughput";
  throughput.title = "Output throughput (min..max over repeats), knee and best SLO point";
  throughput.y_label = "output tokens/s";
  for (PlotSpec* p : {&ttft, &e2el, &throughput}) {
    p->x_label = x_label;
    p->log_x = true;
  }
  PlotSpec energy;
  energy.id = "energy";
  energy.title = "Energy per output token vs speed per user (frontier: the least energy)";
  energy.zero_x = true;
  energy.x_label = pareto.x_label;
  energy.y_label = "joules per output token (valid energy only)";
  for (size_t c = 0; c < data.curves.size(); ++c) {
    const ConfigCurve& cc = data.curves[c];
    const auto& points = cc.curve.points;
    const std::string& name = cc.curve.config;
    AddFrontier(cc, c, cc.frontier, "output_throughput_per_gpu", &pareto);
    if (!cc.energy_frontier.empty()) {
      AddFrontier(cc, c, cc.energy_frontier, "energy_per_output_tok_j", &energy);
    }
    auto line = [&](const std::string& figure, const std::string& series_name, bool dashed,
                    bool bars) {
      PlotSeries s{series_name, {}, {}, {}, {}, c, dashed, true, {}};
      for (const auto& p : points) {
        const Range* r = p.Get(figure);
        s.x.push_back(p.level);
        s.y.push_back(r ? r->median : std::nan(""));
        if (bars) {
          s.y_min.push_back(r ? r->min : std::nan(""));
          s.y_max.push_back(r ? r->max : std::nan(""));
        }
      }
      return s;
    };
    ttft.series.push_back(line("ttft_median_ms", name + " p50", false, false));
    ttft.series.push_back(line("ttft_p95_ms", name + " p95", true, false));
    e2el.series.push_back(line("e2el_median_ms", name + " p50", false, false));
    e2el.series.push_back(line("e2el_p95_ms", name + " p95", true, false));
    throughput.series.push_back(line("output_throughput", name, false, true));
    if (cc.knee.found) {
      throughput.marks.push_back({cc.knee.level, cc.knee.throughput, "knee", "knee", c});
    }
    if (cc.slo.found) {
      throughput.marks.push_back({cc.slo.level, cc.slo.throughput, "slo", "SLO", c});
    }
  }
  plots.push_back(std::move(pareto));
  if (!energy.series.empty()) plots.push_back(std::move(energy));
  plots.push_back(std::move(ttft));
  plots.push_back(std::move(e2el));
  plots.push_back(std::move(throughput));

  for (size_t i = 0; i < data.signals.size(); ++i) {
    const SignalSeries& s = data.signals[i];
    auto series = [&](const std::string& signal, const std::string& name, size_t colour,
                      double scale) {
      PlotSeries out{name, {}, {}, {}, {}, colour, false, true, {}};
      auto it = s.signals.find(signal);
      if (it == s.signals.end()) return out;
      for (const XY& p : it->second) {
        out.x.push_back(p.x);
        out.y.push_back(p.y * scale);
      }
      return out;
    };
    PlotSpec kv;
    kv.id = fmt::format("signals-{}-kv", i);
    kv.title = "KV-cache usage: " + s.run_label;
    kv.x_label = "time in the measured phase (s)";
    kv.y_label = "KV usage (%)";
    kv.width = 440;
    kv.height = 240;
    kv.series.push_back(series("kv_cache_usage", "KV usage", 0, 100));
    PlotSpec requests = kv;
    requests.id = fmt::format("signals-{}-requests", i);
    requests.title = "Requests and preemptions: " + s.run_label;
    requests.y_label = "requests";
    requests.series = {series("running", "running", 2, 1), series("waiting", "waiting", 1, 1),
                       series("preemptions", "preemptions (since start)", 3, 1)};
    plots.push_back(std::move(kv));
    plots.push_back(std::move(requests));
  }
  return plots;
}

std::string HtmlPageHead(const std::string& title) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src "
      "'unsafe-inline'\">\n<title>{}</title>\n<style>\n"
      "body {{ font-family: sans-serif; margin: 1.5em auto; max-width: 1400px; color: #222; }}\n"
      "table {{ border-collapse: collapse; font-size: 12px; margin: 0.5em 0 1em; }}\n"
      "th, td {{ border: 1px solid #ccc; padding: 2px 6px; text-align: left; }}\n"
      "th {{ background: #f0f0f0; }}\n"
      ".banner {{ background: #D55E00; color: #fff; padding: 0.6em 1em; font-weight: bold; }}\n"
      ".plots {{ display: flex; flex-wrap: wrap; gap: 1em; }}\n"
      ".plots svg {{ border: 1px solid #eee; background: #fff; }}\n"
      "code {{ background: #f4f4f4; padding: 0 2px; }}\n"
      "</style>\n</head>\n<body>\n<h1>{}</h1>\n",
      EscapeXml(title), EscapeXml(title));
}

std::string ReportHtml(const ReportData& data, const std::string& title,
                       const std::string& markdown_body) {
  std::string html = HtmlPageHead(title);
  if (!data.simulation.empty()) {
    html += fmt::format(
        "<div class=\"banner\" id=\"simulated\">SIMULATED: these figures come from the "
        "performance model ({}), not from an engine.</div>\n",
        EscapeXml(data.simulation));
  }
  const std::vector<PlotSpec> plots = ReportPlots(data);
  html += "<h2>Plots</h2>\n<div class=\"plots\">\n";
  size_t i = 0;
  for (; i < plots.size() && plots[i].id.rfind("signals-", 0) != 0; ++i) {
    html += RenderSvg(plots[i]);
  }
  html += "</div>\n";
  if (i < plots.size() || !data.unsampled.empty()) {
    html +=
        "<h2>Engine signals over time</h2>\n<p>Scraped from the engine's /metrics during the "
        "measured phase, every 50 ms at first and less often as a run goes on (the interval "
        "doubles every 20 scrapes, up to 1 s); preemptions counted from the first sample.</p>\n"
        "<div class=\"plots\">\n";
    for (; i < plots.size(); ++i) html += RenderSvg(plots[i]);
    html += "</div>\n";
    if (data.signal_runs_left_out > 0) {
      html += fmt::format(
          "<p>{} more run(s) not plotted; their samples are in results.db "
          "(engine_samples).</p>\n",
          data.signal_runs_left_out);
    }
    for (const auto& [label, scrapes] : data.unsampled) {
      html += fmt::format(
          "<p>{}: too short to sample ({} scrape(s) in its measured phase), not plotted.</p>\n",
          EscapeXml(label), scrapes);
    }
  }
  html += MarkdownToHtml(markdown_body);
  return html + "</body>\n</html>\n";
}

}  // namespace servesweep::report
