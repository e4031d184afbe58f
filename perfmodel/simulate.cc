#include "perfmodel/simulate.h"

#include <fmt/format.h>

#include <algorithm>
#include <unordered_map>

namespace servesweep::perfmodel {
namespace {

// The records' places by request id, looked up once per token event. Ids are the plan's indices
// in practice (dense from 0; duration mode's copies count on), so a flat table answers without
// hashing; ids far beyond the requests' count go to a hash map instead.
class RecordIndex {
 public:
  RecordIndex(uint64_t max_id, size_t requests)
      : flat_(max_id < 16 * requests + 4096 ? max_id + 1 : 0, kNone) {}
  // False when the id is already there.
  bool Add(uint64_t id, size_t at) {
    if (flat_.empty()) return sparse_.emplace(id, at).second;
    if (id >= flat_.size()) flat_.resize(id + 1, kNone);
    if (flat_[id] != kNone) return false;
    flat_[id] = at;
    return true;
  }
  size_t At(uint64_t id) const { return flat_.empty() ? sparse_.at(id) : flat_[id]; }

 private:
  static constexpr size_t kNone = ~size_t{0};
  std::vector<size_t> flat_;
  std::unordered_map<uint64_t, size_t> sparse_;
};

}  // namespace

Status SimulateWorkload(const HardwareProfile& hw, const ModelProfile& model,
                        const DeploymentConfig& deployment, const Workload& workload,
                        SimulationResult* out) {
  std::unique_ptr<EngineModel> engine;
  if (Status s = EngineModel::Create(hw, model, deployment, &engine); !s.ok()) return s;
  if (workload.concurrency < 0) {
    return Status::InvalidArgument(
        fmt::format("workload: expected concurrency >= 0, found {}", workload.concurrency));
  }
  SimulationResult result;
  std::vector<RequestSpec> specs = workload.requests;  // grows with repeats (duration mode)
  result.requests.resize(specs.size());
  uint64_t max_id = 0;
  for (const RequestSpec& r : specs) max_id = std::max(max_id, r.id);
  RecordIndex index(max_id, specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const RequestSpec& r = specs[i];
    if (!index.Add(r.id, i)) {
      return Status::InvalidArgument(fmt::format("workload: request id {} appears twice", r.id));
    }
    RequestRecord& rec = result.requests[i];
    rec.id = r.id;
    rec.input_tok = r.input_tok;
    rec.output_tok = r.output_tok;
    rec.adapter = r.adapter;
    rec.chunks.reserve(r.output_tok);  // a chunk carries at least one token
  }

  const bool closed = workload.concurrency > 0;
  const bool capped = !closed && workload.max_in_flight > 0;
  const bool repeat = closed && workload.repeat_until_ns > 0 && !specs.empty();
  // A capped open loop sends requests in arrival order, as the load generator does.
  std::vector<size_t> order(specs.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (capped) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return specs[a].arrival_ns < specs[b].arrival_ns; });
  }
  size_t next = 0;
  int in_flight = 0;
  auto submit = [&](int64_t at_ns) -> Status {
    const size_t i = order[next];
    RequestSpec r = specs[i];
    result.requests[i].scheduled_ns = closed ? at_ns : r.arrival_ns;
    if (closed || capped) r.arrival_ns = at_ns;
    result.requests[i].arrival_ns = std::max<int64_t>(r.arrival_ns, engine->Snapshot().time_ns);
    ++next;
    ++in_flight;
    return engine->Submit(std::move(r));
  };
  // Duration mode: one more copy of the last request, sent at `at_ns`.
  auto extend = [&](int64_t at_ns) {
    if (!repeat || at_ns >= workload.repeat_until_ns || next < specs.size()) return;
    RequestSpec copy = specs.back();
    copy.id = ++max_id;
    if (workload.adapter_of) copy.adapter = workload.adapter_of(specs.size());
    index.Add(copy.id, specs.size());
    RequestRecord rec;
    rec.id = copy.id;
    rec.input_tok = copy.input_tok;
    rec.output_tok = copy.output_tok;
    rec.adapter = copy.adapter;
    rec.chunks.reserve(copy.output_tok);
    result.requests.push_back(std::move(rec));
    order.push_back(specs.size());
    specs.push_back(std::move(copy));
  };
  const size_t initial = closed   ? std::min<size_t>(workload.concurrency, specs.size())
                         : capped ? 0
                                  : specs.size();
  for (size_t i = 0; i < initial; ++i) {
    if (Status s = submit(0); !s.ok()) return s;
  }
  for (int i = static_cast<int>(initial); repeat && i < workload.concurrency; ++i) {
    extend(0);
    if (Status s = submit(0); !s.ok()) return s;
  }
  // The first sample comes before anything runs, as a scraper's first scrape before the load.
  int64_t next_sample_ns = 0;
  if (workload.sample_interval_ns > 0) {
    result.samples.push_back(engine->Snapshot());
    result.samples.back().time_ns = 0;
    next_sample_ns = workload.sample_interval_ns;
  }
  auto sample_until = [&](int64_t t_ns) {
    if (workload.sample_interval_ns <= 0) return;
    while (next_sample_ns <= t_ns) {
      result.samples.push_back(engine->Snapshot());
      result.samples.back().time_ns = next_sample_ns;
      next_sample_ns += workload.sample_interval_ns;
    }
  };

  std::vector<int64_t> ended;  // end times of the last advance
  const EventSink sink = [&](const Event& e) {
    RequestRecord& rec = result.requests[index.At(e.id)];
    switch (e.kind) {
      case EventKind::kFirstToken:
        rec.first_token_ns = e.time_ns;
        rec.chunks.push_back({e.time_ns, e.tokens});
        break;
      case EventKind::kTokens:
        rec.chunks.push_back({e.time_ns, e.tokens});
        break;
      case EventKind::kPreempted:
        ++rec.preemptions;
        break;
      case EventKind::kRejected:
        rec.rejected = true;
        ended.push_back(e.time_ns);
        break;
      case EventKind::kFinished:
        rec.finish_ns = e.time_ns;
        ended.push_back(e.time_ns);
        break;
    }
  };
  while (true) {
    int64_t t = engine->NextEventNs();
    if (capped && next < order.size() && in_flight < workload.max_in_flight) {
      // The next request is due before the engine's next event: send it first.
      const int64_t due_ns = std::max(specs[order[next]].arrival_ns, engine->Snapshot().time_ns);
      if (due_ns <= t) {
        sample_until(due_ns - 1);
        ended.clear();
        engine->AdvanceTo(due_ns, sink);
        in_flight -= static_cast<int>(ended.size());
        if (Status s = submit(due_ns); !s.ok()) return s;
        continue;
      }
    }
    if (t == EngineModel::kNever) break;
    sample_until(t - 1);
    ended.clear();
    engine->AdvanceTo(t, sink);
    in_flight -= static_cast<int>(ended.size());
    // Closed loop: each end lets the next request in (a capped open loop sends at the top).
    if (closed) {
      for (int64_t end_ns : ended) {
        extend(end_ns);
        if (next >= specs.size()) break;
        if (Status s = submit(end_ns); !s.ok()) return s;
      }
    }
  }
  result.final_snapshot = engine->Snapshot();
  if (workload.sample_interval_ns > 0) result.samples.push_back(result.final_snapshot);
  result.summary = Summarize(result.requests);
  *out = std::move(result);
  return Status::Ok();
}

