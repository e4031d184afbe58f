// The load loop: one thread, libcurl's multi interface driven by curl_multi_socket_action over
// our own epoll set, so the loop knows which socket is readable and stamps what libcurl reads
// from it with the kernel's receive time (common/receive_time.h), not the time the loop got
// there.
// Easy handles are reused (remove, new body, re-add) so keep-alive connections persist in the
// multi handle's connection cache and no request pays a TCP handshake after the first few.
#include "loadgen/load_generator.h"

#include <curl/curl.h>
#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <ctime>
#include <deque>
#include <exception>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string_view>
#include <thread>

#include "common/clock.h"
#include "common/curl_global.h"
#include "common/receive_time.h"
#include "loadgen/arrival_schedule.h"
#include "loadgen/early_stop_source.h"
#include "loadgen/epoll_watch.h"
#include "loadgen/openai_stream.h"
#include "loadgen/request_body.h"
#include "loadgen/request_source.h"
#include "loadgen/shared_source.h"
#include "loadgen/sse_parser.h"
#include "loadgen/stream_text.h"
#include "loadgen/thread_pinning.h"
#include "loadgen/vllm_compat.h"

namespace servesweep::loadgen {
namespace {

constexpr size_t kMaxErrorBodyBytes = 200;
constexpr int64_t kProgressIntervalNs = 100'000'000;  // on_progress at most ~10 times/s
constexpr int kMaxPollMs = 100;                       // so progress reports keep coming
constexpr uint32_t kMaxReservedChunks = 256;          // chunk vectors reserved per request
constexpr int kMaxEventsPerWait = 256;
constexpr size_t kLargeReadBytes = 64 * 1024;
constexpr size_t kLargeReadTransfers = 1024;

// For each socket epoll reported readable in this wake-up, the kernel's receive time of what
// waits on it (indexed by fd; -1: unknown). Taken for all of them before libcurl reads any:
// libcurl may read a socket while handling another's event or a timeout.
using ReceiveTimes = std::vector<int64_t>;

// CPU time of the calling thread, ns.
int64_t ThreadCpuNs() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return int64_t{ts.tv_sec} * 1'000'000'000 + ts.tv_nsec;
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
  int64_t read_ns = 0;                          // when the bytes being parsed arrived
  const ReceiveTimes* receive_times = nullptr;  // the load loop's
  DelayHistogram* read_lag = nullptr;           // the load loop's: receive stamp -> this read
  int fd = -1;  // this request's connection (libcurl names it when it starts watching it)
  long http_status = 0;
  std::string error_body;  // first bytes of a non-200 body
  bool saw_done = false;
  bool stream_error = false;
  std::string stream_error_text;
  bool have_usage = false;
  uint32_t usage_prompt_tok = 0;
  uint32_t usage_completion_tok = 0;
  // Multi-turn sessions: the answer text as received (stream_text.h).
  bool capture_text = false;
  std::string answer;
  // The vLLM view (vllm_compat.h).
  bool vllm_view = false;
  bool chat = false;
  bool vllm_exception = false;
  uint32_t input_len_tok = 0;  // requested: the prompt length without usage

  void ResetForRequest(RequestRecord* r, uint32_t expected_chunks) {
    rec = r;
    fd = -1;
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
    answer.clear();
    vllm_exception = false;
  }

  void ObserveAsVllm(std::string_view payload, int64_t now_ns) {
    if (vllm_exception) return;  // vLLM's client stopped reading at the exception
    const VllmChunk c = ClassifyVllmChunk(payload, chat);
    if (c.exception) vllm_exception = true;
    if (c.has_choices) rec->vllm_chunk_times_ns.push_back(now_ns);
    if (c.usage) {
      rec->vllm_output_tokens = c.completion_tokens;
      if (c.prompt_tokens >= 0) rec->vllm_prompt_tokens = c.prompt_tokens;
    }
  }

