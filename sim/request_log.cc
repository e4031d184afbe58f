#include "sim/request_log.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cerrno>
#include <cstring>
#include <iterator>
#include <stdexcept>

namespace servesweep::sim {

RequestLog::RequestLog(const std::string& path) : file_(std::fopen(path.c_str(), "a")) {
  if (file_ == nullptr) {
    throw std::runtime_error(
        fmt::format("cannot open request log {}: {}", path, std::strerror(errno)));
  }
}

RequestLog::~RequestLog() {
  Flush();
  std::fclose(file_);
}

void RequestLog::Append(const RequestRecord& record) {
  // Ids and paths are ours (no characters that need JSON escaping), so fmt renders the line.
  std::string line = fmt::format(
      "{{\"id\":\"{}\",\"path\":\"{}\",\"arrival_ns\":{},\"token_ns\":[{}],\"prompt_tokens\":{},"
      "\"completion_tokens\":{},\"status\":\"{}\"{}{}{}}}\n",
      record.id, record.path, record.arrival_ns, fmt::join(*record.token_ns, ","),
      record.prompt_tok, record.completion_tok, record.status,
      record.fault.empty() ? "" : ",\"fault\":\"", record.fault, record.fault.empty() ? "" : "\"");
  std::lock_guard lock(buffer_mu_);
  buffer_ += line;
}

void RequestLog::Flush() {
  std::lock_guard file_lock(file_mu_);
  std::string pending;
  {
    std::lock_guard lock(buffer_mu_);
    pending.swap(buffer_);
  }
  if (pending.empty()) return;
  std::fwrite(pending.data(), 1, pending.size(), file_);
  std::fflush(file_);
}

}  // namespace servesweep::sim
