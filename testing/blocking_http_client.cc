#include "testing/blocking_http_client.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <stdexcept>

namespace servesweep::testing {

TestConnection::TestConnection(uint16_t port) : fd_(::socket(AF_INET, SOCK_STREAM, 0)) {
  if (fd_ < 0) throw std::runtime_error(fmt::format("socket: {}", std::strerror(errno)));
  timeval timeout{.tv_sec = 10, .tv_usec = 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  int one = 1;
  ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    const std::string error = std::strerror(errno);
    ::close(fd_);
    throw std::runtime_error("connect: " + error);
  }
}

TestConnection::~TestConnection() { ::close(fd_); }

void TestConnection::Send(const std::string& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0) throw std::runtime_error(fmt::format("send: {}", std::strerror(errno)));
    sent += static_cast<size_t>(n);
  }
}

void TestConnection::Need(size_t bytes) {
  char buf[16384];
  while (pending_.size() < bytes) {
    const ssize_t n = ::recv(fd_, buf, sizeof(buf), 0);
    if (n == 0) throw std::runtime_error("connection closed by server");
    if (n < 0) throw std::runtime_error(fmt::format("recv: {}", std::strerror(errno)));
    pending_.append(buf, static_cast<size_t>(n));
  }
}

void TestConnection::WaitFor(const std::string& needle) {
  while (pending_.find(needle) == std::string::npos) Need(pending_.size() + 1);
}

std::string TestConnection::ReadLine() {
  WaitFor("\r\n");
  const size_t end = pending_.find("\r\n");
  std::string line = pending_.substr(0, end);
  pending_.erase(0, end + 2);
  return line;
}

HttpResponse TestConnection::ReadResponse() {
  HttpResponse response;
  const std::string status_line = ReadLine();  // "HTTP/1.1 200 OK"
  response.status = std::stoi(status_line.substr(9, 3));
  for (std::string line = ReadLine(); !line.empty(); line = ReadLine()) {
    const size_t colon = line.find(':');
    std::string name = line.substr(0, colon);
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    response.headers[name] = line.substr(line.find_first_not_of(' ', colon + 1));
  }
  if (response.headers["transfer-encoding"] == "chunked") {
    for (size_t size = std::stoul(ReadLine(), nullptr, 16); size != 0;
         size = std::stoul(ReadLine(), nullptr, 16)) {
      Need(size + 2);
      response.body += pending_.substr(0, size);
      pending_.erase(0, size + 2);
    }
    ReadLine();  // the empty line after the last chunk (no trailers)
  } else {
    const size_t length = std::stoul(response.headers["content-length"]);
    Need(length);
    response.body = pending_.substr(0, length);
    pending_.erase(0, length);
  }
  return response;
}

std::string GetRequest(const std::string& path) {
  return fmt::format("GET {} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", path);
}

std::string PostRequest(const std::string& path, const std::string& json_body, bool keep_alive) {
  return fmt::format(
      "POST {} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: {}\r\n{}\r\n{}",
      path, json_body.size(), keep_alive ? "" : "Connection: close\r\n", json_body);
}

std::vector<std::string> SseData(const std::string& body) {
  std::vector<std::string> events;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    if (end == std::string::npos) throw std::runtime_error("unterminated SSE event");
    const std::string event = body.substr(pos, end - pos);
    if (event.rfind("data: ", 0) != 0) throw std::runtime_error("SSE event without data: " + event);
    events.push_back(event.substr(6));
    pos = end + 2;
  }
  return events;
}

}  // namespace servesweep::testing
