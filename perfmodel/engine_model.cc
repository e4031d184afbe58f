#include "perfmodel/engine_model.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <list>
#include <queue>
#include <unordered_map>

namespace servesweep::perfmodel {
namespace {

struct Seq {
  RequestSpec spec;
  int64_t computed = 0;          // tokens whose KV is in the cache
  int64_t generated = 0;         // tokens sampled so far (all delivered or about to be)
  int64_t private_tok = 0;       // KV tokens held outside shared cache blocks
  std::vector<uint64_t> blocks;  // shared cache blocks held (the prompt's leading blocks)
  bool prompt_counted = false;
  bool remote_kv = false;  // decode instance: the prompt's KV came from a prefill instance
  bool cancelled = false;
  int64_t spec_steps = 0;
  int replica = -1;
  int64_t known() const { return spec.input_tok + generated; }
};

// The LRU prefix cache's blocks: referenced ones are pinned, unreferenced ones are kept (and
// counted as used memory) until space is needed, least recently released first.
class BlockCache {
 public:
  bool Contains(uint64_t hash) const { return blocks_.count(hash) != 0; }
  int64_t size() const { return static_cast<int64_t>(blocks_.size()); }
  int64_t evictable() const { return static_cast<int64_t>(lru_.size()); }

  void Ref(uint64_t hash) {
    auto [it, inserted] = blocks_.try_emplace(hash);
    if (!inserted && it->second.refs == 0) lru_.erase(it->second.lru_pos);
    ++it->second.refs;
  }
  void Unref(uint64_t hash) {
    auto it = blocks_.find(hash);
    if (--it->second.refs == 0) it->second.lru_pos = lru_.insert(lru_.end(), hash);
  }
  // Drops every block no request holds (what an engine's prefix-cache reset does).
  void EvictAll() {
    while (EvictOne()) {
    }
  }
  bool EvictOne() {
    if (lru_.empty()) return false;
    blocks_.erase(lru_.front());
    lru_.pop_front();
    return true;
  }

 private:
  struct Block {
    int refs = 0;
    std::list<uint64_t>::iterator lru_pos;
  };
  std::unordered_map<uint64_t, Block> blocks_;
  std::list<uint64_t> lru_;
};

enum class Role { kBoth, kPrefill, kDecode };

struct Counters {
  int64_t preemptions = 0, prefix_queries_tok = 0, prefix_hits_tok = 0, prompt_tok = 0,
          generation_tok = 0, spec_draft_tok = 0, spec_accepted_tok = 0, steps = 0, finished = 0,
          rejected = 0, cancelled = 0, lora_loads = 0;
};

struct Scheduled {
  Seq* seq;
  int32_t new_tok;
  bool spec_decode;
  bool multi_step = false;  // new_tok decode tokens of a multi-step run, all delivered
};

// One engine instance: its queues, KV cache and the step in flight.
class Replica {
 public:
  Replica(Role role, const CostModel* cost, const DeploymentConfig* d, Counters* counters)
      : role_(role), cost_(cost), d_(d), counters_(counters) {}

  Role role() const { return role_; }
  int64_t load() const { return static_cast<int64_t>(running_.size() + waiting_.size()); }
  int32_t running() const { return static_cast<int32_t>(running_.size()); }
  int32_t waiting() const { return static_cast<int32_t>(waiting_.size()); }
  int64_t used_tok() const {
    return private_tok_ + (cache_.size() - cache_.evictable()) * d_->block_size_tok;
  }
  int64_t next_ns() const { return busy_ ? step_end_ns_ : wake_ns_; }
  // Idle with work queued: its next instant starts a step rather than ending one.
  bool waking() const { return !busy_ && wake_ns_ != EngineModel::kNever; }
  void DropCachedPrefixes() { cache_.EvictAll(); }

  void Enqueue(Seq* seq, int64_t now) {
    waiting_.push_back(seq);
    if (!busy_) wake_ns_ = std::min(wake_ns_, now);
  }

