// Tests of the engine emulator over real sockets: the wire format load generators rely on,
// token accounting, absolute timing (from the request log), aborts and concurrency.
#include "sim/emulator.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <future>
#include <memory>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "common/clock.h"
#include "sim/engine_core.h"
#include "sim/fault_plan.h"
#include "sim/fixed_schedule.h"
#include "testing/blocking_http_client.h"

namespace servesweep::sim {
namespace {

using nlohmann::json;
using testing::GetRequest;
using testing::HttpResponse;
using testing::PostRequest;
using testing::SseData;
using testing::TestConnection;

class EmulatorTest : public ::testing::Test {
 protected:
  void StartEmulator(EmulatorSettings settings, std::unique_ptr<EngineCore> core = nullptr) {
    emulator_ = core ? std::make_unique<Emulator>(std::move(settings), std::move(core))
                     : std::make_unique<Emulator>(std::move(settings));
    ASSERT_TRUE(emulator_->Start().ok());
    thread_ = std::thread([this] { emulator_->Run(); });
  }
  // Stops the server and joins its thread; the request log is complete afterwards.
  void StopEmulator() {
    if (!emulator_) return;
    emulator_->Stop();
    thread_.join();
    emulator_.reset();
  }
  void TearDown() override { StopEmulator(); }

  HttpResponse Exchange(const std::string& request) {
    TestConnection connection(emulator_->port());
    connection.Send(request);
    return connection.ReadResponse();
  }
  HttpResponse Post(const std::string& path, const json& body) {
    return Exchange(PostRequest(path, body.dump()));
  }

  static std::string LogPath() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info->name();  // "Name/0" for a parameterised test
    std::replace(name.begin(), name.end(), '/', '_');
    std::string path = ::testing::TempDir() + "sim_" + name + ".jsonl";
    std::remove(path.c_str());
    return path;
  }
  static std::vector<json> ReadLog(const std::string& path) {
    std::ifstream in(path);
    std::vector<json> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(json::parse(line));
    return lines;
  }

