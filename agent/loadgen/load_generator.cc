// The load loop: one thread, libcurl's multi interface, plain curl_multi_perform +
// curl_multi_poll (measured faster than socket_action + epoll for this load; DESIGN.md).
// Easy handles are reused (remove, new body, re-add) so keep-alive connections persist in the
// multi handle's connection cache and no request pays a TCP handshake after the first few.
#include "agent/loadgen/load_generator.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string_view>
#include <unordered_set>

#include "agent/loadgen/arrival_schedule.h"
#include "agent/loadgen/openai_stream.h"
#include "agent/loadgen/prompt_builder.h"
#include "agent/loadgen/sse_parser.h"

namespace servesweep::loadgen {
namespace {

constexpr size_t kMaxErrorBodyBytes = 200;
constexpr int64_t kProgressIntervalNs = 100'000'000;  // on_progress at most ~10 times/s
constexpr int kMaxPollMs = 100;                       // so progress reports keep coming
constexpr uint32_t kMaxReservedChunks = 256;          // chunk vectors reserved per request

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void GlobalInitOnce() {
  // curl_global_init is not thread-safe in every build; RunLoad may run on several threads.
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// One reusable easy handle and the per-stream parsing state. Used only by the load thread.
// Events reach OnEvent straight from the parser, as views into libcurl's buffer (no copy).
struct Transfer final : SseSink {
  CURL* easy = nullptr;
  char errbuf[CURL_ERROR_SIZE] = {};
  std::string body;
  RequestRecord* rec = nullptr;
  SseParser parser;
  OpenAiStreamDecoder decoder;
  int64_t read_ns = 0;  // when the bytes being parsed arrived
  long http_status = 0;
  std::string error_body;  // first bytes of a non-200 body
  bool saw_done = false;
  bool stream_error = false;
  std::string stream_error_text;
  bool have_usage = false;
  uint32_t usage_prompt_tok = 0;
  uint32_t usage_completion_tok = 0;

  void ResetForRequest(RequestRecord* r, uint32_t expected_chunks) {
    rec = r;
    // Room for the expected chunks up front: no regrowth while a typical stream is read. Capped
    // so that a huge max_tokens the server never reaches does not pin memory per record.
    const uint32_t reserve = std::min<uint32_t>(expected_chunks, kMaxReservedChunks);
    rec->chunk_times_ns.reserve(reserve);
    rec->chunk_tokens.reserve(reserve);
    parser.Reset();
    decoder.Reset();
    http_status = 0;
    error_body.clear();
    saw_done = false;
    stream_error = false;
    stream_error_text.clear();
    have_usage = false;
    usage_prompt_tok = usage_completion_tok = 0;
    errbuf[0] = '\0';
  }

  void OnEvent(std::string_view /*event*/, std::string_view data) override {
    if (saw_done || stream_error) return;  // nothing after [DONE] or an error counts
    StreamChunk c = decoder.Decode(data);
    if (c.done) {
      saw_done = true;
      return;
    }
    if (c.error) {
      stream_error = true;
      stream_error_text = std::move(c.error_text);
      return;
    }
    if (c.has_usage) {
      have_usage = true;
      usage_prompt_tok = c.prompt_tokens;
      usage_completion_tok = c.completion_tokens;
    }
    if (c.output) {
      if (rec->first_token_ns < 0) rec->first_token_ns = read_ns;
      rec->end_ns = read_ns;
      rec->chunk_times_ns.push_back(read_ns);
      rec->chunk_tokens.push_back(c.tokens);
    }
  }
};

size_t WriteCallback(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t n = size * nmemb;
  const int64_t now_ns = NowNs();  // one timestamp per read: these bytes arrived together
  if (t->http_status == 0) curl_easy_getinfo(t->easy, CURLINFO_RESPONSE_CODE, &t->http_status);
  if (t->http_status != 200) {
    if (t->error_body.size() < kMaxErrorBodyBytes) {
      t->error_body.append(ptr, std::min(n, kMaxErrorBodyBytes - t->error_body.size()));
    }
    return n;
  }
  t->read_ns = now_ns;
  t->parser.Feed(std::string_view(ptr, n), t);
  return n;
}

// The handshake or certificate check failed: said apart from other transport errors, since the
// fix is a setting (ca_file), not the server.
bool IsTlsError(CURLcode code) {
  switch (code) {
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_CRL_BADFILE:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
      return true;
    default:
      return false;
  }
}

std::string BuildBody(const LoadSettings& s, uint64_t prompt_index, uint32_t input_len_tok,
                      uint32_t output_len_tok, const PromptPrefix& prefix) {
  nlohmann::json body;
  body["model"] = s.model;
  if (s.api == Api::kChatCompletions) {
    const std::string prompt = BuildPrompt(s.seed, prompt_index, input_len_tok, prefix);
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
    // Newer servers read max_completion_tokens, older ones max_tokens: send both.
    body["max_completion_tokens"] = output_len_tok;
  } else if (s.token_id_prompts) {
    body["prompt"] = BuildPromptTokenIds(s.seed, prompt_index, input_len_tok, prefix);
  } else {
    body["prompt"] = BuildPrompt(s.seed, prompt_index, input_len_tok, prefix);
  }
  body["max_tokens"] = output_len_tok;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  // Sent only when set, as vLLM does: OpenAI's own API rejects unknown fields.
  if (s.ignore_eos) body["ignore_eos"] = true;
  body["temperature"] = s.temperature;
  return body.dump();
}

class Engine {
 public:
  Engine(const LoadSettings& s, const std::function<void(const Progress&)>& on_progress)
      : s_(s), on_progress_(on_progress) {
    GlobalInitOnce();
    multi_ = curl_multi_init();
    if (!multi_) throw std::runtime_error("curl_multi_init failed");
    std::string base = s.base_url;
    while (!base.empty() && base.back() == '/') base.pop_back();
    url_ = base + (s.api == Api::kChatCompletions ? "/v1/chat/completions" : "/v1/completions");
    headers_ = curl_slist_append(headers_, "Content-Type: application/json");
    // libcurl 7.88 sends "Expect: 100-continue" for bodies over 1 KiB and waits up to 1 s
    // for a 100 that many servers never send: that would land in every long prompt's TTFT.
    headers_ = curl_slist_append(headers_, "Expect:");
    if (!s.api_key.empty()) {
      headers_ = curl_slist_append(headers_, ("Authorization: Bearer " + s.api_key).c_str());
    }
  }

  ~Engine() {
    for (auto& t : transfers_) {
      curl_multi_remove_handle(multi_, t->easy);  // harmless when not added
      curl_easy_cleanup(t->easy);
    }
    curl_multi_cleanup(multi_);
    curl_slist_free_all(headers_);
  }

  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  // Runs records[0..n) to completion. schedule_ns == nullptr: closed loop at `cap` in flight.
  // Otherwise request i becomes due at t0_ns + (*schedule_ns)[i], and at most `cap` (0 = no
  // cap) are in flight. Record times are absolute steady-clock ns. Returns the last done time.
  int64_t RunPhase(std::vector<RequestRecord>& records, uint64_t prompt_index_base,
                   const std::vector<int64_t>* schedule_ns, uint32_t cap, int64_t t0_ns,
                   bool warmup) {
    const uint32_t n = static_cast<uint32_t>(records.size());
    uint32_t next = 0, done = 0, in_flight = 0;
    int64_t last_done_ns = t0_ns;
    int64_t last_progress_ns = NowNs();
    if (cap > 0) curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(cap));
    while (done < n) {
      int64_t now_ns = NowNs();
      while (next < n && (cap == 0 || in_flight < cap)) {
        int64_t due_ns = schedule_ns ? t0_ns + (*schedule_ns)[next] : now_ns;
        if (due_ns > now_ns) break;
        RequestRecord& r = records[next];
        r.scheduled_ns = due_ns;
        Start(r, prompt_index_base + next);
        ++next;
        ++in_flight;
        now_ns = NowNs();
      }

      int running = 0;
      curl_multi_perform(multi_, &running);
      bool finished_any = false;
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
        if (msg->msg != CURLMSG_DONE) continue;
        int64_t done_ns = Finish(msg->easy_handle, msg->data.result);
        last_done_ns = std::max(last_done_ns, done_ns);
        ++done;
        --in_flight;
        finished_any = true;
      }

      now_ns = NowNs();
      if (on_progress_ && (now_ns - last_progress_ns >= kProgressIntervalNs || done == n)) {
        last_progress_ns = now_ns;
        on_progress_(Progress{done, n, warmup});
      }
      // A freed slot in the closed loop is refilled at once, without waiting in poll.
      if (done == n || (finished_any && !schedule_ns)) continue;

      int timeout_ms = kMaxPollMs;
      if (schedule_ns && next < n && (cap == 0 || in_flight < cap)) {
        int64_t wait_ns = t0_ns + (*schedule_ns)[next] - now_ns;
        // Rounded up: waking early would only spin; the lateness shows as client queue time.
        timeout_ms =
            static_cast<int>(std::clamp<int64_t>((wait_ns + 999'999) / 1'000'000, 0, kMaxPollMs));
      }
      if (timeout_ms > 0) curl_multi_poll(multi_, nullptr, 0, timeout_ms, nullptr);
    }
    return last_done_ns;
  }

 private:
  Transfer* Acquire() {
    if (!free_.empty()) {
      Transfer* t = free_.back();
      free_.pop_back();
      return t;
    }
    auto t = std::make_unique<Transfer>();
    t->easy = curl_easy_init();
    if (!t->easy) throw std::runtime_error("curl_easy_init failed");
    CURL* e = t->easy;
    curl_easy_setopt(e, CURLOPT_URL, url_.c_str());
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, headers_);
    curl_easy_setopt(e, CURLOPT_POST, 1L);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, &WriteCallback);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for DNS timeouts: we are threaded
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_FORBID_REUSE, s_.reuse_connections ? 0L : 1L);
    curl_easy_setopt(e, CURLOPT_TIMEOUT_MS,
                     static_cast<long>(std::llround(s_.request_timeout_s * 1000.0)));
    if (!s_.ca_file.empty()) curl_easy_setopt(e, CURLOPT_CAINFO, s_.ca_file.c_str());
    if (s_.insecure_tls) {
      curl_easy_setopt(e, CURLOPT_SSL_VERIFYPEER, 0L);
      curl_easy_setopt(e, CURLOPT_SSL_VERIFYHOST, 0L);
    }
    // No CURLOPT_MAXFILESIZE: responses are as long as the server makes them.
    transfers_.push_back(std::move(t));
    return transfers_.back().get();
  }

