// The results database (SQLite, one file per sweep output folder): the sweep's identity, the
// state of every run (pending / running / done / failed, attempts), every attempt, the committed
// results with their benchmark-record columns, per-request records and engine samples.
// A result is committed in one transaction with its run's state, so a crash between the two is
// impossible; committing the same run twice is refused by the primary key (idempotent).
//
// Thread-safety: not thread-safe; owned by the coordinator's loop (reports open their own).
#pragma once

#include <sqlite3.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "schema/result.capnp.h"
#include "schema/run_spec.capnp.h"
#include "schema/wire.capnp.h"

namespace servesweep::results {

struct RecordColumn;

// kSkipped: never run, by the coordinator's decision (a lower level of its load ladder was
// over-saturated); final, like kDone and kFailed.
enum class RunState { kPending, kRunning, kDone, kFailed, kSkipped };
const char* RunStateName(RunState state);

struct StoredRun {
  std::string run_id;
  uint32_t index = 0;
  std::string label;
  std::string spec_bytes;  // a serialised schema::RunSpec message
  RunState state = RunState::kPending;
  uint32_t attempts = 0;
  std::string last_error;
};

// A table read back for reports: column names and text cells ("" for NULL).
struct Table {
  std::vector<std::string> columns;
  std::vector<std::vector<std::string>> rows;
  std::vector<std::vector<bool>> is_null;
};

class ResultsStore {
 public:
  ~ResultsStore();
  ResultsStore(const ResultsStore&) = delete;
  ResultsStore& operator=(const ResultsStore&) = delete;

  // Opens (creating if needed) the database and its tables.
  static Status Open(const std::string& path, std::unique_ptr<ResultsStore>* out);

  // The stored matrix hash, or "" when the database holds no sweep yet.
  Status SweepHash(std::string* hash);
  // Records the sweep and all its runs as pending, in one transaction.
  Status InitSweep(schema::Matrix::Reader matrix, const std::string& matrix_text);
  Status LoadRuns(std::vector<StoredRun>* out);
  // After a restart: runs left `running` go back to `pending`, their attempts marked "lost".
  Status RequeueInterrupted(int* requeued);

  Status MarkRunning(const std::string& run_id, uint32_t attempt, const std::string& agents);
  // Ends one attempt that produced no committed result: the run goes back to pending or, when
  // `final`, to failed.
  Status EndAttempt(const std::string& run_id, uint32_t attempt, const std::string& outcome,
                    const std::string& error, bool final);
  // Commits a result: results row + requests + engine samples + run state, one transaction.
  // *duplicate is set (and nothing written) when the run already has a committed result.
  Status CommitResult(schema::RunResult::Reader result, bool final_state_done, bool* duplicate);
  Status UpsertAgent(schema::Inventory::Reader inventory);
  // Agent id -> the CurveZMQ public key (Z85) it was first seen with; kept across --resume.
  // BindAgentKey replaces an id's binding: the caller decides when one may change.
  Status LoadAgentKeys(std::map<std::string, std::string>* out);
  Status BindAgentKey(const std::string& agent_id, const std::string& public_key);
  // Replaces an agent's pre-flight probe report (its figures and verdicts).
  Status StoreProbeReport(const std::string& agent_id, schema::ProbeReport::Reader report,
                          bool excluded);

  // Group commit: after BeginBatch() every write joins one transaction (each write still atomic
  // on its own, as a savepoint), made durable by CommitBatch() with a single fsync. Nothing
  // written in between may be acknowledged to anyone before CommitBatch() succeeds.
  void BeginBatch();
  Status CommitBatch();

  // runs LEFT JOIN results, ordered by run index: the benchmark record of every run.
  Status QuerySummary(Table* out);
  Status Query(const std::string& sql, Table* out);

 private:
  explicit ResultsStore(sqlite3* db) : db_(db) {}
  Status Exec(const std::string& sql);
  Status MigrateRunsTable();
  Status AddLaterRecordColumns();
  Status FillRecordColumns(const std::vector<const RecordColumn*>& added);
  // BEGIN IMMEDIATE; body; COMMIT, or ROLLBACK when the body fails or throws.
  Status InTransaction(const std::function<Status()>& body);
  sqlite3* db_;
  bool batching_ = false;    // BeginBatch() called: the next write opens the batch
  bool batch_open_ = false;  // a batch transaction is open
};

}  // namespace servesweep::results