  // Ends the step in flight (if any), then starts the next one. `done` receives the requests
  // that leave this instance: finished, or (prefill role) prefilled.
  void Run(int64_t now, const EventSink& sink, std::vector<Seq*>* done) {
    if (busy_) FinishStep(now, sink, done);
    busy_ = false;
    wake_ns_ = EngineModel::kNever;
    StartStep(now, sink);
  }

  // Takes a cancelled request out now, unless the step in flight computes it (then it leaves
  // when the step ends, without events). True if it is out.
  bool Remove(Seq* seq) {
    if (auto it = std::find(waiting_.begin(), waiting_.end(), seq); it != waiting_.end()) {
      waiting_.erase(it);
      Release(seq);
      return true;
    }
    if (busy_ && std::any_of(batch_.begin(), batch_.end(),
                             [&](const Scheduled& s) { return s.seq == seq; })) {
      return false;
    }
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    Release(seq);
    return true;
  }

  void Release(Seq* seq) {
    private_tok_ -= seq->private_tok;
    seq->private_tok = 0;
    for (uint64_t hash : seq->blocks) cache_.Unref(hash);
    seq->blocks.clear();
  }

 private:
  int64_t free_tok() const {
    return cost_->kv_capacity_tok() - private_tok_ - cache_.size() * d_->block_size_tok;
  }

  // Makes room for `need` more tokens by evicting unreferenced cache blocks.
  bool Reserve(int64_t need) {
    while (free_tok() < need) {
      if (!cache_.EvictOne()) return false;
    }
    return true;
  }

  void Preempt(Seq* seq, int64_t now, const EventSink& sink) {
    Release(seq);
    seq->computed = 0;
    seq->remote_kv = false;
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    waiting_.push_front(seq);
    ++counters_->preemptions;
    sink(Event{EventKind::kPreempted, seq->spec.id, now, 0});
  }

  // Leading prompt blocks found in the cache, capped so at least one token is computed.
  void LookupPrefix(Seq* seq) {
    const int64_t bs = d_->block_size_tok;
    const int64_t max_blocks = std::min<int64_t>(
        static_cast<int64_t>(seq->spec.block_hashes.size()), (seq->known() - 1) / bs);
    int64_t hits = 0;
    while (hits < max_blocks && cache_.Contains(seq->spec.block_hashes[hits])) ++hits;
    for (int64_t i = 0; i < hits; ++i) {
      cache_.Ref(seq->spec.block_hashes[i]);
      seq->blocks.push_back(seq->spec.block_hashes[i]);
    }
    seq->computed = hits * bs;
  }

  // The prompt's full blocks, once computed, become shared cache blocks.
  void InsertPrefix(Seq* seq) {
    if (!d_->prefix_caching) return;
    const int64_t bs = d_->block_size_tok;
    const int64_t full =
        std::min<int64_t>(static_cast<int64_t>(seq->spec.block_hashes.size()),
                          std::min<int64_t>(seq->spec.input_tok, seq->computed) / bs);
    for (int64_t i = static_cast<int64_t>(seq->blocks.size()); i < full; ++i) {
      cache_.Ref(seq->spec.block_hashes[i]);
      seq->blocks.push_back(seq->spec.block_hashes[i]);
      seq->private_tok -= bs;
      private_tok_ -= bs;
    }
  }

  int64_t HeldTok(const Seq* seq) const {
    return seq->private_tok + static_cast<int64_t>(seq->blocks.size()) * d_->block_size_tok;
  }

  bool Allocate(Seq* seq, int64_t tokens_after) {
    const int64_t need = tokens_after - HeldTok(seq);
    if (need <= 0) return true;
    if (!Reserve(need)) return false;
    seq->private_tok += need;
    private_tok_ += need;
    return true;
  }

  int32_t AcceptedThisStep(Seq* seq) {
    ++seq->spec_steps;
    const double a = d_->spec_mean_accepted_tok;
    const auto accepted = static_cast<int64_t>(std::floor(seq->spec_steps * a + 1e-9)) -
                          static_cast<int64_t>(std::floor((seq->spec_steps - 1) * a + 1e-9));
    return static_cast<int32_t>(std::min<int64_t>(accepted, d_->spec_num_tok));
  }