  // A measured request of a planned workload takes its planned lengths; others the settings'.
  std::pair<uint32_t, uint32_t> LengthsFor(const RequestRecord& r) const {
    if (!r.warmup && r.index < s_.plan.size()) {
      return {s_.plan[r.index].input_len_tok, s_.plan[r.index].output_len_tok};
    }
    return {s_.input_len_tok, s_.output_len_tok};
  }

  void Start(RequestRecord& r, uint64_t prompt_index) {
    Transfer* t = Acquire();
    const auto [input_len_tok, output_len_tok] = LengthsFor(r);
    t->ResetForRequest(&r, output_len_tok);
    PromptPrefix prefix;
    if (!r.warmup && r.index < s_.plan.size() && !s_.plan[r.index].prefix_blocks.empty()) {
      const PlannedRequest& planned = s_.plan[r.index];
      prefix = {&planned.prefix_blocks, planned.prefix_len_tok};
      // Whether an earlier request of this run sent the same first block (a possible hit).
      r.prefix_seen = sent_first_blocks_.insert(planned.prefix_blocks[0]).second ? 0 : 1;
    }
    t->body = BuildBody(s_, prompt_index, input_len_tok, output_len_tok, prefix);
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, t->body.data());
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
    r.start_ns = NowNs();  // as vLLM: just before the request goes to the client library
    CURLMcode mc = curl_multi_add_handle(multi_, t->easy);
    if (mc != CURLM_OK) {
      throw std::runtime_error(fmt::format("curl_multi_add_handle: {}", curl_multi_strerror(mc)));
    }
  }

