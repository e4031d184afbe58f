#include "sim/http_session.h"

#include <spdlog/spdlog.h>

#include <array>
#include <boost/asio/write.hpp>
#include <boost/beast/core/read_size.hpp>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <string_view>
#include <utility>
#include <vector>

#include "common/receive_time.h"

namespace servesweep::sim {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kBodyLimitBytes = 64ull << 20;  // a 131k-token id array is ~1 MB
constexpr size_t kReadBytes = 64 << 10;            // the most one read takes (as Beast's reads)
constexpr const char* kJson = "application/json";

// The streaming response head, rendered once (as Beast rendered it before).
constexpr std::string_view kStreamHead =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
    "Cache-Control: no-cache\r\nTransfer-Encoding: chunked\r\n\r\n";
constexpr std::string_view kStreamHeadClose =
    "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream; charset=utf-8\r\n"
    "Cache-Control: no-cache\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n";
constexpr std::string_view kCrlf = "\r\n";
constexpr std::string_view kLastChunk = "0\r\n\r\n";

int64_t SinceEpochNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

struct HttpSession::Generation {
  Generation(const CompletionRequest& req, uint64_t seq_in, std::string_view path_in,
             const RequestFaults& faults_in, const ServerContext& ctx)
      : request(req),
        seq(seq_in),
        path(path_in),
        renderer(req.api, seq_in, ctx.created_s, ctx.model_json),
        faults(faults_in),
        fault_tok(req.max_tok / 2) {}

  CompletionRequest request;
  uint64_t seq;
  std::string_view path;  // a literal: the endpoint's route
  ResponseRenderer renderer;
  RequestFaults faults;
  int64_t fault_tok;  // where a broken event or a truncation strikes: the middle token
  bool done = false;
  bool last_received = false;  // the core sent the finished event (or the stream was cut)
  bool watching = false;       // a hang-up watch is pending
  bool recorded = false;       // counted in the metrics and the request log
  bool stalled = false;        // the stall has begun: every later event is held
  int64_t emitted_tok = 0;     // tokens received from the core
  int64_t counted_tok = 0;     // tokens handed to the socket (non-streaming: produced)
  int64_t last_chunk_ns = 0;   // when the previous chunk was handed over (ITL)
  std::string_view fault;      // the injected fault that struck, for the request log
  // Stalled events and their release times, in order; those before held_next are released.
  // (A vector: a std::deque allocates on construction, and most requests never stall.)
  std::vector<std::pair<Clock::time_point, TokenEvent>> held;
  size_t held_next = 0;
  std::vector<int64_t> token_ns;  // filled only when the request log is on
};

HttpSession::HttpSession(tcp::socket socket, ServerContext& ctx)
    : socket_(std::move(socket)), ctx_(ctx), timer_(socket_.get_executor()) {
  // The hang-up probe is the one synchronous call on this socket; it must never block.
  ErrorCode ignored;
  socket_.non_blocking(true, ignored);
}

HttpSession::~HttpSession() = default;

void HttpSession::Start() { ReadRequest(); }

void HttpSession::ReadRequest() {
  parser_.emplace();
  parser_->body_limit(kBodyLimitBytes);
  received_at_.reset();
  // Bytes of a pipelined request already read: their receive time is gone; stamp at parse.
  if (buffer_.size() > 0) return ParseRequest();
  // Under load the next request is often queued already: try to read it before waiting.
  ReceiveFirstBytes();
}

void HttpSession::WaitForRequest() {
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this()](ErrorCode ec) {
    if (ec) return self->OnRequestRead(ec);
    self->ReceiveFirstBytes();
  });
}

