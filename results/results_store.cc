#include "results/results_store.h"

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <fmt/format.h>
#include <kj/exception.h>

#include <cmath>
#include <cstring>
#include <set>

#include "common/clock.h"
#include "results/record_columns.h"

namespace servesweep::results {
namespace {

// A prepared statement that finalises itself.
class Statement {
 public:
  Statement(sqlite3* db, const std::string& sql) : db_(db) {
    rc_ = sqlite3_prepare_v2(db, sql.c_str(), static_cast<int>(sql.size()), &stmt_, nullptr);
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  bool ok() const { return rc_ == SQLITE_OK; }
  sqlite3_stmt* get() { return stmt_; }
  std::string error() const { return sqlite3_errmsg(db_); }

  void Bind(int i, const std::string& v) {
    sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT);
  }
  void Bind(int i, int64_t v) { sqlite3_bind_int64(stmt_, i, v); }
  void Bind(int i, double v) {
    if (std::isnan(v)) {
      sqlite3_bind_null(stmt_, i);
    } else {
      sqlite3_bind_double(stmt_, i, v);
    }
  }
  void BindBlob(int i, const void* data, size_t size) {
    sqlite3_bind_blob(stmt_, i, data, static_cast<int>(size), SQLITE_TRANSIENT);
  }
  // Runs to completion (for statements without rows).
  Status Run() {
    const int rc = sqlite3_step(stmt_);
    if (rc != SQLITE_DONE && rc != SQLITE_ROW) {
      return Status::Internal(fmt::format("sqlite: {}", sqlite3_errmsg(db_)));
    }
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
    return Status::Ok();
  }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
  int rc_;
};

std::string SerializeToString(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto chars = words.asChars();
  return std::string(chars.begin(), chars.size());
}

// The runs table under a name (`runs`, or the copy a migration fills). Its CHECK lists every
// RunStateName.
std::string RunsTableSql(const char* name) {
  return fmt::format(R"sql(CREATE TABLE IF NOT EXISTS {}(
  run_id TEXT PRIMARY KEY,
  idx INTEGER NOT NULL,
  label TEXT NOT NULL,
  spec BLOB NOT NULL,
  status TEXT NOT NULL CHECK(status IN ('pending','running','done','failed','skipped')),
  attempts INTEGER NOT NULL DEFAULT 0,
  last_error TEXT NOT NULL DEFAULT '',
  updated_unix_ms INTEGER NOT NULL);
)sql",
                     name);
}

constexpr const char* kSchemaPragmasSql = R"sql(
PRAGMA journal_mode=WAL;
PRAGMA synchronous=FULL;
PRAGMA foreign_keys=ON;
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
)sql";

constexpr const char* kSchemaSql = R"sql(
CREATE TABLE IF NOT EXISTS attempts(
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  attempt INTEGER NOT NULL,
  agents TEXT NOT NULL,
  assigned_unix_ms INTEGER NOT NULL,
  outcome TEXT NOT NULL,
  error TEXT NOT NULL DEFAULT '',
  PRIMARY KEY(run_id, attempt));
CREATE TABLE IF NOT EXISTS requests(
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  idx INTEGER NOT NULL,
  success INTEGER NOT NULL,
  error TEXT NOT NULL,
  prompt_tokens INTEGER NOT NULL,
  output_tokens INTEGER NOT NULL,
  scheduled_ns INTEGER NOT NULL,
  start_ns INTEGER NOT NULL,
  first_token_ns INTEGER NOT NULL,
  end_ns INTEGER NOT NULL,
  chunks INTEGER NOT NULL,
  PRIMARY KEY(run_id, idx));
CREATE TABLE IF NOT EXISTS engine_samples(
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  at_ns INTEGER NOT NULL,
  name TEXT NOT NULL,
  value REAL);