  // Closes one transfer's record; returns its done time.
  int64_t Finish(CURL* easy, CURLcode result) {
    const int64_t done_ns = NowNs();
    Transfer* t = nullptr;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
    curl_multi_remove_handle(multi_, easy);  // the connection stays in the multi's cache
    RequestRecord& r = *t->rec;
    r.done_ns = done_ns;
    if (t->http_status == 0) curl_easy_getinfo(easy, CURLINFO_RESPONSE_CODE, &t->http_status);
    if (t->http_status == 200) {
      t->read_ns = done_ns;
      t->parser.Finish(t);  // a last event without its blank line
    }

    const uint32_t output_chunks = static_cast<uint32_t>(r.chunk_times_ns.size());
    r.output_tokens =
        t->have_usage && t->usage_completion_tok > 0 ? t->usage_completion_tok : output_chunks;
    r.prompt_tokens =
        t->have_usage && t->usage_prompt_tok > 0 ? t->usage_prompt_tok : LengthsFor(r).first;
    r.success = false;
    if (result != CURLE_OK && !(t->saw_done && result == CURLE_PARTIAL_FILE)) {
      if (result == CURLE_OPERATION_TIMEDOUT) {
        r.error = fmt::format("timeout after {} s", s_.request_timeout_s);
      } else if (IsTlsError(result)) {
        r.error = fmt::format("tls: {}", t->errbuf[0] ? t->errbuf : curl_easy_strerror(result));
      } else {
        r.error = fmt::format("curl: {}", t->errbuf[0] ? t->errbuf : curl_easy_strerror(result));
      }
    } else if (t->http_status != 200) {
      r.error = fmt::format("HTTP {}: {}", t->http_status, t->error_body);
    } else if (t->stream_error) {
      r.error = t->stream_error_text;
    } else if (output_chunks == 0) {
      r.error = "no output tokens";
    } else {
      r.success = true;  // [DONE], or a clean end of body (result == CURLE_OK)
    }
    t->rec = nullptr;
    free_.push_back(t);
    return done_ns;
  }