void HttpSession::ReceiveFirstBytes() {
  // The parser's first read, done here to have the bytes' receive time with them (one call).
  const auto space = buffer_.prepare(beast::read_size(buffer_, kReadBytes));
  const ReceivedBytes received =
      ReceiveWithTime(socket_.native_handle(), space.data(), space.size());
  if (received.bytes < 0 && (received.error == EAGAIN || received.error == EWOULDBLOCK)) {
    return WaitForRequest();  // nothing queued (yet, or the readiness was stale)
  }
  if (received.bytes <= 0) return ParseRequest();  // the parser's own read reports the close
  buffer_.commit(static_cast<size_t>(received.bytes));
  received_at_ = received.received_at;
  // A request that came whole (the usual case) is handled now, without the extra dispatch an
  // async_read would cost; otherwise async_read goes on with the parser from here.
  parser_->eager(true);  // as async_read parses: the body in the same pass as the header
  ErrorCode ec;
  while (!parser_->is_done() && buffer_.size() > 0) {
    buffer_.consume(parser_->put(buffer_.data(), ec));
    if (ec) break;
  }
  if (ec == http::error::need_more || (!ec && !parser_->is_done())) return ParseRequest();
  OnRequestRead(ec);
}

void HttpSession::ParseRequest() {
  http::async_read(socket_, buffer_, *parser_,
                   [self = shared_from_this()](ErrorCode ec, size_t) { self->OnRequestRead(ec); });
}

void HttpSession::OnRequestRead(ErrorCode ec) {
  if (ec) {
    if (ec != http::error::end_of_stream && ec != net::error::operation_aborted) {
      spdlog::debug("sim: closing connection after read error: {}", ec.message());
    }
    return Close();
  }
  // The kernel's receive time of the first bytes, else (pipelined, no timestamps) now.
  arrival_ = received_at_ ? *received_at_ : Clock::now();
  const auto request = parser_->release();
  parser_.reset();
  keep_alive_ = request.keep_alive();
  Route(request);
}

void HttpSession::Route(const http::request<http::string_body>& request) {
  std::string_view target(request.target().data(), request.target().size());
  target = target.substr(0, target.find('?'));
  const bool get = request.method() == http::verb::get;
  const bool post = request.method() == http::verb::post;

  if (!ctx_.settings.api_key.empty() && target.rfind("/v1/", 0) == 0 &&
      request[http::field::authorization] != "Bearer " + ctx_.settings.api_key) {
    const ErrorReply error =
        MakeError(401, "invalid_request_error",
                  request[http::field::authorization].empty()
                      ? "You didn't provide an API key (an Authorization: Bearer header)."
                      : "Incorrect API key provided.");
    return SendReply(error.status, kJson, error.body);
  }
  if (target == "/v1/completions" && post) {
    return RouteCompletion(Api::kCompletions, "/v1/completions", request.body());
  }
  if (target == "/v1/chat/completions" && post) {
    return RouteCompletion(Api::kChat, "/v1/chat/completions", request.body());
  }
  if (target == "/health" && get) {
    return SendReply(Clock::now() < ctx_.ready_at ? 503 : 200, kJson, "");
  }
  if (target == "/v1/models" && get) {
    return SendReply(
        200, kJson,
        RenderModelList(ctx_.settings.model_name, ctx_.created_s, ctx_.settings.max_model_len));
  }
  if (target == "/metrics" && get) {
    return ctx_.driver->Snapshot(
        socket_.get_executor(), [self = shared_from_this()](const EngineSnapshot& engine) {
          self->SendReply(200, "text/plain; version=0.0.4; charset=utf-8",
                          self->ctx_.metrics.RenderPrometheus(self->ctx_.persona,
                                                              self->ctx_.settings.model_name,
                                                              engine, self->ctx_.created_s));
        });
  }
  // The engines' cache resets, each answered as its engine does: vLLM 0.33's POST
  // /reset_prefix_cache ({"success": ...}) and SGLang's /flush_cache (GET or POST; 400 when
  // requests are in flight).
  if ((target == "/reset_prefix_cache" && post) || (target == "/flush_cache" && (get || post))) {
    if (ctx_.settings.faults.ignore_cache_reset) {
      return SendReply(200, kJson,
                       target == "/flush_cache" ? "Cache flushed.\n" : R"({"success":true})");
    }
  }
  if (target == "/reset_prefix_cache" && post) {
    return ctx_.driver->ResetPrefixCache(
        socket_.get_executor(), [self = shared_from_this()](bool reset) {
          self->SendReply(200, kJson, reset ? R"({"success":true})" : R"({"success":false})");
        });
  }
  if (target == "/flush_cache" && (get || post)) {
    return ctx_.driver->ResetPrefixCache(
        socket_.get_executor(), [self = shared_from_this()](bool reset) {
          self->SendReply(reset ? 200 : 400, "text/plain",
                          reset ? "Cache flushed.\n" : "Flush cache failed.\n");
        });
  }
  const bool known = target == "/health" || target == "/v1/models" || target == "/metrics" ||
                     target == "/v1/completions" || target == "/v1/chat/completions" ||
                     target == "/reset_prefix_cache" || target == "/flush_cache";
  const ErrorReply error = known ? MakeError(405, "MethodNotAllowedError", "Method Not Allowed")
                                 : MakeError(404, "NotFoundError", "Not Found");
  SendReply(error.status, kJson, error.body);
}

