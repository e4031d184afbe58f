#include "report/svg_plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace servesweep::report {
namespace {

constexpr int kLeft = 64, kRight = 16, kTop = 34, kBottom = 46;
constexpr int kLegendRow = 16;

bool Finite(double v) { return std::isfinite(v); }

// Maps data to pixels inside the plot area.
struct Frame {
  double x0, x1, y0, y1;  // data range
  bool log_x;
  double left, right, top, bottom;  // pixels
  double X(double x) const {
    const double a = log_x ? std::log2(x) : x, lo = log_x ? std::log2(x0) : x0,
                 hi = log_x ? std::log2(x1) : x1;
    return hi > lo ? left + (a - lo) / (hi - lo) * (right - left) : (left + right) / 2;
  }
  double Y(double y) const {
    return y1 > y0 ? bottom - (y - y0) / (y1 - y0) * (bottom - top) : (top + bottom) / 2;
  }
};

std::string Num(double v) { return fmt::format("{:.1f}", v); }

}  // namespace

std::string EscapeXml(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&#39;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

const std::string& SeriesColour(size_t index) {
  // Okabe, M. and Ito, K. (2008) Color Universal Design: blue, orange, bluish green, vermillion,
  // reddish purple, sky blue, black, yellow (last: weakest on white).
  static const std::array<std::string, 8> kPalette = {"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                                      "#CC79A7", "#56B4E9", "#000000", "#F0E442"};
  return kPalette[index % kPalette.size()];
}

std::vector<double> NiceTicks(double lo, double hi, int target) {
  std::vector<double> ticks;
  if (!Finite(lo) || !Finite(hi) || target < 1) return ticks;
  if (hi <= lo) hi = lo + (lo == 0 ? 1 : std::fabs(lo) * 0.1);
  const double raw = (hi - lo) / target;
  // step = m x 10^e with m in {1, 2, 5}; a tick is n x m x 10^e, computed as n x m / 10^-e for
  // e < 0 so that 0.15 prints as 0.15 (no accumulated or scaled rounding error).
  const int exponent = static_cast<int>(std::floor(std::log10(raw)));
  double m = 1;
  for (double candidate : {1.0, 2.0, 5.0, 10.0}) {
    m = candidate;
    if (m * std::pow(10, exponent) >= raw) break;
  }
  auto tick = [&](double n) {
    return exponent < 0 ? n * m / std::pow(10, -exponent) : n * m * std::pow(10, exponent);
  };
  const double step = tick(1);
  const double first = std::floor(lo / step);
  for (int k = 0; k < 1000; ++k) {
    const double t = tick(first + k);
    ticks.push_back(t == 0 ? 0 : t);  // no -0
    if (t >= hi - step * 1e-9) break;
  }
  return ticks;
}

std::vector<double> Log2Ticks(double lo, double hi, int max_ticks) {
  std::vector<double> ticks;
  if (!(lo > 0) || !Finite(hi) || max_ticks < 1) return ticks;
  const int a = static_cast<int>(std::floor(std::log2(lo)));
  const int b = static_cast<int>(std::ceil(std::log2(std::max(hi, lo))));
  const int stride = std::max(1, (b - a + max_ticks - 1) / max_ticks);
  for (int e = a;; e += stride) {  // up to the first power at or above hi
    ticks.push_back(std::ldexp(1.0, e));
    if (e >= b) break;
  }
  return ticks;
}

std::string TickLabel(double v) {
  const double a = std::fabs(v);
  if (a >= 1e6) return fmt::format("{:g}M", v / 1e6);
  if (a >= 1e4) return fmt::format("{:g}k", v / 1e3);
  if (a == 0) return "0";
  if (a < 0.01) return fmt::format("{:.3g}", v);
  return fmt::format("{:g}", std::round(v * 1000) / 1000);
}

std::string RenderSvg(const PlotSpec& spec) {
  // Data range over every finite point (bars and marks included).
  double x0 = std::numeric_limits<double>::infinity(), x1 = -x0, y0 = x0, y1 = -x0;
  size_t points = 0;
  auto include = [&](double x, double y) {
    if (!Finite(x) || !Finite(y) || (spec.log_x && x <= 0)) return;
    x0 = std::min(x0, x);
    x1 = std::max(x1, x);
    y0 = std::min(y0, y);
    y1 = std::max(y1, y);
  };
  for (const auto& s : spec.series) {
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (Finite(s.x[i]) && Finite(s.y[i]) && (!spec.log_x || s.x[i] > 0)) ++points;
      include(s.x[i], s.y[i]);
      if (i < s.y_min.size()) include(s.x[i], s.y_min[i]);
      if (i < s.y_max.size()) include(s.x[i], s.y_max[i]);
    }
  }
  for (const auto& m : spec.marks) include(m.x, m.y);

  const int legend_rows = static_cast<int>(spec.series.size());
  const int height = spec.height + legend_rows * kLegendRow + (legend_rows > 0 ? 10 : 0);
  std::string svg = fmt::format(
      "<svg xmlns=\"http://www.w3.org/2000/svg\" id=\"plot-{0}\" data-plot=\"{0}\" "
      "class=\"plot\" width=\"{1}\" height=\"{2}\" viewBox=\"0 0 {1} {2}\" role=\"img\" "
      "aria-label=\"{3}\" font-family=\"sans-serif\" font-size=\"11\">\n<title>{3}</title>\n",
      EscapeXml(spec.id), spec.width, height, EscapeXml(spec.title));
  svg += fmt::format("<text x=\"{}\" y=\"18\" font-size=\"13\" font-weight=\"bold\">{}</text>\n",
                     kLeft, EscapeXml(spec.title));
  const double left = kLeft, right = spec.width - kRight, top = kTop,
               bottom = spec.height - kBottom;
  if (points == 0) {
    svg += fmt::format(
        "<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"none\" stroke=\"#999\"/>\n"
        "<text class=\"no-data\" x=\"{}\" y=\"{}\" text-anchor=\"middle\">no data</text>\n</svg>\n",
        left, top, right - left, bottom - top, (left + right) / 2, (top + bottom) / 2);
    return svg;
  }
  if (spec.zero_y) y0 = std::min(0.0, y0);
  if (spec.zero_x && !spec.log_x) x0 = std::min(0.0, x0);

  std::vector<double> x_ticks = spec.log_x ? Log2Ticks(x0, x1, 10) : NiceTicks(x0, x1, 6);
  if (!spec.log_x) {
    x0 = std::min(x0, x_ticks.front());
    x1 = std::max(x1, x_ticks.back());
  } else if (x1 <= x0) {
    x0 /= 2;
    x1 *= 2;
  }
  const std::vector<double> y_ticks = NiceTicks(y0, y1 + (y1 - y0) * 0.05, 5);
  y0 = std::min(y0, y_ticks.front());
  y1 = std::max(y1, y_ticks.back());
  const Frame f{x0, x1, y0, y1, spec.log_x, left, right, top, bottom};

  // Grid, ticks and labels.
  svg += "<g class=\"axes\" stroke=\"#000\">\n";
  for (double t : y_ticks) {
    if (t < y0 || t > y1) continue;
    svg += fmt::format(
        "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"#ddd\"/>"
        "<text x=\"{3}\" y=\"{4}\" text-anchor=\"end\" stroke=\"none\">{5}</text>\n",
        Num(left), Num(right), Num(f.Y(t)), Num(left - 6), Num(f.Y(t) + 4),
        EscapeXml(TickLabel(t)));
  }
  for (double t : x_ticks) {
    if (t < x0 * (1 - 1e-9) || t > x1 * (1 + 1e-9)) continue;
    svg += fmt::format(
        "<line x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" stroke=\"#eee\"/>"
        "<line x1=\"{0}\" x2=\"{0}\" y1=\"{2}\" y2=\"{3}\"/>"
        "<text x=\"{0}\" y=\"{4}\" text-anchor=\"middle\" stroke=\"none\">{5}</text>\n",
        Num(f.X(t)), Num(top), Num(bottom), Num(bottom + 5), Num(bottom + 18),
        EscapeXml(TickLabel(t)));
  }
  svg += fmt::format(
      "<line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\"/><line x1=\"{0}\" x2=\"{0}\" "
      "y1=\"{3}\" y2=\"{2}\"/>\n</g>\n",
      Num(left), Num(right), Num(bottom), Num(top));
  svg += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}{}</text>\n",
                     Num((left + right) / 2), Num(bottom + 36), EscapeXml(spec.x_label),
                     spec.log_x ? " (log scale)" : "");
  svg += fmt::format(
      "<text x=\"14\" y=\"{0}\" text-anchor=\"middle\" transform=\"rotate(-90 14 "
      "{0})\">{1}</text>\n",
      Num((top + bottom) / 2), EscapeXml(spec.y_label));

  // Series: bars, line, points.
  for (const auto& s : spec.series) {
    const std::string& colour = SeriesColour(s.colour);
    svg += fmt::format("<g class=\"series\" data-series=\"{}\" stroke=\"{}\" fill=\"{}\">\n",
                       EscapeXml(s.name), colour, colour);
    std::string d;
    for (size_t i = 0; i < s.x.size() && i < s.y.size(); ++i) {
      if (!Finite(s.x[i]) || !Finite(s.y[i]) || (spec.log_x && s.x[i] <= 0)) continue;
      const double px = f.X(s.x[i]), py = f.Y(s.y[i]);
      if (i < s.y_min.size() && i < s.y_max.size() && Finite(s.y_min[i]) && Finite(s.y_max[i]) &&
          s.y_max[i] > s.y_min[i]) {
        svg += fmt::format(
            "<line class=\"range\" x1=\"{0}\" x2=\"{0}\" y1=\"{1}\" y2=\"{2}\" "
            "stroke-width=\"1\"/>\n",
            Num(px), Num(f.Y(s.y_min[i])), Num(f.Y(s.y_max[i])));
      }
      d += fmt::format("{}{} {} ", d.empty() ? "M" : "L", Num(px), Num(py));
      svg += fmt::format(
          "<circle class=\"point\" cx=\"{}\" cy=\"{}\" r=\"3\"><title>{}: ({}, {})</title>"
          "</circle>\n",
          Num(px), Num(py), EscapeXml(s.name), TickLabel(s.x[i]), TickLabel(s.y[i]));
      if (i < s.point_labels.size() && !s.point_labels[i].empty()) {
        svg += fmt::format(
            "<text class=\"point-label\" x=\"{}\" y=\"{}\" font-size=\"9\" stroke=\"none\">{}"
            "</text>\n",
            Num(px + 5), Num(py - 5), EscapeXml(s.point_labels[i]));
      }
    }
    if (s.line && !d.empty()) {
      d.pop_back();
      svg += fmt::format("<path class=\"line\" d=\"{}\" fill=\"none\" stroke-width=\"2\"{}/>\n", d,
                         s.dashed ? " stroke-dasharray=\"6 4\"" : "");
    }
    svg += "</g>\n";
  }
  // Marks on top.
  for (const auto& m : spec.marks) {
    if (!Finite(m.x) || !Finite(m.y) || (spec.log_x && m.x <= 0)) continue;
    const double px = f.X(m.x), py = f.Y(m.y);
    const std::string& colour = SeriesColour(m.colour);
    const std::string title = EscapeXml(m.label);
    if (m.kind == "knee") {
      svg += fmt::format(
          "<path class=\"mark-knee\" d=\"M{0} {1} L{2} {3} L{0} {4} L{5} {3} Z\" fill=\"#fff\" "
          "stroke=\"{6}\" stroke-width=\"2\"><title>{7}</title></path>\n",
          Num(px), Num(py - 8), Num(px + 8), Num(py), Num(py + 8), Num(px - 8), colour, title);
    } else if (m.kind == "point") {
      svg += fmt::format(
          "<circle class=\"mark-point\" cx=\"{}\" cy=\"{}\" r=\"3.5\" fill=\"#fff\" "
          "stroke=\"{}\" stroke-width=\"1.5\"><title>{}</title></circle>\n",
          Num(px), Num(py), colour, title);
      continue;
    } else {
      svg += fmt::format(
          "<rect class=\"mark-{0}\" x=\"{1}\" y=\"{2}\" width=\"12\" height=\"12\" fill=\"none\" "
          "stroke=\"{3}\" stroke-width=\"2\"><title>{4}</title></rect>\n",
          EscapeXml(m.kind), Num(px - 6), Num(py - 6), colour, title);
    }
    // Labels near the right edge go to the left of their mark.
    const bool left_of = px > right - 60;
    svg += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10\" fill=\"{}\"{}>{}</text>\n",
                       Num(left_of ? px - 10 : px + 10), Num(py - 8), colour,
                       left_of ? " text-anchor=\"end\"" : "", title);
  }
  // Legend below the plot, one row per series.
  int row = 0;
  for (const auto& s : spec.series) {
    const double y = spec.height + 6 + row * kLegendRow;
    svg += fmt::format(
        "<g class=\"legend\"><line x1=\"{0}\" x2=\"{1}\" y1=\"{2}\" y2=\"{2}\" stroke=\"{3}\" "
        "stroke-width=\"2\"{4}/><text x=\"{5}\" y=\"{6}\">{7}</text></g>\n",
        kLeft, kLeft + 24, Num(y), SeriesColour(s.colour),
        s.dashed ? " stroke-dasharray=\"6 4\"" : "", kLeft + 30, Num(y + 4), EscapeXml(s.name));
    ++row;
  }
  return svg + "</svg>\n";
}

}  // namespace servesweep::report