  // The prefill tokens a request may take now: its pending prompt within the step's budget and
  // prefill budget; without chunked prefill the whole prompt or nothing (alone in a step, it may
  // exceed the budget, as an engine's max_num_batched_tokens >= max_model_len).
  int64_t PrefillTokens(int64_t pending, int64_t budget, int64_t prefill_budget) const {
    const int64_t room = std::min(budget, prefill_budget);
    if (d_->chunked_prefill) return std::min(pending, room);
    if (pending <= room || batch_.empty()) return pending;
    return 0;
  }

  void StartStep(int64_t now, const EventSink& sink) {
    batch_.clear();
    multi_steps_ = 1;
    int64_t budget = d_->max_num_batched_tokens;
    int64_t prefill_budget = d_->prefill_chunk_tok > 0 ? d_->prefill_chunk_tok : budget;
    bool preempted = false;
    // Without mixed batches (vLLM V0), a step that can admit a waiting prompt prefills only.
    const bool prefill_only = !d_->mixed_batches && !waiting_.empty() &&
                              static_cast<int>(running_.size()) < d_->max_num_seqs &&
                              CanAdmit(waiting_.front());
    // Running requests first, oldest first; a request that cannot grow preempts the newest.
    for (size_t i = 0; i < running_.size() && budget > 0 && !prefill_only;) {
      Seq* seq = running_[i];
      const int64_t pending = seq->known() - seq->computed;
      const bool decode = pending == 1 && seq->generated > 0;
      const bool spec = decode && d_->spec_num_tok > 0;
      const int64_t n = spec && budget >= 1 + d_->spec_num_tok ? 1 + d_->spec_num_tok
                        : decode                               ? 1
                                 : PrefillTokens(pending, budget, prefill_budget);
      if (n == 0) {
        ++i;
        continue;
      }
      bool preempted_self = false;
      while (!Allocate(seq, seq->computed + n)) {
        Seq* victim = running_.back();
        Preempt(victim, now, sink);
        preempted = true;
        if (victim == seq) {
          preempted_self = true;
          break;
        }
      }
      if (preempted_self) continue;  // running_[i] is now the next request (or the end)
      batch_.push_back({seq, static_cast<int32_t>(n), spec && n == 1 + d_->spec_num_tok});
      budget -= n;
      if (!decode) prefill_budget -= n;
      ++i;
    }
    // The LoRA adapters the step's running requests use: a waiting request of another adapter is
    // skipped (not blocking the queue) once they fill the slots (vLLM's scheduled_loras).
    std::vector<int32_t> adapters;
    for (const Scheduled& s : batch_) AddAdapter(s.seq->spec.adapter, &adapters);
    // Then waiting requests, in order, while there is room; the head blocks the rest. After a
    // preemption there is none this step (as vLLM: the victim would be readmitted at once).
    size_t next = 0;
    while (!preempted && next < waiting_.size() && budget > 0 && prefill_budget > 0 &&
           (d_->mixed_batches || prefill_only) &&
           static_cast<int>(running_.size()) < d_->max_num_seqs) {
      Seq* seq = waiting_[next];
      if (!AdapterFits(seq->spec.adapter, adapters)) {
        ++next;
        continue;
      }
      const bool lookup = seq->computed == 0 && d_->prefix_caching;
      if (lookup) LookupPrefix(seq);
      const int64_t n = PrefillTokens(seq->known() - seq->computed, budget, prefill_budget);
      if (n == 0 || !Allocate(seq, seq->computed + n)) {
        Release(seq);  // gives back the prefix hits; they are looked up again next step
        if (!seq->remote_kv) seq->computed = 0;
        break;
      }
      if (lookup) {  // counted once per admission, not per blocked attempt
        counters_->prefix_queries_tok += seq->known();
        counters_->prefix_hits_tok += seq->computed;
      }
      waiting_.erase(waiting_.begin() + static_cast<std::ptrdiff_t>(next));
      running_.push_back(seq);
      batch_.push_back({seq, static_cast<int32_t>(n), false});
      AddAdapter(seq->spec.adapter, &adapters);
      budget -= n;
      prefill_budget -= n;
    }
    if (batch_.empty()) return;
    const int64_t loads = LoadAdapters(adapters);
    entries_.clear();
    bool decode_only = d_->decode_steps > 1 && d_->spec_num_tok == 0;
    for (const Scheduled& s : batch_) {
      const bool completes = s.seq->computed + s.new_tok >= s.seq->known();
      const int32_t sampled = s.spec_decode ? s.new_tok : (completes ? 1 : 0);
      entries_.push_back({s.seq->computed, s.new_tok, sampled, s.seq->spec.adapter});
      decode_only = decode_only && s.new_tok == 1 && s.seq->generated > 0;
    }
    int64_t step_ns = cost_->Step(entries_).total_ns;
    if (decode_only) step_ns = MultiStep(step_ns);
    step_ns += loads * cost_->LoraLoadNs();  // copied in before the step's kernels run
    busy_ = true;
    step_end_ns_ = now + step_ns;
    counters_->steps += multi_steps_;
  }