CREATE TABLE IF NOT EXISTS probes(
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  name TEXT NOT NULL,
  status TEXT NOT NULL,
  value REAL,
  unit TEXT NOT NULL,
  detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS adapter_figures(
  run_id TEXT NOT NULL REFERENCES runs(run_id),
  adapter TEXT NOT NULL,
  requests INTEGER NOT NULL,
  completed INTEGER NOT NULL,
  output_throughput REAL,
  ttft_mean_ms REAL,
  ttft_p90_ms REAL,
  tpot_mean_ms REAL,
  tpot_p90_ms REAL,
  PRIMARY KEY(run_id, adapter));
CREATE TABLE IF NOT EXISTS node_probe_reports(
  agent_id TEXT PRIMARY KEY,
  status TEXT NOT NULL,
  gpu_model TEXT NOT NULL,
  healthy INTEGER NOT NULL,
  excluded INTEGER NOT NULL,
  reported_unix_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS node_probes(
  agent_id TEXT NOT NULL,
  name TEXT NOT NULL,
  gpu INTEGER NOT NULL,
  status TEXT NOT NULL,
  value REAL,
  unit TEXT NOT NULL,
  expected REAL,
  verdict TEXT NOT NULL,
  reason TEXT NOT NULL,
  detail TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agents(
  agent_id TEXT PRIMARY KEY,
  hostname TEXT NOT NULL,
  address TEXT NOT NULL,
  gpus INTEGER NOT NULL,
  emulated_gpus INTEGER NOT NULL,
  gpu_model TEXT NOT NULL,
  cpu_cores INTEGER NOT NULL,
  memory_bytes INTEGER NOT NULL,
  version TEXT NOT NULL,
  last_hello_unix_ms INTEGER NOT NULL,
  pool TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agent_keys(
  agent_id TEXT PRIMARY KEY,
  public_key TEXT NOT NULL,
  bound_unix_ms INTEGER NOT NULL);
)sql";

// Load modes (docs/metrics.md): warm-up flag (duration mode keeps warm-up records), first body
// byte, end of transfer, drain cancellation, multi-turn session and turn (-1 when none).
constexpr const char* kLaterRequestColumns[] = {
    "warmup INTEGER NOT NULL DEFAULT 0", "first_byte_ns INTEGER NOT NULL DEFAULT -1",
    "done_ns INTEGER NOT NULL DEFAULT -1", "cancelled INTEGER NOT NULL DEFAULT 0",
    "session_id INTEGER NOT NULL DEFAULT -1", "turn INTEGER NOT NULL DEFAULT -1",
    "output_tokens_from_usage INTEGER NOT NULL DEFAULT 0", "http_status INTEGER NOT NULL DEFAULT 0",
    "sent_ns INTEGER NOT NULL DEFAULT -1",
    // Multi-LoRA and the server's own prefix-cache report (docs/results.md#requests).
    "adapter TEXT NOT NULL DEFAULT ''", "cached_prompt_tokens INTEGER NOT NULL DEFAULT -1"};

// One record column's value for a result, as stored: NULL where it was not measured.
void BindColumn(Statement& statement, int index, const RecordColumn& column,
                schema::RunResult::Reader result) {
  const bool ok = result.getStatus() == schema::RunStatus::OK;
  if ((column.figure && !ok) || (column.from_record && !result.hasRecord())) {
    statement.Bind(index, std::nan(""));
  } else {
    std::visit([&](const auto& v) { statement.Bind(index, v); }, column.value(result));
  }
}

std::string ResultsTableSql() {
  std::string sql =
      "CREATE TABLE IF NOT EXISTS results(run_id TEXT PRIMARY KEY REFERENCES runs(run_id), "
      "committed_unix_ms INTEGER NOT NULL, result BLOB NOT NULL";
  for (const auto& column : RecordColumns()) {
    sql += fmt::format(", \"{}\" {}", column.name, column.sql_type);
  }
  return sql + ");";
}

}  // namespace

const char* RunStateName(RunState state) {
  switch (state) {
    case RunState::kPending:
      return "pending";
    case RunState::kRunning:
      return "running";
    case RunState::kDone:
      return "done";
    case RunState::kFailed:
      return "failed";
    case RunState::kSkipped:
      return "skipped";
  }
  return "?";
}

ResultsStore::~ResultsStore() { sqlite3_close(db_); }

Status ResultsStore::Open(const std::string& path, std::unique_ptr<ResultsStore>* out) {
  sqlite3* db = nullptr;
  if (sqlite3_open(path.c_str(), &db) != SQLITE_OK) {
    std::string error = db ? sqlite3_errmsg(db) : "out of memory";
    sqlite3_close(db);
    return Status::Internal(fmt::format("{}: cannot open the results database: {}", path, error));
  }
  sqlite3_busy_timeout(db, 10000);
  std::unique_ptr<ResultsStore> store(new ResultsStore(db));
  Status status = store->Exec(kSchemaPragmasSql);
  if (status.ok()) status = store->Exec(RunsTableSql("runs"));
  if (status.ok()) status = store->MigrateRunsTable();
  if (status.ok()) status = store->Exec(kSchemaSql);
  if (status.ok()) status = store->Exec(ResultsTableSql());
  // Per-request columns added after the first release: added to older databases in place.
  for (const char* column : kLaterRequestColumns) {
    if (!status.ok()) break;
    status = store->Exec(fmt::format("ALTER TABLE requests ADD COLUMN {}", column));
    if (!status.ok() && status.message().find("duplicate column name") != std::string::npos) {
      status = Status::Ok();
    }
  }
  if (status.ok()) status = store->AddLaterRecordColumns();
  if (!status.ok()) return status.Prefixed(path);
  *out = std::move(store);
  return Status::Ok();
}

// A database made before the `skipped` state has a runs table whose CHECK refuses it: the
// table is rebuilt with the current CHECK and every row copied (SQLite cannot alter a CHECK;
// sqlite.org/lang_altertable.html#otheralter, foreign keys off while the table is replaced).
Status ResultsStore::MigrateRunsTable() {
  std::string text;
  {
    // Finalized before the table is dropped: an open read locks it.
    Statement sql(db_, "SELECT sql FROM sqlite_master WHERE type='table' AND name='runs'");
    if (sqlite3_step(sql.get()) != SQLITE_ROW) return Status::Ok();
    text = reinterpret_cast<const char*>(sqlite3_column_text(sql.get(), 0));
  }
  if (text.find("'skipped'") != std::string::npos) return Status::Ok();
  if (Status s = Exec("PRAGMA foreign_keys=OFF"); !s.ok()) return s;
  Status status = InTransaction([&]() -> Status {
    for (const std::string& step :
         {std::string("DROP TABLE IF EXISTS runs_migrated"), RunsTableSql("runs_migrated"),
          std::string("INSERT INTO runs_migrated SELECT * FROM runs"),
          std::string("DROP TABLE runs"),
          std::string("ALTER TABLE runs_migrated RENAME TO runs")}) {
      if (Status s = Exec(step); !s.ok()) return s.Prefixed("migrating the runs table");
    }
    return Status::Ok();
  });
  const Status on = Exec("PRAGMA foreign_keys=ON");
  return status.ok() ? on : status;
}

// A database made before a record column existed (e.g. cost_per_mtok_output) gets the column
// in place, filled from each stored RunResult, so reports and comparisons still read it.
Status ResultsStore::AddLaterRecordColumns() {
  std::set<std::string> existing;
  Statement info(db_, "PRAGMA table_info(results)");
  while (sqlite3_step(info.get()) == SQLITE_ROW) {
    existing.insert(reinterpret_cast<const char*>(sqlite3_column_text(info.get(), 1)));
  }
  std::vector<const RecordColumn*> added;
  for (const auto& column : RecordColumns()) {
    if (existing.count(column.name) != 0) continue;
    added.push_back(&column);
  }
  if (added.empty()) return Status::Ok();
  return InTransaction([&]() { return FillRecordColumns(added); });
}

Status ResultsStore::FillRecordColumns(const std::vector<const RecordColumn*>& added) {
  for (const RecordColumn* column : added) {
    const std::string sql =
        fmt::format("ALTER TABLE results ADD COLUMN \"{}\" {}", column->name, column->sql_type);
    if (Status s = Exec(sql); !s.ok()) return s;
  }
  std::string sets;
  for (const RecordColumn* column : added) {
    sets += fmt::format("{}\"{}\"=?", sets.empty() ? "" : ", ", column->name);
  }
  Statement update(db_, fmt::format("UPDATE results SET {} WHERE run_id=?", sets));
  Statement rows(db_, "SELECT run_id, result FROM results");
  while (sqlite3_step(rows.get()) == SQLITE_ROW) {
    const std::string run_id = reinterpret_cast<const char*>(sqlite3_column_text(rows.get(), 0));
    const auto* blob = static_cast<const char*>(sqlite3_column_blob(rows.get(), 1));
    auto words =
        kj::heapArray<capnp::word>(sqlite3_column_bytes(rows.get(), 1) / sizeof(capnp::word));
    if (words.size() > 0) std::memcpy(words.begin(), blob, words.size() * sizeof(capnp::word));
    Status status;
    kj::Maybe<kj::Exception> corrupt = kj::runCatchingExceptions([&]() {
      capnp::ReaderOptions options;
      options.traversalLimitInWords = words.size() + 1;
      capnp::FlatArrayMessageReader reader(words, options);
      const auto result = reader.getRoot<schema::RunResult>();
      int index = 1;
      for (const RecordColumn* column : added) BindColumn(update, index++, *column, result);
      update.Bind(index, run_id);
      status = update.Run();
    });
    if (corrupt != nullptr) {
      return Status::Internal(fmt::format("the stored result of run {} is unreadable", run_id));
    }
    if (!status.ok()) return status;
  }
  return Status::Ok();
}

Status ResultsStore::InTransaction(const std::function<Status()>& body) {
  // Inside a group commit each write is a savepoint: it stays atomic on its own (a failed one
  // rolls back alone), and the batch's COMMIT makes all of them durable with one fsync.
  if (batching_ && !batch_open_) {
    if (Status s = Exec("BEGIN IMMEDIATE"); !s.ok()) return s;
    batch_open_ = true;
  }
  const bool nested = batch_open_;
  Status status = Exec(nested ? "SAVEPOINT one_write" : "BEGIN IMMEDIATE");
  if (!status.ok()) return status;
  // Statements live inside `body`, so they are finalised before COMMIT or ROLLBACK; an exception
  // (e.g. a malformed message read lazily) rolls back like an error.
  kj::Maybe<kj::Exception> failure = kj::runCatchingExceptions([&]() { status = body(); });
  KJ_IF_MAYBE (exception, failure) {
    status = Status::Internal(exception->getDescription().cStr());
  }
  if (!status.ok()) {
    // The body's failure is the one to report; a failed rollback leaves SQLite's own (it rolls
    // back an open transaction when the connection closes).
    if (nested) {
      Exec("ROLLBACK TO one_write").IgnoreError();
      Exec("RELEASE one_write").IgnoreError();
    } else {
      Exec("ROLLBACK").IgnoreError();
    }
    return status;
  }
  return Exec(nested ? "RELEASE one_write" : "COMMIT");
}

void ResultsStore::BeginBatch() { batching_ = true; }

Status ResultsStore::CommitBatch() {
  batching_ = false;
  if (!batch_open_) return Status::Ok();
  batch_open_ = false;
  Status status = Exec("COMMIT");
  if (!status.ok()) Exec("ROLLBACK").IgnoreError();  // the commit's failure is the one to report
  return status;
}

Status ResultsStore::Exec(const std::string& sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    return Status::Internal("sqlite: " + message);
  }
  return Status::Ok();
}

Status ResultsStore::SweepHash(std::string* hash) {
  Table table;
  Status status = Query("SELECT value FROM meta WHERE key='matrix_hash'", &table);
  if (!status.ok()) return status;
  *hash = table.rows.empty() ? "" : table.rows[0][0];
  return Status::Ok();
}

Status ResultsStore::InitSweep(schema::Matrix::Reader matrix, const std::string& matrix_text) {
  return InTransaction([&]() -> Status {
    Status status;
    Statement meta(db_, "INSERT OR REPLACE INTO meta(key, value) VALUES(?, ?)");
    const std::pair<std::string, std::string> entries[] = {
        {"sweep_name", matrix.getName()},
        {"matrix_path", matrix.getSourcePath()},
        {"matrix_hash", matrix.getSourceHash()},
        {"matrix_text", matrix_text},
        {"created_unix_ms", std::to_string(UnixNowMs())},
        {"servesweep_version", SERVESWEEP_VERSION}};
    for (const auto& [key, value] : entries) {
      meta.Bind(1, key);
      meta.Bind(2, value);
      if (status = meta.Run(); !status.ok()) break;
    }
    Statement run(db_,
                  "INSERT INTO runs(run_id, idx, label, spec, status, updated_unix_ms) "
                  "VALUES(?, ?, ?, ?, 'pending', ?)");
    for (auto spec : matrix.getRuns()) {
      if (!status.ok()) break;
      capnp::MallocMessageBuilder message;
      message.setRoot(spec);
      const std::string bytes = SerializeToString(message);
      run.Bind(1, std::string(spec.getRunId()));
      run.Bind(2, int64_t{spec.getIndex()});
      run.Bind(3, std::string(spec.getLabel()));
      run.BindBlob(4, bytes.data(), bytes.size());
      run.Bind(5, UnixNowMs());
      status = run.Run();
    }
    return status;
  });
}

Status ResultsStore::LoadRuns(std::vector<StoredRun>* out) {
  Statement stmt(
      db_, "SELECT run_id, idx, label, spec, status, attempts, last_error FROM runs ORDER BY idx");
  if (!stmt.ok()) return Status::Internal("sqlite: " + stmt.error());
  out->clear();
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    StoredRun run;
    auto text = [&](int i) {
      const auto* p = sqlite3_column_text(stmt.get(), i);
      return std::string(p ? reinterpret_cast<const char*>(p) : "");
    };
    run.run_id = text(0);
    run.index = static_cast<uint32_t>(sqlite3_column_int64(stmt.get(), 1));
    run.label = text(2);
    const void* blob = sqlite3_column_blob(stmt.get(), 3);
    run.spec_bytes.assign(static_cast<const char*>(blob),
                          static_cast<size_t>(sqlite3_column_bytes(stmt.get(), 3)));
    const std::string state = text(4);
    run.state = state == "done"      ? RunState::kDone
                : state == "failed"  ? RunState::kFailed
                : state == "skipped" ? RunState::kSkipped
                : state == "running" ? RunState::kRunning
                                     : RunState::kPending;
    run.attempts = static_cast<uint32_t>(sqlite3_column_int64(stmt.get(), 5));
    run.last_error = text(6);
    out->push_back(std::move(run));
  }
  if (rc != SQLITE_DONE)
    return Status::Internal(fmt::format("sqlite: reading runs: {}", stmt.error()));
  return Status::Ok();
}

