#include "agent/scraper/metrics_scraper.h"

#include "agent/scraper/engine_signals.h"
#include "agent/scraper/http_get.h"
#include "agent/scraper/prometheus_text.h"
#include "common/clock.h"

namespace servesweep::agent {

MetricsScraper::~MetricsScraper() { Stop(); }

void MetricsScraper::Start(std::string metrics_url, std::string engine, int interval_ms,
                           int64_t origin_ns) {
  url_ = std::move(metrics_url);
  engine_ = std::move(engine);
  origin_ns_ = origin_ns;
  stopping_ = false;
  // The first scrape before Start returns, so before the load: counters are reduced as
  // last - first, and a request admitted before an asynchronous first scrape would be lost.
  ScrapeOnce();
  thread_ = std::thread([this, interval_ms] { Loop(interval_ms); });
}

void MetricsScraper::Stop() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  ScrapeOnce();  // counters are reduced as last - first, so take the last one at the very end
}

void MetricsScraper::Loop(int interval_ms) {
  std::unique_lock<std::mutex> lock(mutex_);
  while (
      !wake_.wait_for(lock, std::chrono::milliseconds(interval_ms), [this] { return stopping_; })) {
    lock.unlock();
    ScrapeOnce();
    lock.lock();
  }
}

void MetricsScraper::ScrapeOnce() {
  HttpResponse response;
  const int64_t at_ns = SteadyNowNs() - origin_ns_;
  Status status = HttpGet(url_, 2000, &response);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!status.ok() || response.status_code != 200) {
    ++failed_scrapes_;
    return;
  }
  for (const auto& value : ExtractSignals(engine_, ParsePrometheusText(response.body))) {
    samples_.push_back({at_ns, value.signal, value.value});
  }
}

std::vector<ScrapedSample> MetricsScraper::Samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return samples_;
}

size_t MetricsScraper::failed_scrapes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_scrapes_;
}

}  // namespace servesweep::agent
