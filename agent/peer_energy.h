// The energy counters of a multi-node run's other nodes (issue #26, record/run_energy.h): at
// each edge of the measured phase the head asks every other agent of the run, through the
// coordinator (wire.capnp's energyMark and energyRead), to read its GPUs' counters, and waits
// for the answers. A worker's read happened between the head's asking and the answer's arrival,
// so that span on the head's steady clock stands for the read's time: no clock across nodes is
// trusted, and a slow round trip shows as a window too uncertain for a short phase.
//
// Thread-safety: every method may be called from any thread; the head's run thread asks and
// waits, the worker's run thread waits for asks and answers, the agent's loop carries messages.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "record/run_energy.h"
#include "schema/wire.capnp.h"

namespace servesweep::agent {

// One node's answer for one edge (0 = before the measured phase, 1 = after).
struct PeerEnergyRead {
  uint8_t edge = 0;
  std::string node;  // the agent that read
  std::vector<std::string> gpus;
  std::vector<bool> prefill;
  record::EnergyCounterRead read;  // started_ns/finished_ns: the head's asking and the arrival
};

void ToWire(const PeerEnergyRead& read, schema::EnergyRead::Builder out);
PeerEnergyRead FromWire(schema::EnergyRead::Reader in);

class PeerEnergyMailbox {
 public:
  // Head: asks the other nodes for `edge`'s read (the agent's loop sends it).
  void Ask(uint8_t edge);
  // Head: waits until `nodes` answers for `edge` arrived or `timeout` passed; returns those that
  // did, each timed from the asking to its arrival.
  std::vector<PeerEnergyRead> AwaitAnswers(uint8_t edge, size_t nodes,
                                           std::chrono::milliseconds timeout);
  // Agent's loop, head: the asks to send; an answer that arrived.
  std::vector<uint8_t> TakeAsks();
  void DeliverAnswer(PeerEnergyRead read);

  // Agent's loop, worker: an ask that arrived; the answers to send.
  void DeliverAsk(uint8_t edge);
  std::vector<PeerEnergyRead> TakeAnswers();
  // Worker: the next ask, or nothing after `timeout`; then its answer.
  std::optional<uint8_t> WaitAsk(std::chrono::milliseconds timeout);
  void Answer(PeerEnergyRead read);

 private:
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<uint8_t> asks_out_, asks_in_;
  std::vector<PeerEnergyRead> answers_out_, answers_in_;
  int64_t asked_ns_[2] = {0, 0};  // the head's asking per edge, steady ns
};

}  // namespace servesweep::agent
