#include "loadgen/early_stop_source.h"

#include <algorithm>
#include <cmath>

namespace servesweep::loadgen {

EarlyStopSource::EarlyStopSource(RequestSource& inner, const workload::EarlyStopSettings& settings,
                                 bool watch_in_flight, int64_t measured_from_ns)
    : inner_(inner), measured_from_ns_(measured_from_ns), judge_(settings, watch_in_flight) {}

bool EarlyStopSource::Stopped(int64_t now_ns) const {
  if (stopped_at_ns_ >= 0) return true;
  if (now_ns < measured_from_ns_) return false;
  const StopVerdict& verdict = judge_.Judge(MeasuredS(now_ns));
  if (verdict.reason == StopReason::kNone) return false;
  stopped_at_ns_ = now_ns;
  verdict_ = verdict;
  return true;
}

int64_t EarlyStopSource::NextDueNs(int64_t now_ns) {
  return Stopped(now_ns) ? kNotYet : inner_.NextDueNs(now_ns);
}

bool EarlyStopSource::Exhausted(int64_t now_ns) const {
  return Stopped(now_ns) || inner_.Exhausted(now_ns);
}

void EarlyStopSource::Take(int64_t due_ns, RequestRecord& record, RequestContent* content) {
  inner_.Take(due_ns, record, content);
  ++in_flight_;
  judge_.Sent(MeasuredS(due_ns), in_flight_);
}

bool EarlyStopSource::TakeIfDue(int64_t now_ns, int64_t* due_ns, RequestRecord& record,
                                RequestContent* content) {
  if (Stopped(now_ns) || !inner_.TakeIfDue(now_ns, due_ns, record, content)) return false;
  ++in_flight_;
  judge_.Sent(MeasuredS(now_ns), in_flight_);
  return true;
}

void EarlyStopSource::Finished(const RequestRecord& r, const std::string& answer, int64_t now_ns) {
  inner_.Finished(r, answer, now_ns);
  if (in_flight_ > 0) --in_flight_;
  if (r.warmup) return;
  judge_.End(EndedOf(r, in_flight_, now_ns, measured_from_ns_));
}

int64_t EarlyStopSource::IssueEndNs() const {
  return stopped_at_ns_ >= 0 ? stopped_at_ns_ : inner_.IssueEndNs();
}

EarlyStopJudge::Ended EndedOf(const RequestRecord& r, uint32_t in_flight, int64_t end_ns,
                              int64_t measured_from_ns) {
  auto measured_s = [&](int64_t ns) { return (ns - measured_from_ns) / 1e9; };
  EarlyStopJudge::Ended e;
  e.t_s = measured_s(end_ns);
  e.in_flight = in_flight;
  e.success = r.success;
  e.output_tokens = r.output_tokens;
  // The record's times may be another clock's (the steady clock's, in the loop): only their
  // differences are used, placed against end_ns.
  if (r.first_token_ns >= 0 && r.done_ns >= r.first_token_ns) {
    e.first_token_s = measured_s(end_ns - (r.done_ns - r.first_token_ns));
    if (r.scheduled_ns >= 0) e.due_to_first_token_s = (r.first_token_ns - r.scheduled_ns) / 1e9;
    if (r.sent_ns >= 0) e.ttft_s = (r.first_token_ns - r.sent_ns) / 1e9;
    if (r.sent_ns >= 0) e.e2e_s = (r.done_ns - r.sent_ns) / 1e9;
    if (r.output_tokens > 1 && r.end_ns > r.first_token_ns) {
      e.tpot_s = (r.end_ns - r.first_token_ns) / 1e9 / (r.output_tokens - 1);
    }
  }
  return e;
}

StopVerdict JudgeAfterTheFact(const std::vector<RequestRecord>& records,
                              const workload::EarlyStopSettings& settings, bool watch_in_flight,
                              int64_t measured_from_ns, int64_t* stopped_at_ns) {
  *stopped_at_ns = -1;
  struct Event {
    int64_t t_ns;
    bool send;
    size_t record;
  };
  std::vector<Event> events;
  events.reserve(2 * records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    const RequestRecord& r = records[i];
    if (r.start_ns < 0) continue;  // never sent
    events.push_back({r.start_ns, true, i});
    if (r.done_ns >= 0) events.push_back({r.done_ns, false, i});
  }
  std::stable_sort(events.begin(), events.end(), [](const Event& a, const Event& b) {
    return a.t_ns != b.t_ns ? a.t_ns < b.t_ns : (!a.send && b.send);
  });
  EarlyStopJudge judge(settings, watch_in_flight);
  StopVerdict verdict;
  uint32_t in_flight = 0;
  auto judged = [&](int64_t t_ns) {
    if (t_ns < measured_from_ns) return false;
    // The time cap holds at its own time, not at the next event's.
    if (settings.max_duration_s > 0) {
      const auto cap_ns = measured_from_ns + std::llround(settings.max_duration_s * 1e9);
      if (t_ns > cap_ns) t_ns = cap_ns;
    }
    verdict = judge.Judge((t_ns - measured_from_ns) / 1e9);
    if (verdict.reason == StopReason::kNone) return false;
    *stopped_at_ns = t_ns;
    return true;
  };
  for (const Event& e : events) {
    const RequestRecord& r = records[e.record];
    if (e.send) {
      if (judged(e.t_ns)) break;
      ++in_flight;
      judge.Sent((e.t_ns - measured_from_ns) / 1e9, in_flight);
      continue;
    }
    if (in_flight > 0) --in_flight;
    if (r.warmup) continue;
    judge.End(EndedOf(r, in_flight, e.t_ns, measured_from_ns));
    if (judged(e.t_ns)) break;
  }
  if (*stopped_at_ns < 0) verdict = StopVerdict{};
  return verdict;
}

}  // namespace servesweep::loadgen