void HttpSession::RouteCompletion(Api api, std::string_view path, std::string_view body) {
  auto parsed = ParseCompletionRequest(api, body, ctx_.settings.model_name,
                                       ctx_.settings.max_model_len, ctx_.settings.lora_adapters);
  if (auto* error = std::get_if<ErrorReply>(&parsed)) {
    return SendReply(error->status, kJson, std::move(error->body));
  }
  const CompletionRequest& request = std::get<CompletionRequest>(parsed);
  const uint64_t seq = ctx_.next_seq.fetch_add(1, std::memory_order_relaxed);
  const FaultSettings& faults = ctx_.settings.faults;
  if (faults.crash_after_requests > 0 &&
      seq >= static_cast<uint64_t>(faults.crash_after_requests)) {
    // An engine dying: no reply, no clean-up, every open stream cut. The ground truth is kept.
    spdlog::error("sim: injected crash on request {} (crash_after_requests = {})", seq + 1,
                  faults.crash_after_requests);
    if (ctx_.request_log) ctx_.request_log->Flush();
    std::raise(SIGKILL);
  }
  const RequestFaults planned = PlanFaults(faults, seq);
  // A faulted request that produced no token, in the request log (ground truth) as such.
  auto log_tokenless = [&](const ResponseRenderer& renderer, const char* status,
                           const char* fault) {
    if (!ctx_.request_log) return;
    const std::vector<int64_t> none;
    ctx_.request_log->Append({.id = renderer.id(),
                              .path = path,
                              .arrival_ns = SinceEpochNs(arrival_),
                              .token_ns = &none,
                              .prompt_tok = request.prompt_tok,
                              .completion_tok = 0,
                              .status = status,
                              .fault = fault});
  };
  if (planned.error) {
    log_tokenless(ResponseRenderer(api, seq, ctx_.created_s, ctx_.model_json), "error", "error");
    const ErrorReply error =
        MakeError(500, "InternalServerError", "Injected fault: the engine failed this request.");
    return SendReply(error.status, kJson, error.body);
  }
  if (planned.empty_stream && request.stream) {
    // The engine accepted and finished the request without generating anything.
    ctx_.metrics.OnRequestStart(request.prompt_tok);
    ctx_.metrics.OnRequestEnd(/*ok=*/true, 0);
    const ResponseRenderer renderer(api, seq, ctx_.created_s, ctx_.model_json);
    log_tokenless(renderer, "ok", "empty_stream");
    std::string events;
    if (request.include_usage) renderer.AppendUsageEvent(events, request.prompt_tok, 0);
    ResponseRenderer::AppendDoneEvent(events);
    return SendReply(200, "text/event-stream", std::move(events));
  }
  StartGeneration(request, path, seq, planned,
                  PromptBlockHashes(api, body, ctx_.settings.prefix_block_tok));
}

