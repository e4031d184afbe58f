#include "sim/engine_driver.h"

#include <boost/asio/post.hpp>
#include <chrono>
#include <utility>

namespace servesweep::sim {
namespace {

namespace net = boost::asio;
using Clock = std::chrono::steady_clock;

int64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

}  // namespace

class EngineDriver::Collector final : public TokenSink {
 public:
  explicit Collector(std::vector<TokenEvent>& events) : events_(events) {}
  void OnEvent(const TokenEvent& event) override { events_.push_back(event); }

 private:
  std::vector<TokenEvent>& events_;
};

EngineDriver::EngineDriver(net::io_context& ioc, bool single_threaded,
                           std::unique_ptr<EngineCore> core)
    : single_threaded_(single_threaded),
      strand_(net::make_strand(ioc)),
      core_(std::move(core)),
      timer_(single_threaded ? net::any_io_executor(ioc.get_executor())
                             : net::any_io_executor(strand_)) {}

EngineDriver::~EngineDriver() { Shutdown(); }

void EngineDriver::Shutdown() {
  armed_ns_ = kNever;
  timer_.cancel();
  routes_.clear();
}

template <typename F>
void EngineDriver::OnDriver(F&& f) {
  if (single_threaded_) {
    f();
  } else {
    net::post(strand_, std::forward<F>(f));
  }
}

void EngineDriver::Submit(EngineRequest request, std::shared_ptr<StreamListener> listener,
                          net::any_io_executor listener_executor) {
  OnDriver([this, request = std::move(request),
            route = Route{std::move(listener), std::move(listener_executor)}]() mutable {
    SubmitHere(std::move(request), std::move(route));
  });
}

void EngineDriver::Cancel(uint64_t id) {
  OnDriver([this, id] { CancelHere(id); });
}

void EngineDriver::Snapshot(net::any_io_executor reply_executor,
                            std::function<void(const EngineSnapshot&)> done) {
  if (single_threaded_) return done(core_->Snapshot());
  net::post(strand_, [this, reply_executor, done = std::move(done)]() mutable {
    net::post(reply_executor,
              [snapshot = core_->Snapshot(), done = std::move(done)] { done(snapshot); });
  });
}

void EngineDriver::ResetPrefixCache(net::any_io_executor reply_executor,
                                    std::function<void(bool)> done) {
  auto reset = [this] {
    AdvanceHere();
    return core_->ResetPrefixCache();
  };
  if (single_threaded_) return done(reset());
  net::post(strand_, [reset, reply_executor, done = std::move(done)]() mutable {
    net::post(reply_executor, [ok = reset(), done = std::move(done)] { done(ok); });
  });
}

void EngineDriver::SubmitHere(EngineRequest request, Route route) {
  const uint64_t id = request.id;
  routes_.emplace(id, std::move(route));
  core_->Submit(request);
  // Due already (ttft = 0, or a model with an idle batch): emit now, without a timer.
  if (core_->NextEventNs() <= NowNs()) return AdvanceHere();
  Arm();
}

void EngineDriver::CancelHere(uint64_t id) {
  if (routes_.erase(id) == 0) return;  // finished (its last event is on its way) or unknown
  core_->Cancel(id, NowNs());
}

void EngineDriver::AdvanceHere() {
  // Delivery is inline when single-threaded, and a listener may call back (Cancel, in principle
  // Submit): a re-entered advance collects into its own vector.
  std::vector<TokenEvent> nested;
  std::vector<TokenEvent>& events = advancing_ ? nested : events_;
  const bool outermost = !advancing_;
  advancing_ = true;
  events.clear();
  Collector sink(events);
  core_->AdvanceTo(NowNs(), sink);

  // Deliver each run of consecutive events of one request together (one socket write).
  for (size_t begin = 0; begin < events.size();) {
    const uint64_t id = events[begin].id;
    size_t end = begin + 1;
    while (end < events.size() && events[end].id == id) ++end;
    const bool finished = events[end - 1].finished;
    auto it = routes_.find(id);
    if (it != routes_.end()) {
      Route route = finished ? std::move(it->second) : it->second;
      if (finished) routes_.erase(it);
      if (single_threaded_) {
        route.listener->OnTokenEvents(&events[begin], end - begin);
      } else {
        net::post(route.executor,
                  [listener = std::move(route.listener),
                   run = std::vector<TokenEvent>(events.begin() + static_cast<ptrdiff_t>(begin),
                                                 events.begin() + static_cast<ptrdiff_t>(end))] {
                    listener->OnTokenEvents(run.data(), run.size());
                  });
      }
    }
    begin = end;
  }
  if (outermost) advancing_ = false;
  Arm();
}

void EngineDriver::Arm() {
  const int64_t next_ns = core_->NextEventNs();
  if (next_ns == kNever || next_ns >= armed_ns_) return;  // a wait for an earlier time is set
  armed_ns_ = next_ns;
  timer_.expires_at(Clock::time_point(std::chrono::nanoseconds(next_ns)));
  timer_.async_wait([this](boost::system::error_code ec) {
    if (ec) return;  // re-armed earlier, or shut down
    armed_ns_ = kNever;
    AdvanceHere();
  });
}

}  // namespace servesweep::sim
