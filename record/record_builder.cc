#include "record/record_builder.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "loadgen/request_source.h"
#include "record/gpu_summary.h"
#include "scraper/engine_signals.h"
#include "workload/length_distribution.h"
#include "workload/task_set.h"

namespace servesweep::record {
namespace {

std::string OrNa(capnp::Text::Reader text, const char* why) {
  return text.size() > 0 ? std::string(text) : fmt::format("n/a: {}", why);
}

}  // namespace

void FillStats(const loadgen::Stats& stats, schema::LatencyStats::Builder out) {
  out.setMean(stats.mean);
  out.setMedian(stats.median);
  out.setStd(stats.std);
  out.setP90(stats.p90);
  out.setP95(stats.p95);
  out.setP99(stats.p99);
  out.setMin(stats.min);
  out.setMax(stats.max);
  out.setCount(stats.count);
}

void FillConditions(schema::RunSpec::Reader spec, const NodeFacts& node,
                    const loadgen::LoadSettings& load, schema::BenchmarkRecord::Builder record) {
  const auto layout = spec.getLayout();
  const auto w = spec.getWorkload();
  record.setModel(spec.getModel());
  if (spec.getCheckpointRevision().size() == 0 && !node.model_fingerprint.empty()) {
    record.setCheckpointRevision(node.model_fingerprint);
  } else {
    record.setCheckpointRevision(OrNa(spec.getCheckpointRevision(), "not given in the matrix"));
  }
  record.setEngine(spec.getEngine());
  record.setEngineVersion(node.engine_version.empty() ? "n/a: not reported" : node.engine_version);
  record.setEngineCommit(node.engine_commit.empty() ? "n/a: not reported" : node.engine_commit);
  record.setImage(OrNa(spec.getImage(), "none, the engine ran from the host's install"));
  record.setGpuModel(node.gpu_model);
  record.setGpuCount(spec.getGpusNeeded());
  record.setInterconnect(node.interconnect);
  record.setPrecision(OrNa(spec.getPrecision(), "engine default"));
  record.setQuantization(OrNa(spec.getQuantization(), "none given"));
  record.setKvCacheDtype(OrNa(spec.getKvCacheDtype(), "engine default"));
  record.setTp(layout.getTp());
  record.setEp(layout.getExpertParallel());
  record.setPp(layout.getPp());
  record.setDp(layout.getDp());
  record.setPdSplit(
      layout.getPrefillInstances() > 0
          ? fmt::format("{}P{}D", layout.getPrefillInstances(), layout.getDecodeInstances())
          : "none");
  const bool traced = w.getTrace().size() > 0;
  auto describe = [&](schema::LengthDistribution::Reader d, uint32_t mean_tok) {
    if (traced) return fmt::format("{} mean:{}", w.getTrace().cStr(), mean_tok);
    if (d.getKind().size() == 0 || d.getKind() == "fixed") return fmt::format("fixed:{}", mean_tok);
    workload::LengthDistribution dist{d.getKind(), d.getA(), d.getB(),    d.getMin(),
                                      d.getMax(),  {},       d.getTrace()};
    return fmt::format("{} mean:{}", workload::Describe(dist), mean_tok);
  };
  record.setInputLenDist(describe(w.getInputLenDistribution(), w.getInputLenTok()));
  record.setOutputLenDist(describe(w.getOutputLenDistribution(), w.getOutputLenTok()));
  record.setConcurrency(w.getConcurrency());
  record.setMaxInFlight(w.getMaxInFlight());
  record.setRequestRatePerS(w.getRequestRatePerS());
  const bool replayed =
      traced && w.getPlan().size() > 0 && w.getReplayArrivals() && w.getRequestRatePerS() == 0;
  std::string arrival =
      replayed ? fmt::format("trace x{}", w.getTraceSpeedup())
      : w.getSessions() > 0
          ? fmt::format("sessions {}x{} turns, think {} s{}", w.getSessions(), w.getTurns(),
                        w.getThinkTimeS(), w.getThinkTimeExponential() ? " (exponential)" : "")
      : w.getRequestRatePerS() > 0 || load.ramp != loadgen::RampKind::kNone
          ? loadgen::DescribeArrivals(
                workload::ArrivalKindFor(load), load.burstiness,
                workload::RateProfileFor(load, load.duration_s > 0 ? 0 : load.num_requests))
          : "closed-loop";
  if (w.getDurationS() > 0) {
    arrival += fmt::format(", warm-up {} s, window {} s", w.getWarmupS(), w.getDurationS());
  }
  if (w.getDrainTimeoutS() > 0)
    arrival += fmt::format(", drain timeout {} s", w.getDrainTimeoutS());
  if (w.getCustomPrompts().size() > 0)
    arrival += fmt::format(", prompts {}", w.getPrompts().cStr());
  record.setArrival(arrival);
  record.setWarm(w.getWarmupRequests() > 0);
  record.setWarmupRequests(w.getWarmupRequests());
  const std::string why = node.why_no_gpu_facts.empty() ? "not reported" : node.why_no_gpu_facts;
  auto or_why = [&why](const std::string& value) {
    return value.empty() ? fmt::format("n/a: {}", why) : value;
  };
  record.setDriverVersion(or_why(node.driver_version));
  record.setCudaVersion(or_why(node.cuda_version));
  record.setNcclVersion(node.nccl_version.empty()
                            ? std::string("n/a: no libnccl.so.2 on the agent, none reported by the "
                                          "engine")
                            : node.nccl_version);
  record.setGpuTopology(or_why(node.gpu_topology));
  FillGpuTelemetry({}, "the run did not reach its measured phase", record);
  FillEnergy(NoEnergy("the run did not reach its measured phase"), record);
  // Quality: NaN until the tasks are scored (FillQuality); no task set says so.
  const auto quality = spec.getQuality();
  record.setQualityTaskSet(quality.getTaskSet().size() > 0
                               ? fmt::format("{} ({} tasks, max_tokens {})",
                                             quality.getTaskSet().cStr(), quality.getTasks().size(),
                                             quality.getMaxTokens())
                               : std::string("n/a: no quality task set"));
  record.setQualityAccuracy(std::numeric_limits<double>::quiet_NaN());
}

void FillGpuTelemetry(const std::vector<scraper::ScrapedSample>& samples,
                      const std::string& why_none, schema::BenchmarkRecord::Builder record) {
  const GpuTelemetrySummary summary = SummarizeGpuSamples(samples);
  record.setGpuUtilMeanPct(summary.util_mean_pct);
  record.setGpuMemoryUsedMaxMib(summary.memory_used_max_mib);
  record.setGpuPowerMeanW(summary.power_mean_w);
  record.setGpuSmClockMeanMhz(summary.sm_clock_mean_mhz);
  if (summary.gpus == 0) {
    record.setGpuTelemetry(fmt::format("n/a: {}", why_none.empty() ? "no samples" : why_none));
  } else {
    record.setGpuTelemetry(fmt::format("nvidia-smi: {} GPU(s), {} sample(s) each", summary.gpus,
                                       summary.rows / summary.gpus));
  }
}

RunEnergy NoEnergy(const std::string& why) {
  RunEnergy energy;
  energy.energy_j = energy.prefill_j = energy.decode_j = std::numeric_limits<double>::quiet_NaN();
  energy.source = "n/a: " + why;
  energy.invalid_reason = why;
  return energy;
}

void FillEnergy(const RunEnergy& energy, schema::BenchmarkRecord::Builder record) {
  auto per = [](double joules, double count) {
    return count > 0 ? joules / count : std::numeric_limits<double>::quiet_NaN();
  };
  const double input_tok = record.getTotalInputTokens();
  const double output_tok = record.getTotalOutputTokens();
  record.setEnergySource(energy.source);
  record.setEnergyValid(energy.valid);
  record.setEnergyInvalidReason(energy.invalid_reason);
  record.setEnergyJ(energy.energy_j);
  record.setEnergyWindowS(energy.window_s);
  record.setEnergyPerRequestJ(per(energy.energy_j, record.getCompleted()));
  record.setEnergyPerOutputTokJ(per(energy.energy_j, output_tok));
  record.setEnergyPerTotalTokJ(per(energy.energy_j, input_tok + output_tok));
  record.setEnergyPrefillJ(energy.prefill_j);
  record.setEnergyDecodeJ(energy.decode_j);
  record.setEnergyPrefillPerInputTokJ(per(energy.prefill_j, input_tok));
  record.setEnergyDecodePerOutputTokJ(per(energy.decode_j, output_tok));
}

QualityScore ScoreQuality(schema::RunSpec::Reader spec,
                          const std::vector<loadgen::Answer>& answers) {
  QualityScore score;
  const auto quality = spec.getQuality();
  const auto tasks = quality.getTasks();
  score.tasks = tasks.size();
  for (uint32_t i = 0; i < tasks.size() && i < answers.size(); ++i) {
    if (!answers[i].ok) {
      ++score.failed;
      if (score.first_error.empty()) score.first_error = answers[i].error;
      continue;
    }
    if (workload::AnswerMatches(tasks[i].getAnswer().cStr(), answers[i].text,
                                quality.getNumericAnswers())) {
      ++score.correct;
    }
  }
  return score;
}

void FillQuality(const QualityScore& score, schema::BenchmarkRecord::Builder record) {
  record.setQualityTasks(score.tasks);
  record.setQualityCorrect(score.correct);
  record.setQualityAccuracy(score.tasks > 0 ? static_cast<double>(score.correct) / score.tasks
                                            : std::numeric_limits<double>::quiet_NaN());
}

void FillFigures(schema::RunSpec::Reader spec, const loadgen::BenchSummary& summary,
                 const std::vector<scraper::ScrapedSample>& samples, double cold_start_ms,
                 schema::BenchmarkRecord::Builder record) {
  record.setDurationS(summary.duration_s);
  record.setCompleted(summary.completed);
  record.setFailed(summary.failed);
  const uint32_t total = summary.completed + summary.failed;
  record.setSuccessRate(total > 0 ? static_cast<double>(summary.completed) / total
                                  : std::numeric_limits<double>::quiet_NaN());
  record.setTotalInputTokens(summary.total_input_tokens);
  record.setTotalOutputTokens(summary.total_output_tokens);
  record.setRequestThroughput(summary.request_throughput);
  record.setOutputThroughput(summary.output_throughput);
  record.setTotalTokenThroughput(summary.total_token_throughput);
  FillStats(summary.ttft_ms, record.initTtftMs());
  FillStats(summary.tpot_ms, record.initTpotMs());
  FillStats(summary.itl_ms, record.initItlMs());
  FillStats(summary.e2el_ms, record.initE2elMs());
  FillStats(summary.decode_tok_per_s, record.initDecodeTokPerSPerRequest());
  FillStats(summary.prefill_tok_per_s, record.initPrefillTokPerSPerRequest());
  FillStats(summary.ttft_prefix_seen_ms, record.initTtftPrefixSeenMs());
  FillStats(summary.ttft_hit_ms, record.initTtftHitMs());
  FillStats(summary.ttft_miss_ms, record.initTtftMissMs());
  FillStats(summary.prefill_tok_per_s_hit, record.initPrefillTokPerSHit());
  FillStats(summary.prefill_tok_per_s_miss, record.initPrefillTokPerSMiss());
  auto adapters = record.initAdapterFigures(static_cast<unsigned>(summary.adapters.size()));
  for (size_t i = 0; i < summary.adapters.size(); ++i) {
    const loadgen::AdapterSummary& a = summary.adapters[i];
    adapters[i].setAdapter(a.adapter);
    adapters[i].setRequests(a.requests);
    adapters[i].setCompleted(a.completed);
    adapters[i].setOutputThroughput(a.output_throughput);
    FillStats(a.ttft_ms, adapters[i].initTtftMs());
    FillStats(a.tpot_ms, adapters[i].initTpotMs());
  }
  FillStats(summary.ttft_prefix_new_ms, record.initTtftPrefixNewMs());
  record.setOutputThroughputPerGpu(spec.getGpusNeeded() > 0
                                       ? summary.output_throughput / spec.getGpusNeeded()
                                       : std::numeric_limits<double>::quiet_NaN());
  record.setGoodput(summary.goodput);
  record.setColdStartMs(cold_start_ms);
  record.setCancelled(summary.cancelled);
  record.setOutputTokensSource(summary.output_tokens_source);
  FillStats(summary.client_queue_ms, record.initClientQueueMs());
  FillStats(summary.client_send_ms, record.initClientSendMs());
  FillStats(summary.ttfb_ms, record.initTtfbMs());
  record.setWindowS(summary.window_s);
  record.setWindowOutputThroughput(summary.window_output_throughput);
  record.setWindowTotalTokenThroughput(summary.window_total_token_throughput);
  record.setReconnects(summary.reconnects);
  record.setFailureReasons(loadgen::DescribeFailureReasons(summary.failure_reasons));
  record.setLoadThreadBusyMax(summary.load_thread_busy_max);
  record.setReadLagP99Ms(summary.read_lag_p99_ms);
  record.setSendLatenessP99Ms(summary.send_lateness_p99_ms);
  switch (summary.stopped) {
    case loadgen::StopReason::kNone:
      record.setStopped(schema::StopReason::NONE);
      break;
    case loadgen::StopReason::kStable:
      record.setStopped(schema::StopReason::STABLE);
      break;
    case loadgen::StopReason::kOversaturated:
      record.setStopped(schema::StopReason::OVERSATURATED);
      break;
    case loadgen::StopReason::kMaxDuration:
      record.setStopped(schema::StopReason::MAX_DURATION);
      break;
  }
  record.setStopEvidence(summary.stop_evidence);
  record.setStoppedAtS(summary.stopped_at_s);
  const std::string client_bound = loadgen::ClientBoundReasons(loadgen::ClientLoadFiguresOf(
      summary, std::max<uint32_t>(1, spec.getWorkload().getClientThreads())));
  record.setClientBound(!client_bound.empty());
  record.setClientBoundReasons(client_bound);

  std::map<std::string, std::vector<double>> series;
  for (const auto& sample : samples) series[sample.signal].push_back(sample.value);
  auto reduced = [&](const char* signal) {
    auto it = series.find(signal);
    return scraper::ReduceSignal(signal, it == series.end() ? std::vector<double>{} : it->second);
  };
  record.setKvCacheUsageMax(reduced("kv_cache_usage"));
  record.setRunningMax(reduced("running"));
  record.setWaitingMax(reduced("waiting"));
  record.setPreemptions(reduced("preemptions"));
  record.setPrefixCacheHits(reduced("prefix_cache_hits"));
  record.setPrefixCacheQueries(reduced("prefix_cache_queries"));
  // The measured rate is the validity gate's (FillValidity): it judges it against this.
  const double target = spec.getWorkload().getPrefixHitRate();
  record.setPrefixHitRateTarget(target >= 0 ? target : std::numeric_limits<double>::quiet_NaN());
  record.setPrefixHitRate(std::numeric_limits<double>::quiet_NaN());
  record.setSpecDecodeAcceptance(reduced("spec_decode_acceptance"));
}

void FillValidity(const Validity& validity, schema::BenchmarkRecord::Builder record) {
  record.setPrefixHitRate(validity.prefix_hit_rate);
  record.setValidity(validity.verdict);
  record.setValidityReasons(validity.Reasons());
  record.setEngineRestarts(validity.engine_restarts);
  std::string reconciliation;
  for (const auto& c : validity.counters) {
    reconciliation += reconciliation.empty() ? "" : "; ";
    reconciliation += c.checked() ? fmt::format("{}: client {}, engine {} (tolerance {})", c.name,
                                                c.client, c.engine, c.tolerance)
                                  : c.why_unchecked;
  }
  record.setReconciliation(reconciliation);
}

void CopyRequestRecord(const loadgen::RequestRecord& in, schema::RequestRecord::Builder out,
                       const std::vector<std::string>& adapter_names) {
  if (in.adapter >= 0 && static_cast<size_t>(in.adapter) < adapter_names.size()) {
    out.setAdapter(adapter_names[static_cast<size_t>(in.adapter)]);
  }
  out.setCachedPromptTokens(in.cached_prompt_tokens);
  out.setIndex(in.index);
  out.setWarmup(in.warmup);
  out.setSuccess(in.success);
  out.setError(in.error);
  out.setPromptTokens(in.prompt_tokens);
  out.setOutputTokens(in.output_tokens);
  out.setScheduledNs(in.scheduled_ns);
  out.setStartNs(in.start_ns);
  out.setFirstTokenNs(in.first_token_ns);
  out.setEndNs(in.end_ns);
  auto times = out.initChunkTimesNs(static_cast<unsigned>(in.chunk_times_ns.size()));
  for (size_t i = 0; i < in.chunk_times_ns.size(); ++i) times.set(i, in.chunk_times_ns[i]);
  auto tokens = out.initChunkTokens(static_cast<unsigned>(in.chunk_tokens.size()));
  for (size_t i = 0; i < in.chunk_tokens.size(); ++i) tokens.set(i, in.chunk_tokens[i]);
  out.setFirstByteNs(in.first_byte_ns);
  out.setCancelled(in.cancelled);
  out.setSessionId(in.session_id);
  out.setTurn(in.turn);
  out.setDoneNs(in.done_ns);
  out.setOutputTokensFromUsage(in.output_tokens_from_usage);
  out.setHttpStatus(in.http_status);
  out.setSentNs(in.sent_ns);
  out.setReconnected(in.reconnected);
}

}  // namespace servesweep::record
