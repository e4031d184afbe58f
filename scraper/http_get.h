// Blocking HTTP GET and POST for the agent's control paths (engine readiness and its probe
// request, /metrics scrapes).
// Never used for load: the load generator has its own event-driven client.
//
// Thread-safety: each call uses its own easy handle; safe from any thread once
// curl_global_init has run (done on first use).
#pragma once

#include <string>

#include "common/status.h"

namespace servesweep::scraper {

struct HttpResponse {
  long status_code = 0;
  std::string body;
};

// `bearer_token`, when not empty, is sent as `Authorization: Bearer ...` and never logged.
Status HttpGet(const std::string& url, long timeout_ms, HttpResponse* out,
               const std::string& bearer_token = "");
// POSTs `json_body` with `Content-Type: application/json`.
Status HttpPostJson(const std::string& url, const std::string& json_body, long timeout_ms,
                    HttpResponse* out, const std::string& bearer_token = "");

}  // namespace servesweep::scraper
