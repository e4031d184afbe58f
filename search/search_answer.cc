#include "search/search_answer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string_view>

#include "perfmodel/calibration.h"
#include "report/report_curves.h"
#include "report/report_html.h"
#include "report/svg_plot.h"

namespace servesweep::search {
namespace {

// NaN as JSON null.
nlohmann::json Number(double v) { return std::isnan(v) ? nlohmann::json() : nlohmann::json(v); }
nlohmann::json Level(const std::optional<double>& v) {
  return v ? nlohmann::json(*v) : nlohmann::json();
}
std::string Text(double v) { return std::isnan(v) ? "n/a" : fmt::format("{:.4g}", v); }
std::string Text(const std::optional<double>& v) { return v ? fmt::format("{:.4g}", *v) : "none"; }

// The model's error on the runs of each round, each predicted before it ran, and when the
// model was fitted again (--learn): how the error fell as the search went on.
std::string ModelErrorMarkdown(const SearchAnswer& a) {
  std::map<int, std::vector<double>> errors;  // round -> |error| of the objective
  std::map<int, int> generation;
  for (const auto& s : a.result.steps) {
    const double e = s.predicted_objective / s.objective - 1;
    if (s.not_counted.empty() && std::isfinite(e)) errors[s.round].push_back(std::abs(e));
    generation[s.round] = s.model_generation;
  }
  std::string md =
      "\n## The model's error as the search went on\n\nThe median |error| of the objective "
      "predicted before each run, per round";
  md += a.result.model_updates.empty()
            ? " (the model was not fitted again: `--learn` fits it after every round).\n\n"
            : "; model 0 is the one the search began with, model N the fit after an earlier "
              "round.\n\n";
  md += "| round | model | runs | median abs error |\n|---|---|---|---|\n";
  for (const auto& [round, e] : errors) {
    md += fmt::format("| {} | {} | {} | {:.1f}% |\n", round, generation[round], e.size(),
                      perfmodel::MedianAbs(e) * 100);
  }
  if (!a.result.model_updates.empty()) {
    md += "\n| fitted after round | model | counted runs | fit |\n|---|---|---|---|\n";
    for (const auto& u : a.result.model_updates) {
      md += fmt::format("| {} | {} | {} | {} |\n", u.round, u.generation, u.runs, u.note);
    }
  }
  return md;
}

}  // namespace

nlohmann::json SearchAnswerJson(const SearchAnswer& a) {
  const auto& info = InfoOf(a.spec.objective);
  nlohmann::json constraints = nlohmann::json::array();
  for (const auto& c : a.spec.constraints) {
    constraints.push_back({{"column", c.column}, {c.is_max ? "max" : "min", c.limit}});
  }
  nlohmann::json configurations = nlohmann::json::array();
  for (size_t i = 0; i < a.configurations.size(); ++i) {
    const auto& r = a.result.configurations[i];
    const auto& p = r.prediction;
    configurations.push_back({{"label", a.configurations[i].label},
                              {"ladder", a.configurations[i].ladder},
                              {"gpus", a.configurations[i].gpus},
                              {"predicted",
                               {{"error", p.error},
                                {"limit", p.limit},
                                {"objective", Number(p.objective)},
                                {"optimistic", Number(p.optimistic)},
                                {"pessimistic", Number(p.pessimistic)},
                                {"band_kind", p.band_kind},
                                {"band_known", p.band.known()},
                                {"band_low_pct", Number(p.band.known() ? p.band.low_pct : NAN)},
                                {"band_high_pct", Number(p.band.known() ? p.band.high_pct : NAN)}}},
                              {"status", ConfigurationStatusName(r.status)},
                              {"why", r.why},
                              {"limit", Level(r.limit)},
                              {"lowest_failing", Level(r.lowest_failing)},
                              {"uncertainty", r.uncertainty},
                              {"objective", Number(r.objective)},
                              {"binding", r.binding},
                              {"runs", r.runs},
                              {"gpu_s", r.gpu_s}});
  }
  nlohmann::json steps = nlohmann::json::array();
  for (const auto& s : a.result.steps) {
    steps.push_back({{"round", s.round},
                     {"configuration", s.configuration},
                     {"level", s.level},
                     {"run_id", s.run_id},
                     {"counted", s.not_counted.empty()},
                     {"not_counted", s.not_counted},
                     {"meets", s.meets},
                     {"binding", s.binding},
                     {"objective", Number(s.objective)},
                     {"predicted_objective", Number(s.predicted_objective)},
                     {"model_generation", s.model_generation}});
  }
  nlohmann::json updates = nlohmann::json::array();
  for (const auto& u : a.result.model_updates) {
    updates.push_back(
        {{"round", u.round}, {"runs", u.runs}, {"generation", u.generation}, {"note", u.note}});
  }
  return {{"objective", info.name},
          {"objective_unit", info.unit},
          {"constraints", constraints},
          {"knob", a.spec.knob == LoadKnob::kConcurrency ? "concurrency" : "request_rate"},
          {"predict_only", a.predict_only},
          {"winner", a.result.winner ? nlohmann::json(*a.result.winner) : nlohmann::json()},
          {"rounds", a.result.rounds},
          {"real_runs", a.result.steps.size()},
          {"gpu_s", a.result.gpu_s},
          {"kept_idle_gpu_s", a.kept_idle_gpu_s},
          {"exhaustive_gpu_s_estimated",
           a.exhaustive_known ? nlohmann::json(a.exhaustive_gpu_s) : nlohmann::json()},
          {"stopped_by", a.result.stopped_by},
          {"configurations", configurations},
          {"steps", steps},
          {"model_updates", updates}};
}

std::string SearchAnswerMarkdown(const SearchAnswer& a) {
  const auto& info = InfoOf(a.spec.objective);
  const auto& r = a.result;
  // --predict-only: the model stood in for the runs, and says so in every figure's place.
  const char* runs_word = a.predict_only ? "simulated" : "real";
  const char* measured_word = a.predict_only ? "simulated" : "measured";
  std::string md = fmt::format("# Search: {} ({})\n\n", info.name, info.unit);
  std::string limits;
  for (const auto& c : a.spec.constraints) {
    limits += fmt::format("{}{} {} {}", limits.empty() ? "" : ", ", c.column,
                          c.is_max ? "<=" : ">=", c.limit);
  }
  md += fmt::format("Constraints: {}. Load searched: {} in [{}, {}], within {:.0f}%.\n\n", limits,
                    a.spec.knob == LoadKnob::kConcurrency ? "concurrency" : "request rate",
                    a.spec.load_min, a.spec.load_max, a.spec.precision * 100);
  if (a.predict_only) md += "**Predicted only** (`--predict-only`): nothing was run.\n\n";
  if (r.winner) {
    const auto& w = r.configurations[*r.winner];
    md += fmt::format(
        "## Winner: {}\n\n{} {} at {} (the lowest failing level {}, so the limit is within "
        "{:.1f}%); bound by {}. Evidence: {} {} run(s), {:.1f} GPU-s.\n\n",
        a.configurations[*r.winner].label, Text(w.objective), info.unit,
        DescribeLevel(a.spec, *w.limit), Text(w.lowest_failing), w.uncertainty * 100,
        w.binding.empty() ? "nothing (load.max met)" : w.binding, w.runs, runs_word, w.gpu_s);
  } else {
    md += "## No winner\n\nNo configuration was measured to meet the constraints";
    md += r.stopped_by.empty() ? ".\n\n"
                               : fmt::format(" before the search stopped ({}).\n\n", r.stopped_by);
  }
  md += fmt::format("Spent: {} {} run(s) in {} round(s), {:.1f} GPU-s", r.steps.size(), runs_word,
                    r.rounds, r.gpu_s);
  if (a.exhaustive_known && a.exhaustive_gpu_s > 0) {
    md += fmt::format(
        " ({:.0f}% of the {:.1f} GPU-s the model estimates for the matrix's "
        "exhaustive grid)",
        100 * r.gpu_s / a.exhaustive_gpu_s, a.exhaustive_gpu_s);
  }
  if (a.kept_idle_gpu_s > 0) {
    md += fmt::format(
        "; besides, at most {:.1f} GPU-s held by engines kept between rounds while the search "
        "chose the next",
        a.kept_idle_gpu_s);
  }
  md +=
      ".\n\n## Ranking\n\nMeasured figures are at the measured limit; predicted ones (the "
      "performance model, with its cross-validated band) are marked so.\n\n"
      "| # | configuration | GPUs | status | objective | limit | binding | predicted (band) "
      "| runs |\n|---|---|---|---|---|---|---|---|---|\n";
  std::vector<size_t> order(a.configurations.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  auto value = [&](size_t i) {
    const auto& c = r.configurations[i];
    return c.status == ConfigurationStatus::kFound ? c.objective : NAN;
  };
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) {
    if (Better(a.spec.objective, value(x), value(y))) return true;
    if (Better(a.spec.objective, value(y), value(x))) return false;
    return Better(a.spec.objective, r.configurations[x].prediction.objective,
                  r.configurations[y].prediction.objective);
  });
  int rank = 0;
  for (size_t i : order) {
    const auto& c = r.configurations[i];
    const auto& p = c.prediction;
    const std::string band = p.band.known()
                                 ? fmt::format("{:+.0f}%..{:+.0f}%, optimistic {}", p.band.low_pct,
                                               p.band.high_pct, Text(p.optimistic))
                                 : "band unknown";
    const std::string predicted =
        p.error.empty()
            ? fmt::format("{} at {} ({}, {})", Text(p.objective), p.limit, p.band_kind, band)
            : "model: " + p.error;
    const bool measured = c.status == ConfigurationStatus::kFound;
    md += fmt::format("| {} | {} | {} | {}{} | {} | {} | {} | {} | {} |\n", ++rank,
                      a.configurations[i].label, a.configurations[i].gpus,
                      ConfigurationStatusName(c.status), c.why.empty() ? "" : ": " + c.why,
                      measured ? Text(c.objective) + " " + measured_word : "", Text(c.limit),
                      c.binding, predicted, c.runs);
  }
  // The model's error on each real run it predicted before the run.
  md +=
      "\n## The search's path\n\n![The search's path: each configuration's levels in the "
      "order they ran, failing ones marked](search.svg)\n\nEach run, in order, with the "
      "model's prediction of its objective before it ran (error = predicted / measured - "
      "1).\n\n"
      "| round | configuration | level | verdict | measured | predicted | error |\n"
      "|---|---|---|---|---|---|---|\n";
  for (const auto& s : r.steps) {
    const std::string verdict = !s.not_counted.empty()
                                    ? "not counted: " + s.not_counted
                                    : (s.meets ? "meets" : "fails (" + s.binding + ")");
    const double error = s.predicted_objective / s.objective - 1;
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} |\n", s.round,
                      a.configurations[s.configuration].label, s.level, verdict, Text(s.objective),
                      Text(s.predicted_objective),
                      std::isfinite(error) ? fmt::format("{:+.1f}%", error * 100) : "n/a");
  }
  md += ModelErrorMarkdown(a);
  // The Pareto frontier over every counted run: output tok/s per GPU vs tok/s per user.
  std::vector<report::XY> points;
  std::vector<size_t> which;
  for (size_t i = 0; i < r.steps.size(); ++i) {
    const auto& f = r.steps[i].figures;
    const auto x = f.find("decode_median_tok_per_s"), y = f.find("output_throughput_per_gpu");
    if (x == f.end() || y == f.end()) continue;
    points.push_back({x->second, y->second});
    which.push_back(i);
  }
  md +=
      "\n## Pareto frontier of what was measured\n\n| tok/s per user | output tok/s per GPU | "
      "configuration | level |\n|---|---|---|---|\n";
  for (size_t k : report::ParetoFrontier(points)) {
    const auto& s = r.steps[which[k]];
    md += fmt::format("| {:.1f} | {:.1f} | {} | {} |\n", points[k].x, points[k].y,
                      a.configurations[s.configuration].label, s.level);
  }
  return md;
}

