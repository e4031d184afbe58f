// A minimal HTTP/1.1 keep-alive server on 127.0.0.1 for the load generator's end-to-end
// tests: a thread per connection, OpenAI-style SSE answers chosen by the request's "model":
//   ok           max_tokens text chunks (chat: after a role-only chunk), usage, [DONE]
//   closes       as ok, then the connection is closed 50 ms later although it was not said
//                (llama.cpp's server does so): a request sent on it meanwhile is lost
//   crlf         as ok, with CRLF line ends and ':' ping comments
//   spec         chunks of two tokens each (speculative decoding), usage = max_tokens
//   nousage      as ok without the usage chunk, and no [DONE]: the body just ends
//   http500      HTTP 500 with body "boom"
//   notokens     200, usage-only chunk and [DONE], no text
//   error_event  one token, then data: {"error": {"message": "oops"}}
//   hang         200 headers, then nothing until the client gives up
//   garbage      two tokens, then an event whose payload is not JSON
//   cut          two tokens, then the connection closes mid-body
//   stall        two tokens, then nothing until the client gives up
// It counts connections, requests and the peak of requests in flight. Test-only; its
// counters are atomics and the last request is kept under a mutex.
#pragma once

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace servesweep::testing {

class TestSseServer {
 public:
  explicit TestSseServer(int token_delay_us = 1000);
  ~TestSseServer();
  TestSseServer(const TestSseServer&) = delete;
  TestSseServer& operator=(const TestSseServer&) = delete;

  std::string base_url() const;
  int connections() const { return connections_.load(); }
  int requests() const { return requests_.load(); }
  int max_in_flight() const { return max_in_flight_.load(); }
  std::string last_head() const;
  std::string last_body() const;
  std::vector<std::string> prompts() const;

 private:
  void AcceptLoop();
  void Serve(int fd);
  bool Respond(int fd, const std::string& head, const std::string& path, const std::string& body);

  int listen_fd_ = -1;
  uint16_t port_ = 0;
  int token_delay_us_;
  std::atomic<bool> stop_{false};
  std::atomic<int> connections_{0}, requests_{0}, in_flight_{0}, max_in_flight_{0};
  std::thread accept_thread_;
  mutable std::mutex mu_;
  std::vector<std::thread> conn_threads_;
  std::vector<int> conn_fds_;
  std::string last_head_, last_body_;
  std::vector<std::string> prompts_;
};

}  // namespace servesweep::testing
