#include "loadgen/request_source.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

namespace servesweep::loadgen {
namespace {

constexpr double kNsPerS = 1e9;

uint32_t CountWords(const std::string& text) {
  uint32_t words = 0;
  bool in_word = false;
  for (char c : text) {
    const bool space = c == ' ' || c == '\t' || c == '\n' || c == '\r';
    if (!space && !in_word) ++words;
    in_word = !space;
  }
  return words;
}

class CountSource : public RequestSource {
 public:
  CountSource(const LoadSettings& s, uint32_t count, uint64_t prompt_index_base, bool warmup,
              std::vector<int64_t> schedule)
      : s_(s),
        count_(count),
        base_(prompt_index_base),
        warmup_(warmup),
        schedule_(std::move(schedule)) {}

  int64_t NextDueNs(int64_t now_ns) override {
    if (next_ >= count_) return kNotYet;
    return schedule_.empty() ? now_ns : schedule_[next_];
  }
  bool Exhausted(int64_t) const override { return next_ >= count_; }
  uint32_t ExpectedTotal() const override { return count_; }

  void Take(int64_t, RequestRecord& r, RequestContent* c) override {
    const uint32_t i = next_++;
    r.index = i;
    r.warmup = warmup_;
    c->prompt_index = base_ + i;
    c->input_len_tok = s_.input_len_tok;
    c->output_len_tok = s_.output_len_tok;
    c->adapter = r.adapter = workload::AdapterOf(s_, i);
    if (warmup_) return;
    if (i < s_.plan.size()) {
      const PlannedRequest& planned = s_.plan[i];
      c->input_len_tok = planned.input_len_tok;
      c->output_len_tok = planned.output_len_tok;
      if (!planned.prefix_blocks.empty()) {
        c->prefix = {&planned.prefix_blocks, planned.prefix_len_tok};
        // Whether an earlier request of this run sent the same first block (a possible hit).
        r.prefix_seen = sent_first_blocks_.insert(planned.prefix_blocks[0]).second ? 0 : 1;
      }
    }
    if (!s_.custom_prompts.empty()) {
      FillCustomContent(s_.custom_prompts[i % s_.custom_prompts.size()], c->output_len_tok, c);
    }
  }

 private:
  const LoadSettings& s_;
  uint32_t count_;
  uint64_t base_;
  bool warmup_;
  std::vector<int64_t> schedule_;
  uint32_t next_ = 0;
  std::unordered_set<uint64_t> sent_first_blocks_;  // first prefix blocks sent so far
};

class DurationSource : public RequestSource {
 public:
  explicit DurationSource(const LoadSettings& s)
      : s_(s),
        warmup_end_ns_(std::llround(s.warmup_s * kNsPerS)),
        end_ns_(std::llround((s.warmup_s + s.duration_s) * kNsPerS)),
        open_loop_(s.request_rate_per_s > 0 || s.ramp != RampKind::kNone) {
    if (open_loop_) {
      process_ = std::make_unique<ArrivalProcess>(ArrivalKindFor(s), s.burstiness,
                                                  RateProfileFor(s, 0), s.seed);
      next_due_ns_ = process_->NextNs();
    }
  }

  int64_t NextDueNs(int64_t now_ns) override {
    if (open_loop_) return next_due_ns_ < end_ns_ ? next_due_ns_ : kNotYet;
    return now_ns < end_ns_ ? now_ns : kNotYet;
  }
  bool Exhausted(int64_t now_ns) const override {
    return open_loop_ ? next_due_ns_ >= end_ns_ : now_ns >= end_ns_;
  }
  int64_t IssueEndNs() const override { return end_ns_; }

  void Take(int64_t due_ns, RequestRecord& r, RequestContent* c) override {
    const uint32_t i = taken_++;
    r.index = i;
    r.warmup = due_ns < warmup_end_ns_;  // by scheduled time: every arrival of the window counts
    c->prompt_index = i;
    c->input_len_tok = s_.input_len_tok;
    c->output_len_tok = s_.output_len_tok;
    c->adapter = r.adapter = workload::AdapterOf(s_, i);
    if (!s_.custom_prompts.empty()) {
      FillCustomContent(s_.custom_prompts[i % s_.custom_prompts.size()], c->output_len_tok, c);
    }
    if (open_loop_) next_due_ns_ = process_->NextNs();
  }

 private:
  const LoadSettings& s_;
  int64_t warmup_end_ns_;
  int64_t end_ns_;
  bool open_loop_;
  std::unique_ptr<ArrivalProcess> process_;
  int64_t next_due_ns_ = 0;
  uint32_t taken_ = 0;
};

class SessionSource : public RequestSource {
 public:
  explicit SessionSource(const LoadSettings& s)
      : s_(s), max_open_(s.concurrency > 0 ? s.concurrency : s.sessions), sessions_(s.sessions) {}

  int64_t NextDueNs(int64_t now_ns) override {
    int64_t due = ready_.empty() ? kNotYet : ready_.top().first;
    if (open_ < max_open_ && next_session_ < s_.sessions) due = std::min(due, now_ns);
    return due;
  }
  // Every turn of every session sent (the last ones may still be in flight, and the drain
  // timeout applies to them).
  bool Exhausted(int64_t) const override { return taken_ >= s_.sessions * s_.turns; }
  uint32_t ExpectedTotal() const override { return s_.sessions * s_.turns; }
  bool WantsAnswerText() const override { return true; }

