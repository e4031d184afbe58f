// One request source shared by several load threads: every call that reads or changes what is
// left to send is made under one lock (WantsAnswerText is fixed at construction; IssueEndNs is
// not, since an early stop moves it), and a due request is taken in one step (TakeIfDue), so
// each request goes out exactly once. The lock is held for a source call only (microseconds),
// never across a network wait.
//
// Thread-safety: all methods may be called from any thread.
#pragma once

#include <mutex>
#include <string>

#include "loadgen/request_source.h"

namespace servesweep::loadgen {

class SharedSource final : public RequestSource {
 public:
  explicit SharedSource(RequestSource& inner) : inner_(inner) {}

  int64_t NextDueNs(int64_t now_ns) override {
    std::lock_guard lock(mu_);
    return inner_.NextDueNs(now_ns);
  }
  bool Exhausted(int64_t now_ns) const override {
    std::lock_guard lock(mu_);
    return inner_.Exhausted(now_ns);
  }
  void Take(int64_t due_ns, RequestRecord& record, RequestContent* content) override {
    std::lock_guard lock(mu_);
    inner_.Take(due_ns, record, content);
  }
  bool TakeIfDue(int64_t now_ns, int64_t* due_ns, RequestRecord& record,
                 RequestContent* content) override {
    std::lock_guard lock(mu_);
    return inner_.TakeIfDue(now_ns, due_ns, record, content);
  }
  void Finished(const RequestRecord& record, const std::string& answer, int64_t now_ns) override {
    std::lock_guard lock(mu_);
    inner_.Finished(record, answer, now_ns);
  }
  bool WantsAnswerText() const override { return inner_.WantsAnswerText(); }
  int64_t IssueEndNs() const override {
    std::lock_guard lock(mu_);
    return inner_.IssueEndNs();
  }
  uint32_t ExpectedTotal() const override {
    std::lock_guard lock(mu_);
    return inner_.ExpectedTotal();
  }

 private:
  RequestSource& inner_;
  mutable std::mutex mu_;
};

}  // namespace servesweep::loadgen
