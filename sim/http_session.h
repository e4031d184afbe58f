// One keep-alive HTTP/1.1 connection of the emulator: reads requests, routes them to the
// endpoints, submits each generation to the timing core (through the EngineDriver) and turns
// the core's token events into SSE bytes. At most one generation runs per connection.
//
// Writes are coalesced: events that arrive while a write is in flight (or together, e.g. every
// token of a ttft = itl = 0 request) leave in the next single write, as one HTTP chunk; the
// response head, every token, the usage event, [DONE] and the chunked terminator of a short
// request are one write.
//
// A request's arrival (the reference of its TTFT, its request-log line and the timing core's
// schedule) is the kernel's receive time of its first bytes, taken with them when they are read
// (common/receive_time.h), not the time the io thread parsed them; pipelined requests, whose bytes
// were read with the previous one, are stamped when parsed.
//
// Thread-safety: all handlers of one session run on the socket's executor, which is a strand
// when the io_context has several threads; the driver delivers events there too.
#pragma once

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/engine_driver.h"
#include "sim/fault_plan.h"
#include "sim/openai_protocol.h"
#include "sim/server_context.h"

namespace servesweep::sim {

class HttpSession final : public StreamListener, public std::enable_shared_from_this<HttpSession> {
 public:
  HttpSession(boost::asio::ip::tcp::socket socket, ServerContext& ctx);
  ~HttpSession() override;

  void Start();
  void OnTokenEvents(const TokenEvent* events, size_t count) override;

 private:
  struct Generation;
  using ErrorCode = boost::system::error_code;

  // Reads the next request: reads its first bytes with their receive time (waiting for them
  // if none are queued), then lets the parser read the rest (ParseRequest).
  void ReadRequest();
  void WaitForRequest();
  void ReceiveFirstBytes();
  void ParseRequest();
  void OnRequestRead(ErrorCode ec);
  void Route(const boost::beast::http::request<boost::beast::http::string_body>& request);
  void RouteCompletion(Api api, std::string_view path, std::string_view body);
  void SendReply(unsigned status, const char* content_type, std::string body);
  void OnWriteDone(ErrorCode ec, bool keep_alive);

  void StartGeneration(const CompletionRequest& request, std::string_view path, uint64_t seq,
                       const RequestFaults& faults, std::vector<uint64_t> prefix_block_hashes);
  // Notices a client that hangs up mid-generation (nothing else would until the next write).
  void WatchForHangup(uint64_t seq);
  // Renders one event (streams) or counts it (non-streaming).
  void Consume(const TokenEvent& event);
  // Releases stalled events whose time has come, and waits for the next.
  void ReleaseHeld(uint64_t seq);
  // Starts a write of everything pending, unless one is in flight.
  void Flush();
  void OnFlushed(ErrorCode ec, uint64_t seq);
  // Ends the generation (records it unless recorded), then closes (aborted) or goes on.
  void FinishGeneration(bool aborted);
  // Counts the request's end in the metrics and appends its request-log line.
  void Record(bool aborted);
  // Whether generation seq is still running (handlers of an ended one must do nothing).
  bool Active(uint64_t seq) const;
  void Close();

  boost::asio::ip::tcp::socket socket_;
  ServerContext& ctx_;
  boost::beast::flat_buffer buffer_;
  std::optional<boost::beast::http::request_parser<boost::beast::http::string_body>> parser_;
  std::optional<boost::beast::http::response<boost::beast::http::string_body>> reply_;
  boost::asio::steady_timer timer_;  // releases stalled events (fault injection)
  // After an abort it lives on (done) until the session dies: pending operations refer to it.
  std::unique_ptr<Generation> gen_;
  // When the current request's first bytes were received (the kernel's stamp), or when it was
  // parsed if that is unknown (see ReadRequest).
  std::chrono::steady_clock::time_point arrival_;
  std::optional<std::chrono::steady_clock::time_point> received_at_;  // of the request being read
  bool keep_alive_ = false;                                           // of the current request

  // The stream's output: pending_ collects SSE bytes until the write in flight completes.
  std::string_view pending_head_;  // the response head, before the first chunk
  std::string pending_;
  bool pending_last_ = false;  // pending_ ends the body (add the chunked terminator)
  bool pending_cut_ = false;   // pending_ is cut mid-chunk (truncation fault)
  int64_t pending_tok_ = 0;    // tokens in pending_ (stamped when handed to the socket)
  std::string writing_;
  char chunk_line_[20];
  bool write_in_flight_ = false;
  bool writing_last_ = false;
  bool writing_cut_ = false;
};

}  // namespace servesweep::sim
