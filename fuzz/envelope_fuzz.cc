// Fuzz target: one wire frame from a peer, decoded as the coordinator and agent do (size check,
// traversal and nesting limits, protocol version, known union member), then read in full the
// way the coordinator reads a result (a deep copy), which touches every pointer in the message.
#include <capnp/message.h>
#include <kj/exception.h>

#include <cstddef>
#include <cstdint>

#include "transport/envelope_codec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  zmq::message_t frame(data, size);
  std::unique_ptr<servesweep::DecodedEnvelope> decoded;
  if (!servesweep::DecodeFrame(frame, &decoded, 1u << 20).ok()) return 0;
  kj::runCatchingExceptions([&]() {
    capnp::MallocMessageBuilder copy;
    copy.setRoot(decoded->envelope());
    (void)copy.getRoot<servesweep::schema::Envelope>().totalSize();
  });
  return 0;
}
