#include "coordinator/zap_handler.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include <cstring>
#include <zmq_addon.hpp>

namespace servesweep::coordinator {
namespace {

constexpr const char* kZapEndpoint = "inproc://zeromq.zap.01";

std::string Z85(const uint8_t* key) {
  char text[41] = {};
  zmq_z85_encode(text, key, 32);
  return text;
}

}  // namespace

ZapHandler::ZapHandler(zmq::context_t& context, const std::vector<std::string>& allowed_public_z85)
    : context_(context) {
  for (const auto& z85 : allowed_public_z85) {
    std::array<uint8_t, 32> key{};
    if (z85.size() == 40 && zmq_z85_decode(key.data(), z85.c_str()) != nullptr) {
      allowed_.insert(key);
    }
  }
}

ZapHandler::~ZapHandler() { Stop(); }

Status ZapHandler::Start() {
  try {
    socket_ = zmq::socket_t(context_, zmq::socket_type::rep);
    socket_.set(zmq::sockopt::linger, 0);
    socket_.bind(kZapEndpoint);
  } catch (const zmq::error_t& e) {
    return Status::Internal(
        fmt::format("cannot start the ZAP handler on {}: {}", kZapEndpoint, e.what()));
  }
  thread_ = std::thread([this] { Serve(); });
  return Status::Ok();
}

void ZapHandler::Stop() {
  stop_.store(true);
  if (thread_.joinable()) thread_.join();
  socket_.close();
}

void ZapHandler::Serve() {
  std::set<std::array<uint8_t, 32>> refused_logged;
  while (!stop_.load()) {
    zmq::pollitem_t item{socket_.handle(), 0, ZMQ_POLLIN, 0};
    try {
      if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) == 0) continue;
      std::vector<zmq::message_t> request;
      if (!zmq::recv_multipart(socket_, std::back_inserter(request))) continue;
      // version, request id, domain, address, identity, mechanism, credentials...
      std::string status_code = "400";
      std::string status_text = "malformed ZAP request";
      std::string user_id;
      if (request.size() >= 6) {
        const std::string mechanism = request[5].to_string();
        const std::string address = request[3].to_string();
        if (mechanism == "CURVE" && request.size() == 7 && request[6].size() == 32) {
          std::array<uint8_t, 32> key{};
          std::memcpy(key.data(), request[6].data(), 32);
          if (allowed_.count(key) > 0) {
            status_code = "200";
            status_text = "OK";
            user_id = Z85(key.data());
            ++admitted_;
            spdlog::debug("ZAP: admitted key {} from {}", user_id, address);
          } else {
            status_text = "public key not on the allow-list";
            ++refused_;
            // Refused peers reconnect every few hundred ms: say it once per key.
            if (refused_logged.insert(key).second) {
              spdlog::warn(
                  "refused an agent from {}: its public key {} is not on the allow-list "
                  "(--allowed-keys); nothing it sends is accepted",
                  address, Z85(key.data()));
            }
          }
        } else {
          status_text = fmt::format("mechanism {} not accepted: expected CURVE", mechanism);
          ++refused_;
          spdlog::warn("refused a connection from {}: {}", address, status_text);
        }
      }
      std::vector<zmq::message_t> reply;
      reply.emplace_back(std::string("1.0"));
      reply.emplace_back(request.size() >= 2 ? request[1].data() : nullptr,
                         request.size() >= 2 ? request[1].size() : 0);
      reply.emplace_back(status_code);
      reply.emplace_back(status_text);
      reply.emplace_back(user_id);
      reply.emplace_back();  // metadata
      zmq::send_multipart(socket_, reply);
    } catch (const zmq::error_t& e) {
      if (e.num() == ETERM) return;
      if (e.num() != EINTR) spdlog::warn("ZAP handler: {}", e.what());
    }
  }
}

}  // namespace servesweep::coordinator