// The search's path as a plot: each configuration's levels in the order they were run (x: the
// real run's number, y: its level), failing levels marked.
std::string SearchPathSvg(const SearchAnswer& a) {
  report::PlotSpec plot;
  plot.id = "search-path";
  plot.title = "The search's path";
  plot.x_label = "run";
  plot.y_label = a.spec.knob == LoadKnob::kConcurrency ? "concurrency" : "request rate";
  plot.zero_x = true;
  std::map<size_t, size_t> series_of;  // configuration -> series
  for (size_t i = 0; i < a.result.steps.size(); ++i) {
    const auto& step = a.result.steps[i];
    auto [at, added] = series_of.emplace(step.configuration, plot.series.size());
    if (added) {
      report::PlotSeries series;
      series.name = a.configurations[step.configuration].label;
      series.colour = plot.series.size();
      plot.series.push_back(std::move(series));
    }
    auto& series = plot.series[at->second];
    series.x.push_back(static_cast<double>(i + 1));
    series.y.push_back(step.level);
    if (!step.not_counted.empty() || !step.meets) {
      report::PlotMark mark;
      mark.x = static_cast<double>(i + 1);
      mark.y = step.level;
      mark.kind = "point";
      mark.label =
          step.not_counted.empty() ? "fails: " + step.binding : "not counted: " + step.not_counted;
      mark.colour = at->second;
      plot.marks.push_back(mark);
    }
  }
  return report::RenderSvg(plot);
}