  // vLLM's multi-step scheduling: a decode-only batch runs decode_steps steps back to back (the
  // batch keeps its shape; requests that end early idle), its tokens delivered at the end. The
  // GPU runs the middle step's cost once per step; the CPU schedules and prepares once.
  int64_t MultiStep(int64_t first_step_ns) {
    const int32_t k = d_->decode_steps;
    for (size_t i = 0; i < batch_.size(); ++i) {
      Seq* seq = batch_[i].seq;
      const auto n =
          static_cast<int32_t>(std::min<int64_t>(k, seq->spec.output_tok - seq->generated));
      if (!Allocate(seq, seq->computed + n)) {
        return first_step_ns;  // no room for k tokens each: one step, as the engine falls back
      }
    }
    for (size_t i = 0; i < batch_.size(); ++i) {
      Seq* seq = batch_[i].seq;
      batch_[i].new_tok =
          static_cast<int32_t>(std::min<int64_t>(k, seq->spec.output_tok - seq->generated));
      batch_[i].multi_step = true;
      entries_[i].context_tok += (k - 1) / 2;
    }
    multi_steps_ = k;
    const StepCost c = cost_->Step(entries_);
    return cost_->TotalNs(c.gpu_ns * k, c.cpu_ns);
  }

  static void AddAdapter(int32_t adapter, std::vector<int32_t>* adapters) {
    if (adapter >= 0 && std::find(adapters->begin(), adapters->end(), adapter) == adapters->end()) {
      adapters->push_back(adapter);
    }
  }
  // Whether a request of `adapter` may join a step whose requests use `adapters`.
  bool AdapterFits(int32_t adapter, const std::vector<int32_t>& adapters) const {
    if (adapter < 0 || d_->lora_rank == 0) return true;
    return static_cast<int>(adapters.size()) < d_->max_loras ||
           std::find(adapters.begin(), adapters.end(), adapter) != adapters.end();
  }
  // The step's adapters into the GPU slots, least recently used out; how many were copied in.
  int64_t LoadAdapters(const std::vector<int32_t>& adapters) {
    if (d_->lora_rank == 0) return 0;
    int64_t loads = 0;
    for (int32_t adapter : adapters) {
      auto it = std::find(loaded_adapters_.begin(), loaded_adapters_.end(), adapter);
      if (it != loaded_adapters_.end()) {
        loaded_adapters_.erase(it);
      } else {
        ++loads;
        if (static_cast<int>(loaded_adapters_.size()) >= d_->max_loras) {
          loaded_adapters_.erase(loaded_adapters_.begin());
        }
      }
      loaded_adapters_.push_back(adapter);  // most recently used last
    }
    counters_->lora_loads += loads;
    return loads;
  }

  // Whether the head of the queue's first chunk fits the KV cache now (for a prefill-only step).
  bool CanAdmit(const Seq* seq) const {
    const int64_t need =
        std::min<int64_t>(seq->known() - seq->computed,
                          d_->chunked_prefill ? d_->max_num_batched_tokens : seq->known());
    return free_tok() + cache_.evictable() * d_->block_size_tok >= need;
  }