void HttpSession::SendReply(unsigned status, const char* content_type, std::string body) {
  reply_.emplace(static_cast<http::status>(status), 11, std::move(body));
  reply_->set(http::field::content_type, content_type);
  reply_->keep_alive(keep_alive_);
  reply_->prepare_payload();
  http::async_write(socket_, *reply_,
                    [self = shared_from_this(), keep_alive = keep_alive_](ErrorCode ec, size_t) {
                      self->reply_.reset();
                      self->OnWriteDone(ec, keep_alive);
                    });
}

void HttpSession::OnWriteDone(ErrorCode ec, bool keep_alive) {
  if (ec || !keep_alive) return Close();
  ReadRequest();
}

void HttpSession::StartGeneration(const CompletionRequest& request, std::string_view path,
                                  uint64_t seq, const RequestFaults& faults,
                                  std::vector<uint64_t> prefix_block_hashes) {
  gen_ = std::make_unique<Generation>(request, seq, path, faults, ctx_);
  if (request.question) {
    gen_->renderer.set_first_token_text(" " + AnswerArithmetic(*request.question,
                                                               ctx_.settings.answer_accuracy,
                                                               ctx_.settings.answer_seed));
  }
  ctx_.metrics.OnRequestStart(request.prompt_tok);
  if (request.stream) pending_head_ = keep_alive_ ? kStreamHead : kStreamHeadClose;
  // Events already due (ttft = 0) are delivered inside Submit when single-threaded.
  ctx_.driver->Submit({.id = seq,
                       .arrival_ns = SinceEpochNs(arrival_),
                       .prompt_tok = request.prompt_tok,
                       .max_tok = request.max_tok,
                       .prefix_block_hashes = std::move(prefix_block_hashes),
                       .adapter = request.adapter},
                      shared_from_this(), socket_.get_executor());
  if (!Active(seq)) return;  // a non-streaming request answered already
  if (!gen_->last_received) {
    // A stream that lives on should not pin the read buffer (Beast reads up to 64 KB at a
    // time): 10,000 streams would hold 640 MB. One answered at once keeps it for the next read.
    if (buffer_.size() == 0) buffer_.shrink_to_fit();
    gen_->watching = true;
    WatchForHangup(seq);
  }
  Flush();  // the stream's head goes at once, with whatever tokens are due
}

void HttpSession::WatchForHangup(uint64_t seq) {
  socket_.async_wait(tcp::socket::wait_read, [self = shared_from_this(), seq](ErrorCode ec) {
    if (!self->Active(seq)) return;
    char byte;
    ErrorCode peek_ec;
    const size_t peeked =
        ec ? 0 : self->socket_.receive(net::buffer(&byte, 1), tcp::socket::message_peek, peek_ec);
    // Readiness can be stale (the request's own bytes, already consumed): look again later.
    if (peek_ec == net::error::would_block) return self->WatchForHangup(seq);
    if (ec || peek_ec || peeked == 0) return self->FinishGeneration(/*aborted=*/true);
    // Otherwise these are the bytes of a pipelined request: ReadRequest takes them later.
  });
}

void HttpSession::OnTokenEvents(const TokenEvent* events, size_t count) {
  if (count == 0 || !Active(events[0].id)) return;
  const uint64_t seq = events[0].id;
  for (size_t i = 0; i < count; ++i) {
    Generation& gen = *gen_;
    if (gen.last_received) break;  // the stream was cut (truncation fault): flush the cut
    const FaultSettings& faults = ctx_.settings.faults;
    if (gen.faults.stall && (gen.stalled || gen.emitted_tok >= faults.stall_after_tok)) {
      // The stream pauses: this event and every later one leave stall_ms after they came.
      gen.stalled = true;
      gen.fault = "stall";
      gen.held.emplace_back(Clock::now() + ctx_.stall, events[i]);
      if (gen.held.size() - gen.held_next == 1) {
        timer_.expires_at(gen.held.front().first);
        timer_.async_wait([self = shared_from_this(), seq](ErrorCode ec) {
          if (!ec) self->ReleaseHeld(seq);
        });
      }
      continue;
    }
    Consume(events[i]);
    if (!Active(seq)) return;  // a non-streaming request was answered
  }
  Flush();
}

