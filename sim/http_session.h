// One keep-alive HTTP/1.1 connection of the emulator: reads requests, routes them to the
// endpoints, and drives at most one generation at a time on a per-connection steady_timer
// (no thread per stream: an idle stream costs a timer and a few hundred bytes).
//
// Thread-safety: all handlers of one session run on the socket's executor, which is a strand
// when the io_context has several threads; a session is never touched from elsewhere.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <string>

#include "sim/openai_protocol.h"
#include "sim/server_context.h"

namespace servesweep::sim {

class HttpSession : public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  ~HttpSession();

  void Start();

 private:
  struct Generation;
  using ErrorCode = boost::system::error_code;

  void ReadRequest();
  void OnRequestRead(ErrorCode ec);
  void Route(const boost::beast::http::request<boost::beast::http::string_body>& request);
  void SendReply(unsigned status, const char* content_type, std::string body);
  void OnWriteDone(ErrorCode ec, bool keep_alive);

  void StartGeneration(const CompletionRequest& request, std::string_view path);
  // Notices a client that hangs up mid-generation (nothing else would until the next write).
  void WatchForHangup(uint64_t seq);
  void ScheduleNextToken(uint64_t seq);
  void OnTokenDue(uint64_t seq);
  void CountToken(int64_t k);
  void FinishGeneration(bool aborted);
  // Whether generation seq is still running (handlers of an ended one must do nothing).
  bool Active(uint64_t seq) const;
  void Close();

  boost::asio::ip::tcp::socket socket_;
  ServerContext& ctx_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> reply_;
  boost::asio::steady_timer timer_;
  std::string chunk_;  // the SSE bytes of the write in flight
  // After an abort it lives on (done) until the session dies: pending operations refer to it.
  std::unique_ptr<Generation> gen_;
  std::chrono::steady_clock::time_point arrival_;  // when the current request was fully read
  bool keep_alive_ = false;                         // of the current request
};

}  // namespace servesweep::sim