  const LoadSettings& s_;
  const std::function<void(const Progress&)>& on_progress_;
  CURLM* multi_ = nullptr;
  curl_slist* headers_ = nullptr;
  std::string url_;
  std::vector<std::unique_ptr<Transfer>> transfers_;
  std::unordered_set<uint64_t> sent_first_blocks_;  // first prefix blocks sent so far
  std::vector<Transfer*> free_;
};

void Validate(const LoadSettings& s) {
  if (s.base_url.empty()) throw std::invalid_argument("base_url is empty");
  if (s.num_requests == 0) throw std::invalid_argument("num_requests must be > 0");
  if (s.input_len_tok == 0) throw std::invalid_argument("input_len_tok must be > 0");
  if (s.output_len_tok == 0) throw std::invalid_argument("output_len_tok must be > 0");
  if (std::isnan(s.request_rate_per_s) || s.request_rate_per_s < 0) {
    throw std::invalid_argument("request_rate_per_s must be >= 0 (0 = closed loop)");
  }
  const bool replay = !s.plan.empty() && s.replay_arrivals;
  if (s.request_rate_per_s == 0 && s.concurrency == 0 && !replay) {
    throw std::invalid_argument("closed loop (request_rate_per_s == 0) needs concurrency > 0");
  }
  if (!(s.request_timeout_s > 0)) throw std::invalid_argument("request_timeout_s must be > 0");
  if (!(s.burstiness > 0)) throw std::invalid_argument("burstiness must be > 0");
  if (s.token_id_prompts && s.api == Api::kChatCompletions) {
    throw std::invalid_argument("token-id prompts need /v1/completions (chat messages are text)");
  }
  if (!s.plan.empty()) {
    if (s.plan.size() != s.num_requests) {
      throw std::invalid_argument("plan must hold num_requests entries");
    }
    for (const auto& p : s.plan) {
      if (p.input_len_tok == 0 || p.output_len_tok == 0 || p.offset_ns < 0) {
        throw std::invalid_argument("plan entries need lengths > 0 and offsets >= 0");
      }
    }
  }
}