WorkloadSummary Summarize(const std::vector<RequestRecord>& records) {
  WorkloadSummary s;
  int64_t first_arrival = -1, last_finish = 0, output_tok = 0, tpot_n = 0, gaps = 0,
          later_chunks = 0, later_tok = 0;
  double ttft = 0, tpot = 0, e2e = 0, itl = 0;
  for (const RequestRecord& r : records) {
    if (r.finish_ns < 0) continue;
    ++s.finished;
    if (first_arrival < 0 || r.arrival_ns < first_arrival) first_arrival = r.arrival_ns;
    last_finish = std::max(last_finish, r.finish_ns);
    ttft += static_cast<double>(r.first_token_ns - r.arrival_ns);
    e2e += static_cast<double>(r.finish_ns - r.arrival_ns);
    output_tok += r.output_tok;
    if (r.output_tok > 1) {
      tpot += static_cast<double>(r.finish_ns - r.first_token_ns) / (r.output_tok - 1);
      ++tpot_n;
    }
    for (size_t i = 1; i < r.chunks.size(); ++i) {
      itl += static_cast<double>(r.chunks[i].time_ns - r.chunks[i - 1].time_ns);
      ++gaps;
      ++later_chunks;
      later_tok += r.chunks[i].tokens;
    }
  }
  if (s.finished == 0) return s;
  s.ttft_mean_ns = ttft / s.finished;
  s.e2e_mean_ns = e2e / s.finished;
  s.tpot_mean_ns = tpot_n > 0 ? tpot / tpot_n : 0;
  s.itl_chunk_mean_ns = gaps > 0 ? itl / gaps : 0;
  s.chunk_tok_mean = later_chunks > 0 ? static_cast<double>(later_tok) / later_chunks : 0;
  s.makespan_ns = last_finish - first_arrival;
  s.output_tok_per_s =
      s.makespan_ns > 0 ? static_cast<double>(output_tok) / (s.makespan_ns / 1e9) : 0;
  return s;
}

}  // namespace servesweep::perfmodel
