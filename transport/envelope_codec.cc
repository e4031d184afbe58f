#include "transport/envelope_codec.h"

#include <fmt/format.h>
#include <kj/exception.h>

#include <cstring>

#include "common/clock.h"

namespace servesweep {

zmq::message_t EncodeFrame(capnp::MessageBuilder& message) {
  kj::Array<capnp::word> words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return zmq::message_t(bytes.begin(), bytes.size());
}

schema::Envelope::Builder NewEnvelope(capnp::MessageBuilder& message) {
  auto envelope = message.initRoot<schema::Envelope>();
  envelope.setProtocolVersion(schema::PROTOCOL_VERSION);
  envelope.setSentAtUnixMs(UnixNowMs());
  return envelope;
}

Status DecodeFrame(const zmq::message_t& frame, std::unique_ptr<DecodedEnvelope>* out,
                   size_t max_frame_bytes) {
  const size_t size = frame.size();
  if (size == 0 || size % sizeof(capnp::word) != 0) {
    return Status::InvalidArgument(fmt::format(
        "frame of {} bytes: expected a non-empty multiple of 8 bytes (a Cap'n Proto message)",
        size));
  }
  if (size > max_frame_bytes) {
    return Status::InvalidArgument(
        fmt::format("frame of {} bytes: expected at most {} bytes", size, max_frame_bytes));
  }
  auto decoded = std::make_unique<DecodedEnvelope>();
  decoded->words_ = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  std::memcpy(decoded->words_.begin(), frame.data(), size);

  capnp::ReaderOptions options;
  options.traversalLimitInWords = size / sizeof(capnp::word) * 4 + 1024;
  options.nestingLimit = 32;
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&]() {
    decoded->reader_ = std::make_unique<capnp::FlatArrayMessageReader>(decoded->words_, options);
    auto envelope = decoded->reader_->getRoot<schema::Envelope>();
    if (envelope.getProtocolVersion() != schema::PROTOCOL_VERSION) {
      KJ_FAIL_REQUIRE("protocol version mismatch", envelope.getProtocolVersion(),
                      schema::PROTOCOL_VERSION);
    }
    // Unknown union members (a newer peer) read as an out-of-range discriminant: ENERGY_READ is
    // the last member (wire.capnp).
    auto which = static_cast<unsigned>(envelope.which());
    KJ_REQUIRE(which <= static_cast<unsigned>(schema::Envelope::ENERGY_READ),
               "unknown message kind", which);
  });
  KJ_IF_MAYBE (exception, failure) {
    return Status::InvalidArgument(
        fmt::format("malformed frame of {} bytes: {}", size, exception->getDescription().cStr()));
  }
  *out = std::move(decoded);
  return Status::Ok();
}

}  // namespace servesweep
