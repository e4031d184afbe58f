// Emulator wiring: the listening socket, the accept loop, the io threads and the periodic
// request-log flush. Endpoint behaviour lives in http_session.cc and openai_protocol.cc.
#include "sim/emulator.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <cmath>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "common/receive_time.h"
#include "sim/engine_core.h"
#include "sim/engine_driver.h"
#include "sim/fixed_schedule.h"
#include "sim/http_session.h"
#include "sim/server_context.h"

namespace servesweep::sim {
namespace {

namespace net = boost::asio;
using tcp = net::ip::tcp;

constexpr auto kLogFlushPeriod = std::chrono::seconds(1);
// After a failed accept (e.g. out of file descriptors) wait before trying again, not spin.
constexpr auto kAcceptRetryDelay = std::chrono::milliseconds(50);

// Requests are stamped with the kernel's receive time (common/receive_time.h); a socket that cannot
// have it falls back to the parse time, which is worth one debug line, not one per connection.
void EnableReceiveTimestampsOrSay(int fd) {
  static std::atomic<bool> said{false};
  if (!EnableReceiveTimestamps(fd) && !said.exchange(true)) {
    spdlog::debug("sim: SO_TIMESTAMPNS refused; request arrivals are stamped when parsed");
  }
}

std::chrono::nanoseconds FromMs(double ms) {
  return std::chrono::nanoseconds(std::llround(ms * 1e6));
}

}  // namespace

struct Emulator::Impl {
  Impl(EmulatorSettings settings, std::unique_ptr<EngineCore> core_in)
      : ioc(std::max(settings.io_threads, 1)),
        acceptor(ioc),
        retry_timer(ioc),
        flush_timer(ioc),
        core(std::move(core_in)) {
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
  std::unique_ptr<EngineCore> core;  // handed to the driver by Start()
  uint16_t port = 0;
  // Declared last: destroyed first, it releases the sessions it holds while the io_context
  // (which their sockets and its timer use) still exists.
  std::unique_ptr<EngineDriver> driver;
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
    EnableReceiveTimestampsOrSay(socket.native_handle());
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

Emulator::Emulator(EmulatorSettings settings)
    : impl_(std::make_unique<Impl>(std::move(settings), nullptr)) {}

Emulator::Emulator(EmulatorSettings settings, std::unique_ptr<EngineCore> core)
    : impl_(std::make_unique<Impl>(std::move(settings), std::move(core))) {
  if (!impl_->core) throw std::invalid_argument("sim: Emulator given a null EngineCore");
}

Emulator::~Emulator() = default;

Status Emulator::Start() {
  ServerContext& ctx = impl_->ctx;
  const EmulatorSettings& s = ctx.settings;
  if (Status status = ParsePersona(s.persona, &ctx.persona); !status.ok()) return status;
  if (s.kv_capacity_tok <= 0 || s.max_model_len <= 0 || s.ttft_ms < 0 || s.itl_ms < 0 ||
      s.tokens_per_chunk < 1) {
    return Status::InvalidArgument(fmt::format(
        "sim: kv_capacity_tok ({}), max_model_len ({}) and tokens_per_chunk ({}) must be "
        "positive, ttft_ms ({}) and itl_ms ({}) not negative",
        s.kv_capacity_tok, s.max_model_len, s.tokens_per_chunk, s.ttft_ms, s.itl_ms));
  }
  const FaultSettings& f = s.faults;
  auto fraction = [](double p) { return p >= 0 && p <= 1; };
  if (!fraction(f.error_rate) || !fraction(f.stall_probability) || !fraction(f.broken_event_rate) ||
      !fraction(f.truncate_rate) || f.stall_ms < 0 || f.stall_after_tok < 0 ||
      f.crash_after_requests < 0) {
    return Status::InvalidArgument(
        "sim: fault rates and probabilities must lie in [0, 1]; stall_ms, stall_after_tok and "
        "crash_after_requests must not be negative");
  }
  ctx.model_json = nlohmann::json(s.model_name).dump();
  ctx.stall = FromMs(f.stall_ms);
  if (!impl_->core) {
    impl_->core = std::make_unique<FixedScheduleCore>(
        FixedScheduleSettings{.ttft_ns = FromMs(s.ttft_ms).count(),
                              .itl_ns = FromMs(s.itl_ms).count(),
                              .tokens_per_chunk = s.tokens_per_chunk,
                              .kv_capacity_tok = s.kv_capacity_tok,
                              .lora_slots = s.max_loras,
                              .lora_load_ns = FromMs(s.lora_load_ms).count()});
  }
  impl_->driver =
      std::make_unique<EngineDriver>(impl_->ioc, s.io_threads <= 1, std::move(impl_->core));
  ctx.driver = impl_->driver.get();
  ctx.created_s = std::chrono::duration_cast<std::chrono::seconds>(
                      std::chrono::system_clock::now().time_since_epoch())
                      .count();
  ctx.ready_at = std::chrono::steady_clock::now() + FromMs(s.startup_ms);
  if (!s.request_log_path.empty()) {
    try {
      ctx.request_log = std::make_unique<RequestLog>(s.request_log_path);
    } catch (const std::exception& e) {
      return Status::NotFound(fmt::format("sim: {}", e.what()));
    }
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
    // Accepted sockets inherit it, and bytes that arrive before the accept are stamped too.
    EnableReceiveTimestampsOrSay(acceptor.native_handle());
    impl_->port = acceptor.local_endpoint().port();
  } catch (const boost::system::system_error& e) {
    return Status::Unavailable(fmt::format("sim: cannot listen on {}: {}", address, e.what()));
  }
  impl_->Accept();
  spdlog::info("sim: serving {} on {}:{}", s.model_name, s.host, impl_->port);
  return Status::Ok();
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
