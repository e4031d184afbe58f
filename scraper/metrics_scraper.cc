#include "scraper/metrics_scraper.h"

#include <fmt/format.h>

#include <algorithm>

#include "common/clock.h"
#include "scraper/engine_signals.h"
#include "scraper/http_get.h"
#include "scraper/prometheus_text.h"

namespace servesweep::scraper {

Status ScrapeSignals(const std::string& metrics_url, const std::string& engine,
                     std::map<std::string, double>* out) {
  out->clear();
  HttpResponse response;
  if (Status s = HttpGet(metrics_url, 2000, &response); !s.ok()) return s;
  if (response.status_code != 200) {
    return Status::Unavailable(
        fmt::format("GET {}: expected HTTP 200, found {}", metrics_url, response.status_code));
  }
  for (const auto& value : ExtractSignals(engine, ParsePrometheusText(response.body))) {
    (*out)[value.signal] = value.value;
  }
  return Status::Ok();
}

MetricsScraper::~MetricsScraper() { Stop(); }

void MetricsScraper::Start(std::string metrics_url, std::string engine, int64_t origin_ns) {
  url_ = std::move(metrics_url);
  engine_ = std::move(engine);
  origin_ns_ = origin_ns;
  stopping_ = false;
  // The first scrape before Start returns, so before the load: counters are reduced as
  // last - first, and a request admitted before an asynchronous first scrape would be lost.
  ScrapeOnce();
  thread_ = std::thread([this] { Loop(); });
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

void MetricsScraper::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  int interval_ms = kFirstIntervalMs;
  for (int at_this_interval = 0;; ++at_this_interval) {
    if (at_this_interval == kScrapesPerInterval) {
      interval_ms = std::min(2 * interval_ms, kMaxIntervalMs);
      at_this_interval = 0;
    }
    if (wake_.wait_for(lock, std::chrono::milliseconds(interval_ms),
                       [this] { return stopping_; })) {
      return;
    }
    lock.unlock();
    ScrapeOnce();
    lock.lock();
  }
}

void MetricsScraper::ScrapeOnce() {
  const int64_t at_ns = SteadyNowNs() - origin_ns_;
  std::map<std::string, double> signals;
  const Status status = ScrapeSignals(url_, engine_, &signals);
  std::lock_guard<std::mutex> lock(mutex_);
  if (!status.ok()) {
    ++failed_scrapes_;
    return;
  }
  ++scrapes_;
  for (const auto& [signal, value] : signals) samples_.push_back({at_ns, signal, value});
}

std::vector<ScrapedSample> MetricsScraper::Samples() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return samples_;
}

size_t MetricsScraper::scrapes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return scrapes_;
}

size_t MetricsScraper::failed_scrapes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failed_scrapes_;
}

}  // namespace servesweep::scraper