  void OnEvent(std::string_view /*event*/, std::string_view data) override {
    if (vllm_view && !saw_done) ObserveAsVllm(data, read_ns);
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
    if (c.cached_prompt_tokens >= 0) {
      rec->cached_prompt_tokens =
          static_cast<int32_t>(std::min<int64_t>(c.cached_prompt_tokens, INT32_MAX));
    }
    if (c.output) {
      if (capture_text) AppendChunkText(data, &answer);
      if (rec->first_token_ns < 0) rec->first_token_ns = read_ns;
      rec->end_ns = read_ns;
      rec->chunk_times_ns.push_back(read_ns);
      rec->chunk_tokens.push_back(c.tokens);
    }
  }
};

// libcurl is about to write the request on its connection (connected, TLS done): the send.
int PrereqCallback(void* userdata, char* /*conn_primary_ip*/, char* /*conn_local_ip*/,
                   int /*conn_primary_port*/, int /*conn_local_port*/) {
  auto* t = static_cast<Transfer*>(userdata);
  t->rec->sent_ns = SteadyNowNs();
  return CURL_PREREQFUNC_OK;
}

// Every new connection gets kernel receive timestamps (where refused, reads use the clock).
int SockoptCallback(void* /*userdata*/, curl_socket_t fd, curlsocktype purpose) {
  if (purpose == CURLSOCKTYPE_IPCXN) EnableReceiveTimestamps(fd);
  return CURL_SOCKOPT_OK;
}

// When the bytes libcurl hands over arrived: the kernel's time for the socket being read, else
// now. Never before the request went out. How long the loop took to get to them is the read lag.
int64_t ReadTimeNs(const Transfer& t) {
  const ReceiveTimes& times = *t.receive_times;
  const bool known = t.fd >= 0 && static_cast<size_t>(t.fd) < times.size() && times[t.fd] >= 0;
  const int64_t now_ns = SteadyNowNs();
  if (known) t.read_lag->Add(now_ns - times[t.fd]);
  return std::max(known ? times[t.fd] : now_ns, t.rec->sent_ns);
}

size_t WriteCallback(char* ptr, size_t size, size_t nmemb, void* userdata) {
  auto* t = static_cast<Transfer*>(userdata);
  const size_t n = size * nmemb;
  const int64_t now_ns = ReadTimeNs(*t);  // one timestamp per read: these bytes arrived together
  if (t->rec->first_byte_ns < 0) t->rec->first_byte_ns = now_ns;
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

// What an error response says, for the failure's reason: the message of an OpenAI-style error
// body ({"error": {"message": ...}}, vLLM and SGLang), of {"message": ...} or FastAPI's
// {"detail": ...}; else the body's first bytes on one line.
std::string ErrorBodyMessage(const std::string& body) {
  const auto json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_object()) {
    for (const char* key : {"error", "message", "detail"}) {
      if (!json.contains(key)) continue;
      const auto& value = json[key];
      if (value.is_string()) return value.get<std::string>();
      if (value.is_object() && value.contains("message") && value["message"].is_string()) {
        return value["message"].get<std::string>();
      }
      if (!value.is_null()) return value.dump();
    }
  }
  std::string line = body;
  std::replace(line.begin(), line.end(), '\n', ' ');
  return line.empty() ? "(empty body)" : line;
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

class LoadLoop {
 public:
  LoadLoop(const LoadSettings& s, std::function<void(const Progress&)> on_progress)
      : s_(s), on_progress_(std::move(on_progress)), bodies_(s) {
    InitCurlOnce();
    multi_ = curl_multi_init();
    if (!multi_) throw std::runtime_error("curl_multi_init failed");
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) throw std::runtime_error("epoll_create1 failed");
    watch_ = EpollWatch(epoll_fd_);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETFUNCTION, &LoadLoop::OnSocket);
    curl_multi_setopt(multi_, CURLMOPT_SOCKETDATA, this);
    curl_multi_setopt(multi_, CURLMOPT_TIMERFUNCTION, &LoadLoop::OnTimer);
    curl_multi_setopt(multi_, CURLMOPT_TIMERDATA, this);
    // On the steady clock's base (CLOCK_MONOTONIC), so SteadyNowNs() deadlines arm it directly.
    // Without it the loop still runs, on millisecond epoll timeouts.
    due_timer_fd_ = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
    if (due_timer_fd_ >= 0) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.fd = due_timer_fd_;
      if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, due_timer_fd_, &ev) != 0) {
        close(due_timer_fd_);
        due_timer_fd_ = -1;
      }
    }
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

  ~LoadLoop() {
    for (auto& t : transfers_) {
      curl_multi_remove_handle(multi_, t->easy);  // harmless when not added
      curl_easy_cleanup(t->easy);
    }
    curl_multi_cleanup(multi_);
    if (due_timer_fd_ >= 0) close(due_timer_fd_);
    close(epoll_fd_);
    curl_slist_free_all(headers_);
  }

  LoadLoop(const LoadLoop&) = delete;
  LoadLoop& operator=(const LoadLoop&) = delete;

  // Runs the source's requests to completion, appending their records (absolute steady-clock
  // times) to `records` (a deque: transfers point into it). At most `cap` in flight (0 = no
  // cap). Once the source is exhausted and its issue end passed, requests still in flight after
  // drain_timeout_s (> 0) are cancelled. Returns the last done time.
  int64_t RunPhase(RequestSource& source, std::deque<RequestRecord>& records, uint32_t cap,
                   int64_t t0_ns, bool warmup, double drain_timeout_s) {
    uint32_t done = 0, in_flight = 0;
    int64_t last_done_ns = t0_ns;
    int64_t last_progress_ns = SteadyNowNs();
    int64_t drain_from_ns = -1;  // when the drain began
    const int64_t drain_timeout_ns = std::llround(drain_timeout_s * 1e9);
    if (cap > 0) curl_multi_setopt(multi_, CURLMOPT_MAXCONNECTS, static_cast<long>(cap));
    const bool capture_text = source.WantsAnswerText();
    load_ = ClientLoad();
    const int64_t cpu_start_ns = ThreadCpuNs(), wall_start_ns = SteadyNowNs();
    // When each free slot became free (capped loops): a request is due at its scheduled time
    // and a free slot, whichever is later; sending later than that is the client's lateness.
    std::deque<int64_t> slot_free_ns(cap, t0_ns);
    while (true) {
      int64_t now_ns = SteadyNowNs();
      while (cap == 0 || in_flight < cap) {
        RequestRecord taken;
        RequestContent content;
        int64_t due_rel_ns = 0;
        if (!source.TakeIfDue(now_ns - t0_ns, &due_rel_ns, taken, &content)) break;
        RequestRecord& r = records.emplace_back(std::move(taken));
        r.scheduled_ns = t0_ns + due_rel_ns;
        int64_t due_ns = r.scheduled_ns;
        if (cap > 0 && !slot_free_ns.empty()) {
          due_ns = std::max(due_ns, slot_free_ns.front());
          slot_free_ns.pop_front();
        }
        Start(r, content, capture_text);
        if (!warmup) load_.send_lateness.Add(r.start_ns - due_ns);
        ++in_flight;
        now_ns = SteadyNowNs();
      }

      // New transfers (libcurl asks for an immediate timeout) and libcurl's own timeouts.
      if (curl_due_ns_ >= 0 && curl_due_ns_ <= SteadyNowNs()) {
        curl_due_ns_ = -1;
        int running = 0;
        curl_multi_socket_action(multi_, CURL_SOCKET_TIMEOUT, 0, &running);
      }
      bool finished_any = false;
      int queued = 0;
      while (CURLMsg* msg = curl_multi_info_read(multi_, &queued)) {
        if (msg->msg != CURLMSG_DONE) continue;
        if (ResendOnNewConnection(msg->easy_handle, msg->data.result)) continue;
        Transfer* t = Finish(msg->easy_handle, msg->data.result);
        last_done_ns = std::max(last_done_ns, t->rec->done_ns);
        if (cap > 0) slot_free_ns.push_back(t->rec->done_ns);
        source.Finished(*t->rec, t->answer, t->rec->done_ns - t0_ns);
        Release(t);
        ++done;
        --in_flight;
        finished_any = true;
      }

      now_ns = SteadyNowNs();
      const bool exhausted = source.Exhausted(now_ns - t0_ns);
      if (exhausted && drain_from_ns < 0) {
        drain_from_ns = std::max(now_ns, t0_ns + source.IssueEndNs());
      }
      if (exhausted && drain_timeout_ns > 0 && in_flight > 0 &&
          now_ns >= drain_from_ns + drain_timeout_ns) {
        for (auto& t : transfers_) {
          if (!t->rec) continue;
          Cancel(*t, now_ns, drain_timeout_s);
          last_done_ns = std::max(last_done_ns, now_ns);
          source.Finished(*t->rec, t->answer, now_ns - t0_ns);
          Release(t.get());
          ++done;
          --in_flight;
        }
      }
      const bool all_done = exhausted && in_flight == 0;
      if (on_progress_ && (now_ns - last_progress_ns >= kProgressIntervalNs || all_done)) {
        last_progress_ns = now_ns;
        on_progress_(Progress{done, std::max(source.ExpectedTotal(), done), warmup});
      }
      if (all_done) break;
      // A freed slot may be refilled at once (closed loop), without waiting in poll.
      if (finished_any) continue;

      int64_t wait_ns = int64_t{kMaxPollMs} * 1'000'000;
      bool send_due = false;  // the wait ends at a scheduled send: wake on time, not to the ms
      if (cap == 0 || in_flight < cap) {
        const int64_t due_rel_ns = source.NextDueNs(now_ns - t0_ns);
        if (due_rel_ns != RequestSource::kNotYet && t0_ns + due_rel_ns - now_ns < wait_ns) {
          wait_ns = t0_ns + due_rel_ns - now_ns;
          send_due = true;
        }
      }
      if (exhausted && drain_timeout_ns > 0 && in_flight > 0) {
        wait_ns = std::min(wait_ns, drain_from_ns + drain_timeout_ns - now_ns);
      }
      if (curl_due_ns_ >= 0 && curl_due_ns_ - now_ns < wait_ns) {
        wait_ns = curl_due_ns_ - now_ns;
        send_due = false;
      }
      if (wait_ns > 0) WaitForSockets(now_ns + wait_ns, send_due);
    }
    const int64_t wall_ns = SteadyNowNs() - wall_start_ns;
    load_.busiest_thread_cpu_fraction =
        wall_ns > 0 ? static_cast<double>(ThreadCpuNs() - cpu_start_ns) / wall_ns : 0;
    return last_done_ns;
  }

  // This loop's saturation over its last phase.
  const ClientLoad& load() const { return load_; }

 private:
  // Sleeps until a socket is ready or deadline_ns (steady clock), then hands each ready socket
  // to libcurl with the kernel's receive time of what waits on it. epoll's timeout is whole
  // milliseconds, which alone made sends up to 1 ms late (p50 0.5 ms); for a scheduled send
  // (`precise`) a timerfd armed at the deadline in the same epoll set wakes it within
  // microseconds. Other deadlines (progress, drain, libcurl's) keep the millisecond timeout and
  // cost no timer syscall, so the closed loop's waits are unchanged.
  void WaitForSockets(int64_t deadline_ns, bool precise) {
    if (precise && due_timer_fd_ >= 0) {
      itimerspec at{};
      at.it_value.tv_sec = deadline_ns / 1'000'000'000;
      at.it_value.tv_nsec = deadline_ns % 1'000'000'000;
      timerfd_settime(due_timer_fd_, TFD_TIMER_ABSTIME, &at, nullptr);
    }
    // The millisecond timeout stays as a backstop (rounded up, so it never fires early).
    const int64_t wait_ns = deadline_ns - SteadyNowNs();
    const int timeout_ms =
        static_cast<int>(std::clamp<int64_t>((wait_ns + 999'999) / 1'000'000, 0, kMaxPollMs));
    if (timeout_ms <= 0) return;
    epoll_event events[kMaxEventsPerWait];
    const int n = epoll_wait(epoll_fd_, events, kMaxEventsPerWait, timeout_ms);
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd == due_timer_fd_) continue;
      if (watch_.Unwanted(fd)) {  // an idle connection libcurl no longer watches
        events[i].data.fd = -1;
        continue;
      }
      if (!(events[i].events & EPOLLIN)) continue;
      if (static_cast<size_t>(fd) >= receive_times_.size()) receive_times_.resize(fd + 1, -1);
      receive_times_[fd] = PeekReceiveSteadyNs(fd);
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd < 0) continue;
      if (fd == due_timer_fd_) {
        uint64_t expirations = 0;
        [[maybe_unused]] const ssize_t r = read(due_timer_fd_, &expirations, sizeof expirations);
        continue;
      }
      const uint32_t ev = events[i].events;
      int flags = 0;
      if (ev & EPOLLIN) flags |= CURL_CSELECT_IN;
      if (ev & EPOLLOUT) flags |= CURL_CSELECT_OUT;
      if (ev & (EPOLLERR | EPOLLHUP)) flags |= CURL_CSELECT_ERR;
      int running = 0;
      curl_multi_socket_action(multi_, fd, flags, &running);
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[i].data.fd;
      if (fd >= 0 && static_cast<size_t>(fd) < receive_times_.size()) receive_times_[fd] = -1;
    }
  }

  // libcurl: watch `fd` for what it names (level-triggered), or stop watching it.
  static int OnSocket(CURL* easy, curl_socket_t fd, int what, void* userp, void* /*socketp*/) {
    auto* self = static_cast<LoadLoop*>(userp);
    if (what == CURL_POLL_REMOVE) {
      self->watch_.Want(fd, 0);
      return 0;
    }
    // The transfer now using `fd` (libcurl's own handles carry no Transfer): its reads are
    // stamped with this socket's receive times.
    Transfer* t = nullptr;
    if (easy &&
        curl_easy_getinfo(easy, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t)) == CURLE_OK &&
        t != nullptr) {
      t->fd = fd;
    }
    self->watch_.Want(
        fd, ((what & CURL_POLL_IN) ? EPOLLIN : 0u) | ((what & CURL_POLL_OUT) ? EPOLLOUT : 0u));
    return 0;
  }

  // libcurl opens and closes its connections' sockets through these, so that the watch knows
  // their lifetime exactly (epoll_watch.h).
  static curl_socket_t OpenSocket(void* clientp, curlsocktype /*purpose*/, curl_sockaddr* addr) {
    const int fd = socket(addr->family, addr->socktype, addr->protocol);
    if (fd >= 0) static_cast<LoadLoop*>(clientp)->watch_.Opened(fd);
    return fd >= 0 ? fd : CURL_SOCKET_BAD;
  }
  static int CloseSocket(void* clientp, curl_socket_t fd) {
    static_cast<LoadLoop*>(clientp)->watch_.Closing(fd);
    return close(fd);
  }

  // libcurl: call back with CURL_SOCKET_TIMEOUT in timeout_ms (-1: no timeout wanted).
  static int OnTimer(CURLM* /*multi*/, long timeout_ms, void* userp) {
    auto* self = static_cast<LoadLoop*>(userp);
    self->curl_due_ns_ = timeout_ms < 0 ? -1 : SteadyNowNs() + int64_t{timeout_ms} * 1'000'000;
    return 0;
  }

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
    curl_easy_setopt(e, CURLOPT_PREREQFUNCTION, &PrereqCallback);
    curl_easy_setopt(e, CURLOPT_PREREQDATA, t.get());
    curl_easy_setopt(e, CURLOPT_SOCKOPTFUNCTION, &SockoptCallback);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETFUNCTION, &LoadLoop::OpenSocket);
    curl_easy_setopt(e, CURLOPT_OPENSOCKETDATA, this);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETFUNCTION, &LoadLoop::CloseSocket);
    curl_easy_setopt(e, CURLOPT_CLOSESOCKETDATA, this);
    t->receive_times = &receive_times_;
    t->read_lag = &load_.read_lag;
    curl_easy_setopt(e, CURLOPT_ERRORBUFFER, t->errbuf);
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for DNS timeouts: we are threaded
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    // One read for a whole burst of events (a fast small model's, or a static body): a third
    // fewer system calls per request than libcurl's 16 KB. Up to kLargeReadTransfers per loop,
    // so that 10,000 held streams do not each pin 64 KB.
    if (transfers_.size() < kLargeReadTransfers) {
      curl_easy_setopt(e, CURLOPT_BUFFERSIZE, static_cast<long>(kLargeReadBytes));
    }
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

  void Start(RequestRecord& r, const RequestContent& content, bool capture_text) {
    Transfer* t = Acquire();
    t->ResetForRequest(&r, content.output_len_tok);
    t->capture_text = capture_text;
    t->vllm_view = s_.vllm_view;
    t->chat = s_.api == Api::kChatCompletions;
    t->input_len_tok = content.input_len_tok;
    bodies_.Write(content, &t->body);
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDS, t->body.data());
    curl_easy_setopt(t->easy, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(t->body.size()));
    curl_easy_setopt(t->easy, CURLOPT_FRESH_CONNECT, 0L);
    r.start_ns = SteadyNowNs();  // as vLLM: just before the request goes to the client library
    Add(*t);
  }

  void Add(Transfer& t) {
    CURLMcode mc = curl_multi_add_handle(multi_, t.easy);
    if (mc != CURLM_OK) {
      throw std::runtime_error(fmt::format("curl_multi_add_handle: {}", curl_multi_strerror(mc)));
    }
  }

  // A request sent on a reused keep-alive connection that the server had already closed (it
  // closes after a streamed response while announcing keep-alive, e.g. llama.cpp's server)
  // never reached the engine. libcurl resends such a request itself, but counts those resends
  // per easy handle and across requests (Curl_retry_request's retrycount, 5 at most), and our
  // handles live for the whole run: every sixth such loss comes back as "Connection died, tried
  // 5 times before giving up", no response byte received. That request is sent once more, on a
  // new connection, and marked reconnected; it is not the engine's failure. Returns whether it
  // was resent.
  bool ResendOnNewConnection(CURL* easy, CURLcode result) {
    if (result != CURLE_GOT_NOTHING && result != CURLE_SEND_ERROR && result != CURLE_RECV_ERROR) {
      return false;
    }
    Transfer* t = nullptr;
    curl_easy_getinfo(easy, CURLINFO_PRIVATE, reinterpret_cast<char**>(&t));
    long new_connections = 0;
    curl_easy_getinfo(easy, CURLINFO_NUM_CONNECTS, &new_connections);
    RequestRecord& r = *t->rec;
    if (r.reconnected || new_connections != 0 || r.first_byte_ns >= 0 || t->http_status != 0) {
      return false;
    }
    curl_multi_remove_handle(multi_, easy);
    const uint32_t expected_chunks = static_cast<uint32_t>(r.chunk_times_ns.capacity());
    t->ResetForRequest(&r, expected_chunks);
    r.reconnected = true;
    r.sent_ns = -1;
    curl_easy_setopt(easy, CURLOPT_FRESH_CONNECT, 1L);
    Add(*t);
    return true;
  }

  // Cuts off a request still in flight at the drain timeout; what it received stays recorded.
  void Cancel(Transfer& t, int64_t now_ns, double drain_timeout_s) {
    curl_multi_remove_handle(multi_, t.easy);
    RequestRecord& r = *t.rec;
    r.done_ns = now_ns;
    r.cancelled = true;
    r.success = false;
    r.vllm_success = false;
    r.error = fmt::format("cancelled: still in flight {} s after sending stopped (drain_timeout_s)",
                          drain_timeout_s);
    uint32_t tokens = 0;
    for (uint32_t n : r.chunk_tokens) tokens += n;
    r.output_tokens = tokens;
    r.prompt_tokens = t.input_len_tok;
    if (r.vllm_prompt_tokens < 0) r.vllm_prompt_tokens = t.input_len_tok;
  }

  void Release(Transfer* t) {
    t->rec = nullptr;
    free_.push_back(t);
  }

  // Closes one transfer's record (the caller releases the transfer).
  Transfer* Finish(CURL* easy, CURLcode result) {
    const int64_t done_ns = SteadyNowNs();
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
    r.http_status = static_cast<int32_t>(t->http_status);
    r.output_tokens_from_usage = t->have_usage && t->usage_completion_tok > 0;
    if (r.output_tokens_from_usage) {
      r.output_tokens = t->usage_completion_tok;
    } else {
      // Without usage: the chunks' own token counts (1 each unless the server said more).
      r.output_tokens = 0;
      for (uint32_t n : r.chunk_tokens) r.output_tokens += n;
    }
    r.prompt_tokens =
        t->have_usage && t->usage_prompt_tok > 0 ? t->usage_prompt_tok : t->input_len_tok;
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
      r.error = fmt::format("HTTP {}: {}", t->http_status, ErrorBodyMessage(t->error_body));
    } else if (t->stream_error) {
      r.error = t->stream_error_text;
    } else if (output_chunks == 0) {
      r.error = "no output tokens";
    } else {
      r.success = true;  // [DONE], or a clean end of body (result == CURLE_OK)
    }
    if (t->vllm_view) {
      // vLLM: any transport error raises; HTTP != 200 fails; else one token chunk suffices.
      const bool transport_ok = result == CURLE_OK || (t->saw_done && result == CURLE_PARTIAL_FILE);
      r.vllm_success = transport_ok && t->http_status == 200 && !t->vllm_exception &&
                       !r.vllm_chunk_times_ns.empty();
      if (r.vllm_prompt_tokens < 0) r.vllm_prompt_tokens = t->input_len_tok;
    }
    return t;
  }

  const LoadSettings& s_;
  std::function<void(const Progress&)> on_progress_;
  const RequestBodyWriter bodies_;
  CURLM* multi_ = nullptr;
  int due_timer_fd_ = -1;
  int epoll_fd_ = -1;
  EpollWatch watch_{-1};      // what epoll_fd_ watches
  int64_t curl_due_ns_ = -1;  // libcurl's timeout (steady clock); -1: none
  ReceiveTimes receive_times_;
  ClientLoad load_;  // this phase's
  curl_slist* headers_ = nullptr;
  std::string url_;
  std::vector<std::unique_ptr<Transfer>> transfers_;
  std::vector<Transfer*> free_;
};