  std::unique_ptr<Emulator> emulator_;
  std::thread thread_;
};

EmulatorSettings FastSettings() {
  EmulatorSettings s;
  s.model_name = "m/x";
  s.ttft_ms = 2;
  s.itl_ms = 1;
  return s;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// The value of a Prometheus sample; series is the line up to the value (name and labels).
double Sample(const std::string& text, const std::string& series) {
  const size_t at = text.find("\n" + series + " ");
  if (at == std::string::npos) throw std::runtime_error("no sample " + series);
  return std::stod(text.substr(at + series.size() + 2));
}

TEST_F(EmulatorTest, HealthIs503UntilStartupElapses) {
  EmulatorSettings s = FastSettings();
  s.startup_ms = 400;
  const auto started = std::chrono::steady_clock::now();
  StartEmulator(s);
  HttpResponse early = Exchange(GetRequest("/health"));
  if (std::chrono::steady_clock::now() - started >= std::chrono::milliseconds(400)) {
    // A machine this busy asked after the startup had elapsed: the 503 cannot be seen.
    GTEST_SKIP() << "the first /health came after the 400 ms startup (a busy machine)";
  }
  EXPECT_EQ(early.status, 503);
  std::this_thread::sleep_until(started + std::chrono::milliseconds(450));
  HttpResponse ready = Exchange(GetRequest("/health"));
  EXPECT_EQ(ready.status, 200);
  EXPECT_EQ(ready.body, "");
}

TEST_F(EmulatorTest, ModelsListsTheModel) {
  EmulatorSettings s = FastSettings();
  s.max_model_len = 4096;
  StartEmulator(s);
  HttpResponse r = Exchange(GetRequest("/v1/models"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "application/json");
  const json body = json::parse(r.body);
  EXPECT_EQ(body["object"], "list");
  ASSERT_EQ(body["data"].size(), 1u);
  EXPECT_EQ(body["data"][0]["id"], "m/x");
  EXPECT_EQ(body["data"][0]["object"], "model");
  EXPECT_EQ(body["data"][0]["owned_by"], "servesweep-sim");
  EXPECT_EQ(body["data"][0]["max_model_len"], 4096);
  EXPECT_TRUE(body["data"][0]["created"].is_number_integer());
}

// A managed API's key check: /v1/* needs the Bearer key; /health and /metrics stay open.
TEST_F(EmulatorTest, AnApiKeyGuardsTheApiAsAManagedEndpointDoes) {
  EmulatorSettings s = FastSettings();
  s.api_key = "sk-test";
  StartEmulator(s);
  auto with_header = [](std::string request, const std::string& header) {
    return request.insert(request.find("\r\n") + 2, header + "\r\n");
  };
  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  HttpResponse none = Exchange(PostRequest("/v1/completions", body));
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(json::parse(none.body)["error"]["type"], "invalid_request_error");
  EXPECT_NE(none.body.find("didn't provide an API key"), std::string::npos) << none.body;
  HttpResponse wrong =
      Exchange(with_header(PostRequest("/v1/completions", body), "Authorization: Bearer sk-no"));
  EXPECT_EQ(wrong.status, 401);
  EXPECT_NE(wrong.body.find("Incorrect API key provided."), std::string::npos) << wrong.body;
  EXPECT_EQ(Exchange(GetRequest("/v1/models")).status, 401);
  EXPECT_EQ(
      Exchange(with_header(PostRequest("/v1/completions", body), "Authorization: Bearer sk-test"))
          .status,
      200);
  EXPECT_EQ(Exchange(with_header(GetRequest("/v1/models"), "Authorization: Bearer sk-test")).status,
            200);
  EXPECT_EQ(Exchange(GetRequest("/health")).status, 200);
  EXPECT_EQ(Exchange(GetRequest("/metrics")).status, 200);
}

TEST_F(EmulatorTest, StreamedCompletionEventSequence) {
  StartEmulator(FastSettings());
  HttpResponse r = Post("/v1/completions", {{"model", "m/x"},
                                            {"prompt", "one two\tthree \n four  "},
                                            {"max_tokens", 5},
                                            {"stream", true},
                                            {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/event-stream; charset=utf-8");
  EXPECT_EQ(r.headers["transfer-encoding"], "chunked");
  const std::vector<std::string> events = SseData(r.body);
  ASSERT_EQ(events.size(), 7u);  // 5 tokens, usage, [DONE]
  std::string id;
  for (int k = 0; k < 5; ++k) {
    const json chunk = json::parse(events[k]);
    if (k == 0) id = chunk["id"];
    EXPECT_EQ(chunk["id"], id);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_EQ(chunk["model"], "m/x");
    ASSERT_EQ(chunk["choices"].size(), 1u);
    EXPECT_EQ(chunk["choices"][0]["text"], " t" + std::to_string(k));
    EXPECT_EQ(chunk["choices"][0]["finish_reason"], k == 4 ? json("length") : json(nullptr));
    EXPECT_TRUE(chunk["usage"].is_null());
  }
  EXPECT_EQ(id.rfind("cmpl-", 0), 0u);
  const json usage = json::parse(events[5]);
  EXPECT_EQ(usage["id"], id);
  EXPECT_EQ(usage["choices"], json::array());
  EXPECT_EQ(usage["usage"],
            json({{"prompt_tokens", 4}, {"total_tokens", 9}, {"completion_tokens", 5}}));
  EXPECT_EQ(events[6], "[DONE]");

  // Without include_usage there is no usage chunk.
  HttpResponse plain = Post(
      "/v1/completions", {{"model", "m/x"}, {"prompt", "a"}, {"max_tokens", 3}, {"stream", true}});
  const std::vector<std::string> plain_events = SseData(plain.body);
  ASSERT_EQ(plain_events.size(), 4u);
  EXPECT_EQ(json::parse(plain_events[2])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(plain_events[3], "[DONE]");
}

TEST_F(EmulatorTest, ChatStreamSendsRoleChunkFirst) {
  StartEmulator(FastSettings());
  HttpResponse r =
      Post("/v1/chat/completions", {{"model", "m/x"},
                                    {"messages", {{{"role", "user"}, {"content", "hi there"}}}},
                                    {"max_completion_tokens", 3},
                                    {"stream", true},
                                    {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200);
  const std::vector<std::string> events = SseData(r.body);
  ASSERT_EQ(events.size(), 6u);  // role, 3 tokens, usage, [DONE]
  const json role = json::parse(events[0]);
  EXPECT_EQ(role["object"], "chat.completion.chunk");
  EXPECT_EQ(role["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
  EXPECT_EQ(role["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  for (int k = 0; k < 3; ++k) {
    const json chunk = json::parse(events[1 + k]);
    EXPECT_EQ(chunk["choices"][0]["delta"], json({{"content", " t" + std::to_string(k)}}));
    EXPECT_EQ(chunk["choices"][0]["finish_reason"], k == 2 ? json("length") : json(nullptr));
  }
  EXPECT_EQ(json::parse(events[4])["usage"]["prompt_tokens"], 2);
  EXPECT_EQ(json::parse(events[4])["usage"]["completion_tokens"], 3);
  EXPECT_EQ(events[5], "[DONE]");
}

TEST_F(EmulatorTest, PromptTokenAccounting) {
  StartEmulator(FastSettings());
  auto prompt_tokens = [&](const json& prompt) {
    HttpResponse r =
        Post("/v1/completions", {{"model", "m/x"}, {"prompt", prompt}, {"max_tokens", 3}});
    EXPECT_EQ(r.status, 200) << r.body;
    const json body = json::parse(r.body);
    EXPECT_EQ(body["choices"][0]["text"], " t0 t1 t2");
    EXPECT_EQ(body["choices"][0]["finish_reason"], "length");
    EXPECT_EQ(body["usage"]["completion_tokens"], 3);
    return body["usage"]["prompt_tokens"].get<int>();
  };
  EXPECT_EQ(prompt_tokens(json::array({101, 7, 9, 9, 2, 0, 55})), 7);
  EXPECT_EQ(prompt_tokens(json::array({json::array({1, 2})})), 2);
  EXPECT_EQ(prompt_tokens(json::array({"five words in one prompt"})), 5);
  EXPECT_EQ(prompt_tokens(""), 0);

  HttpResponse chat =
      Post("/v1/chat/completions", {{"model", "m/x"},
                                    {"messages",
                                     {{{"role", "system"}, {"content", "be brief"}},
                                      {{"role", "user"}, {"content", "three more words"}},
                                      {{"role", "user"}, {"content", json::array()}}}},
                                    {"max_tokens", 2}});
  ASSERT_EQ(chat.status, 200);
  const json body = json::parse(chat.body);
  EXPECT_EQ(body["object"], "chat.completion");
  EXPECT_EQ(body["choices"][0]["message"]["role"], "assistant");
  EXPECT_EQ(body["choices"][0]["message"]["content"], " t0 t1");
  EXPECT_EQ(body["usage"],
            json({{"prompt_tokens", 5}, {"total_tokens", 7}, {"completion_tokens", 2}}));
}

TEST_F(EmulatorTest, DefaultMaxTokensIs16) {
  StartEmulator(FastSettings());
  HttpResponse r = Post("/v1/completions", {{"prompt", "x"}});  // model may be omitted
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(json::parse(r.body)["usage"]["completion_tokens"], 16);
}

TEST_F(EmulatorTest, UnknownModelIs404) {
  StartEmulator(FastSettings());
  HttpResponse r = Post("/v1/completions", {{"model", "other"}, {"prompt", "x"}});
  EXPECT_EQ(r.status, 404);
  EXPECT_EQ(json::parse(r.body),
            json::parse(R"({"error":{"message":"The model `other` does not exist.",
                                                  "type":"NotFoundError","param":null,"code":404}})"));
}

TEST_F(EmulatorTest, MalformedRequestsAre400AndUnknownPathsAre404) {
  EmulatorSettings s = FastSettings();
  s.max_model_len = 10;
  StartEmulator(s);
  auto expect_400 = [&](const std::string& path, const std::string& body) {
    HttpResponse r = Exchange(PostRequest(path, body));
    EXPECT_EQ(r.status, 400) << body;
    const json error = json::parse(r.body)["error"];
    EXPECT_EQ(error["type"], "BadRequestError");
    EXPECT_EQ(error["code"], 400);
    EXPECT_FALSE(error["message"].get<std::string>().empty());
  };
  expect_400("/v1/completions", "{not json");
  expect_400("/v1/completions", R"({"model":"m/x"})");
  expect_400("/v1/chat/completions", R"({"model":"m/x","prompt":"x"})");
  expect_400("/v1/completions", R"({"prompt":"x","max_tokens":"5"})");
  expect_400("/v1/completions", R"({"prompt":"x","max_tokens":0})");
  expect_400("/v1/completions", R"({"prompt":["a","b"]})");
  expect_400("/v1/completions", R"({"prompt":"x","max_tokens":10})");  // 11 > max_model_len

  HttpResponse missing = Exchange(GetRequest("/v1/nothing"));
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(json::parse(missing.body)["error"]["code"], 404);
  EXPECT_EQ(Exchange(GetRequest("/v1/completions")).status, 405);
}

TEST_F(EmulatorTest, KeepAliveServesSeveralRequestsOnOneConnection) {
  StartEmulator(FastSettings());
  TestConnection connection(emulator_->port());
  const std::string stream_body =
      json({{"prompt", "a b"}, {"max_tokens", 2}, {"stream", true}}).dump();
  for (int i = 0; i < 2; ++i) {
    connection.Send(PostRequest("/v1/completions", stream_body));
    HttpResponse r = connection.ReadResponse();
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(SseData(r.body).size(), 3u);
  }
  connection.Send(GetRequest("/health"));
  EXPECT_EQ(connection.ReadResponse().status, 200);
  // Two requests sent back to back (pipelined) are answered in order.
  connection.Send(PostRequest("/v1/completions", stream_body) + GetRequest("/v1/models"));
  EXPECT_EQ(SseData(connection.ReadResponse().body).size(), 3u);
  EXPECT_EQ(json::parse(connection.ReadResponse().body)["object"], "list");
}

TEST_F(EmulatorTest, TokensFollowTheAbsoluteSchedule) {
  EmulatorSettings s = FastSettings();
  s.ttft_ms = 30;
  s.itl_ms = 8;
  s.request_log_path = LogPath();
  StartEmulator(s);
  for (int i = 0; i < 5; ++i) {
    ASSERT_EQ(
        Post("/v1/completions", {{"prompt", "a b c"}, {"max_tokens", 20}, {"stream", true}}).status,
        200);
  }
  ASSERT_EQ(Post("/v1/chat/completions",
                 {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 4}})
                .status,
            200);
  StopEmulator();

  const std::vector<json> log = ReadLog(s.request_log_path);
  ASSERT_EQ(log.size(), 6u);
  std::vector<double> ttft_ms, itl_ms;
  for (size_t i = 0; i < 5; ++i) {
    const json& line = log[i];
    EXPECT_EQ(line["path"], "/v1/completions");
    EXPECT_EQ(line["status"], "ok");
    EXPECT_EQ(line["prompt_tokens"], 3);
    EXPECT_EQ(line["completion_tokens"], 20);
    const auto tokens = line["token_ns"].get<std::vector<int64_t>>();
    ASSERT_EQ(tokens.size(), 20u);
    ttft_ms.push_back(static_cast<double>(tokens[0] - line["arrival_ns"].get<int64_t>()) / 1e6);
    for (size_t k = 1; k < tokens.size(); ++k) {
      itl_ms.push_back(static_cast<double>(tokens[k] - tokens[k - 1]) / 1e6);
    }
    // Absolute schedule: the last token is due at ttft + 19 itl, whatever the jitter before.
    EXPECT_NEAR(static_cast<double>(tokens[19] - line["arrival_ns"].get<int64_t>()) / 1e6,
                30 + 19 * 8, 5);
  }
  EXPECT_NEAR(Median(ttft_ms), 30, 2);
  EXPECT_NEAR(Median(itl_ms), 8, 2);
  EXPECT_EQ(log[5]["path"], "/v1/chat/completions");
  EXPECT_EQ(log[5]["completion_tokens"], 4);
  EXPECT_EQ(log[5]["token_ns"].size(), 4u);
}

TEST_F(EmulatorTest, ClientDisconnectMidStreamIsAbortedAndServerKeepsServing) {
  EmulatorSettings s = FastSettings();
  s.itl_ms = 5;
  s.request_log_path = LogPath();
  StartEmulator(s);
  {
    TestConnection quitter(emulator_->port());
    quitter.Send(
        PostRequest("/v1/completions",
                    json({{"prompt", "a b c d"}, {"max_tokens", 1000}, {"stream", true}}).dump()));
    quitter.WaitFor("\"text\":\" t2\"");
    const std::string metrics = Exchange(GetRequest("/metrics")).body;
    EXPECT_EQ(Sample(metrics, "vllm:num_requests_running{model_name=\"m/x\"}"), 1);
    // Prompt 4 tokens + at least 3 generated, of a 1,000,000-token cache.
    EXPECT_GE(Sample(metrics, "vllm:kv_cache_usage_perc{model_name=\"m/x\"}"), 7e-6);
  }  // closes the socket mid-stream
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  const std::string metrics = Exchange(GetRequest("/metrics")).body;
  EXPECT_EQ(Sample(metrics, "vllm:num_requests_running{model_name=\"m/x\"}"), 0);
  EXPECT_EQ(Sample(metrics, "vllm:kv_cache_usage_perc{model_name=\"m/x\"}"), 0);
  EXPECT_EQ(
      Sample(metrics, "vllm:request_success_total{model_name=\"m/x\",finished_reason=\"abort\"}"),
      1);
  EXPECT_EQ(Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}}).status, 200);
  StopEmulator();

  const std::vector<json> log = ReadLog(s.request_log_path);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["status"], "aborted");
  EXPECT_GE(log[0]["completion_tokens"], 3);
  EXPECT_LT(log[0]["completion_tokens"], 100);
  EXPECT_EQ(log[0]["token_ns"].size(), log[0]["completion_tokens"].get<size_t>());
  EXPECT_EQ(log[1]["status"], "ok");
}

TEST_F(EmulatorTest, MetricsUseVllmNamesAndCount) {
  StartEmulator(FastSettings());
  ASSERT_EQ(
      Post("/v1/completions", {{"prompt", "a b c"}, {"max_tokens", 4}, {"stream", true}}).status,
      200);
  ASSERT_EQ(Post("/v1/completions", {{"prompt", {1, 2}}, {"max_tokens", 6}}).status, 200);
  HttpResponse r = Exchange(GetRequest("/metrics"));
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(r.headers["content-type"], "text/plain; version=0.0.4; charset=utf-8");
  const std::string& text = r.body;
  const std::string label = "{model_name=\"m/x\"}";
  EXPECT_EQ(Sample(text, "vllm:num_requests_running" + label), 0);
  EXPECT_EQ(Sample(text, "vllm:num_requests_waiting" + label), 0);
  EXPECT_EQ(Sample(text, "vllm:kv_cache_usage_perc" + label), 0);
  EXPECT_EQ(Sample(text, "vllm:prompt_tokens_total" + label), 5);
  EXPECT_EQ(Sample(text, "vllm:generation_tokens_total" + label), 10);
  EXPECT_EQ(
      Sample(text, "vllm:request_success_total{model_name=\"m/x\",finished_reason=\"length\"}"), 2);
  EXPECT_EQ(Sample(text, "vllm:num_preemptions_total" + label), 0);
  EXPECT_EQ(Sample(text, "vllm:prefix_cache_queries_total" + label), 5);
  EXPECT_EQ(Sample(text, "vllm:prefix_cache_hits_total" + label), 0);
  EXPECT_EQ(Sample(text, "vllm:time_to_first_token_seconds_count" + label), 2);
  EXPECT_EQ(Sample(text, "vllm:time_to_first_token_seconds_bucket{model_name=\"m/x\",le=\"+Inf\"}"),
            2);
  EXPECT_EQ(
      Sample(text, "vllm:time_to_first_token_seconds_bucket{model_name=\"m/x\",le=\"0.001\"}"), 0);
  EXPECT_NE(text.find("# TYPE vllm:prompt_tokens_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE vllm:kv_cache_usage_perc gauge\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE vllm:time_to_first_token_seconds histogram\n"), std::string::npos);
}

// Opens kStreams connections at once, each streaming one completion, and checks every stream
// is whole. The streams must overlap (1000 in series would take 290 s): counted, not timed, as
// the most streams that had their first event and were still open at one moment.
void ExpectThousandConcurrentStreamsComplete(uint16_t port) {
  constexpr int kStreams = 1000;
  constexpr int kTokens = 20;
  const std::string request =
      PostRequest("/v1/completions",
                  json({{"prompt", "a b"}, {"max_tokens", kTokens}, {"stream", true}}).dump(),
                  /*keep_alive=*/false);
  std::vector<std::unique_ptr<TestConnection>> connections;
  for (int i = 0; i < kStreams; ++i) {
    connections.push_back(std::make_unique<TestConnection>(port));
    connections.back()->Send(request);
  }
  // Read every connection until the server closes it (Connection: close), multiplexed by poll.
  std::vector<std::string> received(kStreams);
  std::vector<pollfd> fds;
  for (auto& c : connections) fds.push_back({c->fd(), POLLIN, 0});
  int open = kStreams;
  int streaming = 0, most_streaming = 0;  // had a first event, not yet closed
  std::vector<bool> started(kStreams, false);
  char buf[16384];
  while (open > 0) {
    ASSERT_GT(::poll(fds.data(), fds.size(), 10000), 0) << "streams stalled; open: " << open;
    for (int i = 0; i < kStreams; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      const ssize_t n = ::recv(fds[i].fd, buf, sizeof(buf), 0);
      if (n > 0) {
        received[i].append(buf, static_cast<size_t>(n));
        if (!started[i] && received[i].find("data: ") != std::string::npos) {
          started[i] = true;
          most_streaming = std::max(most_streaming, ++streaming);
        }
      } else {
        fds[i].fd = -1;
        --open;
        if (started[i]) --streaming;
      }
    }
  }
  for (int i = 0; i < kStreams; ++i) {
    const std::string& raw = received[i];
    ASSERT_EQ(raw.rfind("HTTP/1.1 200 OK\r\n", 0), 0u) << i;
    size_t events = 0;
    for (size_t at = raw.find("data: "); at != std::string::npos; at = raw.find("data: ", at + 1)) {
      ++events;
    }
    EXPECT_EQ(events, kTokens + 1u) << i;
    EXPECT_TRUE(raw.ends_with("data: [DONE]\n\n\r\n0\r\n\r\n")) << i;
  }
  EXPECT_GE(most_streaming, kStreams / 2) << "the streams were served one after another";
}

EmulatorSettings ConcurrencySettings(int io_threads) {
  EmulatorSettings s = FastSettings();
  s.ttft_ms = 100;
  s.itl_ms = 10;
  s.io_threads = io_threads;
  return s;
}

TEST_F(EmulatorTest, ThousandConcurrentStreamsCompleteOnOneIoThread) {
  StartEmulator(ConcurrencySettings(1));
  ExpectThousandConcurrentStreamsComplete(emulator_->port());
}

TEST_F(EmulatorTest, ThousandConcurrentStreamsCompleteOnFourIoThreads) {
  StartEmulator(ConcurrencySettings(4));
  ExpectThousandConcurrentStreamsComplete(emulator_->port());
}

// ---- Multi-token chunks (speculative decoding) ----

TEST_F(EmulatorTest, MultiTokenChunksAreOneEventEachAndCountEveryToken) {
  EmulatorSettings s = FastSettings();
  s.tokens_per_chunk = 3;
  s.request_log_path = LogPath();
  StartEmulator(s);
  HttpResponse r = Post("/v1/completions", {{"prompt", "a b"},
                                            {"max_tokens", 7},
                                            {"stream", true},
                                            {"stream_options", {{"include_usage", true}}}});
  ASSERT_EQ(r.status, 200);
  const std::vector<std::string> events = SseData(r.body);
  ASSERT_EQ(events.size(), 5u);  // 3 chunks, usage, [DONE]
  EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], " t0 t1 t2");
  EXPECT_EQ(json::parse(events[1])["choices"][0]["text"], " t3 t4 t5");
  EXPECT_EQ(json::parse(events[2])["choices"][0]["text"], " t6");
  EXPECT_EQ(json::parse(events[2])["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(json::parse(events[1])["choices"][0]["finish_reason"], json(nullptr));
  EXPECT_EQ(json::parse(events[3])["usage"]["completion_tokens"], 7);
  HttpResponse chat = Post(
      "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "x"}}}}, {"max_tokens", 4}, {"stream", true}});
  const std::vector<std::string> chat_events = SseData(chat.body);
  ASSERT_EQ(chat_events.size(), 4u);  // role, 2 chunks, [DONE]
  EXPECT_EQ(json::parse(chat_events[1])["choices"][0]["delta"]["content"], " t0 t1 t2");
  EXPECT_EQ(json::parse(chat_events[2])["choices"][0]["delta"]["content"], " t3");
  const std::string metrics = Exchange(GetRequest("/metrics")).body;
  EXPECT_EQ(Sample(metrics, "vllm:generation_tokens_total{model_name=\"m/x\"}"), 11);
  StopEmulator();

  const std::vector<json> log = ReadLog(s.request_log_path);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["completion_tokens"], 7);
  const auto tokens = log[0]["token_ns"].get<std::vector<int64_t>>();
  ASSERT_EQ(tokens.size(), 7u);  // one instant per token; a chunk's tokens share it
  EXPECT_EQ(tokens[0], tokens[2]);
  EXPECT_EQ(tokens[3], tokens[5]);
  EXPECT_LE(tokens[2], tokens[3]);
  EXPECT_EQ(log[1]["token_ns"].size(), 4u);
}

// ---- A plugged-in timing core ----

// A global, batched model: every running request advances together, 2 tokens per 5 ms step,
// all from one schedule; it reports fixed engine signals so the test can see them on /metrics.
class BatchedTestCore : public EngineCore {
 public:
  static constexpr int64_t kStepNs = 5'000'000;
  void Submit(const EngineRequest& request) override {
    if (running_.empty()) next_step_ns_ = request.arrival_ns + kStepNs;
    running_.push_back({request.id, request.max_tok, 0});
  }
  void Cancel(uint64_t id, int64_t) override {
    std::erase_if(running_, [id](const Running& r) { return r.id == id; });
  }
  int64_t NextEventNs() const override { return running_.empty() ? kNever : next_step_ns_; }
  void AdvanceTo(int64_t now_ns, TokenSink& sink) override {
    while (!running_.empty() && next_step_ns_ <= now_ns) {
      for (Running& r : running_) {
        const int64_t tokens = std::min<int64_t>(2, r.max_tok - r.emitted);
        r.emitted += tokens;
        sink.OnEvent({.id = r.id,
                      .time_ns = next_step_ns_,
                      .tokens = static_cast<int32_t>(tokens),
                      .finished = r.emitted == r.max_tok});
      }
      std::erase_if(running_, [](const Running& r) { return r.emitted == r.max_tok; });
      ++steps_;
      next_step_ns_ += kStepNs;
    }
  }
  EngineSnapshot Snapshot() const override {
    return {.running = static_cast<int64_t>(running_.size()),
            .waiting = 3,
            .kv_used_tok = 250,
            .kv_capacity_tok = 1000,
            .preemptions_total = 2,
            .prefix_cache_queries_tok = 20,
            .prefix_cache_hits_tok = 11};
  }

 private:
  struct Running {
    uint64_t id;
    int64_t max_tok;
    int64_t emitted;
  };
  std::vector<Running> running_;
  int64_t next_step_ns_ = 0;
  int64_t steps_ = 0;
};

TEST_F(EmulatorTest, APluggedCoreDrivesEveryStreamAndTheEngineGauges) {
  EmulatorSettings s = FastSettings();
  s.request_log_path = LogPath();
  StartEmulator(s, std::make_unique<BatchedTestCore>());
  // Three streams at once: the core batches them.
  std::vector<std::unique_ptr<TestConnection>> connections;
  for (int i = 0; i < 3; ++i) {
    connections.push_back(std::make_unique<TestConnection>(emulator_->port()));
    connections.back()->Send(PostRequest(
        "/v1/completions", json({{"prompt", "p q"}, {"max_tokens", 5}, {"stream", true}}).dump()));
  }
  for (auto& connection : connections) {
    const std::vector<std::string> events = SseData(connection->ReadResponse().body);
    ASSERT_EQ(events.size(), 4u);  // chunks of 2, 2, 1 and [DONE]
    EXPECT_EQ(json::parse(events[0])["choices"][0]["text"], " t0 t1");
    EXPECT_EQ(json::parse(events[2])["choices"][0]["text"], " t4");
  }
  const std::string text = Exchange(GetRequest("/metrics")).body;
  const std::string label = "{model_name=\"m/x\"}";
  EXPECT_EQ(Sample(text, "vllm:num_requests_waiting" + label), 3);
  EXPECT_EQ(Sample(text, "vllm:kv_cache_usage_perc" + label), 0.25);
  EXPECT_EQ(Sample(text, "vllm:num_preemptions_total" + label), 2);
  EXPECT_EQ(Sample(text, "vllm:prefix_cache_queries_total" + label), 20);
  EXPECT_EQ(Sample(text, "vllm:prefix_cache_hits_total" + label), 11);
  EXPECT_EQ(Sample(text, "vllm:generation_tokens_total" + label), 15);
  StopEmulator();
  // The three streams' tokens came from the same steps: equal chunk instants across requests
  // are not guaranteed on the wire, but every request's 5 tokens are logged.
  const std::vector<json> log = ReadLog(s.request_log_path);
  ASSERT_EQ(log.size(), 3u);
  for (const json& line : log) EXPECT_EQ(line["token_ns"].size(), 5u);
}

// ---- Arrival: the kernel's receive time, not the parse time ----

// The fixed schedule, except that its first Submit keeps the io thread busy for kBusy after
// saying so (busy_started): whatever a client sends meanwhile is read late.
class BusyFirstSubmitCore : public EngineCore {
 public:
  static constexpr auto kBusy = std::chrono::milliseconds(60);
  BusyFirstSubmitCore(FixedScheduleSettings settings, std::promise<void> busy_started)
      : core_(settings), busy_started_(std::move(busy_started)) {}
  void Submit(const EngineRequest& request) override {
    core_.Submit(request);
    if (submitted_++ > 0) return;
    busy_started_.set_value();
    std::this_thread::sleep_for(kBusy);
  }
  void Cancel(uint64_t id, int64_t now_ns) override { core_.Cancel(id, now_ns); }
  int64_t NextEventNs() const override { return core_.NextEventNs(); }
  void AdvanceTo(int64_t now_ns, TokenSink& sink) override { core_.AdvanceTo(now_ns, sink); }
  EngineSnapshot Snapshot() const override { return core_.Snapshot(); }

 private:
  FixedScheduleCore core_;
  std::promise<void> busy_started_;
  int submitted_ = 0;
};

TEST_F(EmulatorTest, ArrivalIsWhenTheRequestWasReceivedNotWhenTheBusyIoThreadReadIt) {
  EmulatorSettings s = FastSettings();
  s.request_log_path = LogPath();
  std::promise<void> busy_started;
  std::future<void> busy = busy_started.get_future();
  StartEmulator(s, std::make_unique<BusyFirstSubmitCore>(
                       FixedScheduleSettings{.ttft_ns = 20'000'000, .itl_ns = 1'000'000},
                       std::move(busy_started)));
  const std::string request = PostRequest(
      "/v1/completions", json({{"prompt", "a b"}, {"max_tokens", 2}, {"stream", true}}).dump());
  // An idle keep-alive connection, already served once: its session waits for the next request.
  TestConnection idle(emulator_->port());
  idle.Send(GetRequest("/health"));
  ASSERT_EQ(idle.ReadResponse().status, 200);

  TestConnection first(emulator_->port());
  first.Send(request);
  ASSERT_EQ(busy.wait_for(std::chrono::seconds(10)), std::future_status::ready);
  // While the io thread is busy: a request on the idle connection, and one on a connection
  // the emulator has not even accepted yet.
  const int64_t idle_sent_ns = SteadyNowNs();
  idle.Send(request);
  TestConnection fresh(emulator_->port());
  const int64_t fresh_sent_ns = SteadyNowNs();
  fresh.Send(request);
  for (TestConnection* c : {&first, &idle, &fresh}) EXPECT_EQ(c->ReadResponse().status, 200);
  StopEmulator();

  const std::vector<json> log = ReadLog(s.request_log_path);
  ASSERT_EQ(log.size(), 3u);
  auto line = [&log](const std::string& id) {
    for (const json& l : log) {
      if (l["id"] == id) return l;
    }
    throw std::runtime_error("no log line " + id);
  };
  // Requests 1 (idle) and 2 (fresh) were sent in the busy period and parsed after it.
  const std::pair<std::string, int64_t> late[] = {{"cmpl-1", idle_sent_ns},
                                                  {"cmpl-2", fresh_sent_ns}};
  for (const auto& [id, sent_ns] : late) {
    SCOPED_TRACE(id);
    const json l = line(id);
    const int64_t arrival_ns = l["arrival_ns"].get<int64_t>();
    const auto tokens = l["token_ns"].get<std::vector<int64_t>>();
    ASSERT_EQ(tokens.size(), 2u);
    // Read >= 40 ms late (its first token, due at arrival + 20 ms, could not leave before)...
    EXPECT_GE(static_cast<double>(tokens[0] - sent_ns) / 1e6, 40);
    // ...yet stamped when its bytes arrived.
    EXPECT_LT(std::abs(static_cast<double>(arrival_ns - sent_ns) / 1e6), 5);
  }
}

// ---- Fault injection ----

// Why reading a response failed ("" if it did not): a closed or reset connection, not the
// client's 10 s read timeout, is what the fault tests expect.
std::string ReadFailure(TestConnection& connection) {
  try {
    connection.ReadResponse();
  } catch (const std::runtime_error& e) {
    return e.what();
  }
  return "";
}

EmulatorSettings InstantSettings() {
  EmulatorSettings s = FastSettings();
  s.ttft_ms = 0;
  s.itl_ms = 0;
  return s;
}

// Which of n sequential requests were answered 500 (and that those are OpenAI error bodies).
std::vector<int> ErroredRequests(uint16_t port, int n) {
  std::vector<int> errored;
  TestConnection connection(port);
  for (int i = 0; i < n; ++i) {
    connection.Send(PostRequest("/v1/completions", R"({"prompt":"a","max_tokens":2})"));
    const HttpResponse r = connection.ReadResponse();
    if (r.status == 200) continue;
    EXPECT_EQ(r.status, 500);
    const json error = json::parse(r.body)["error"];
    EXPECT_EQ(error["type"], "InternalServerError");
    EXPECT_EQ(error["code"], 500);
    errored.push_back(i);
  }
  return errored;
}

TEST_F(EmulatorTest, ErrorRateAnswers500ToSeededRequests) {
  EmulatorSettings s = InstantSettings();
  s.faults.error_rate = 0.3;
  s.faults.seed = 7;
  s.request_log_path = LogPath();
  StartEmulator(s);
  const std::vector<int> first = ErroredRequests(emulator_->port(), 60);
  StopEmulator();
  EXPECT_GE(first.size(), 6u);
  EXPECT_LE(first.size(), 32u);
  std::vector<int> predicted;
  for (int i = 0; i < 60; ++i) {
    if (PlanFaults(s.faults, static_cast<uint64_t>(i)).error) predicted.push_back(i);
  }
  EXPECT_EQ(first, predicted);
  const std::vector<json> log = ReadLog(s.request_log_path);
  ASSERT_EQ(log.size(), 60u);
  size_t logged_errors = 0;
  for (const json& line : log) logged_errors += line["status"] == "error" ? 1 : 0;
  EXPECT_EQ(logged_errors, first.size());

  // The same seed hits the same requests; another seed others.
  s.request_log_path.clear();
  StartEmulator(s);
  EXPECT_EQ(ErroredRequests(emulator_->port(), 60), first);
  StopEmulator();
  s.faults.seed = 8;
  StartEmulator(s);
  EXPECT_NE(ErroredRequests(emulator_->port(), 60), first);
}

TEST_F(EmulatorTest, StalledStreamPausesAfterKTokens) {
  EmulatorSettings s = FastSettings();
  s.faults.stall_probability = 1;
  s.faults.stall_after_tok = 2;
  s.faults.stall_ms = 150;
  s.request_log_path = LogPath();
  StartEmulator(s);
  HttpResponse r = Post("/v1/completions", {{"prompt", "a"}, {"max_tokens", 5}, {"stream", true}});
  ASSERT_EQ(r.status, 200);
  EXPECT_EQ(SseData(r.body).size(), 6u);  // the stream is whole, only late
  StopEmulator();
  const std::vector<json> log = ReadLog(s.request_log_path);
  ASSERT_EQ(log.size(), 1u);
  EXPECT_EQ(log[0]["fault"], "stall");
  const auto t = log[0]["token_ns"].get<std::vector<int64_t>>();
  ASSERT_EQ(t.size(), 5u);
  EXPECT_LT(t[1] - t[0], 100'000'000);  // before the stall: itl 1 ms
  EXPECT_GE(t[2] - t[1], 140'000'000);  // the pause
  EXPECT_LT(t[4] - t[2], 100'000'000);  // later tokens shifted, not stalled again
}

TEST_F(EmulatorTest, BrokenEventCutsOneEventsJsonAndTheStreamGoesOn) {
  EmulatorSettings s = InstantSettings();
  s.faults.broken_event_rate = 1;
  StartEmulator(s);
  HttpResponse r = Post("/v1/completions", {{"prompt", "a"}, {"max_tokens", 6}, {"stream", true}});
  ASSERT_EQ(r.status, 200);
  const std::vector<std::string> events = SseData(r.body);
  ASSERT_EQ(events.size(), 7u);
  for (size_t k = 0; k < 6; ++k) {
    EXPECT_EQ(json::accept(events[k]), k != 3) << k << ": " << events[k];  // the middle token
  }
  EXPECT_EQ(events[6], "[DONE]");
}

class TruncationTest : public EmulatorTest,
                       public ::testing::WithParamInterface<std::pair<double, double>> {};

// (ttft, itl): with itl 1 ms the cut chunk comes alone; with itl 0 every event of the request
// comes in one batch (inline with the request when ttft is 0, from the timer otherwise) and the
// cut must still go out.
TEST_P(TruncationTest, TruncatedStreamStopsMidChunkAndClosesTheConnection) {
  EmulatorSettings s = FastSettings();
  s.ttft_ms = GetParam().first;
  s.itl_ms = GetParam().second;
  s.faults.truncate_rate = 1;
  s.request_log_path = LogPath();
  StartEmulator(s);
  {
    TestConnection connection(emulator_->port());
    connection.Send(PostRequest(
        "/v1/completions", json({{"prompt", "a"}, {"max_tokens", 6}, {"stream", true}}).dump()));
    EXPECT_EQ(ReadFailure(connection), "connection closed by server");  // mid-chunk
  }
  EXPECT_EQ(Post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}}).status, 200);
  StopEmulator();
  const std::vector<json> log = ReadLog(s.request_log_path);
  ASSERT_EQ(log.size(), 2u);
  EXPECT_EQ(log[0]["status"], "aborted");
  EXPECT_EQ(log[0]["fault"], "truncated");
  EXPECT_EQ(log[0]["completion_tokens"], 4);  // tokens 0..3 went out, the 4th cut in half
}

INSTANTIATE_TEST_SUITE_P(TtftItl, TruncationTest,
                         ::testing::Values(std::pair{1.0, 1.0}, std::pair{0.0, 0.0},
                                           std::pair{5.0, 0.0}));

TEST_F(EmulatorTest, CrashAfterNRequestsKillsTheProcess) {
  int port_pipe[2];
  ASSERT_EQ(::pipe(port_pipe), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(port_pipe[0]);
    EmulatorSettings s = InstantSettings();
    s.faults.crash_after_requests = 2;
    Emulator emulator(s);
    if (!emulator.Start().ok()) ::_exit(4);
    const uint16_t port = emulator.port();
    if (::write(port_pipe[1], &port, sizeof(port)) != sizeof(port)) ::_exit(3);
    emulator.Run();
    ::_exit(0);
  }
  ::close(port_pipe[1]);
  uint16_t port = 0;
  ASSERT_EQ(::read(port_pipe[0], &port, sizeof(port)), static_cast<ssize_t>(sizeof(port)));
  ::close(port_pipe[0]);
  TestConnection streaming(port);  // a stream in flight when the engine dies
  streaming.Send(PostRequest("/v1/completions",
                             json({{"prompt", "a"}, {"max_tokens", 2}, {"stream", true}}).dump()));
  EXPECT_EQ(streaming.ReadResponse().status, 200);
  TestConnection connection(port);
  connection.Send(PostRequest("/v1/completions", R"({"prompt":"a","max_tokens":2})"));
  EXPECT_EQ(connection.ReadResponse().status, 200);
  connection.Send(PostRequest("/v1/completions", R"({"prompt":"a","max_tokens":2})"));
  // No answer: the process died, and the kernel closed its sockets.
  const std::string failure = ReadFailure(connection);
  EXPECT_TRUE(failure == "connection closed by server" ||
              failure == "recv: Connection reset by peer")
      << failure;
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status));
  if (WIFSIGNALED(status)) {
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
  }
}

// ---- SGLang persona ----

TEST_F(EmulatorTest, SglangPersonaServesSglangNamesInValidPrometheusText) {
  EmulatorSettings s = FastSettings();
  s.persona = "sglang";
  StartEmulator(s);
  ASSERT_EQ(
      Post("/v1/completions", {{"prompt", "a b c"}, {"max_tokens", 4}, {"stream", true}}).status,
      200);
  ASSERT_EQ(Post("/v1/completions", {{"prompt", {1, 2}}, {"max_tokens", 6}}).status, 200);
  HttpResponse r = Exchange(GetRequest("/metrics"));
  ASSERT_EQ(r.status, 200);
  const std::string& text = r.body;

  // Every line is a comment or `name{labels} value`; every sample's family has a TYPE line.
  const std::regex sample_line(R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)\{([^}]*)\} (\S+)$)");
  const std::regex type_line(R"(^# TYPE ([a-zA-Z_:][a-zA-Z0-9_:]*) (gauge|counter|histogram)$)");
  std::set<std::string> families, names;
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    if (line.rfind("# HELP ", 0) == 0) continue;
    if (std::regex_match(line, m, type_line)) {
      families.insert(m[1]);
      continue;
    }
    ASSERT_TRUE(std::regex_match(line, m, sample_line)) << line;
    names.insert(m[1]);
    EXPECT_NO_THROW((void)std::stod(m[3].str())) << line;
    std::string family = m[1];
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      if (family.ends_with(suffix) && !families.contains(family)) {
        family.resize(family.size() - std::string(suffix).size());
      }
    }
    EXPECT_TRUE(families.contains(family)) << "no TYPE for " << line;
  }
  for (const char* name :
       {"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:token_usage",
        "sglang:num_used_tokens", "sglang:cache_hit_rate", "sglang:gen_throughput",
        "sglang:num_retracted_reqs", "sglang:prompt_tokens_total", "sglang:generation_tokens_total",
        "sglang:cached_tokens_total", "sglang:num_requests_total",
        "sglang:num_aborted_requests_total", "sglang:time_to_first_token_seconds_bucket",
        "sglang:time_to_first_token_seconds_count", "sglang:inter_token_latency_seconds_sum",
        "sglang:e2e_request_latency_seconds_count"}) {
    EXPECT_TRUE(names.contains(name)) << name;
  }
  EXPECT_EQ(text.find("vllm:"), std::string::npos);
  const std::string sched =
      "{model_name=\"m/x\",engine_type=\"unified\",tp_rank=\"0\",pp_rank=\"0\"}";
  const std::string tok = "{model_name=\"m/x\"}";
  EXPECT_EQ(Sample(text, "sglang:num_running_reqs" + sched), 0);
  EXPECT_EQ(Sample(text, "sglang:num_queue_reqs" + sched), 0);
  EXPECT_EQ(Sample(text, "sglang:prompt_tokens_total" + tok), 5);
  EXPECT_EQ(Sample(text, "sglang:generation_tokens_total" + tok), 10);
  EXPECT_EQ(Sample(text, "sglang:num_requests_total" + tok), 2);
  EXPECT_EQ(Sample(text, "sglang:time_to_first_token_seconds_count" + tok), 2);
  EXPECT_EQ(
      Sample(text, "sglang:time_to_first_token_seconds_bucket{model_name=\"m/x\",le=\"0.1\"}"), 2);
  // Tokens after each request's first chunk: 5 of the non-streamed one, up to 3 of the stream
  // (fewer when a late timer coalesced two tokens into its first write).
  const double itl_count = Sample(text, "sglang:inter_token_latency_seconds_count" + tok);
  EXPECT_GE(itl_count, 5);
  EXPECT_LE(itl_count, 8);
  EXPECT_NE(text.find("# TYPE sglang:time_to_first_token_seconds histogram\n"), std::string::npos);
}

TEST_F(EmulatorTest, UnknownPersonaIsRejectedAtStart) {
  EmulatorSettings s = FastSettings();
  s.persona = "tgi";
  Emulator emulator(s);
  const Status started = emulator.Start();
  EXPECT_EQ(started.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(started.message().find("unknown persona 'tgi'"), std::string::npos)
      << started.message();
}

}  // namespace
}  // namespace servesweep::sim