Status ResultsStore::RequeueInterrupted(int* requeued) {
  return InTransaction([&]() -> Status {
    Status status = Exec(
        "UPDATE attempts SET outcome='lost', error='coordinator restarted' WHERE outcome='running';"
        "UPDATE runs SET status='pending', last_error='coordinator restarted' WHERE "
        "status='running';");
    *requeued = sqlite3_changes(db_);
    return status;
  });
}

Status ResultsStore::MarkRunning(const std::string& run_id, uint32_t attempt,
                                 const std::string& agents) {
  return InTransaction([&]() -> Status {
    Statement run(db_,
                  "UPDATE runs SET status='running', attempts=?, updated_unix_ms=? WHERE run_id=?");
    run.Bind(1, int64_t{attempt});
    run.Bind(2, UnixNowMs());
    run.Bind(3, run_id);
    Status status = run.Run();
    if (status.ok()) {
      Statement history(
          db_,
          "INSERT OR REPLACE INTO attempts(run_id, attempt, agents, assigned_unix_ms, "
          "outcome) VALUES(?, ?, ?, ?, 'running')");
      history.Bind(1, run_id);
      history.Bind(2, int64_t{attempt});
      history.Bind(3, agents);
      history.Bind(4, UnixNowMs());
      status = history.Run();
    }
    return status;
  });
}

