#include "agent/peer_energy.h"

#include <algorithm>
#include <utility>

#include "common/clock.h"

namespace servesweep::agent {

void ToWire(const PeerEnergyRead& read, schema::EnergyRead::Builder out) {
  out.setEdge(read.edge);
  out.setAgentId(read.node);
  auto gpus = out.initGpus(static_cast<unsigned>(read.gpus.size()));
  for (unsigned i = 0; i < gpus.size(); ++i) gpus.set(i, read.gpus[i]);
  auto prefill = out.initPrefill(static_cast<unsigned>(read.prefill.size()));
  for (unsigned i = 0; i < prefill.size(); ++i) prefill.set(i, read.prefill[i]);
  auto counters = out.initCounters(static_cast<unsigned>(read.read.gpus.size()));
  for (unsigned i = 0; i < counters.size(); ++i) {
    counters[i].setIndex(read.read.gpus[i].index);
    counters[i].setUuid(read.read.gpus[i].uuid);
    counters[i].setEnergyMj(read.read.gpus[i].energy_mj);
  }
  out.setWhyNone(read.read.why_none);
}

PeerEnergyRead FromWire(schema::EnergyRead::Reader in) {
  PeerEnergyRead read;
  read.edge = in.getEdge();
  read.node = in.getAgentId();
  for (auto gpu : in.getGpus()) read.gpus.emplace_back(gpu.cStr());
  for (bool prefill : in.getPrefill()) read.prefill.push_back(prefill);
  for (auto counter : in.getCounters()) {
    read.read.gpus.push_back({counter.getIndex(), counter.getUuid(), counter.getEnergyMj()});
  }
  read.read.why_none = in.getWhyNone();
  return read;
}

void PeerEnergyMailbox::Ask(uint8_t edge) {
  std::lock_guard<std::mutex> lock(mutex_);
  asked_ns_[edge & 1] = SteadyNowNs();
  asks_out_.push_back(edge);
}

std::vector<PeerEnergyRead> PeerEnergyMailbox::AwaitAnswers(uint8_t edge, size_t nodes,
                                                            std::chrono::milliseconds timeout) {
  auto of_edge = [&] {
    return static_cast<size_t>(std::count_if(answers_in_.begin(), answers_in_.end(),
                                             [&](const auto& a) { return a.edge == edge; }));
  };
  std::unique_lock<std::mutex> lock(mutex_);
  changed_.wait_for(lock, timeout, [&] { return of_edge() >= nodes; });
  std::vector<PeerEnergyRead> out;
  for (auto it = answers_in_.begin(); it != answers_in_.end();) {
    if (it->edge == edge) {
      out.push_back(std::move(*it));
      it = answers_in_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

std::vector<uint8_t> PeerEnergyMailbox::TakeAsks() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(asks_out_, {});
}

void PeerEnergyMailbox::DeliverAnswer(PeerEnergyRead read) {
  std::lock_guard<std::mutex> lock(mutex_);
  read.read.started_ns = asked_ns_[read.edge & 1];
  read.read.finished_ns = SteadyNowNs();
  // One answer per node and edge: a duplicate (a resent frame) replaces the first.
  std::erase_if(answers_in_,
                [&](const auto& a) { return a.edge == read.edge && a.node == read.node; });
  answers_in_.push_back(std::move(read));
  changed_.notify_all();
}

void PeerEnergyMailbox::DeliverAsk(uint8_t edge) {
  std::lock_guard<std::mutex> lock(mutex_);
  asks_in_.push_back(edge);
  changed_.notify_all();
}

std::vector<PeerEnergyRead> PeerEnergyMailbox::TakeAnswers() {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::exchange(answers_out_, {});
}

std::optional<uint8_t> PeerEnergyMailbox::WaitAsk(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!changed_.wait_for(lock, timeout, [&] { return !asks_in_.empty(); })) return std::nullopt;
  const uint8_t edge = asks_in_.front();
  asks_in_.erase(asks_in_.begin());
  return edge;
}

void PeerEnergyMailbox::Answer(PeerEnergyRead read) {
  std::lock_guard<std::mutex> lock(mutex_);
  answers_out_.push_back(std::move(read));
}

}  // namespace servesweep::agent
