// Emulator wiring: the listening socket, the accept loop, the io threads and the periodic
// request-log flush. Endpoint behaviour lives in http_session.cc and openai_protocol.cc.
#include "sim/emulator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "sim/http_session.h"
#include "sim/server_context.h"

namespace servesweep::sim {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr auto kLogFlushPeriod = std::chrono::seconds(1);
// After a failed accept (e.g. out of file descriptors) wait before trying again, not spin.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(50);

std::chrono::nanoseconds FromMs(double ms) {
  return std::chrono::nanoseconds(std::llround(ms * 1e6));
}

}  // namespace

struct Emulator::Impl {
  explicit Impl(EmulatorSettings settings)
      : ioc(std::max(settings.io_threads, 1)), acceptor(ioc), retry_timer(ioc), flush_timer(ioc) {
    ctx.settings = std::move(settings);
  }

  void Accept();
  void FlushLogPeriodically();

  // ctx is declared first so that it outlives the sessions the io_context destroys.
  ServerContext ctx;
  net::io_context ioc;
  tcp::acceptor acceptor;
  net::steady_timer retry_timer;
  net::steady_timer flush_timer;
  uint16_t port = 0;
};

void Emulator::Impl::Accept() {
  // With one io thread the handlers are already serialised; with more, each connection gets a
  // strand so its handlers never run concurrently.
  auto executor = ctx.settings.io_threads > 1 ? net::any_io_executor(net::make_strand(ioc))
                                              : net::any_io_executor(ioc.get_executor());
  acceptor.async_accept(executor, [this](boost::system::error_code ec, tcp::socket socket) {
    if (ec == net::error::operation_aborted) return;
    if (ec) {
      spdlog::warn("sim: accept failed: {}", ec.message());
      retry_timer.expires_after(kAcceptRetryDelay);
      retry_timer.async_wait([this](boost::system::error_code wait_ec) {
        if (!wait_ec) Accept();
      });
      return;
    }
    // Token chunks are small and latency is what we emulate: do not let Nagle hold them.
    socket.set_option(tcp::no_delay(true), ec);
    std::make_shared<HttpSession>(std::move(socket), ctx)->Start();
    Accept();
  });
}

void Emulator::Impl::FlushLogPeriodically() {
  flush_timer.expires_after(kLogFlushPeriod);
  flush_timer.async_wait([this](boost::system::error_code ec) {
    if (ec) return;
    ctx.request_log->Flush();
    FlushLogPeriodically();
  });
}

Emulator::Emulator(EmulatorSettings settings) : impl_(std::make_unique<Impl>(std::move(settings))) {}

Emulator::~Emulator() = default;

void Emulator::Start() {
  ServerContext& ctx = impl_->ctx;
  const EmulatorSettings& s = ctx.settings;
  if (s.persona != "vllm") throw std::invalid_argument("sim: unknown persona " + s.persona);
  if (s.kv_capacity_tok <= 0 || s.max_model_len <= 0 || s.ttft_ms < 0 || s.itl_ms < 0) {
    throw std::invalid_argument("sim: kv_capacity_tok and max_model_len must be positive, "
                                "ttft_ms and itl_ms not negative");
  }
  ctx.model_json = nlohmann::json(s.model_name).dump();
  ctx.ttft = FromMs(s.ttft_ms);
  ctx.itl = FromMs(s.itl_ms);
  ctx.created_s = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  ctx.ready_at = std::chrono::steady_clock::now() + FromMs(s.startup_ms);
  if (!s.request_log_path.empty()) {
    ctx.request_log = std::make_unique<RequestLog>(s.request_log_path);
    impl_->FlushLogPeriodically();
  }

  const std::string address = fmt::format("{}:{}", s.host, s.port);
  try {
    tcp::resolver resolver(impl_->ioc);
    const tcp::endpoint endpoint = *resolver.resolve(s.host, std::to_string(s.port)).begin();
    tcp::acceptor& acceptor = impl_->acceptor;
    acceptor.open(endpoint.protocol());
    acceptor.set_option(tcp::acceptor::reuse_address(true));
    acceptor.bind(endpoint);
    acceptor.listen(net::socket_base::max_listen_connections);
    impl_->port = acceptor.local_endpoint().port();
  } catch (const boost::system::system_error& e) {
    throw std::runtime_error(fmt::format("sim: cannot listen on {}: {}", address, e.what()));
  }
  impl_->Accept();
  spdlog::info("sim: serving {} on {}:{}", s.model_name, s.host, impl_->port);
}

uint16_t Emulator::port() const { return impl_->port; }

void Emulator::Run() {
  std::vector<std::thread> helpers;
  for (int i = 1; i < impl_->ctx.settings.io_threads; ++i) {
    helpers.emplace_back([this] { impl_->ioc.run(); });
  }
  impl_->ioc.run();
  for (std::thread& t : helpers) t.join();
  if (impl_->ctx.request_log) impl_->ctx.request_log->Flush();
}

void Emulator::Stop() {
  impl_->ioc.stop();
  if (impl_->ctx.request_log) impl_->ctx.request_log->Flush();
}

}  // namespace servesweep::sim