  void FinishStep(int64_t now, const EventSink& sink, std::vector<Seq*>* done) {
    for (const Scheduled& s : batch_) {
      Seq* seq = s.seq;
      if (seq->cancelled) {
        Leave(seq, done);
        continue;
      }
      const int64_t remaining = seq->spec.output_tok - seq->generated;
      int64_t emitted = 0;
      if (s.multi_step) {
        emitted = std::min<int64_t>(s.new_tok, remaining);
        seq->computed += emitted;
      } else if (s.spec_decode) {
        const int32_t accepted = AcceptedThisStep(seq);
        counters_->spec_draft_tok += d_->spec_num_tok;
        counters_->spec_accepted_tok += accepted;
        emitted = std::min<int64_t>(1 + accepted, remaining);
        seq->computed += emitted;
      } else {
        seq->computed += s.new_tok;
        if (seq->computed >= seq->known()) emitted = 1;
      }
      // Drop KV held for rejected draft positions.
      const int64_t excess = HeldTok(seq) - seq->computed;
      if (excess > 0) {
        seq->private_tok -= excess;
        private_tok_ -= excess;
      }
      if (seq->computed >= seq->spec.input_tok) {
        InsertPrefix(seq);
        if (!seq->prompt_counted) {
          seq->prompt_counted = true;
          counters_->prompt_tok += seq->spec.input_tok;
        }
      }
      if (emitted == 0) continue;
      const bool first = seq->generated == 0;
      seq->generated += emitted;
      if (role_ == Role::kPrefill) {  // the first token leaves with the KV cache
        Leave(seq, done);
        continue;
      }
      counters_->generation_tok += emitted;
      sink(Event{first ? EventKind::kFirstToken : EventKind::kTokens, seq->spec.id, now,
                 static_cast<int32_t>(emitted)});
      if (seq->generated >= seq->spec.output_tok) {
        ++counters_->finished;
        sink(Event{EventKind::kFinished, seq->spec.id, now, 0});
        Leave(seq, done);
      }
    }
    batch_.clear();
  }

  void Leave(Seq* seq, std::vector<Seq*>* done) {
    Release(seq);
    running_.erase(std::find(running_.begin(), running_.end(), seq));
    done->push_back(seq);
  }

  Role role_;
  const CostModel* cost_;
  const DeploymentConfig* d_;
  Counters* counters_;
  std::deque<Seq*> waiting_;
  std::vector<Seq*> running_;  // in admission order: the newest is preempted first
  BlockCache cache_;
  int64_t private_tok_ = 0;
  bool busy_ = false;
  int64_t step_end_ns_ = 0;
  int64_t wake_ns_ = EngineModel::kNever;
  std::vector<Scheduled> batch_;
  std::vector<BatchEntry> entries_;
  int64_t multi_steps_ = 1;               // engine steps the batch in flight stands for
  std::vector<int32_t> loaded_adapters_;  // the GPU slots' LoRA adapters, least recently used first
};

}  // namespace

class EngineModel::Impl {
 public:
  Impl(CostModel cost, const DeploymentConfig& d)
      : cost_(std::move(cost)),
        d_(d),
        front_end_ns_(std::llround(d.engine.coefficients.request_us * 1e3)),
        api_request_ns_(std::llround(d.engine.coefficients.api_request_us * 1e3)),
        api_token_ns_(std::llround(d.engine.coefficients.api_token_us * 1e3)),
        api_(std::max(d.api_servers, 1)) {
    if (d_.prefill_instances > 0 && d_.decode_instances > 0) {
      for (int i = 0; i < d_.prefill_instances; ++i) AddReplica(Role::kPrefill);
      for (int i = 0; i < d_.decode_instances; ++i) AddReplica(Role::kDecode);
    } else {
      for (int i = 0; i < d_.dp; ++i) AddReplica(Role::kBoth);
    }
  }