Status ResultsStore::EndAttempt(const std::string& run_id, uint32_t attempt,
                                const std::string& outcome, const std::string& error, bool final) {
  return InTransaction([&]() -> Status {
    Statement history(db_, "UPDATE attempts SET outcome=?, error=? WHERE run_id=? AND attempt=?");
    history.Bind(1, outcome);
    history.Bind(2, error);
    history.Bind(3, run_id);
    history.Bind(4, int64_t{attempt});
    Status status = history.Run();
    if (status.ok()) {
      // Only the run's current attempt moves its state; a stale attempt just leaves history.
      Statement run(db_,
                    "UPDATE runs SET status=?, last_error=?, updated_unix_ms=? "
                    "WHERE run_id=? AND attempts=? AND status='running'");
      run.Bind(1, std::string(final ? "failed" : "pending"));
      run.Bind(2, error);
      run.Bind(3, UnixNowMs());
      run.Bind(4, run_id);
      run.Bind(5, int64_t{attempt});
      status = run.Run();
    }
    return status;
  });
}

Status ResultsStore::CommitResult(schema::RunResult::Reader result, bool final_state_done,
                                  bool* duplicate) {
  const std::string run_id = result.getRunId();
  // A committed ok result is final. A recorded failure gives way to a later ok result of the
  // same run (e.g. an earlier attempt's result resent from a spool).
  bool exists = false, existing_ok = false;
  {
    Statement existing(db_, "SELECT result_status FROM results WHERE run_id=?");
    existing.Bind(1, run_id);
    if (sqlite3_step(existing.get()) == SQLITE_ROW) {
      exists = true;
      const auto* text = sqlite3_column_text(existing.get(), 0);
      existing_ok = text != nullptr && std::string(reinterpret_cast<const char*>(text)) == "ok";
    }
  }
  const bool incoming_ok = result.getStatus() == schema::RunStatus::OK;
  *duplicate = exists && (existing_ok || !incoming_ok);
  if (*duplicate) return Status::Ok();
  return InTransaction([&]() -> Status {
    Status status;
    if (exists) {
      for (const char* table :
           {"results", "requests", "engine_samples", "probes", "adapter_figures"}) {
        Statement erase(db_, fmt::format("DELETE FROM {} WHERE run_id=?", table));
        erase.Bind(1, run_id);
        if (status = erase.Run(); !status.ok()) return status;
      }
    }

    const auto& columns = RecordColumns();
    std::string names = "run_id, committed_unix_ms, result";
    std::string marks = "?, ?, ?";
    for (const auto& column : columns) {
      names += fmt::format(", \"{}\"", column.name);
      marks += ", ?";
    }
    Statement insert(db_, fmt::format("INSERT INTO results({}) VALUES({})", names, marks));
    if (!insert.ok()) return Status::Internal("sqlite: " + insert.error());
    capnp::MallocMessageBuilder copy;
    copy.setRoot(result);
    const std::string bytes = SerializeToString(copy);
    insert.Bind(1, run_id);
    insert.Bind(2, UnixNowMs());
    insert.BindBlob(3, bytes.data(), bytes.size());
    int index = 4;
    for (const auto& column : columns) BindColumn(insert, index++, column, result);
    if (status = insert.Run(); !status.ok()) return status;

    Statement request(db_,
                      "INSERT INTO requests(run_id, idx, success, error, prompt_tokens, "
                      "output_tokens, scheduled_ns, start_ns, first_token_ns, end_ns, chunks, "
                      "warmup, first_byte_ns, done_ns, cancelled, session_id, turn, "
                      "output_tokens_from_usage, http_status, sent_ns, adapter, "
                      "cached_prompt_tokens) "
                      "VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (auto r : result.getRequests()) {
      request.Bind(1, run_id);
      request.Bind(2, int64_t{r.getIndex()});
      request.Bind(3, int64_t{r.getSuccess() ? 1 : 0});
      request.Bind(4, std::string(r.getError()));
      request.Bind(5, int64_t{r.getPromptTokens()});
      request.Bind(6, int64_t{r.getOutputTokens()});
      request.Bind(7, r.getScheduledNs());
      request.Bind(8, r.getStartNs());
      request.Bind(9, r.getFirstTokenNs());
      request.Bind(10, r.getEndNs());
      request.Bind(11, int64_t{r.getChunkTimesNs().size()});
      request.Bind(12, int64_t{r.getWarmup() ? 1 : 0});
      request.Bind(13, r.getFirstByteNs());
      request.Bind(14, r.getDoneNs());
      request.Bind(15, int64_t{r.getCancelled() ? 1 : 0});
      request.Bind(16, int64_t{r.getSessionId()});
      request.Bind(17, int64_t{r.getTurn()});
      request.Bind(18, int64_t{r.getOutputTokensFromUsage() ? 1 : 0});
      request.Bind(19, int64_t{r.getHttpStatus()});
      request.Bind(20, r.getSentNs());
      request.Bind(21, std::string(r.getAdapter()));
      request.Bind(22, int64_t{r.getCachedPromptTokens()});
      if (status = request.Run(); !status.ok()) return status;
    }
    Statement sample(db_, "INSERT INTO engine_samples VALUES(?, ?, ?, ?)");
    for (auto s : result.getEngineSamples()) {
      sample.Bind(1, run_id);
      sample.Bind(2, s.getAtNs());
      sample.Bind(3, std::string(s.getName()));
      sample.Bind(4, s.getValue());
      if (status = sample.Run(); !status.ok()) return status;
    }
    if (result.hasRecord()) {
      Statement adapter(db_, "INSERT INTO adapter_figures VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?)");
      for (auto a : result.getRecord().getAdapterFigures()) {
        adapter.Bind(1, run_id);
        adapter.Bind(2, std::string(a.getAdapter()));
        adapter.Bind(3, int64_t{a.getRequests()});
        adapter.Bind(4, int64_t{a.getCompleted()});
        adapter.Bind(5, a.getOutputThroughput());
        adapter.Bind(6, a.getTtftMs().getMean());
        adapter.Bind(7, a.getTtftMs().getP90());
        adapter.Bind(8, a.getTpotMs().getMean());
        adapter.Bind(9, a.getTpotMs().getP90());
        if (status = adapter.Run(); !status.ok()) return status;
      }
    }
    Statement probe(db_, "INSERT INTO probes VALUES(?, ?, ?, ?, ?, ?)");
    for (auto p : result.getProbes()) {
      probe.Bind(1, run_id);
      probe.Bind(2, std::string(p.getName()));
      probe.Bind(3, std::string(p.getStatus()));
      probe.Bind(4, p.getValue());
      probe.Bind(5, std::string(p.getUnit()));
      probe.Bind(6, std::string(p.getDetail()));
      if (status = probe.Run(); !status.ok()) return status;
    }
    Statement run(db_, "UPDATE runs SET status=?, last_error=?, updated_unix_ms=? WHERE run_id=?");
    const bool skipped = result.getStatus() == schema::RunStatus::SKIPPED;
    run.Bind(1, std::string(final_state_done ? "done" : skipped ? "skipped" : "failed"));
    run.Bind(2, std::string(result.getError()));
    run.Bind(3, UnixNowMs());
    run.Bind(4, run_id);
    if (status = run.Run(); !status.ok()) return status;
    Statement history(
        db_,
        "INSERT INTO attempts(run_id, attempt, agents, assigned_unix_ms, outcome, error) "
        "VALUES(?, ?, ?, ?, ?, ?) ON CONFLICT(run_id, attempt) DO UPDATE SET "
        "outcome=excluded.outcome, error=excluded.error");
    history.Bind(1, run_id);
    history.Bind(2, int64_t{result.getAttempt()});
    history.Bind(3, std::string(result.getAgentId()));
    history.Bind(4, result.getStartedAtUnixMs());
    history.Bind(5, std::string(final_state_done                                   ? "committed"
                                : result.getStatus() == schema::RunStatus::REFUSED ? "refused"
                                : skipped                                          ? "skipped"
                                                                                   : "failed"));
    history.Bind(6, std::string(result.getError()));
    return history.Run();
  });
}

