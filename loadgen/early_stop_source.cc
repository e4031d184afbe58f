#include "loadgen/early_stop_source.h"

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
  EarlyStopJudge::Ended e;
  e.t_s = MeasuredS(now_ns);
  e.in_flight = in_flight_;
  e.success = r.success;
  e.output_tokens = r.output_tokens;
  // The record's times are the steady clock's; only their differences are used here.
  if (r.first_token_ns >= 0 && r.done_ns >= r.first_token_ns) {
    e.first_token_s = MeasuredS(now_ns - (r.done_ns - r.first_token_ns));
    if (r.scheduled_ns >= 0) e.due_to_first_token_s = (r.first_token_ns - r.scheduled_ns) / 1e9;
    if (r.sent_ns >= 0) e.ttft_s = (r.first_token_ns - r.sent_ns) / 1e9;
    if (r.sent_ns >= 0) e.e2e_s = (r.done_ns - r.sent_ns) / 1e9;
    if (r.output_tokens > 1 && r.end_ns > r.first_token_ns) {
      e.tpot_s = (r.end_ns - r.first_token_ns) / 1e9 / (r.output_tokens - 1);
    }
  }
  judge_.End(e);
}

int64_t EarlyStopSource::IssueEndNs() const {
  return stopped_at_ns_ >= 0 ? stopped_at_ns_ : inner_.IssueEndNs();
}

}  // namespace servesweep::loadgen
