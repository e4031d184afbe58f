#include "loadgen/answer_client.h"

#include <curl/curl.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
#include <thread>

#include "common/curl_global.h"

namespace servesweep::loadgen {
namespace {

size_t Append(char* data, size_t size, size_t count, void* user) {
  static_cast<std::string*>(user)->append(data, size * count);
  return size * count;
}

std::string RequestBody(const AnswerSettings& settings, const std::string& prompt) {
  nlohmann::json body = {{"model", settings.model},
                         {"max_tokens", settings.max_tokens},
                         {"temperature", 0},
                         {"stream", false}};
  if (settings.api == Api::kChatCompletions) {
    body["messages"] = nlohmann::json::array({{{"role", "user"}, {"content", prompt}}});
  } else {
    body["prompt"] = prompt;
  }
  return body.dump();
}

Answer AskOne(CURL* curl, const AnswerSettings& settings, const std::string& url,
              curl_slist* headers, const std::string& prompt) {
  Answer answer;
  std::string response;
  const std::string body = RequestBody(settings, prompt);
  curl_easy_setopt(curl, CURLOPT_URL, url.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.c_str());
  curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, static_cast<long>(body.size()));
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, static_cast<long>(settings.request_timeout_s * 1000));
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, Append);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response);
  const CURLcode rc = curl_easy_perform(curl);
  long status = 0;
  curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
  if (rc != CURLE_OK) {
    answer.error = fmt::format("POST {}: {}", url, curl_easy_strerror(rc));
  } else if (status != 200) {
    answer.error = fmt::format("HTTP {}: {}", status, response.substr(0, 200));
  } else if (!ParseAnswerText(response, &answer.text)) {
    answer.error =
        fmt::format("expected a completion with text, found '{}'", response.substr(0, 200));
  } else {
    answer.ok = true;
  }
  return answer;
}

}  // namespace

bool ParseAnswerText(const std::string& body, std::string* text) {
  const auto json = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object()) return false;
  const auto choices = json.find("choices");
  if (choices == json.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object()) {
    return false;
  }
  const auto& choice = (*choices)[0];
  if (auto t = choice.find("text"); t != choice.end() && t->is_string()) {
    *text = t->get<std::string>();
    return true;
  }
  if (auto m = choice.find("message"); m != choice.end() && m->is_object()) {
    if (auto c = m->find("content"); c != m->end() && c->is_string()) {
      *text = c->get<std::string>();
      return true;
    }
  }
  return false;
}

std::vector<Answer> AskAll(const AnswerSettings& settings,
                           const std::vector<std::string>& prompts) {
  InitCurlOnce();
  std::vector<Answer> answers(prompts.size());
  const std::string url =
      settings.base_url +
      (settings.api == Api::kChatCompletions ? "/v1/chat/completions" : "/v1/completions");
  std::atomic<size_t> next{0};
  auto worker = [&] {
    CURL* curl = curl_easy_init();
    curl_slist* headers = curl_slist_append(nullptr, "Content-Type: application/json");
    if (!settings.api_key.empty()) {
      headers = curl_slist_append(headers, ("Authorization: Bearer " + settings.api_key).c_str());
    }
    for (size_t i = next.fetch_add(1); i < prompts.size(); i = next.fetch_add(1)) {
      if (curl == nullptr) {
        answers[i].error = "curl_easy_init failed";
        continue;
      }
      answers[i] = AskOne(curl, settings, url, headers, prompts[i]);
    }
    curl_slist_free_all(headers);
    if (curl != nullptr) curl_easy_cleanup(curl);
  };
  const size_t threads =
      std::max<size_t>(1, std::min<size_t>(settings.concurrency, prompts.size()));
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t) pool.emplace_back(worker);
  for (auto& thread : pool) thread.join();
  return answers;
}

}  // namespace servesweep::loadgen