void Rebase(int64_t& t_ns, int64_t t0_ns) {
  if (t_ns >= 0) t_ns -= t0_ns;
}

}  // namespace

LoadResult RunLoad(const LoadSettings& settings,
                   const std::function<void(const Progress&)>& on_progress) {
  Validate(settings);
  Engine engine(settings, on_progress);
  const bool replay =
      !settings.plan.empty() && settings.replay_arrivals && settings.request_rate_per_s == 0;
  const bool open_loop = settings.request_rate_per_s > 0 || replay;

  if (settings.warmup_requests > 0) {
    std::vector<RequestRecord> warm(settings.warmup_requests);
    for (uint32_t i = 0; i < warm.size(); ++i) {
      warm[i].index = i;
      warm[i].warmup = true;
    }
    // Warm-up is a closed loop at the same concurrency (all at once when uncapped); prompts
    // are numbered after the measured ones so that no measured prompt was seen before.
    uint32_t cap = settings.concurrency > 0 ? settings.concurrency : settings.warmup_requests;
    engine.RunPhase(warm, settings.num_requests, nullptr, cap, NowNs(), /*warmup=*/true);
    uint32_t failed = static_cast<uint32_t>(
        std::count_if(warm.begin(), warm.end(), [](const auto& r) { return !r.success; }));
    if (failed > 0) {
      spdlog::warn(
          "loadgen: {} of {} warm-up requests failed; first error: {}", failed, warm.size(),
          std::find_if(warm.begin(), warm.end(), [](const auto& r) { return !r.success; })->error);
    }
  }

  LoadResult result;
  result.requests.resize(settings.num_requests);
  for (uint32_t i = 0; i < settings.num_requests; ++i) result.requests[i].index = i;
  std::vector<int64_t> schedule;
  if (replay) {
    for (const auto& p : settings.plan) schedule.push_back(p.offset_ns);
  } else if (open_loop) {
    schedule = GammaScheduleNs(settings.num_requests, settings.request_rate_per_s,
                               settings.burstiness, settings.seed);
  }
  const int64_t t0_ns = NowNs();
  const int64_t last_done_ns = engine.RunPhase(result.requests, 0, open_loop ? &schedule : nullptr,
                                               settings.concurrency, t0_ns, /*warmup=*/false);
  result.duration_s = static_cast<double>(last_done_ns - t0_ns) / 1e9;
  result.t0_steady_ns = t0_ns;

  uint32_t failed = 0;
  for (RequestRecord& r : result.requests) {
    Rebase(r.scheduled_ns, t0_ns);
    Rebase(r.start_ns, t0_ns);
    Rebase(r.first_token_ns, t0_ns);
    Rebase(r.end_ns, t0_ns);
    Rebase(r.done_ns, t0_ns);
    for (int64_t& t : r.chunk_times_ns) t -= t0_ns;
    if (!r.success) ++failed;
  }
  if (failed > 0) {
    spdlog::warn("loadgen: {} of {} requests failed", failed, settings.num_requests);
  }
  return result;
}

}  // namespace servesweep::loadgen
