// Envelope framing: one Cap'n Proto Envelope per ZeroMQ frame. Decoding copies the frame into
// an aligned word array (ZeroMQ frames are not 8-byte aligned) and reads it with traversal and
// nesting limits, so a malformed or hostile frame is rejected with a Status, never a crash.
//
// Thread-safety: free functions and a move-only reader holder; no shared state.
#pragma once

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/array.h>

#include <memory>
#include <zmq.hpp>

#include "common/status.h"
#include "schema/wire.capnp.h"

namespace servesweep {

// Frames larger than this are refused before parsing (results with per-request records fit).
inline constexpr size_t kMaxFrameBytes = 256u << 20;

// Serialises a built message into one frame.
zmq::message_t EncodeFrame(capnp::MessageBuilder& message);

// Owns the decoded bytes; envelope() is valid while this object lives.
class DecodedEnvelope {
 public:
  schema::Envelope::Reader envelope() { return reader_->getRoot<schema::Envelope>(); }

 private:
  friend Status DecodeFrame(const zmq::message_t& frame, std::unique_ptr<DecodedEnvelope>* out,
                            size_t max_frame_bytes);
  kj::Array<capnp::word> words_;
  std::unique_ptr<capnp::FlatArrayMessageReader> reader_;
};

// Checks size, alignment padding, segment table, protocol version and that the union is known.
Status DecodeFrame(const zmq::message_t& frame, std::unique_ptr<DecodedEnvelope>* out,
                   size_t max_frame_bytes = kMaxFrameBytes);

// Sets protocolVersion and sentAtUnixMs on a fresh Envelope root.
schema::Envelope::Builder NewEnvelope(capnp::MessageBuilder& message);

}  // namespace servesweep
