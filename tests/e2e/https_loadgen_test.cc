// The load generator over HTTPS: nginx terminates TLS with a certificate made by `openssl req`
// at test time and proxies to `servesweep sim`. The certificate is verified against --ca-file
// (RunLoad's ca_file); a wrong CA fails every request with a TLS reason; connections are reused
// over TLS (nginx logs each request's connection number).
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>
#include <set>
#include <sstream>

#include "common/net.h"
#include "common/subprocess.h"
#include "loadgen/bench_metrics.h"
#include "loadgen/load_generator.h"
#include "scraper/http_get.h"
#include "tests/support/harness.h"

namespace servesweep::testing {
namespace {

// Runs a program to completion; its output goes to `log_path`. Returns its exit status.
int RunToEnd(const std::vector<std::string>& argv, const std::string& log_path) {
  SpawnOptions options;
  options.argv = argv;
  options.log_path = log_path;
  ChildProcess child;
  if (!ChildProcess::Spawn(options, &child).ok()) return -1;
  const std::optional<int> status = child.Wait(std::chrono::seconds(120));
  return status ? *status : -1;
}

// A self-signed certificate for 127.0.0.1 (its own CA): NAME.pem and NAME.key in the dir.
void MakeCertificate(const Harness& h, const std::string& name) {
  const int status =
      RunToEnd({"openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj",
                "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1", "-keyout",
                h.Path(name + ".key"), "-out", h.Path(name + ".pem")},
               h.Path("openssl-" + name + ".log"));
  ASSERT_EQ(status, 0) << "openssl req failed (scripts/install-deps.sh installs openssl): "
                       << TailOfFile(h.Path("openssl-" + name + ".log"), 20);
}

class HttpsLoadgen : public ::testing::Test {
 protected:
  void SetUp() override {
    ::chmod(h_.dir().c_str(), 0755);  // nginx workers run as another user
    MakeCertificate(h_, "server");
    MakeCertificate(h_, "other");
    const uint16_t sim_port = FreeLoopbackPort();
    h_.Start("sim", {"sim", "--port", std::to_string(sim_port), "--model", "m", "--ttft-ms", "2",
                     "--itl-ms", "1"});
    tls_port_ = FreeLoopbackPort();
    const std::string d = h_.dir();
    h_.WriteFile("nginx.conf", fmt::format(R"(worker_processes 1;
daemon off;
pid {d}/nginx.pid;
error_log {d}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
  log_format conn '$connection $connection_requests $status';
  access_log {d}/nginx-access.log conn;
  client_body_temp_path {d}/nginx-body;
  proxy_temp_path {d}/nginx-proxy;
  fastcgi_temp_path {d}/nginx-fastcgi;
  uwsgi_temp_path {d}/nginx-uwsgi;
  scgi_temp_path {d}/nginx-scgi;
  client_body_buffer_size 1m;
  keepalive_requests 100000;
  upstream sim {{ server 127.0.0.1:{sim_port}; keepalive 16; }}
  server {{
    listen 127.0.0.1:{tls_port} ssl;
    ssl_certificate {d}/server.pem;
    ssl_certificate_key {d}/server.key;
    location / {{
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_buffering off;
    }}
  }}
}}
)",
                                           fmt::arg("d", d), fmt::arg("sim_port", sim_port),
                                           fmt::arg("tls_port", tls_port_)));
    SpawnOptions options;
    options.argv = {
        "nginx", "-p", d, "-c", h_.Path("nginx.conf"), "-e", h_.Path("nginx-error.log")};
    options.log_path = h_.Path("nginx.log");
    ASSERT_TRUE(ChildProcess::Spawn(options, &nginx_).ok()) << "nginx (scripts/install-deps.sh)";
    url_ = fmt::format("https://127.0.0.1:{}", tls_port_);
    // Ready when the emulator answers through the TLS proxy.
    ASSERT_TRUE(Harness::WaitFor(
        [&] {
          loadgen::LoadSettings s = Settings(1);
          s.insecure_tls = true;
          loadgen::LoadResult probe;
          return loadgen::RunLoad(s, &probe).ok() && probe.requests[0].success;
        },
        std::chrono::seconds(15)))
        << TailOfFile(h_.Path("nginx-error.log"), 20);
  }

  void TearDown() override { nginx_.Stop(std::chrono::seconds(2)); }

  loadgen::LoadSettings Settings(uint32_t requests) const {
    loadgen::LoadSettings s;
    s.base_url = url_;
    s.model = "m";
    s.num_requests = requests;
    s.concurrency = 4;
    s.input_len_tok = 16;
    s.output_len_tok = 8;
    s.request_timeout_s = 20;
    return s;
  }

  // Distinct connections nginx logged for requests answered 200.
  std::set<std::string> Connections() const {
    std::ifstream log(h_.Path("nginx-access.log"));
    std::set<std::string> connections;
    std::string connection, requests, status;
    while (log >> connection >> requests >> status) {
      if (status == "200") connections.insert(connection);
    }
    return connections;
  }

  Harness h_{"https-loadgen"};
  ChildProcess nginx_;
  uint16_t tls_port_ = 0;
  std::string url_;
};

