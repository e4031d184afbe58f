#include "testing/test_sse_server.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>
#include <stdexcept>

namespace servesweep::testing {
namespace {

bool SendAll(int fd, const std::string& s) {
  size_t off = 0;
  while (off < s.size()) {
    ssize_t n = ::send(fd, s.data() + off, s.size() - off, MSG_NOSIGNAL);
    if (n <= 0) return false;
    off += static_cast<size_t>(n);
  }
  return true;
}

std::string Chunk(const std::string& payload) {
  std::ostringstream os;
  os << std::hex << payload.size() << "\r\n" << payload << "\r\n";
  return os.str();
}

size_t ContentLength(const std::string& head) {
  std::string lower(head);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  size_t p = lower.find("content-length:");
  if (p == std::string::npos) return 0;
  return std::stoul(lower.substr(p + 15));
}

uint32_t CountWords(const std::string& s) {
  std::istringstream is(s);
  std::string w;
  uint32_t n = 0;
  while (is >> w) ++n;
  return n;
}

}  // namespace

TestSseServer::TestSseServer(int token_delay_us) : token_delay_us_(token_delay_us) {
  listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::listen(listen_fd_, 128) != 0) {
    throw std::runtime_error("test server: bind/listen failed");
  }
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  port_ = ntohs(addr.sin_port);
  accept_thread_ = std::thread([this] { AcceptLoop(); });
}

TestSseServer::~TestSseServer() {
  stop_ = true;
  accept_thread_.join();
  ::close(listen_fd_);
  std::vector<std::thread> threads;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int fd : conn_fds_) ::shutdown(fd, SHUT_RDWR);  // wakes blocked recv()
    threads = std::move(conn_threads_);
  }
  for (auto& t : threads) t.join();
}

std::string TestSseServer::base_url() const { return "http://127.0.0.1:" + std::to_string(port_); }

std::string TestSseServer::last_head() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_head_;
}

std::string TestSseServer::last_body() const {
  std::lock_guard<std::mutex> lock(mu_);
  return last_body_;
}

std::vector<std::string> TestSseServer::prompts() const {
  std::lock_guard<std::mutex> lock(mu_);
  return prompts_;
}

void TestSseServer::AcceptLoop() {
  while (!stop_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    int fd = ::accept(listen_fd_, nullptr, nullptr);
    if (fd < 0) continue;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    ++connections_;
    std::lock_guard<std::mutex> lock(mu_);
    conn_fds_.push_back(fd);
    conn_threads_.emplace_back([this, fd] { Serve(fd); });
  }
}

void TestSseServer::Serve(int fd) {
  std::string buf;
  char tmp[16384];
  while (!stop_) {
    size_t head_end;
    while ((head_end = buf.find("\r\n\r\n")) == std::string::npos) {
      ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) return;  // the fd is closed by nobody but the destructor's shutdown
      buf.append(tmp, static_cast<size_t>(n));
    }
    std::string head = buf.substr(0, head_end);
    size_t need = ContentLength(head);
    while (buf.size() < head_end + 4 + need) {
      ssize_t n = ::recv(fd, tmp, sizeof tmp, 0);
      if (n <= 0) return;
      buf.append(tmp, static_cast<size_t>(n));
    }
    std::string body = buf.substr(head_end + 4, need);
    buf.erase(0, head_end + 4 + need);
    std::string path = head.substr(head.find(' ') + 1);
    path = path.substr(0, path.find(' '));
    if (!Respond(fd, head, path, body)) return;
  }
}

