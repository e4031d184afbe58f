#include "scraper/http_get.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <mutex>

#include "common/curl_global.h"

namespace servesweep::scraper {
namespace {

size_t Append(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

Status Perform(const std::string& url, const std::string* post_body, long timeout_ms,
               HttpResponse* out, const std::string& bearer_token) {
  InitCurlOnce();
  CURL* curl = curl_easy_init();
  if (curl == nullptr) return Status::Internal("curl_easy_init failed");
  out->body.clear();
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &out->body);
  curl_slist* headers = nullptr;
  if (!bearer_token.empty()) {
    headers = curl_slist_append(headers, ("Authorization: Bearer " + bearer_token).c_str());
  }
  if (post_body != nullptr) {
    headers = curl_slist_append(headers, "Content-Type: application/json");
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, post_body->c_str());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(post_body->size()));
  }
  if (headers != nullptr) curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  const CURLcode rc = curl_easy_perform(curl);
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &out->status_code);
  curl_easy_cleanup(curl);
  curl_slist_free_all(headers);
  if (rc != CURLE_OK) {
    return Status::Unavailable(
        fmt::format("{} {}: {}", post_body ? "POST" : "GET", url, curl_easy_strerror(rc)));
  }
  return Status::Ok();
}

}  // namespace

Status HttpGet(const std::string& url, long timeout_ms, HttpResponse* out,
               const std::string& bearer_token) {
  return Perform(url, nullptr, timeout_ms, out, bearer_token);
}

Status HttpPostJson(const std::string& url, const std::string& json_body, long timeout_ms,
                    HttpResponse* out, const std::string& bearer_token) {
  return Perform(url, &json_body, timeout_ms, out, bearer_token);
}

}  // namespace servesweep::scraper