TEST_F(HttpsLoadgen, VerifiesAgainstTheCaFileAndReusesConnections) {
  const size_t connections_before = Connections().size();
  loadgen::LoadSettings s = Settings(40);
  s.ca_file = h_.Path("server.pem");
  loadgen::LoadResult result;
  ASSERT_TRUE(loadgen::RunLoad(s, &result).ok());
  ASSERT_EQ(result.requests.size(), 40u);
  for (const auto& r : result.requests) {
    ASSERT_TRUE(r.success) << r.error;
    EXPECT_EQ(r.output_tokens, 8u);
    EXPECT_EQ(r.chunk_times_ns.size(), 8u);
    EXPECT_GT(r.first_token_ns, r.start_ns);
  }
  // 40 requests at concurrency 4 over kept-alive TLS connections: about 4 new connections,
  // far fewer than 40 handshakes.
  const size_t new_connections = Connections().size() - connections_before;
  EXPECT_GE(new_connections, 1u);
  EXPECT_LE(new_connections, 8u);
}

TEST_F(HttpsLoadgen, AWrongCaFailsEveryRequestWithATlsReason) {
  loadgen::LoadSettings s = Settings(4);
  s.ca_file = h_.Path("other.pem");
  loadgen::LoadResult wrong_ca;
  ASSERT_TRUE(loadgen::RunLoad(s, &wrong_ca).ok());
  for (const auto& r : wrong_ca.requests) {
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.error.rfind("tls: ", 0), 0u) << r.error;
    EXPECT_NE(r.error.find("certificate"), std::string::npos) << r.error;
  }
  // The system CA store does not know the test CA either: verification is on by default.
  s.ca_file.clear();
  loadgen::LoadResult system_store;
  ASSERT_TRUE(loadgen::RunLoad(s, &system_store).ok());
  for (const auto& r : system_store.requests) {
    EXPECT_FALSE(r.success);
    EXPECT_EQ(r.error.rfind("tls: ", 0), 0u) << r.error;
  }
}

TEST_F(HttpsLoadgen, BenchCommandTakesCaFile) {
  const std::string out = h_.Path("bench.out");
  EXPECT_EQ(RunToEnd({ServesweepBinary(), "bench", "--url", url_, "--model", "m", "--concurrency",
                      "2", "--num-requests", "10", "--input-len", "8", "--output-len", "4",
                      "--ca-file", h_.Path("server.pem")},
                     out),
            0)
      << TailOfFile(out, 30);
  std::ifstream in(out);
  std::stringstream text;
  text << in.rdbuf();
  const size_t at = text.str().find("Successful requests:");
  ASSERT_NE(at, std::string::npos) << text.str();
  std::istringstream line(text.str().substr(at + std::string("Successful requests:").size()));
  int successful = 0;
  line >> successful;
  EXPECT_EQ(successful, 10) << text.str();
  // Without the CA file every request fails and the command says so with its exit status.
  const std::string out_bad = h_.Path("bench-bad.out");
  EXPECT_NE(RunToEnd({ServesweepBinary(), "bench", "--url", url_, "--model", "m", "--concurrency",
                      "2", "--num-requests", "2", "--input-len", "8", "--output-len", "4"},
                     out_bad),
            0);
}

}  // namespace
}  // namespace servesweep::testing