void HttpSession::ReleaseHeld(uint64_t seq) {
  if (!Active(seq)) return;
  const Clock::time_point now = Clock::now();
  while (gen_->held_next < gen_->held.size() && gen_->held[gen_->held_next].first <= now) {
    const TokenEvent event = gen_->held[gen_->held_next++].second;
    Consume(event);
    if (!Active(seq)) return;
  }
  Flush();
  if (gen_->held_next == gen_->held.size()) return;
  timer_.expires_at(gen_->held[gen_->held_next].first);
  timer_.async_wait([self = shared_from_this(), seq](ErrorCode ec) {
    if (!ec) self->ReleaseHeld(seq);
  });
}

void HttpSession::Consume(const TokenEvent& event) {
  Generation& gen = *gen_;
  if (gen.last_received) return;
  const int64_t first = gen.emitted_tok;
  const int64_t tokens = event.tokens;
  gen.emitted_tok += tokens;
  ctx_.metrics.OnTokens(tokens);

  if (!gen.request.stream) {
    // Nothing is written until the end: each token counts at the model's instant.
    if (first == 0) ctx_.metrics.OnFirstToken(event.time_ns - SinceEpochNs(arrival_));
    if (first > 0) ctx_.metrics.OnChunkInterval(event.time_ns - gen.last_chunk_ns, tokens);
    gen.last_chunk_ns = event.time_ns;
    gen.counted_tok += tokens;
    if (ctx_.request_log) gen.token_ns.insert(gen.token_ns.end(), tokens, event.time_ns);
    if (!event.finished) return;
    gen.last_received = true;
    std::string body = gen.renderer.RenderResponse(gen.request.prompt_tok, gen.emitted_tok);
    FinishGeneration(/*aborted=*/false);
    return SendReply(200, kJson, std::move(body));
  }

  if (first == 0 && gen.request.api == Api::kChat) gen.renderer.AppendRoleEvent(pending_);
  const size_t event_begin = pending_.size();
  gen.renderer.AppendTokenEvent(pending_, first, tokens, event.finished);
  pending_tok_ += tokens;
  const bool fault_here = first <= gen.fault_tok && gen.fault_tok < gen.emitted_tok;
  if (fault_here && gen.faults.truncate) {
    // The body stops in the middle of this event's chunk; the connection closes after it.
    pending_.resize(event_begin + (pending_.size() - event_begin) / 2);
    pending_cut_ = true;
    gen.fault = "truncated";
    if (!event.finished) ctx_.driver->Cancel(gen.seq);
    gen.last_received = true;
    return;
  }
  if (fault_here && gen.faults.broken_event) {
    // The event's JSON stops halfway; the event itself is terminated, the stream goes on.
    pending_.resize(event_begin + (pending_.size() - event_begin) / 2);
    pending_ += "\n\n";
    gen.fault = "broken_event";
  }
  if (event.finished) {
    gen.last_received = true;
    if (gen.request.include_usage) {
      // An injected undercount reports fewer tokens than were generated and counted.
      const int64_t reported =
          std::max<int64_t>(0, gen.emitted_tok - ctx_.settings.faults.usage_undercount_tok);
      gen.renderer.AppendUsageEvent(pending_, gen.request.prompt_tok, reported);
    }
    ResponseRenderer::AppendDoneEvent(pending_);
    pending_last_ = true;
  }
}