bool TestSseServer::Respond(int fd, const std::string& head, const std::string& path,
                            const std::string& body) {
  nlohmann::json req = nlohmann::json::parse(body, nullptr, false);
  const bool chat = path == "/v1/chat/completions";
  // A token-id prompt is kept as its JSON text; its length is the number of ids.
  const bool ids = !chat && req["prompt"].is_array();
  std::string prompt = chat  ? req["messages"][0]["content"].get<std::string>()
                       : ids ? req["prompt"].dump()
                             : req["prompt"].get<std::string>();
  const uint32_t prompt_tokens =
      ids ? static_cast<uint32_t>(req["prompt"].size()) : CountWords(prompt);
  {
    std::lock_guard<std::mutex> lock(mu_);
    last_head_ = head;
    last_body_ = body;
    prompts_.push_back(prompt);
  }
  const std::string model = req.value("model", "ok");
  const int max_tokens = req.value("max_tokens", 1);
  ++requests_;
  int now = ++in_flight_;
  int seen = max_in_flight_.load();
  while (now > seen && !max_in_flight_.compare_exchange_weak(seen, now)) {
  }
  // Decremented before the last byte goes out: the client cannot finish (and start the next
  // request) before the count drops, so a peak above the concurrency is the client's fault.
  auto leave = [this] { --in_flight_; };

  if (model == "http500") {
    leave();
    return SendAll(fd, "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\nboom");
  }
  if (!SendAll(fd,
               "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
               "Transfer-Encoding: chunked\r\n\r\n")) {
    leave();
    return false;
  }
  if (model == "hang") {
    auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (!stop_ && std::chrono::steady_clock::now() < until) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    leave();
    return false;  // close: the client has given up on this connection
  }
  const std::string sep = model == "crlf" ? "\r\n\r\n" : "\n\n";
  auto event = [&](const nlohmann::json& j) { return Chunk("data: " + j.dump() + sep); };
  auto text_chunk = [&](const std::string& text) {
    nlohmann::json j;
    if (chat) {
      j["choices"] = {{{"index", 0}, {"delta", {{"content", text}}}}};
    } else {
      j["choices"] = {{{"index", 0}, {"text", text}}};
    }
    return event(j);
  };
  auto pause = [this] { std::this_thread::sleep_for(std::chrono::microseconds(token_delay_us_)); };

  bool ok = true;
  if (chat && model != "notokens") {
    ok = SendAll(fd, event({{"choices", {{{"index", 0}, {"delta", {{"role", "assistant"}}}}}}}));
  }
  int completion = 0;
  if (model == "ok" || model == "crlf" || model == "nousage" || model == "closes") {
    for (int i = 0; i < max_tokens && ok; ++i) {
      pause();
      if (model == "crlf") ok = SendAll(fd, Chunk(": ping\r\n"));
      ok = ok && SendAll(fd, text_chunk(" w" + std::to_string(i)));
    }
    completion = max_tokens;
  } else if (model == "spec") {
    for (int i = 0; i < max_tokens && ok; i += 2) {
      pause();
      ok = SendAll(fd, text_chunk(" a b"));
    }
    completion = max_tokens;
  } else if (model == "garbage" || model == "cut" || model == "stall") {
    ok = SendAll(fd, text_chunk(" w0")) && SendAll(fd, text_chunk(" w1"));
    if (model == "garbage") {
      ok = ok && SendAll(fd, Chunk("data: {\"choices\":[{\"text\":\"x\"}]}}not json" + sep));
    } else if (model == "cut") {
      leave();
      ::shutdown(fd, SHUT_RDWR);  // close mid-stream: no usage, no [DONE], no last body chunk
      return false;
    } else {
      auto until = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!stop_ && std::chrono::steady_clock::now() < until) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      }
      leave();
      return false;
    }
    completion = 2;
  } else if (model == "error_event") {
    ok = SendAll(fd, text_chunk(" w")) &&
         SendAll(fd, event({{"error", {{"message", "oops"}, {"code", 500}}}}));
    completion = 1;
  }
  if (ok && model != "nousage") {
    nlohmann::json usage = {{"choices", nlohmann::json::array()},
                            {"usage",
                             {{"prompt_tokens", prompt_tokens},
                              {"completion_tokens", completion},
                              {"total_tokens", prompt_tokens + completion}}}};
    ok = SendAll(fd, event(usage)) && SendAll(fd, Chunk("data: [DONE]" + sep));
  }
  leave();
  ok = ok && SendAll(fd, "0\r\n\r\n");
  if (ok && model == "closes") {
    // As llama.cpp's server: the connection is closed a moment after a streamed response that
    // announced keep-alive, so a client that reuses it at once loses the request it sent.
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    ::shutdown(fd, SHUT_RDWR);
    return false;
  }
  return ok;
}

}  // namespace servesweep::testing
