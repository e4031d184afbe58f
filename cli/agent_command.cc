// `servesweep agent --connect tcp://HOST:PORT`: one per node; runs what the coordinator assigns.
#include <spdlog/spdlog.h>

#include <memory>

#include "agent/agent.h"
#include "agent/inventory.h"
#include "cli/commands.h"
#include "cli/stop_signals.h"
#include "transport/curve_keys.h"

namespace servesweep::cli {

void AddAgentCommand(CLI::App& app, int* exit_code) {
  auto settings = std::make_shared<agent::AgentSettings>();
  auto* cmd = app.add_subcommand("agent", "Run benchmark work for a coordinator on this node");
  cmd->add_option("--connect", settings->connect, "Coordinator endpoint, tcp://HOST:PORT")
      ->required();
  cmd->add_option("--id", settings->agent_id, "Agent id (default: the hostname)");
  cmd->add_option("--address", settings->address, "Address other nodes reach this one at");
  cmd->add_option("--spool", settings->spool_dir,
                  "Spool folder (default: ./servesweep-agent-ID/spool)");
  cmd->add_option("--work-dir", settings->work_dir,
                  "Engine logs (default: ./servesweep-agent-ID/work)");
  cmd->add_option("--emulate-gpus", settings->emulated_gpus,
                  "Announce N emulated GPUs (for the sim engine) instead of real ones");
  cmd->add_option("--pool", settings->pool,
                  "Node pool for disaggregated layouts: prefill or decode (default: any role)")
      ->check(CLI::IsMember({"prefill", "decode"}));
  auto figures = std::make_shared<std::string>();
  cmd->add_option("--emulated-gpu-name", settings->probes.emulated_gpu_name,
                  "Model name the emulated GPUs report to the probes (e.g. \"NVIDIA H200\")");
  cmd->add_option(
      "--emulated-probe-figures", *figures,
      "Probe figures the emulated GPUs report: probe[@gpu]=value,... (rehearses a sick node)");
  cmd->add_option("--heartbeat-ms", settings->heartbeat_ms, "Heartbeat interval")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--liveness", settings->liveness, "Missed heartbeats before reconnecting")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--reconnect-max-ms", settings->reconnect_max_ms, "Longest reconnect backoff")
      ->capture_default_str();
  auto server_key = std::make_shared<std::string>();
  auto secret_key = std::make_shared<std::string>();
  cmd->add_option("--server-key", *server_key,
                  "The coordinator's CurveZMQ public key file (its NAME.pub)");
  cmd->add_option("--secret-key", *secret_key,
                  "This agent's CurveZMQ secret key file (servesweep keygen)");
  auto skip_engine_check = std::make_shared<bool>(false);
  cmd->add_flag("--skip-engine-check", *skip_engine_check,
                "Start engines without handing their command lines to the engine's own argument "
                "handling first (docs/engines.md#engine-check)");
  cmd->add_flag("--insecure", settings->insecure,
                "Plain TCP: coordinator unauthenticated, traffic unencrypted (not recommended)");
  cmd->callback([settings, figures, server_key, secret_key, skip_engine_check, exit_code] {
    settings->engine_check = !*skip_engine_check;
    if (!server_key->empty() || !secret_key->empty()) {
      CurveKeypair keypair;
      Status s = server_key->empty() || secret_key->empty()
                     ? Status::InvalidArgument("expected both --server-key and --secret-key")
                     : ReadCurvePublicKey(*server_key, &settings->curve_server_z85);
      if (s.ok()) s = ReadCurveSecretKey(*secret_key, &keypair);
      if (s.ok() && settings->insecure) {
        s = Status::InvalidArgument("--insecure with CurveZMQ keys: expected one or the other");
      }
      if (!s.ok()) {
        spdlog::error("{}", s.message());
        *exit_code = kExitError;
        return;
      }
      settings->curve_public_z85 = keypair.public_z85;
      settings->curve_secret_z85 = keypair.secret_z85;
    }
    if (Status s = agent::ParseEmulatedFigures(*figures, &settings->probes.emulated_figures);
        !s.ok()) {
      spdlog::error("{}", s.message());
      *exit_code = kExitError;
      return;
    }
    if (settings->agent_id.empty()) settings->agent_id = agent::LocalHostname();
    const std::string home = "servesweep-agent-" + settings->agent_id;
    if (settings->spool_dir.empty()) settings->spool_dir = home + "/spool";
    if (settings->work_dir.empty()) settings->work_dir = home + "/work";
    if (settings->address.empty()) {
      const bool loopback = settings->connect.find("127.0.0.1") != std::string::npos ||
                            settings->connect.find("localhost") != std::string::npos;
      settings->address = loopback ? "127.0.0.1" : agent::LocalHostname();
    }
    zmq::context_t context(1);
    agent::Agent agent(*settings, context);
    StopSignals signals([&agent] { agent.RequestStop(); });
    if (Status s = agent.Run(); !s.ok()) {
      spdlog::error("agent: {}", s.message());
      *exit_code = kExitError;
      return;
    }
    *exit_code = signals.received() ? kExitInterrupted : kExitOk;
  });
}

}  // namespace servesweep::cli
