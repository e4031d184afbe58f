// A minimal blocking HTTP/1.1 client over POSIX sockets for the emulator tests. It is
// deliberately independent of the server's libraries (Beast) so the two cannot share a bug.
//
// Thread-safety: a TestConnection is used by one thread at a time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace servesweep::testing {

struct HttpResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;                            // de-chunked
};

class TestConnection {
 public:
  // Connects to 127.0.0.1:port; every read times out after 10 s so a broken server fails fast.
  explicit TestConnection(uint16_t port);
  ~TestConnection();
  TestConnection(const TestConnection&) = delete;
  TestConnection& operator=(const TestConnection&) = delete;

  void Send(const std::string& bytes);
  HttpResponse ReadResponse();
  // Reads until the raw bytes received so far contain needle (consumes nothing).
  void WaitFor(const std::string& needle);
  int fd() const { return fd_; }

 private:
  void Need(size_t bytes);  // reads until pending_ holds at least this many bytes
  std::string ReadLine();   // one CRLF-terminated line, without the CRLF

  int fd_;
  std::string pending_;
};

std::string GetRequest(const std::string& path);
std::string PostRequest(const std::string& path, const std::string& json_body,
                        bool keep_alive = true);
// The payloads of an SSE body's "data: " events, in order.
std::vector<std::string> SseData(const std::string& body);

}  // namespace servesweep::testing