  void Take(int64_t due_ns, RequestRecord& r, RequestContent* c) override {
    uint32_t id;
    if (!ready_.empty() && ready_.top().first <= due_ns) {
      id = ready_.top().second;
      ready_.pop();
    } else {
      id = next_session_++;
      ++open_;
    }
    Session& session = sessions_[id];
    r.index = taken_++;
    r.session_id = static_cast<int32_t>(id);
    r.turn = static_cast<int32_t>(session.turn);
    c->prompt_index = uint64_t{id} * s_.turns + session.turn;
    c->input_len_tok = s_.input_len_tok;
    c->output_len_tok = s_.output_len_tok;
    c->adapter = r.adapter = workload::AdapterOf(s_, id);  // a conversation keeps its adapter
    session.pending_user = BuildPrompt(s_.seed, c->prompt_index, s_.input_len_tok);
    if (s_.api == Api::kChatCompletions) {
      c->has_messages = true;
      c->messages = session.messages;
      c->messages.push_back({{"role", "user"}, {"content", session.pending_user}});
    } else {
      c->has_prompt_text = true;
      c->prompt_text =
          session.text.empty() ? session.pending_user : session.text + "\n" + session.pending_user;
    }
  }

  void Finished(const RequestRecord& r, const std::string& answer, int64_t now_ns) override {
    if (r.session_id < 0) return;
    const auto id = static_cast<uint32_t>(r.session_id);
    Session& session = sessions_[id];
    // The history holds the answer as received (partial when the request failed).
    if (s_.api == Api::kChatCompletions) {
      session.messages.push_back({{"role", "user"}, {"content", session.pending_user}});
      session.messages.push_back({{"role", "assistant"}, {"content", answer}});
    } else {
      session.text += (session.text.empty() ? "" : "\n") + session.pending_user + answer;
    }
    ++session.turn;
    if (session.turn >= s_.turns) {
      --open_;
      session = Session{};  // its history is no longer needed
      return;
    }
    ready_.emplace(now_ns + ThinkNs(id, session.turn), id);
  }

 private:
  // Think time before turn `turn` of session `id`: a pure function of (seed, session, turn), so
  // the draws do not depend on the order in which turns happen to finish.
  int64_t ThinkNs(uint32_t id, uint32_t turn) const {
    if (s_.think_time_s <= 0) return 0;
    if (!s_.think_time_exponential) return std::llround(s_.think_time_s * kNsPerS);
    std::mt19937_64 rng(s_.seed * 0x9E3779B97F4A7C15ull ^
                        (uint64_t{id} * 0x100000001B3ull + turn + 0x7417));
    return std::llround(ExponentialGapS(rng(), 1.0 / s_.think_time_s) * kNsPerS);
  }

  struct Session {
    uint32_t turn = 0;
    std::string pending_user;                           // the user message of the turn in flight
    nlohmann::json messages = nlohmann::json::array();  // chat history
    std::string text;                                   // completions history
  };
  using Due = std::pair<int64_t, uint32_t>;  // (due time, session)

  const LoadSettings& s_;
  uint32_t max_open_;
  std::vector<Session> sessions_;
  std::priority_queue<Due, std::vector<Due>, std::greater<Due>> ready_;
  uint32_t next_session_ = 0;
  uint32_t open_ = 0;
  uint32_t taken_ = 0;
};

}  // namespace

void FillCustomContent(const CustomPrompt& prompt, uint32_t default_output_len_tok,
                       RequestContent* c) {
  c->output_len_tok = prompt.max_tokens > 0 ? prompt.max_tokens : default_output_len_tok;
  if (!prompt.messages_json.empty()) {
    c->has_messages = true;
    c->messages = nlohmann::json::parse(prompt.messages_json);
    // Completions: the messages' contents joined by newlines.
    c->has_prompt_text = true;
    c->prompt_text.clear();
    for (const auto& m : c->messages) {
      if (!c->prompt_text.empty()) c->prompt_text += "\n";
      if (m.contains("content") && m["content"].is_string()) {
        c->prompt_text += m["content"].get<std::string>();
      }
    }
  } else {
    c->has_prompt_text = true;
    c->prompt_text = prompt.prompt;
    c->has_messages = true;
    c->messages = nlohmann::json::array({{{"role", "user"}, {"content", prompt.prompt}}});
  }
  // The fallback prompt length without usage: the words (the emulator's own count).
  c->input_len_tok = CountWords(c->prompt_text);
}

std::unique_ptr<RequestSource> MakeCountSource(const LoadSettings& settings, uint32_t count,
                                               uint64_t prompt_index_base, bool warmup,
                                               std::vector<int64_t> schedule) {
  return std::make_unique<CountSource>(settings, count, prompt_index_base, warmup,
                                       std::move(schedule));
}

std::unique_ptr<RequestSource> MakeDurationSource(const LoadSettings& settings) {
  return std::make_unique<DurationSource>(settings);
}

std::unique_ptr<RequestSource> MakeSessionSource(const LoadSettings& settings) {
  return std::make_unique<SessionSource>(settings);
}

}  // namespace servesweep::loadgen