std::string SearchFrontierSvg(const SearchAnswer& a) {
  report::PlotSpec plot;
  plot.id = "search-frontier";
  plot.title = "Measured runs: throughput per GPU against speed per user";
  plot.x_label = "tok/s per user (median decode)";
  plot.y_label = "output tok/s per GPU";
  plot.zero_x = true;
  std::map<size_t, size_t> series_of;  // configuration -> series
  std::vector<report::XY> points;
  for (const auto& step : a.result.steps) {
    const auto& f = step.figures;
    const auto x = f.find("decode_median_tok_per_s"), y = f.find("output_throughput_per_gpu");
    if (!step.not_counted.empty() || x == f.end() || y == f.end()) continue;
    auto [at, added] = series_of.emplace(step.configuration, plot.series.size());
    if (added) {
      report::PlotSeries series;
      series.name = a.configurations[step.configuration].label;
      series.colour = plot.series.size();
      series.line = false;
      plot.series.push_back(std::move(series));
    }
    plot.series[at->second].x.push_back(x->second);
    plot.series[at->second].y.push_back(y->second);
    points.push_back({x->second, y->second});
  }
  report::PlotSeries frontier;
  frontier.name = "Pareto frontier";
  frontier.colour = plot.series.size();
  frontier.dashed = true;
  std::vector<size_t> on = report::ParetoFrontier(points);
  std::sort(on.begin(), on.end(), [&](size_t l, size_t r) { return points[l].x < points[r].x; });
  for (size_t k : on) {
    frontier.x.push_back(points[k].x);
    frontier.y.push_back(points[k].y);
  }
  if (!frontier.x.empty()) plot.series.push_back(std::move(frontier));
  return report::RenderSvg(plot);
}

std::string SearchAnswerHtml(const SearchAnswer& a, const std::string& markdown) {
  const auto& info = InfoOf(a.spec.objective);
  std::string html = report::HtmlPageHead(fmt::format("Search: {} ({})", info.name, info.unit));
  if (a.predict_only) {
    html +=
        "<div class=\"banner\" id=\"simulated\">PREDICTED ONLY: these figures come from the "
        "performance model (--predict-only); nothing was run.</div>\n";
  }
  html += "<div class=\"plots\">\n" + SearchPathSvg(a) + SearchFrontierSvg(a) + "</div>\n";
  // search.md without its title (the page's) and its image line (the plot above).
  std::string body;
  size_t from = markdown.find('\n');
  for (size_t at = from == std::string::npos ? markdown.size() : from + 1; at < markdown.size();) {
    size_t end = markdown.find('\n', at);
    if (end == std::string::npos) end = markdown.size();
    const std::string_view line(markdown.data() + at, end - at);
    if (!line.starts_with("![")) body.append(line).append("\n");
    at = end + 1;
  }
  return html + report::MarkdownToHtml(body) + "</body>\n</html>\n";
}

}  // namespace servesweep::search
