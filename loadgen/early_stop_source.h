// A request source that ends its phase when the early-stop judge says so (loadgen/early_stop.h):
// from the verdict on nothing more is due, the source is exhausted, and the drain (and its
// timeout) starts at once, so the requests in flight finish and stay measured. Every send and
// end of the inner source reaches the judge; the time-based rules are judged whenever the load
// loop asks whether the source is exhausted (each wake-up).
//
// Times are ns from the phase start t0, as RequestSource's. Not thread-safe (SharedSource).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "loadgen/early_stop.h"
#include "loadgen/request_source.h"

namespace servesweep::loadgen {

class EarlyStopSource final : public RequestSource {
 public:
  // `measured_from_ns`: where the measured phase starts (a timed warm-up's end; 0 otherwise).
  // `watch_in_flight`: an open loop without a cap (EarlyStopJudge).
  EarlyStopSource(RequestSource& inner, const workload::EarlyStopSettings& settings,
                  bool watch_in_flight, int64_t measured_from_ns);

  int64_t NextDueNs(int64_t now_ns) override;
  bool Exhausted(int64_t now_ns) const override;
  void Take(int64_t due_ns, RequestRecord& record, RequestContent* content) override;
  bool TakeIfDue(int64_t now_ns, int64_t* due_ns, RequestRecord& record,
                 RequestContent* content) override;
  void Finished(const RequestRecord& record, const std::string& answer, int64_t now_ns) override;
  bool WantsAnswerText() const override { return inner_.WantsAnswerText(); }
  int64_t IssueEndNs() const override;
  uint32_t ExpectedTotal() const override { return inner_.ExpectedTotal(); }

  // The verdict (reason kNone when the phase ran its full length).
  const StopVerdict& verdict() const { return verdict_; }
  // Ns from t0 at which the phase was stopped; -1 when it was not.
  int64_t stopped_at_ns() const { return stopped_at_ns_; }

 private:
  double MeasuredS(int64_t now_ns) const { return (now_ns - measured_from_ns_) / 1e9; }
  // Judges at now_ns; true once stopped.
  bool Stopped(int64_t now_ns) const;

  RequestSource& inner_;
  const int64_t measured_from_ns_;
  // Judged from const Exhausted(): the judge's state is this source's own bookkeeping.
  mutable EarlyStopJudge judge_;
  mutable int64_t stopped_at_ns_ = -1;
  mutable StopVerdict verdict_;
  uint32_t in_flight_ = 0;
};

// What the judge sees of a measured request that ended at end_ns (ns from t0).
EarlyStopJudge::Ended EndedOf(const RequestRecord& record, uint32_t in_flight, int64_t end_ns,
                              int64_t measured_from_ns);

// The verdict a finished phase's records would have been given by an EarlyStopSource, judged
// after the fact in the order the load loop sees them (at equal times an end before a send, as a
// closed loop's slot frees before its next send; every send is judged before it goes, every end
// after it arrives). Records: ns from t0, a duration mode's warm-up ones flagged (they count in
// flight, are not judged). *stopped_at_ns: where the phase would have stopped (-1: it ran its
// full length); a request sent at or after it would not have been sent. For the performance
// model's runs (record/virtual_run.h), which simulate the whole phase and then cut it there.
StopVerdict JudgeAfterTheFact(const std::vector<RequestRecord>& records,
                              const workload::EarlyStopSettings& settings, bool watch_in_flight,
                              int64_t measured_from_ns, int64_t* stopped_at_ns);

}  // namespace servesweep::loadgen
