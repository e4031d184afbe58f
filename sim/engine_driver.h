// Drives one EngineCore for all the connections of an emulator: sessions submit requests and
// cancel them, the driver runs the core on one executor (the io_context itself with one io
// thread, else a strand) with ONE steady_timer armed for the core's next event, and delivers
// each request's events to its session. A token that is due when its request is submitted is
// emitted at once, with no timer.
//
// Thread-safety: with one io thread (single_threaded = true) every method must be called from
// that thread and runs inline, delivering events inline too (the hot path: no posting). With
// several, methods may be called from any thread: they post to the driver's strand, and events
// are posted to each listener's executor.
#pragma once

#include <boost/asio/any_io_executor.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/strand.hpp>
#include <functional>
#include <memory>
#include <unordered_map>
#include <vector>

#include "sim/engine_core.h"

namespace servesweep::sim {

// What a session implements to receive its request's events (on its own executor).
class StreamListener {
 public:
  virtual ~StreamListener() = default;
  // count >= 1 events of one request, in time order; the last may be finished.
  virtual void OnTokenEvents(const TokenEvent* events, size_t count) = 0;
};

class EngineDriver {
 public:
  EngineDriver(boost::asio::io_context& ioc, bool single_threaded,
               std::unique_ptr<EngineCore> core);
  ~EngineDriver();
  EngineDriver(const EngineDriver&) = delete;
  EngineDriver& operator=(const EngineDriver&) = delete;

  // The listener is kept alive until the request's finished event is delivered or it is
  // cancelled; its events run on listener_executor.
  void Submit(EngineRequest request, std::shared_ptr<StreamListener> listener,
              boost::asio::any_io_executor listener_executor);
  void Cancel(uint64_t id);
  // Calls done(snapshot) on reply_executor (inline when single-threaded).
  void Snapshot(boost::asio::any_io_executor reply_executor,
                std::function<void(const EngineSnapshot&)> done);
  // Runs the core up to now, then its ResetPrefixCache(); done(reset) on reply_executor.
  void ResetPrefixCache(boost::asio::any_io_executor reply_executor,
                        std::function<void(bool)> done);
  // Drops every listener (the emulator is shutting down).
  void Shutdown();

 private:
  struct Route {
    std::shared_ptr<StreamListener> listener;
    boost::asio::any_io_executor executor;
  };
  class Collector;

  template <typename F>
  void OnDriver(F&& f);
  void SubmitHere(EngineRequest request, Route route);
  void CancelHere(uint64_t id);
  // Emits whatever is due by now and delivers it, then re-arms the timer.
  void AdvanceHere();
  void Arm();

  bool single_threaded_;
  boost::asio::strand<boost::asio::io_context::executor_type> strand_;
  std::unique_ptr<EngineCore> core_;
  boost::asio::steady_timer timer_;
  int64_t armed_ns_ = kNever;
  std::unordered_map<uint64_t, Route> routes_;
  std::vector<TokenEvent> events_;  // reused by AdvanceHere when not re-entered
  bool advancing_ = false;
};

}  // namespace servesweep::sim
