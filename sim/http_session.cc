#include "sim/http_session.h"

#include <spdlog/spdlog.h>

#include <boost/asio/write.hpp>
#include <boost/beast/core/buffers_cat.hpp>
#include <string_view>
#include <utility>
#include <vector>

namespace servesweep::sim {
namespace {

namespace beast = boost::beast;
namespace http = beast::http;
namespace net = boost::asio;
using tcp = net::ip::tcp;
using Clock = std::chrono::steady_clock;

constexpr uint64_t kBodyLimitBytes = 64ull << 20;  // a 131k-token id array is ~1 MB
constexpr const char* kJson = "application/json";

int64_t SinceEpochNs(Clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
}

}  // namespace

struct HttpSession::Generation {
  Generation(const CompletionRequest& req, uint64_t seq_in, std::string_view path_in,
             const ServerContext& ctx)
      : request(req),
        seq(seq_in),
        path(path_in),
        renderer(req.api, seq_in, ctx.created_s, ctx.model_json) {}

  CompletionRequest request;
  uint64_t seq;
  std::string_view path;  // a literal: the endpoint's route
  ResponseRenderer renderer;
  bool done = false;
  int64_t next_tok = 0;
  std::vector<int64_t> token_ns;  // filled only when the request log is on
  http::response<http::empty_body> header;
  http::response_serializer<http::empty_body> header_writer{header};
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
  arrival_ = Clock::now();
  // Idle keep-alive connections should not pin a large request's memory.
  const auto request = parser_->release();
  parser_.reset();
  keep_alive_ = request.keep_alive();
  buffer_.shrink_to_fit();
  Route(request);
}

void HttpSession::Route(const http::request<http::string_body>& request) {
  std::string_view target(request.target().data(), request.target().size());
  target = target.substr(0, target.find('?'));
  const bool get = request.method() == http::verb::get;
  const bool post = request.method() == http::verb::post;

  if (target == "/health" && get) {
    return SendReply(Clock::now() < ctx_.ready_at ? 503 : 200, kJson, "");
  }
  if (target == "/v1/models" && get) {
    return SendReply(200, kJson,
                     RenderModelList(ctx_.settings.model_name, ctx_.created_s,
                                     ctx_.settings.max_model_len));
  }
  if (target == "/metrics" && get) {
    return SendReply(200, "text/plain; version=0.0.4; charset=utf-8",
                     ctx_.metrics.RenderPrometheus(ctx_.settings.model_name,
                                                   ctx_.settings.kv_capacity_tok));
  }
  const bool completions = target == "/v1/completions";
  const bool chat = target == "/v1/chat/completions";
  if ((completions || chat) && post) {
    auto parsed = ParseCompletionRequest(completions ? Api::kCompletions : Api::kChat,
                                         request.body(), ctx_.settings.model_name,
                                         ctx_.settings.max_model_len);
    if (auto* error = std::get_if<ErrorReply>(&parsed)) {
      return SendReply(error->status, kJson, std::move(error->body));
    }
    return StartGeneration(std::get<CompletionRequest>(parsed),
                           completions ? "/v1/completions" : "/v1/chat/completions");
  }
  const bool known = target == "/health" || target == "/v1/models" || target == "/metrics" ||
                     completions || chat;
  const ErrorReply error = known ? MakeError(405, "MethodNotAllowedError", "Method Not Allowed")
                                 : MakeError(404, "NotFoundError", "Not Found");
  SendReply(error.status, kJson, error.body);
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

void HttpSession::StartGeneration(const CompletionRequest& request, std::string_view path) {
  const uint64_t seq = ctx_.next_seq.fetch_add(1, std::memory_order_relaxed);
  gen_ = std::make_unique<Generation>(request, seq, path, ctx_);
  ctx_.metrics.OnRequestStart(request.prompt_tok);
  WatchForHangup(seq);
  if (!request.stream) return ScheduleNextToken(seq);

  http::response<http::empty_body>& header = gen_->header;
  header.version(11);
  header.result(http::status::ok);
  header.set(http::field::content_type, "text/event-stream; charset=utf-8");
  header.set(http::field::cache_control, "no-cache");
  header.keep_alive(keep_alive_);
  header.chunked(true);
  http::async_write_header(socket_, gen_->header_writer,
                           [self = shared_from_this(), seq](ErrorCode ec, size_t) {
                             if (!self->Active(seq)) return;
                             if (ec) return self->FinishGeneration(/*aborted=*/true);
                             self->ScheduleNextToken(seq);
                           });
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

void HttpSession::ScheduleNextToken(uint64_t seq) {
  // An absolute schedule: a late token does not delay the ones after it.
  timer_.expires_at(arrival_ + ctx_.ttft + ctx_.itl * gen_->next_tok);
  timer_.async_wait([self = shared_from_this(), seq](ErrorCode ec) {
    if (ec || !self->Active(seq)) return;
    self->OnTokenDue(seq);
  });
}

void HttpSession::OnTokenDue(uint64_t seq) {
  Generation& gen = *gen_;
  const int64_t k = gen.next_tok++;
  const bool last = gen.next_tok == gen.request.max_tok;
  if (!gen.request.stream) {
    CountToken(k);
    if (!last) return ScheduleNextToken(seq);
    std::string body = gen.renderer.RenderResponse(gen.request.prompt_tok, gen.next_tok);
    FinishGeneration(/*aborted=*/false);
    return SendReply(200, kJson, std::move(body));
  }

  chunk_.clear();
  if (k == 0 && gen.request.api == Api::kChat) gen.renderer.AppendRoleEvent(chunk_);
  gen.renderer.AppendTokenEvent(chunk_, k, last);
  if (last) {
    if (gen.request.include_usage) {
      gen.renderer.AppendUsageEvent(chunk_, gen.request.prompt_tok, gen.next_tok);
    }
    ResponseRenderer::AppendDoneEvent(chunk_);
  }
  CountToken(k);
  auto on_written = [self = shared_from_this(), seq, last](ErrorCode ec, size_t) {
    if (!self->Active(seq)) return;
    if (ec) return self->FinishGeneration(/*aborted=*/true);
    if (!last) return self->ScheduleNextToken(seq);
    self->FinishGeneration(/*aborted=*/false);
    self->OnWriteDone({}, self->keep_alive_);
  };
  if (last) {
    net::async_write(socket_,
                     beast::buffers_cat(http::make_chunk(net::buffer(chunk_)),
                                        http::make_chunk_last()),
                     std::move(on_written));
  } else {
    net::async_write(socket_, http::make_chunk(net::buffer(chunk_)), std::move(on_written));
  }
}

void HttpSession::CountToken(int64_t k) {
  const Clock::time_point now = Clock::now();
  if (k == 0) {
    ctx_.metrics.OnFirstToken(
        std::chrono::duration_cast<std::chrono::nanoseconds>(now - arrival_).count());
  }
  ctx_.metrics.OnToken();
  if (ctx_.request_log) gen_->token_ns.push_back(SinceEpochNs(now));
}

void HttpSession::FinishGeneration(bool aborted) {
  Generation& gen = *gen_;
  gen.done = true;
  ctx_.metrics.OnRequestEnd(gen.request.prompt_tok + gen.next_tok, /*ok=*/!aborted);
  if (ctx_.request_log) {
    const std::string id = gen.renderer.id();
    ctx_.request_log->Append({.id = id,
                              .path = gen.path,
                              .arrival_ns = SinceEpochNs(arrival_),
                              .token_ns = &gen.token_ns,
                              .prompt_tok = gen.request.prompt_tok,
                              .completion_tok = gen.next_tok,
                              .aborted = aborted});
  }
  if (aborted) {
    timer_.cancel();
    return Close();
  }
  ErrorCode ignored;
  socket_.cancel(ignored);  // ends the hang-up watch; nothing else is pending now
  gen_.reset();
}

bool HttpSession::Active(uint64_t seq) const { return gen_ && !gen_->done && gen_->seq == seq; }

void HttpSession::Close() {
  ErrorCode ignored;
  socket_.shutdown(tcp::socket::shutdown_send, ignored);
  socket_.close(ignored);
}

}  // namespace servesweep::sim
