// What the load loop sends next, and when: one source per load mode (closed or open loop by
// count, by duration, multi-turn sessions). The loop (load_generator.cc) asks for the next due
// time, takes requests when due and a slot is free, and reports completions back, so a source
// can schedule what depends on them (a session's next turn).
//
// Times are ns relative to the phase start t0. Not thread-safe: several load threads share one
// through SharedSource (shared_source.h).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <queue>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

#include "loadgen/load_generator.h"
#include "loadgen/prompt_builder.h"

namespace servesweep::loadgen {

// One request's body content. Synthetic unless prompt_text or messages is set.
struct RequestContent {
  uint64_t prompt_index = 0;
  uint32_t input_len_tok = 0;
  uint32_t output_len_tok = 0;
  int32_t adapter = -1;  // index into LoadSettings::adapters; -1 = the base model
  PromptPrefix prefix;
  bool has_prompt_text = false;  // completions: send prompt_text as the prompt
  std::string prompt_text;
  bool has_messages = false;  // chat: send messages as the messages array
  nlohmann::json messages;
};

class RequestSource {
 public:
  static constexpr int64_t kNotYet = std::numeric_limits<int64_t>::max();
  virtual ~RequestSource() = default;

  // The due time of the next request (<= now: due now), or kNotYet when nothing is due until a
  // request finishes (or ever: see Exhausted).
  virtual int64_t NextDueNs(int64_t now_ns) = 0;
  // Nothing more will ever be sent.
  virtual bool Exhausted(int64_t now_ns) const = 0;
  // Takes the next request (due at `due_ns`): fills the record's identity (index, warmup,
  // session, turn, prefix_seen) and the content to send.
  virtual void Take(int64_t due_ns, RequestRecord& record, RequestContent* content) = 0;
  // Takes the next request if it is due at `now_ns` (its due time in *due_ns); false when none
  // is. One step, so that a source shared by several load threads hands each request out once.
  virtual bool TakeIfDue(int64_t now_ns, int64_t* due_ns, RequestRecord& record,
                         RequestContent* content) {
    *due_ns = NextDueNs(now_ns);
    if (*due_ns == kNotYet || *due_ns > now_ns) return false;
    Take(*due_ns, record, content);
    return true;
  }
  // A request ended (finished or cancelled); `answer` is its output text when WantsAnswerText.
  virtual void Finished(const RequestRecord& /*record*/, const std::string& /*answer*/,
                        int64_t /*now_ns*/) {}
  virtual bool WantsAnswerText() const { return false; }
  // No drain starts before this time (duration mode: the window's end).
  virtual int64_t IssueEndNs() const { return 0; }
  // Requests expected in all (progress reports); 0 when unknown.
  virtual uint32_t ExpectedTotal() const { return 0; }
};

// A fixed number of requests: closed loop (schedule empty) or at schedule[i]. Measured requests
// take the plan's lengths and prefixes and the custom prompts when the settings have them.
std::unique_ptr<RequestSource> MakeCountSource(const LoadSettings& settings, uint32_t count,
                                               uint64_t prompt_index_base, bool warmup,
                                               std::vector<int64_t> schedule);

// Duration mode: closed loop (no rate) or the open-loop arrival process, until warmup_s +
// duration_s; requests scheduled before warmup_s are warm-up.
std::unique_ptr<RequestSource> MakeDurationSource(const LoadSettings& settings);

// Multi-turn sessions (LoadSettings::sessions).
std::unique_ptr<RequestSource> MakeSessionSource(const LoadSettings& settings);

// The content of custom prompt i (shared by the sources and the tests).
void FillCustomContent(const CustomPrompt& prompt, uint32_t default_output_len_tok,
                       RequestContent* content);

}  // namespace servesweep::loadgen
