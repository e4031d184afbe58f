#include "search/search_loop.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

#include "search/prediction_bounds.h"

namespace servesweep::search {
namespace {

constexpr double kNan = std::numeric_limits<double>::quiet_NaN();

// Where a search of a configuration starts when nothing is predicted: the middle of the range.
double MiddleLevel(const SearchSpec& spec) { return std::sqrt(spec.load_min * spec.load_max); }

// The bracket's first step from the predicted limit: as wide as the model's band (the limit
// moves about as much as the figures), doubling when the band is unknown.
double FirstStep(const SearchSpec& spec, const Prediction& p) {
  if (!p.error.empty() || !p.band.known() || std::isnan(p.band.low_pct) ||
      std::isnan(p.band.high_pct)) {
    return 2;
  }
  const double widest = std::max(std::abs(p.band.low_pct), std::abs(p.band.high_pct)) / 100;
  return std::clamp(1 + widest, 1 + 2 * spec.precision, 2.0);
}

}  // namespace

const char* ConfigurationStatusName(ConfigurationStatus status) {
  switch (status) {
    case ConfigurationStatus::kNotReached:
      return "not reached";
    case ConfigurationStatus::kFound:
      return "limit found";
    case ConfigurationStatus::kNoneMeets:
      return "no load meets the constraints";
    case ConfigurationStatus::kPruned:
      return "pruned";
    case ConfigurationStatus::kFailed:
      return "failed";
  }
  return "?";
}

Prediction Predict(const SearchSpec& spec, size_t configuration, const perfmodel::KindBand& band,
                   const std::string& band_kind, const PredictLevel& predict) {
  Prediction out;
  out.band = band;
  out.band_kind = band_kind;
  // The model is deterministic: a close verdict needs no repeat.
  SearchSpec once = spec;
  once.boundary_repeats = 1;
  std::map<double, Figures> seen;
  auto search = [&](std::optional<Side> side, LoadLimitSearch* s) -> Status {
    while (const auto level = s->Next()) {
      auto at = seen.find(*level);
      if (at == seen.end()) {
        Figures figures;
        if (Status st = predict(configuration, *level, &figures); !st.ok()) return st;
        at = seen.emplace(*level, std::move(figures)).first;
      }
      const Figures figures = side ? WithinBand(at->second, band, *side) : at->second;
      s->Record(JudgeLevel(once, figures), ObjectiveValue(spec.objective, figures));
    }
    return Status::Ok();
  };
  LoadLimitSearch nominal(once, MiddleLevel(spec));
  Status st = search(std::nullopt, &nominal);
  LoadLimitSearch optimistic(once, nominal.limit().value_or(spec.load_min));
  if (st.ok()) st = search(Side::kOptimistic, &optimistic);
  LoadLimitSearch pessimistic(once, nominal.limit().value_or(spec.load_min));
  if (st.ok()) st = search(Side::kPessimistic, &pessimistic);
  if (!st.ok()) {
    out.error = st.message();
    out.objective = out.optimistic = out.pessimistic = kNan;
    return out;
  }
  out.limit = nominal.limit().value_or(0);
  out.objective = nominal.objective_at_limit();
  out.optimistic = optimistic.objective_at_limit();
  out.pessimistic = pessimistic.objective_at_limit();
  return out;
}

SearchResult RunSearch(const SearchSpec& spec, const std::vector<Prediction>& predictions,
                       const SearchSettings& settings, const PredictLevel& predict,
                       const MeasureRound& measure) {
  SearchResult result;
  const size_t n = predictions.size();
  result.configurations.resize(n);
  for (size_t i = 0; i < n; ++i) result.configurations[i].prediction = predictions[i];
  // Best predicted first; what the model could not predict comes last, in the caller's order.
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::vector<std::optional<LoadLimitSearch>> searches(n);
  std::vector<int> uncounted_in_a_row(n, 0);
  std::vector<bool> decided(n, false);
  std::vector<size_t> active;
  size_t next_in_order = 0;
  auto leader_objective = [&] {
    return result.winner ? result.configurations[*result.winner].objective : kNan;
  };
  // The model's error on each counted run so far: which model predicted it, for which
  // configuration. With relearn, only fitted models' errors bound what is left.
  struct ModelError {
    int generation = 0;
    size_t configuration = 0;
    double pct = 0;
  };
  std::vector<ModelError> errors;
  int generation = 0;
  const int band_generation = settings.relearn ? 1 : 0;
  const bool learn = settings.learn_band || settings.relearn;
  auto learned_band = [&] {
    std::vector<double> pct;
    std::set<size_t> configurations;
    for (const ModelError& e : errors) {
      if (e.generation < band_generation) continue;
      pct.push_back(e.pct);
      configurations.insert(e.configuration);
    }
    return ObservedBand(pct, configurations.size());
  };
  auto by_prediction = [&](size_t a, size_t b) {
    return Better(spec.objective, result.configurations[a].prediction.objective,
                  result.configurations[b].prediction.objective);
  };
  std::stable_sort(order.begin(), order.end(), by_prediction);
  auto finish = [&](size_t c) {
    decided[c] = true;
    active.erase(std::remove(active.begin(), active.end(), c), active.end());
  };
  while (true) {
    // Prune what has not started and cannot beat the leader, then fill the round.
    while (active.size() < std::max<size_t>(settings.width, 1) && next_in_order < n) {
      const size_t c = order[next_in_order++];
      ConfigurationResult& r = result.configurations[c];
      const perfmodel::KindBand learned = learned_band();
      if (learn && learned.known() && r.prediction.error.empty()) {
        r.prediction = Predict(spec, c, learned,
                               fmt::format("{}this search's {} configurations ({} figures)",
                                           settings.relearn ? "the fitted models' errors on " : "",
                                           learned.cases, learned.figures),
                               predict);
      }
      const Prediction& p = r.prediction;
      if (result.winner && p.error.empty() &&
          CanPrune(spec.objective, p.band.known(), p.optimistic, leader_objective())) {
        r.status = ConfigurationStatus::kPruned;
        r.why = fmt::format(
            "predicted {:.4g} (optimistic {:.4g}, band {} {:+.1f}%..{:+.1f}%) cannot beat the "
            "leader's measured {:.4g}",
            p.objective, p.optimistic, p.band_kind, p.band.low_pct, p.band.high_pct,
            leader_objective());
        decided[c] = true;
        continue;
      }
      // From the predicted limit; where the model says nothing meets, load.min settles it.
      const double start = !p.error.empty() ? MiddleLevel(spec)
                           : p.limit > 0    ? p.limit
                                            : spec.load_min;
      searches[c].emplace(spec, start, FirstStep(spec, p));
      active.push_back(c);
    }
    if (active.empty()) break;
    // The budget is checked before a round: a round once started is measured whole.
    const double gpu_hours = result.gpu_s / 3600;
    const int runs = static_cast<int>(result.steps.size());
    if (spec.budget.runs > 0 && runs >= spec.budget.runs) {
      result.stopped_by = fmt::format("budget: {} real runs", spec.budget.runs);
    } else if (spec.budget.gpu_hours > 0 && gpu_hours >= spec.budget.gpu_hours) {
      result.stopped_by = fmt::format("budget: {} GPU-hours", spec.budget.gpu_hours);
    } else if (spec.budget.wall_s > 0 && settings.elapsed_s &&
               settings.elapsed_s() >= spec.budget.wall_s) {
      result.stopped_by = fmt::format("budget: {} s of wall time", spec.budget.wall_s);
    }
    if (!result.stopped_by.empty()) break;
    std::vector<LevelRequest> requests;
    for (size_t c : active) requests.push_back({c, *searches[c]->Next()});
    std::vector<LevelOutcome> outcomes;
    ++result.rounds;
    if (Status s = measure(result.rounds, requests, &outcomes); !s.ok()) {
      result.stopped_by =
          fmt::format("round {} could not be measured: {}", result.rounds, s.message());
      break;
    }
    outcomes.resize(requests.size());
    for (size_t i = 0; i < requests.size(); ++i) {
      const size_t c = requests[i].configuration;
      const LevelOutcome& o = outcomes[i];
      ConfigurationResult& r = result.configurations[c];
      SearchStep step;
      step.round = result.rounds;
      step.configuration = c;
      step.level = requests[i].level;
      step.run_id = o.run_id;
      step.not_counted = o.not_counted;
      step.predicted_objective = kNan;
      step.model_generation = generation;
      Figures predicted;
      if (r.prediction.error.empty() && predict(c, step.level, &predicted).ok()) {
        step.predicted_objective = ObjectiveValue(spec.objective, predicted);
      }
      ++r.runs;
      r.gpu_s += o.gpu_s;
      result.gpu_s += o.gpu_s;
      if (!o.not_counted.empty()) {
        step.objective = kNan;
        result.steps.push_back(step);
        if (o.permanent || ++uncounted_in_a_row[c] >= settings.max_uncounted) {
          r.status = ConfigurationStatus::kFailed;
          r.why = fmt::format("{} at {} (run {})", o.not_counted, step.level, o.run_id);
          finish(c);
        }
        continue;
      }
      uncounted_in_a_row[c] = 0;
      const LevelVerdict verdict = JudgeLevel(spec, o.figures);
      step.meets = verdict.meets;
      step.binding = verdict.binding;
      step.objective = ObjectiveValue(spec.objective, o.figures);
      step.figures = o.figures;
      result.steps.push_back(step);
      // What the model missed by on this run: the objective and every constrained figure, but
      // energy, which it prices at maximum power (a bound, not a prediction to learn a band from).
      if (!predicted.empty()) {
        std::vector<std::pair<double, double>> pairs;
        if (!IsUpperBoundOnly(InfoOf(spec.objective).column)) {
          pairs.push_back({step.predicted_objective, step.objective});
        }
        for (const Constraint& k : spec.constraints) {
          if (IsUpperBoundOnly(k.column)) continue;
          const auto p = predicted.find(k.column);
          const auto m = o.figures.find(k.column);
          if (p != predicted.end() && m != o.figures.end()) pairs.push_back({p->second, m->second});
        }
        for (const auto& [p, m] : pairs) {
          const double e = (p / m - 1) * 100;
          if (std::isfinite(e) && m > 0) errors.push_back({generation, c, e});
        }
      }
      LoadLimitSearch& s = *searches[c];
      s.Record(verdict, step.objective);
      if (!s.done()) continue;
      r.limit = s.limit();
      r.lowest_failing = s.lowest_failing();
      r.uncertainty = s.uncertainty();
      r.objective = s.objective_at_limit();
      r.binding = s.binding();
      r.status = r.limit ? ConfigurationStatus::kFound : ConfigurationStatus::kNoneMeets;
      if (r.limit && (!result.winner || Better(spec.objective, r.objective, leader_objective()))) {
        result.winner = c;
      }
      finish(c);
    }
    // Learn from the round: fit again, then predict and rank again what has not started.
    const bool counted_one =
        std::any_of(result.steps.end() - static_cast<std::ptrdiff_t>(requests.size()),
                    result.steps.end(), [](const SearchStep& s) { return s.not_counted.empty(); });
    const bool left = !active.empty() || next_in_order < n;
    if (settings.relearn && counted_one && left) {
      std::vector<SearchStep> counted;
      for (const SearchStep& s : result.steps) {
        if (s.not_counted.empty()) counted.push_back(s);
      }
      ModelUpdate update;
      if (settings.relearn(counted, &update.note)) {
        update.round = result.rounds;
        update.runs = counted.size();
        update.generation = ++generation;
        result.model_updates.push_back(std::move(update));
        for (size_t k = next_in_order; k < n; ++k) {
          Prediction& p = result.configurations[order[k]].prediction;
          if (p.error.empty()) p = Predict(spec, order[k], p.band, p.band_kind, predict);
        }
        std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(next_in_order), order.end(),
                         by_prediction);
      }
    }
  }
  // Stopped by the budget: what was under way keeps its bracket so far (not a found limit).
  for (size_t c = 0; c < n; ++c) {
    if (decided[c]) continue;
    ConfigurationResult& r = result.configurations[c];
    r.why = result.stopped_by;
    if (!searches[c]) continue;
    r.limit = searches[c]->limit();
    r.lowest_failing = searches[c]->lowest_failing();
    r.objective = searches[c]->objective_at_limit();
  }
  return result;
}

}  // namespace servesweep::search
