// Scrapes an engine's /metrics every interval on its own thread while a run is measured, keeping
// the mapped engine signals as a time series.
//
// Thread-safety: Start/Stop/Samples from one owning thread; the scrape thread is internal.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace servesweep::agent {

struct ScrapedSample {
  int64_t at_ns;  // steady clock, relative to the origin given to Start()
  std::string signal;
  double value;
};

class MetricsScraper {
 public:
  ~MetricsScraper();
  // Takes a first scrape before returning (the baseline of the counters), then one every
  // interval_ms on its own thread.
  void Start(std::string metrics_url, std::string engine, int interval_ms, int64_t origin_ns);
  // Takes one last scrape, then stops the thread.
  void Stop();
  std::vector<ScrapedSample> Samples() const;
  size_t failed_scrapes() const;

 private:
  void ScrapeOnce();
  void Loop(int interval_ms);

  std::string url_;
  std::string engine_;
  int64_t origin_ns_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<ScrapedSample> samples_;
  size_t failed_scrapes_ = 0;
};

}  // namespace servesweep::agent