  Status Submit(RequestSpec request) {
    if (request.input_tok < 1 || request.output_tok < 1) {
      return Status::InvalidArgument(
          fmt::format("request {}: expected input_tok >= 1 and output_tok >= 1, found {} and {}",
                      request.id, request.input_tok, request.output_tok));
    }
    auto [it, inserted] = seqs_.try_emplace(request.id);
    if (!inserted) {
      return Status::InvalidArgument(
          fmt::format("request {}: expected a new id, found one in flight", request.id));
    }
    // The front end (HTTP, tokenisation) delays its arrival at the scheduler; its API process
    // takes requests one at a time, in the order they are submitted (arrival order).
    int64_t in_ns = std::max(request.arrival_ns, now_ns_);
    if (api_request_ns_ > 0) {
      ApiProcess& api = api_[request.id % api_.size()];
      in_ns = api.in_free_ns = std::max(in_ns, api.in_free_ns) + api_request_ns_;
    }
    request.arrival_ns = in_ns + front_end_ns_;
    it->second.spec = std::move(request);
    arrivals_.push({it->second.spec.arrival_ns, submit_order_++, &it->second});
    return Status::Ok();
  }

  bool Cancel(uint64_t id) {
    // What its API process has not streamed yet is not sent (the engine may be done with it).
    bool streaming = false;
    if (!outputs_.empty()) {
      const size_t queued = outputs_.size();
      std::vector<TimedEvent> kept;
      for (; !outputs_.empty(); outputs_.pop()) {
        if (outputs_.top().event.id != id) kept.push_back(outputs_.top());
      }
      streaming = kept.size() < queued;
      for (const TimedEvent& e : kept) outputs_.push(e);
    }
    auto it = seqs_.find(id);
    if (it == seqs_.end() || it->second.cancelled) return streaming;
    Seq* seq = &it->second;
    seq->cancelled = true;
    ++counters_.cancelled;
    if (seq->replica < 0) {  // not yet arrived, or its KV in transfer
      Drop(&arrivals_, seq);
      Drop(&transfers_, seq);
      seqs_.erase(it);
    } else if (replicas_[seq->replica]->Remove(seq)) {
      seqs_.erase(it);
    }  // else it leaves when the step computing it ends
    return true;
  }

  int64_t NextEventNs() const {
    int64_t next = kNever;
    if (!arrivals_.empty()) next = arrivals_.top().time_ns;
    if (!transfers_.empty()) next = std::min(next, transfers_.top().time_ns);
    if (!outputs_.empty()) next = std::min(next, outputs_.top().event.time_ns);
    for (const auto& r : replicas_) next = std::min(next, r->next_ns());
    return next;
  }

  void AdvanceTo(int64_t now, const EventSink& client) {
    // Tokens pass the API process of their request (one at a time, api_token_ns each) and reach
    // the client when it has streamed them; the rest reach it at once (in time order with them).
    const EventSink through_api = [&](const Event& e) {
      ApiProcess& api = api_[e.id % api_.size()];
      Event out = e;
      out.time_ns = std::max(e.time_ns, api.out_free_ns) + e.tokens * api_token_ns_;
      api.out_free_ns = out.time_ns;
      outputs_.push({out, submit_order_++});
    };
    const EventSink& sink = api_token_ns_ > 0 ? through_api : client;
    while (true) {
      // At equal times: an idle instance woken by an arrival starts its step first, then
      // arrivals, then transfers, then step ends. An engine's loop that sleeps until work comes
      // starts a step with the request that woke it: requests a client sends "at once" still
      // arrive one after another, and the later ones wait for the next step (llama.cpp's server
      // at two streams alternates its prompts so: docs/perfmodel.md, "Fidelity"). A request that
      // arrives as a step ends joins the next step.
      const int64_t arrival = arrivals_.empty() ? kNever : arrivals_.top().time_ns;
      const int64_t transfer = transfers_.empty() ? kNever : transfers_.top().time_ns;
      Replica* replica = nullptr;
      int64_t step = kNever;
      for (const auto& r : replicas_) {
        const bool first_waking =
            replica != nullptr && r->next_ns() == step && r->waking() && !replica->waking();
        if (r->next_ns() < step || first_waking) step = r->next_ns(), replica = r.get();
      }
      const int64_t output = outputs_.empty() ? kNever : outputs_.top().event.time_ns;
      const int64_t t = std::min({arrival, transfer, step, output});
      if (t > now || t == kNever) break;
      now_ns_ = std::max(now_ns_, t);
      if (output == t) {  // what was streamed by now reaches the client first
        const Event e = outputs_.top().event;
        outputs_.pop();
        client(e);
      } else if (step == t && replica->waking()) {
        done_.clear();
        replica->Run(t, sink, &done_);
      } else if (arrival == t) {
        Seq* seq = arrivals_.top().seq;
        arrivals_.pop();
        Arrive(seq, t, sink);
      } else if (transfer == t) {
        Seq* seq = transfers_.top().seq;
        transfers_.pop();
        Transferred(seq, t, sink);
      } else {
        done_.clear();
        replica->Run(t, sink, &done_);
        for (Seq* seq : done_) Left(seq, t);
      }
    }
    now_ns_ = std::max(now_ns_, now);
  }

