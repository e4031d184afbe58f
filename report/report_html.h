// report.html: one self-contained file (inline SVG and CSS, no script, no external resource):
// the plots of a sweep (Pareto frontier, TTFT and E2E latency, throughput with knee and best SLO
// point, engine signals per run) followed by the sections of report.md rendered as HTML, so the
// two never disagree. Every text taken from the results is escaped.
//
// Thread-safety: plain functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "report/report_data.h"
#include "report/svg_plot.h"

namespace servesweep::report {

// The subset of Markdown report.md uses: #/##/### headings, pipe tables (header row, then a
// |---| row), "- " lists, paragraphs, **bold** and `code`. Text is escaped first.
std::string MarkdownToHtml(std::string_view markdown);

// The plots of the report, each a PlotSpec (ids: pareto, ttft, e2el, throughput,
// signals-<n>-kv, signals-<n>-requests).
std::vector<PlotSpec> ReportPlots(const ReportData& data);

// A page's start up to its <h1>`title`</h1>: the style every servesweep page shares and a
// policy that loads nothing (no script, no external resource). The page ends "</body></html>".
std::string HtmlPageHead(const std::string& title);

// The page: `title`, a SIMULATED banner when the data is simulated, the plots, then
// `markdown_body` (report.md without its title) as HTML.
std::string ReportHtml(const ReportData& data, const std::string& title,
                       const std::string& markdown_body);

}  // namespace servesweep::report
