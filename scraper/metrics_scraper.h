// Scrapes an engine's /metrics on its own thread while a run is measured, keeping the mapped
// engine signals as a time series, and takes one-off snapshots (the validity gate's counters
// before warm-up and after the measured phase).
//
// The interval follows the run's length, which is not known in advance: the first 20 scrapes
// are kFirstIntervalMs apart, and the interval doubles after every 20 until it reaches
// kMaxIntervalMs, so a 1 s run still has about 20 samples and a long run about one a second.
//
// Thread-safety: Start/Stop/Samples from one owning thread; the scrape thread is internal.
// ScrapeSignals is a free function, safe from any thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

namespace servesweep::scraper {

struct ScrapedSample {
  int64_t at_ns;  // steady clock, relative to the origin given to Start()
  std::string signal;
  double value;
};

// One scrape of `metrics_url`: each engine signal found (engine_signals.h) with its value.
Status ScrapeSignals(const std::string& metrics_url, const std::string& engine,
                     std::map<std::string, double>* out);

class MetricsScraper {
 public:
  static constexpr int kFirstIntervalMs = 50;
  static constexpr int kMaxIntervalMs = 1000;
  static constexpr int kScrapesPerInterval = 20;

  ~MetricsScraper();
  // Takes a first scrape before returning (the baseline of the counters), then one every
  // interval on its own thread.
  void Start(std::string metrics_url, std::string engine, int64_t origin_ns);
  // Takes one last scrape, then stops the thread.
  void Stop();
  std::vector<ScrapedSample> Samples() const;
  size_t scrapes() const;  // successful ones
  size_t failed_scrapes() const;

 private:
  void ScrapeOnce();
  void Loop();

  std::string url_;
  std::string engine_;
  int64_t origin_ns_ = 0;
  std::thread thread_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::vector<ScrapedSample> samples_;
  size_t scrapes_ = 0;
  size_t failed_scrapes_ = 0;
};

}  // namespace servesweep::scraper