  bool ResetPrefixCache() {
    for (const auto& r : replicas_) {
      if (r->load() > 0) return false;
    }
    if (!transfers_.empty() || !arrivals_.empty()) return false;
    for (const auto& r : replicas_) r->DropCachedPrefixes();
    return true;
  }

  EngineSnapshot Snapshot() const {
    EngineSnapshot s;
    s.time_ns = now_ns_;
    int64_t used = 0;
    for (const auto& r : replicas_) {
      s.running += r->running();
      s.waiting += r->waiting();
      used += r->used_tok();
    }
    s.transferring = static_cast<int32_t>(transfers_.size());
    s.kv_capacity_tok = cost_.kv_capacity_tok();
    s.kv_usage = static_cast<double>(used) /
                 (static_cast<double>(cost_.kv_capacity_tok()) * replicas_.size());
    s.preemptions = counters_.preemptions;
    s.lora_loads = counters_.lora_loads;
    s.prefix_queries_tok = counters_.prefix_queries_tok;
    s.prefix_hits_tok = counters_.prefix_hits_tok;
    s.prompt_tok = counters_.prompt_tok;
    s.generation_tok = counters_.generation_tok;
    s.spec_draft_tok = counters_.spec_draft_tok;
    s.spec_accepted_tok = counters_.spec_accepted_tok;
    s.steps = counters_.steps;
    s.finished = counters_.finished;
    s.rejected = counters_.rejected;
    s.cancelled = counters_.cancelled;
    return s;
  }

  const CostModel& cost() const { return cost_; }

 private:
  struct Timed {
    int64_t time_ns;
    uint64_t order;
    Seq* seq;
    bool operator>(const Timed& o) const {
      return time_ns != o.time_ns ? time_ns > o.time_ns : order > o.order;
    }
  };
  using TimedQueue = std::priority_queue<Timed, std::vector<Timed>, std::greater<Timed>>;
  struct TimedEvent {
    Event event;
    uint64_t order;
    bool operator>(const TimedEvent& o) const {
      return event.time_ns != o.event.time_ns ? event.time_ns > o.event.time_ns : order > o.order;
    }
  };
  // An API-server process: when its request path and its output path are free again.
  struct ApiProcess {
    int64_t in_free_ns = 0;
    int64_t out_free_ns = 0;
  };

  static void Drop(TimedQueue* queue, const Seq* seq) {
    std::vector<Timed> kept;
    while (!queue->empty()) {
      if (queue->top().seq != seq) kept.push_back(queue->top());
      queue->pop();
    }
    for (const Timed& t : kept) queue->push(t);
  }

  void AddReplica(Role role) {
    replicas_.push_back(std::make_unique<Replica>(role, &cost_, &d_, &counters_));
  }