Status ResultsStore::UpsertAgent(schema::Inventory::Reader inventory) {
  return InTransaction([&]() -> Status {
    Statement stmt(db_, "INSERT OR REPLACE INTO agents VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    stmt.Bind(1, std::string(inventory.getAgentId()));
    stmt.Bind(2, std::string(inventory.getHostname()));
    stmt.Bind(3, std::string(inventory.getAddress()));
    stmt.Bind(4, int64_t{inventory.getGpus().size()});
    stmt.Bind(5, int64_t{inventory.getEmulatedGpus() ? 1 : 0});
    stmt.Bind(6, inventory.getGpus().size() > 0 ? std::string(inventory.getGpus()[0].getName())
                                                : std::string("none"));
    stmt.Bind(7, int64_t{inventory.getCpuCores()});
    stmt.Bind(8, static_cast<int64_t>(inventory.getMemoryBytes()));
    stmt.Bind(9, std::string(inventory.getVersion()));
    stmt.Bind(10, UnixNowMs());
    stmt.Bind(11, std::string(inventory.getPool()));
    return stmt.Run();
  });
}

Status ResultsStore::LoadAgentKeys(std::map<std::string, std::string>* out) {
  Table table;
  if (Status s = Query("SELECT agent_id, public_key FROM agent_keys", &table); !s.ok()) return s;
  out->clear();
  for (const auto& row : table.rows) (*out)[row[0]] = row[1];
  return Status::Ok();
}

Status ResultsStore::BindAgentKey(const std::string& agent_id, const std::string& public_key) {
  return InTransaction([&]() -> Status {
    // OR REPLACE: the coordinator binds only ids it holds no admitted key for (a binding whose
    // key left the allow-list is replaced).
    Statement stmt(db_, "INSERT OR REPLACE INTO agent_keys VALUES(?, ?, ?)");
    stmt.Bind(1, agent_id);
    stmt.Bind(2, public_key);
    stmt.Bind(3, UnixNowMs());
    return stmt.Run();
  });
}

Status ResultsStore::StoreProbeReport(const std::string& agent_id,
                                      schema::ProbeReport::Reader report, bool excluded) {
  return InTransaction([&]() -> Status {
    Status status;
    for (const char* table : {"node_probes", "node_probe_reports"}) {
      Statement erase(db_, fmt::format("DELETE FROM {} WHERE agent_id=?", table));
      erase.Bind(1, agent_id);
      if (status = erase.Run(); !status.ok()) return status;
    }
    Statement summary(db_, "INSERT INTO node_probe_reports VALUES(?, ?, ?, ?, ?, ?)");
    summary.Bind(1, agent_id);
    summary.Bind(2, std::string(report.getStatus()));
    summary.Bind(3, std::string(report.getGpuModel()));
    summary.Bind(4, int64_t{report.getHealthy() ? 1 : 0});
    summary.Bind(5, int64_t{excluded ? 1 : 0});
    summary.Bind(6, UnixNowMs());
    if (status = summary.Run(); !status.ok()) return status;
    Statement figure(db_, "INSERT INTO node_probes VALUES(?, ?, ?, ?, ?, ?, ?, ?, ?, ?)");
    for (auto r : report.getResults()) {
      figure.Bind(1, agent_id);
      figure.Bind(2, std::string(r.getName()));
      figure.Bind(3, int64_t{r.getGpu()});
      figure.Bind(4, std::string(r.getStatus()));
      figure.Bind(5, r.getValue());
      figure.Bind(6, std::string(r.getUnit()));
      figure.Bind(7, r.getExpected());
      figure.Bind(8, std::string(r.getVerdict()));
      figure.Bind(9, std::string(r.getReason()));
      figure.Bind(10, std::string(r.getDetail()));
      if (status = figure.Run(); !status.ok()) return status;
    }
    return status;
  });
}

Status ResultsStore::Query(const std::string& sql, Table* out) {
  Statement stmt(db_, sql);
  if (!stmt.ok()) return Status::Internal(fmt::format("sqlite: {} in: {}", stmt.error(), sql));
  *out = Table();
  const int n = sqlite3_column_count(stmt.get());
  for (int i = 0; i < n; ++i) out->columns.emplace_back(sqlite3_column_name(stmt.get(), i));
  int rc;
  while ((rc = sqlite3_step(stmt.get())) == SQLITE_ROW) {
    std::vector<std::string> row;
    std::vector<bool> nulls;
    for (int i = 0; i < n; ++i) {
      const bool is_null = sqlite3_column_type(stmt.get(), i) == SQLITE_NULL;
      const auto* p = sqlite3_column_text(stmt.get(), i);
      row.emplace_back(p && !is_null ? reinterpret_cast<const char*>(p) : "");
      nulls.push_back(is_null);
    }
    out->rows.push_back(std::move(row));
    out->is_null.push_back(std::move(nulls));
  }
  if (rc != SQLITE_DONE) return Status::Internal(fmt::format("sqlite: {}", stmt.error()));
  return Status::Ok();
}

Status ResultsStore::QuerySummary(Table* out) {
  std::string columns;
  for (const auto& column : RecordColumns()) columns += fmt::format(", res.\"{}\"", column.name);
  return Query(fmt::format("SELECT r.run_id, r.idx AS run_index, r.label, r.status, "
                           "r.attempts, r.last_error{} FROM runs r LEFT JOIN results res "
                           "ON res.run_id = r.run_id ORDER BY r.idx",
                           columns),
               out);
}

}  // namespace servesweep::results