void HttpSession::Flush() {
  if (write_in_flight_ || !gen_) return;
  if (pending_head_.empty() && pending_.empty() && !pending_last_) return;
  std::swap(writing_, pending_);
  pending_.clear();
  writing_last_ = pending_last_ && !pending_cut_;
  writing_cut_ = pending_cut_;
  std::array<net::const_buffer, 5> buffers{};
  size_t n = 0;
  if (!pending_head_.empty()) buffers[n++] = net::buffer(pending_head_);
  if (!writing_.empty()) {
    // One HTTP chunk for everything pending; a cut chunk promises twice what it carries.
    const size_t promised = writing_cut_ ? 2 * writing_.size() + 1 : writing_.size();
    char* end = std::to_chars(chunk_line_, chunk_line_ + sizeof(chunk_line_) - 2, promised, 16).ptr;
    *end++ = '\r';
    *end++ = '\n';
    buffers[n++] = net::buffer(chunk_line_, static_cast<size_t>(end - chunk_line_));
    buffers[n++] = net::buffer(writing_);
    if (!writing_cut_) buffers[n++] = net::buffer(kCrlf);
  }
  if (writing_last_) buffers[n++] = net::buffer(kLastChunk);
  pending_head_ = {};
  pending_last_ = false;
  pending_cut_ = false;

  // Every token in this write is handed to the socket now.
  Generation& gen = *gen_;
  if (pending_tok_ > 0) {
    const int64_t now_ns = SinceEpochNs(Clock::now());
    if (gen.counted_tok == 0) {
      ctx_.metrics.OnFirstToken(now_ns - SinceEpochNs(arrival_));
    } else {
      ctx_.metrics.OnChunkInterval(now_ns - gen.last_chunk_ns, pending_tok_);
    }
    gen.last_chunk_ns = now_ns;
    gen.counted_tok += pending_tok_;
    if (ctx_.request_log) gen.token_ns.insert(gen.token_ns.end(), pending_tok_, now_ns);
    pending_tok_ = 0;
  }
  // The request is complete once its last bytes are handed over: record it now, so that the
  // log holds it before the client can have read it (a client may stop the emulator then).
  if (writing_last_) Record(/*aborted=*/false);
  write_in_flight_ = true;
  net::async_write(socket_, buffers,
                   [self = shared_from_this(), seq = gen.seq](ErrorCode ec, size_t) {
                     self->OnFlushed(ec, seq);
                   });
}

void HttpSession::OnFlushed(ErrorCode ec, uint64_t seq) {
  write_in_flight_ = false;
  if (!Active(seq)) return;
  if (ec || writing_cut_) return FinishGeneration(/*aborted=*/true);
  if (!writing_last_) return Flush();
  FinishGeneration(/*aborted=*/false);
  OnWriteDone({}, keep_alive_);
}

void HttpSession::FinishGeneration(bool aborted) {
  Generation& gen = *gen_;
  gen.done = true;
  if (!gen.recorded) Record(aborted);
  if (aborted) {
    if (!gen.last_received) ctx_.driver->Cancel(gen.seq);
    timer_.cancel();
    return Close();
  }
  if (gen.watching) {
    ErrorCode ignored;
    socket_.cancel(ignored);  // ends the hang-up watch; nothing else is pending now
  }
  gen_.reset();
}

void HttpSession::Record(bool aborted) {
  Generation& gen = *gen_;
  gen.recorded = true;
  const Clock::time_point now = Clock::now();
  ctx_.metrics.OnRequestEnd(
      !aborted, std::chrono::duration_cast<std::chrono::nanoseconds>(now - arrival_).count());
  if (ctx_.request_log) {
    ctx_.request_log->Append({.id = gen.renderer.id(),
                              .path = gen.path,
                              .arrival_ns = SinceEpochNs(arrival_),
                              .token_ns = &gen.token_ns,
                              .prompt_tok = gen.request.prompt_tok,
                              .completion_tok = gen.counted_tok,
                              .status = aborted ? "aborted" : "ok",
                              .fault = gen.fault});
  }
}

bool HttpSession::Active(uint64_t seq) const { return gen_ && !gen_->done && gen_->seq == seq; }

void HttpSession::Close() {
  ErrorCode ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  socket_.close(ignored);
}

}  // namespace servesweep::sim