  // The least-loaded instance of a role (fewest running + waiting; lowest index on a tie).
  Replica* Pick(Role role, int* index) {
    Replica* best = nullptr;
    for (size_t i = 0; i < replicas_.size(); ++i) {
      Replica* r = replicas_[i].get();
      if (r->role() != role) continue;
      if (best == nullptr || r->load() < best->load()) best = r, *index = static_cast<int>(i);
    }
    return best;
  }

  void Arrive(Seq* seq, int64_t t, const EventSink& sink) {
    const int64_t need = static_cast<int64_t>(seq->spec.input_tok) + seq->spec.output_tok;
    if (need > cost_.kv_capacity_tok()) {
      ++counters_.rejected;
      sink(Event{EventKind::kRejected, seq->spec.id, t, 0});
      seqs_.erase(seq->spec.id);
      return;
    }
    const Role role = replicas_.front()->role() == Role::kBoth ? Role::kBoth : Role::kPrefill;
    Replica* r = Pick(role, &seq->replica);
    r->Enqueue(seq, t);
  }

  // A request left an instance: finished, or prefilled (then its KV cache moves to decode).
  void Left(Seq* seq, int64_t t) {
    if (seq->cancelled) {
      seqs_.erase(seq->spec.id);
      return;
    }
    if (seq->generated >= seq->spec.output_tok &&
        replicas_[seq->replica]->role() != Role::kPrefill) {
      seqs_.erase(seq->spec.id);
      return;
    }
    seq->replica = -1;
    transfers_.push({t + cost_.KvTransferNs(seq->spec.input_tok), submit_order_++, seq});
  }

  void Transferred(Seq* seq, int64_t t, const EventSink& sink) {
    ++counters_.generation_tok;
    sink(Event{EventKind::kFirstToken, seq->spec.id, t, 1});
    if (seq->generated >= seq->spec.output_tok) {
      ++counters_.finished;
      sink(Event{EventKind::kFinished, seq->spec.id, t, 0});
      seqs_.erase(seq->spec.id);
      return;
    }
    seq->computed = seq->spec.input_tok;  // the prompt's KV arrived
    seq->remote_kv = true;
    Replica* r = Pick(Role::kDecode, &seq->replica);
    r->Enqueue(seq, t);
  }

  CostModel cost_;
  DeploymentConfig d_;
  int64_t front_end_ns_;
  int64_t api_request_ns_;
  int64_t api_token_ns_;
  std::vector<ApiProcess> api_;
  std::priority_queue<TimedEvent, std::vector<TimedEvent>, std::greater<TimedEvent>> outputs_;
  Counters counters_;
  std::vector<std::unique_ptr<Replica>> replicas_;
  std::unordered_map<uint64_t, Seq> seqs_;
  TimedQueue arrivals_;
  TimedQueue transfers_;
  uint64_t submit_order_ = 0;
  int64_t now_ns_ = 0;
  std::vector<Seq*> done_;
};

EngineModel::EngineModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
EngineModel::~EngineModel() = default;

Status EngineModel::Create(const HardwareProfile& hw, const ModelProfile& model,
                           const DeploymentConfig& deployment, std::unique_ptr<EngineModel>* out) {
  CostModel cost;
  if (Status s = CostModel::Create(hw, model, deployment, &cost); !s.ok()) return s;
  out->reset(new EngineModel(std::make_unique<Impl>(std::move(cost), deployment)));
  return Status::Ok();
}

Status EngineModel::Submit(RequestSpec request) { return impl_->Submit(std::move(request)); }
bool EngineModel::Cancel(uint64_t id) { return impl_->Cancel(id); }
int64_t EngineModel::NextEventNs() const { return impl_->NextEventNs(); }
void EngineModel::AdvanceTo(int64_t now_ns, const EventSink& sink) {
  impl_->AdvanceTo(now_ns, sink);
}
EngineSnapshot EngineModel::Snapshot() const { return impl_->Snapshot(); }
bool EngineModel::ResetPrefixCache() { return impl_->ResetPrefixCache(); }
int64_t EngineModel::ColdStartNs() const { return impl_->cost().ColdStartNs(); }
const CostModel& EngineModel::cost() const { return impl_->cost(); }

}  // namespace servesweep::perfmodel