// The load threads of a run: one LoadLoop each, loop 0 on the caller's thread, each with its
// share of the concurrency, all taking requests from one SharedSource. More threads only when
// one core cannot parse the streams fast enough (about 20,000 streams of 128 events per second).
class LoadThreads {
 public:
  LoadThreads(const LoadSettings& s, const std::function<void(const Progress&)>& on_progress)
      : on_progress_(on_progress) {
    const uint32_t n = std::max<uint32_t>(1, s.threads);
    done_by_loop_.assign(n, 0);
    if (s.pin_threads) cpus_ = AllowedCpus();  // before any thread is pinned
    for (uint32_t k = 0; k < n; ++k) {
      std::function<void(const Progress&)> report;
      if (on_progress) report = [this, k](const Progress& p) { Report(k, p); };
      loops_.push_back(std::make_unique<LoadLoop>(s, std::move(report)));
    }
  }

  // LoadLoop::RunPhase over min(threads, cap) loops (all of them when cap is 0, no cap); the
  // records come back in the order the source handed them out (by index).
  int64_t RunPhase(RequestSource& source, std::deque<RequestRecord>& records, uint32_t cap,
                   int64_t t0_ns, bool warmup, double drain_timeout_s) {
    std::fill(done_by_loop_.begin(), done_by_loop_.end(), 0);
    const size_t n = cap > 0 ? std::min<size_t>(loops_.size(), cap) : loops_.size();
    if (n == 1) {
      const ScopedPin pin(cpus_, 0);
      const int64_t last =
          loops_[0]->RunPhase(source, records, cap, t0_ns, warmup, drain_timeout_s);
      load_ = loops_[0]->load();
      return last;
    }
    SharedSource shared(source);
    std::vector<std::deque<RequestRecord>> taken(n);
    std::vector<int64_t> last_done_ns(n, t0_ns);
    std::vector<std::exception_ptr> errors(n);
    auto run = [&](size_t k) {
      const ScopedPin pin(cpus_, k);
      try {
        const uint32_t share = cap == 0 ? 0 : static_cast<uint32_t>(cap / n + (k < cap % n));
        last_done_ns[k] =
            loops_[k]->RunPhase(shared, taken[k], share, t0_ns, warmup, drain_timeout_s);
      } catch (...) {
        errors[k] = std::current_exception();
      }
    };
    std::vector<std::thread> threads;
    for (size_t k = 1; k < n; ++k) threads.emplace_back(run, k);
    run(0);
    for (auto& t : threads) t.join();
    for (const auto& e : errors) {
      if (e) std::rethrow_exception(e);
    }
    std::vector<RequestRecord> all;
    for (auto& loop_records : taken) {
      for (auto& r : loop_records) all.push_back(std::move(r));
    }
    std::stable_sort(all.begin(), all.end(), [](const RequestRecord& a, const RequestRecord& b) {
      return a.index < b.index;
    });
    for (auto& r : all) records.push_back(std::move(r));
    load_ = ClientLoad();
    for (size_t k = 0; k < n; ++k) {
      const ClientLoad& loop = loops_[k]->load();
      load_.busiest_thread_cpu_fraction =
          std::max(load_.busiest_thread_cpu_fraction, loop.busiest_thread_cpu_fraction);
      load_.read_lag.Merge(loop.read_lag);
      load_.send_lateness.Merge(loop.send_lateness);
    }
    return *std::max_element(last_done_ns.begin(), last_done_ns.end());
  }

