// The emulator's ground-truth request log: one JSON line per finished or aborted request, with
// the CLOCK_MONOTONIC instants (steady_clock, shared across processes on Linux) at which the
// request arrived (the kernel's receive time of its first bytes; see http_session.h) and each
// token was handed to the socket (tokens of one chunk share it).
//
// Thread-safety: Append() and Flush() may be called concurrently; lines are buffered in memory
// and written out by Flush() (the emulator calls it every second and on Stop()).
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace servesweep::sim {

struct RequestRecord {
  std::string_view id;
  std::string_view path;
  int64_t arrival_ns = 0;
  const std::vector<int64_t>* token_ns = nullptr;
  int64_t prompt_tok = 0;
  int64_t completion_tok = 0;
  std::string_view status = "ok";  // "ok", "aborted" (client gone or stream cut) or "error" (500)
  std::string_view fault;          // the injected fault that hit the request, "" if none
};

class RequestLog {
 public:
  // Opens path for appending; throws std::runtime_error if it cannot.
  explicit RequestLog(const std::string& path);
  ~RequestLog();
  RequestLog(const RequestLog&) = delete;
  RequestLog& operator=(const RequestLog&) = delete;

  void Append(const RequestRecord& record);
  void Flush();

 private:
  std::mutex buffer_mu_;
  std::string buffer_;  // guarded by buffer_mu_
  std::mutex file_mu_;  // serialises writers so lines stay in order
  std::FILE* file_;
};

}  // namespace servesweep::sim
