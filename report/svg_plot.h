// A small SVG line/scatter plot writer for report.html: axes with ticks and labels, linear or
// log2 x (concurrency doubles), series with optional min..max bars, marked points (knee, SLO
// point) and a legend, in the Okabe-Ito colour-blind-safe palette. Static SVG: no script, no
// external resource. Every text is escaped.
//
// Thread-safety: plain functions and values.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace servesweep::report {

// Text for HTML/SVG content and attribute values (& < > " ').
std::string EscapeXml(std::string_view text);

// Okabe & Ito's palette (black first dropped for series: it is kept for axes), cycled.
const std::string& SeriesColour(size_t index);

struct PlotSeries {
  std::string name;
  std::vector<double> x, y;
  std::vector<double> y_min, y_max;       // optional bars (same length as y), e.g. over repeats
  size_t colour = 0;                      // index into the palette
  bool dashed = false;                    // e.g. p95 beside a solid p50
  bool line = true;                       // false: points only
  std::vector<std::string> point_labels;  // optional, beside each point (e.g. its level)
};

struct PlotMark {
  double x = 0, y = 0;
  // "knee" (diamond), "slo" (square) or "point" (hollow circle); the SVG class is mark-<kind>.
  std::string kind;
  std::string label;  // its <title>, and shown beside it unless kind is "point"
  size_t colour = 0;
};

struct PlotSpec {
  std::string id;  // the svg's id ("plot-<id>") and data-plot attribute
  std::string title, x_label, y_label;
  bool log_x = false;   // base 2
  bool zero_y = true;   // y axis starts at 0
  bool zero_x = false;  // x axis starts at 0 (linear x only)
  std::vector<PlotSeries> series;
  std::vector<PlotMark> marks;
  int width = 640, height = 380;
};

// Tick positions covering [lo, hi]: 1-2-5 steps, about `target` of them.
std::vector<double> NiceTicks(double lo, double hi, int target);
// Powers of two covering [lo, hi] (lo > 0), every k-th so that about `max_ticks` remain.
std::vector<double> Log2Ticks(double lo, double hi, int max_ticks);
// A tick label: 1.2k, 3.5M, 0.25, 64.
std::string TickLabel(double value);

// The <svg> element. A plot without any finite point says "no data" and has no series path.
std::string RenderSvg(const PlotSpec& spec);

}  // namespace servesweep::report