  // The loops' saturation over the last phase, merged (the busiest thread's CPU fraction).
  const ClientLoad& load() const { return load_; }

 private:
  // One loop's progress, reported as the sum over the loops (one caller at a time).
  void Report(size_t k, const Progress& p) {
    std::lock_guard lock(progress_mu_);
    done_by_loop_[k] = p.completed;
    uint32_t done = 0;
    for (uint32_t d : done_by_loop_) done += d;
    on_progress_(Progress{done, std::max(p.total, done), p.warmup});
  }

  const std::function<void(const Progress&)>& on_progress_;
  std::vector<std::unique_ptr<LoadLoop>> loops_;
  std::vector<int> cpus_;  // where loop k runs when pinned: cpus_[k % size] (empty: unpinned)
  std::mutex progress_mu_;
  std::vector<uint32_t> done_by_loop_;
  ClientLoad load_;
};

void Rebase(int64_t& t_ns, int64_t t0_ns) {
  if (t_ns >= 0) t_ns -= t0_ns;
}

}  // namespace

namespace {

Status RunValidLoad(const LoadSettings& settings, LoadResult* out,
                    const std::function<void(const Progress&)>& on_progress) {
  LoadThreads threads(settings, on_progress);
  const bool ramp = settings.ramp != RampKind::kNone;
  const bool replay = !settings.plan.empty() && settings.replay_arrivals &&
                      settings.request_rate_per_s == 0 && !ramp;
  const bool open_loop = workload::IsOpenLoop(settings);
  const bool by_duration = settings.duration_s > 0;
  const bool sessions = settings.sessions > 0;

  if (settings.warmup_requests > 0) {
    // Warm-up is a closed loop (workload::WarmupConcurrency slots); prompts are numbered after
    // the measured ones so that no measured prompt was seen before.
    std::deque<RequestRecord> warm;
    auto source = MakeCountSource(settings, settings.warmup_requests, settings.num_requests,
                                  /*warmup=*/true, {});
    const uint32_t cap = workload::WarmupConcurrency(settings);
    threads.RunPhase(*source, warm, cap, SteadyNowNs(), /*warmup=*/true, 0);
    uint32_t failed = static_cast<uint32_t>(
        std::count_if(warm.begin(), warm.end(), [](const auto& r) { return !r.success; }));
    if (failed > 0) {
      spdlog::warn(
          "loadgen: {} of {} warm-up requests failed; first error: {}", failed, warm.size(),
          std::find_if(warm.begin(), warm.end(), [](const auto& r) { return !r.success; })->error);
    }
  }

  LoadResult result;
  std::unique_ptr<RequestSource> source;
  uint32_t cap = open_loop ? settings.max_in_flight : settings.concurrency;
  for (const auto& adapter : settings.adapters) result.adapter_names.push_back(adapter.name);
  if (sessions) {
    source = MakeSessionSource(settings);
    cap = 0;  // the source keeps at most `concurrency` sessions open
    result.arrival =
        fmt::format("sessions {}x{} turns, think {} s{}", settings.sessions, settings.turns,
                    settings.think_time_s, settings.think_time_exponential ? " (exponential)" : "");
  } else if (by_duration) {
    source = MakeDurationSource(settings);
    result.arrival = open_loop ? DescribeArrivals(ArrivalKindFor(settings), settings.burstiness,
                                                  RateProfileFor(settings, 0))
                               : "closed-loop";
  } else {
    std::vector<int64_t> schedule;
    if (replay) {
      for (const auto& p : settings.plan) schedule.push_back(p.offset_ns);
      result.arrival = "trace";
    } else if (open_loop) {
      const RateProfile profile = RateProfileFor(settings, settings.num_requests);
      schedule = ScheduleNs(ArrivalKindFor(settings), settings.burstiness, profile,
                            settings.num_requests, settings.seed);
      result.arrival = DescribeArrivals(ArrivalKindFor(settings), settings.burstiness, profile);
    } else {
      result.arrival = "closed-loop";
    }
    source =
        MakeCountSource(settings, settings.num_requests, 0, /*warmup=*/false, std::move(schedule));
  }
  std::unique_ptr<EarlyStopSource> stopping;
  if (settings.early_stop.enabled()) {
    stopping =
        std::make_unique<EarlyStopSource>(*source, settings.early_stop, open_loop && cap == 0,
                                          by_duration ? std::llround(settings.warmup_s * 1e9) : 0);
  }
  std::deque<RequestRecord> records;
  const int64_t t0_ns = SteadyNowNs();
  threads.RunPhase(stopping ? *stopping : *source, records, cap, t0_ns, /*warmup=*/false,
                   settings.drain_timeout_s);
  result.t0_steady_ns = t0_ns;
  result.client = threads.load();
  if (stopping && stopping->verdict().reason != StopReason::kNone) {
    result.stopped = stopping->verdict().reason;
    result.stop_evidence = stopping->verdict().evidence;
    result.stopped_at_s = stopping->verdict().at_s;
  }

  result.requests.assign(std::make_move_iterator(records.begin()),
                         std::make_move_iterator(records.end()));
  if (by_duration) {
    result.window_start_ns = std::llround(settings.warmup_s * 1e9);
    result.window_end_ns = std::llround((settings.warmup_s + settings.duration_s) * 1e9);
    if (stopping && stopping->stopped_at_ns() >= 0) {
      result.window_end_ns = std::min(result.window_end_ns, stopping->stopped_at_ns());
    }
  }
  uint32_t failed = 0, cancelled = 0, measured = 0;
  int64_t last_measured_done_ns = -1, last_measured_send_ns = 0;
  for (RequestRecord& r : result.requests) {
    Rebase(r.scheduled_ns, t0_ns);
    Rebase(r.start_ns, t0_ns);
    Rebase(r.sent_ns, t0_ns);
    Rebase(r.first_byte_ns, t0_ns);
    Rebase(r.first_token_ns, t0_ns);
    Rebase(r.end_ns, t0_ns);
    Rebase(r.done_ns, t0_ns);
    for (int64_t& t : r.chunk_times_ns) t -= t0_ns;
    for (int64_t& t : r.vllm_chunk_times_ns) t -= t0_ns;
    if (r.warmup) continue;
    ++measured;
    last_measured_done_ns = std::max(last_measured_done_ns, r.done_ns);
    last_measured_send_ns = std::max(last_measured_send_ns, r.start_ns);
    if (!r.success) ++failed;
    if (r.cancelled) ++cancelled;
  }
  if (!by_duration) result.window_end_ns = last_measured_send_ns;
  result.duration_s =
      last_measured_done_ns >= result.window_start_ns
          ? static_cast<double>(last_measured_done_ns - result.window_start_ns) / 1e9
          : 0;
  if (failed > 0) {
    spdlog::warn("loadgen: {} of {} requests failed ({} cancelled at the drain timeout)", failed,
                 measured, cancelled);
  }
  *out = std::move(result);
  return Status::Ok();
}

}  // namespace

Status RunLoad(const LoadSettings& settings, LoadResult* out,
               const std::function<void(const Progress&)>& on_progress) {
  if (Status s = workload::ValidateLoadSettings(settings); !s.ok()) return s;
  try {
    return RunValidLoad(settings, out, on_progress);
  } catch (const std::exception& e) {
    // libcurl or epoll could not be set up (out of descriptors or memory): nothing measured.
    return Status::Internal(fmt::format("loadgen: {}", e.what()));
  }
}

}  // namespace servesweep::loadgen
