// The results store on a real SQLite file: sweep init, attempts, idempotent commit, resume.
#include "results/results_store.h"

#include <capnp/message.h>
#include <gtest/gtest.h>
#include <sqlite3.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>

#include "common/ids.h"
#include "matrix/matrix_loader.h"
#include "results/record_columns.h"
#include "results/result_reads.h"

namespace servesweep::results {
namespace {

class ResultsStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    path_ = (std::filesystem::temp_directory_path() /
             ("servesweep-store-" + std::to_string(::getpid()) + "-" + RandomHex(6) + ".db"))
                .string();
    ASSERT_TRUE(ResultsStore::Open(path_, &store_).ok());
    ASSERT_TRUE(matrix::ExpandMatrix("m.yaml", R"(name: t
engine: sim
model: m
workload: {input_len: 10, output_len: 5, num_requests: 3}
axes: {concurrency: [1, 2, 4]}
)",
                                     matrix_.get())
                    .ok());
    ASSERT_TRUE(store_->InitSweep(matrix_->matrix(), matrix_->text).ok());
    run0_ = matrix_->matrix().getRuns()[0].getRunId();
  }
  void TearDown() override {
    store_.reset();
    for (const char* suffix : {"", "-wal", "-shm"}) std::filesystem::remove(path_ + suffix);
  }
  std::string Cell(const std::string& sql) {
    Table t;
    EXPECT_TRUE(store_->Query(sql, &t).ok()) << sql;
    return t.rows.empty() ? "<none>" : t.rows[0][0];
  }
  void BuildResult(capnp::MallocMessageBuilder& message, uint32_t attempt) {
    auto result = message.initRoot<schema::RunResult>();
    result.setRunId(run0_);
    result.setAttempt(attempt);
    result.setAgentId("a");
    result.setStatus(schema::RunStatus::OK);
    result.setSpec(matrix_->matrix().getRuns()[0]);
    auto record = result.initRecord();
    record.setCompleted(3);
    record.setOutputThroughput(123.5);
    record.initTtftMs().setMedian(20.25);
    record.setGoodput(std::nan(""));
    auto requests = result.initRequests(3);
    for (uint32_t i = 0; i < 3; ++i) requests[i].setIndex(i);
  }
  // The first run's result committed, the store closed, the file opened by plain SQLite: to
  // make an older servesweep's database out of it.
  void CommitFirstRunAndReopenRaw(sqlite3** raw) {
    ASSERT_TRUE(store_->MarkRunning(run0_, 1, "a").ok());
    capnp::MallocMessageBuilder message;
    BuildResult(message, 1);
    bool duplicate = true;
    ASSERT_TRUE(store_->CommitResult(message.getRoot<schema::RunResult>(), true, &duplicate).ok());
    store_.reset();
    ASSERT_EQ(sqlite3_open(path_.c_str(), raw), SQLITE_OK);
  }

  std::string path_;
  std::unique_ptr<ResultsStore> store_;
  // Held by pointer: the message builder's destructor may throw, a fixture's may not.
  std::unique_ptr<matrix::LoadedMatrix> matrix_ = std::make_unique<matrix::LoadedMatrix>();
  std::string run0_;
};

TEST_F(ResultsStoreTest, InitRecordsEveryRunPending) {
  std::string hash;
  ASSERT_TRUE(store_->SweepHash(&hash).ok());
  EXPECT_EQ(hash, matrix_->matrix().getSourceHash());
  std::vector<StoredRun> runs;
  ASSERT_TRUE(store_->LoadRuns(&runs).ok());
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[2].label, "concurrency=4");
  EXPECT_EQ(runs[2].state, RunState::kPending);
}

TEST_F(ResultsStoreTest, CommitIsIdempotentAndAtomicWithRunState) {
  ASSERT_TRUE(store_->MarkRunning(run0_, 1, "a").ok());
  capnp::MallocMessageBuilder message;
  BuildResult(message, 1);
  bool duplicate = true;
  ASSERT_TRUE(store_->CommitResult(message.getRoot<schema::RunResult>(), true, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  EXPECT_EQ(Cell("SELECT status FROM runs WHERE run_id='" + run0_ + "'"), "done");
  EXPECT_EQ(Cell("SELECT output_throughput FROM results"), "123.5");
  EXPECT_EQ(Cell("SELECT ttft_median_ms FROM results"), "20.25");
  EXPECT_EQ(Cell("SELECT goodput IS NULL FROM results"), "1");  // NaN -> NULL
  EXPECT_EQ(Cell("SELECT COUNT(*) FROM requests"), "3");
  EXPECT_EQ(Cell("SELECT outcome FROM attempts WHERE run_id='" + run0_ + "'"), "committed");

  capnp::MallocMessageBuilder again;
  BuildResult(again, 2);
  ASSERT_TRUE(store_->CommitResult(again.getRoot<schema::RunResult>(), true, &duplicate).ok());
  EXPECT_TRUE(duplicate);
  EXPECT_EQ(Cell("SELECT COUNT(*) FROM results"), "1");
  EXPECT_EQ(Cell("SELECT COUNT(*) FROM requests"), "3");
  EXPECT_EQ(Cell("SELECT attempt FROM results"), "1");
}

TEST_F(ResultsStoreTest, RequestsKeepSessionTurnFirstByteSendAndCancellation) {
  // Reopening adds no column twice (older databases get the later columns in place).
  store_.reset();
  ASSERT_TRUE(ResultsStore::Open(path_, &store_).ok());
  ASSERT_TRUE(store_->MarkRunning(run0_, 1, "a").ok());
  capnp::MallocMessageBuilder message;
  BuildResult(message, 1);
  auto requests = message.getRoot<schema::RunResult>().getRequests();
  requests[1].setSessionId(4);
  requests[1].setTurn(2);
  requests[1].setFirstByteNs(1234);
  requests[1].setDoneNs(9999);
  requests[1].setSentNs(77);
  requests[2].setCancelled(true);
  requests[2].setWarmup(true);
  bool duplicate = true;
  ASSERT_TRUE(store_->CommitResult(message.getRoot<schema::RunResult>(), true, &duplicate).ok());
  EXPECT_EQ(Cell("SELECT session_id || ',' || turn || ',' || first_byte_ns || ',' || done_ns "
                 "FROM requests WHERE idx = 1"),
            "4,2,1234,9999");
  EXPECT_EQ(Cell("SELECT cancelled || ',' || warmup FROM requests WHERE idx = 2"), "1,1");
  EXPECT_EQ(Cell("SELECT sent_ns FROM requests WHERE idx = 1"), "77");
}

TEST_F(ResultsStoreTest, RecordColumnsMissingFromAnOlderDatabaseAreAddedAndFilled) {
  // An older servesweep made this database: two record columns did not exist yet.
  sqlite3* raw = nullptr;
  ASSERT_NO_FATAL_FAILURE(CommitFirstRunAndReopenRaw(&raw));
  for (const char* column : {"output_throughput", "goodput"}) {
    const std::string sql = std::string("ALTER TABLE results DROP COLUMN ") + column;
    EXPECT_EQ(sqlite3_exec(raw, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  }
  sqlite3_close(raw);

  ASSERT_TRUE(ResultsStore::Open(path_, &store_).ok());
  EXPECT_EQ(Cell("SELECT output_throughput FROM results"), "123.5");  // from the stored result
  EXPECT_EQ(Cell("SELECT goodput IS NULL FROM results"), "1");        // NaN stays NULL
  EXPECT_EQ(Cell("SELECT ttft_median_ms FROM results"), "20.25");     // untouched
  Table summary;
  ASSERT_TRUE(store_->QuerySummary(&summary).ok());
  EXPECT_EQ(summary.rows.size(), 3u);
}

// An older servesweep's runs table refuses the `skipped` state in its CHECK: opening the
// database rebuilds it with every row kept, and a skipped run is then recorded and read back.
TEST_F(ResultsStoreTest, ARunsTableWithoutTheSkippedStateIsMigratedWithItsRows) {
  sqlite3* raw = nullptr;
  ASSERT_NO_FATAL_FAILURE(CommitFirstRunAndReopenRaw(&raw));
  for (const char* sql :
       {"PRAGMA foreign_keys=OFF",
        "CREATE TABLE runs_old(run_id TEXT PRIMARY KEY, idx INTEGER NOT NULL, label TEXT NOT "
        "NULL, spec BLOB NOT NULL, status TEXT NOT NULL CHECK(status IN "
        "('pending','running','done','failed')), attempts INTEGER NOT NULL DEFAULT 0, "
        "last_error TEXT NOT NULL DEFAULT '', updated_unix_ms INTEGER NOT NULL)",
        "INSERT INTO runs_old SELECT * FROM runs", "DROP TABLE runs",
        "ALTER TABLE runs_old RENAME TO runs"}) {
    ASSERT_EQ(sqlite3_exec(raw, sql, nullptr, nullptr, nullptr), SQLITE_OK) << sql;
  }
  ASSERT_NE(sqlite3_exec(raw, "UPDATE runs SET status='skipped'", nullptr, nullptr, nullptr),
            SQLITE_OK);  // the old CHECK
  sqlite3_close(raw);

  const Status opened = ResultsStore::Open(path_, &store_);
  ASSERT_TRUE(opened.ok()) << opened.message();
  std::vector<StoredRun> runs;
  ASSERT_TRUE(store_->LoadRuns(&runs).ok());
  ASSERT_EQ(runs.size(), 3u);
  EXPECT_EQ(runs[0].state, RunState::kDone);
  EXPECT_EQ(Cell("SELECT COUNT(*) FROM requests"), "3");  // the rows that refer to it stay
  capnp::MallocMessageBuilder skipped;
  auto result = skipped.initRoot<schema::RunResult>();
  const auto spec = matrix_->matrix().getRuns()[2];
  result.setRunId(spec.getRunId());
  result.setStatus(schema::RunStatus::SKIPPED);
  result.setError("skipped: concurrency 2 was over-saturated");
  result.setSpec(spec);
  bool duplicate = true;
  ASSERT_TRUE(store_->CommitResult(result, false, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  ASSERT_TRUE(store_->LoadRuns(&runs).ok());
  EXPECT_EQ(runs[2].state, RunState::kSkipped);
  EXPECT_EQ(runs[2].last_error, "skipped: concurrency 2 was over-saturated");
  EXPECT_EQ(Cell("SELECT result_status FROM results WHERE run_id='" +
                 std::string(spec.getRunId().cStr()) + "'"),
            "skipped");
  EXPECT_STREQ(RunStateName(RunState::kSkipped), "skipped");
}

TEST_F(ResultsStoreTest, EndAttemptRetriesThenFailsOnlyTheCurrentAttempt) {
  ASSERT_TRUE(store_->MarkRunning(run0_, 1, "a").ok());
  ASSERT_TRUE(store_->EndAttempt(run0_, 1, "lost", "agent a lost", false).ok());
  EXPECT_EQ(Cell("SELECT status FROM runs WHERE run_id='" + run0_ + "'"), "pending");
  ASSERT_TRUE(store_->MarkRunning(run0_, 2, "b").ok());
  // A late report about attempt 1 changes only its history, not the run.
  ASSERT_TRUE(store_->EndAttempt(run0_, 1, "failed", "late", true).ok());
  EXPECT_EQ(Cell("SELECT status FROM runs WHERE run_id='" + run0_ + "'"), "running");
  ASSERT_TRUE(store_->EndAttempt(run0_, 2, "failed", "engine crashed", true).ok());
  EXPECT_EQ(Cell("SELECT status || ':' || last_error FROM runs WHERE run_id='" + run0_ + "'"),
            "failed:engine crashed");
  EXPECT_EQ(Cell("SELECT COUNT(*) FROM attempts"), "2");
}

TEST_F(ResultsStoreTest, RequeueInterruptedAfterARestart) {
  ASSERT_TRUE(store_->MarkRunning(run0_, 1, "a").ok());
  store_.reset();
  ASSERT_TRUE(ResultsStore::Open(path_, &store_).ok());
  int requeued = 0;
  ASSERT_TRUE(store_->RequeueInterrupted(&requeued).ok());
  EXPECT_EQ(requeued, 1);
  EXPECT_EQ(Cell("SELECT status || ':' || attempts FROM runs WHERE run_id='" + run0_ + "'"),
            "pending:1");
  EXPECT_EQ(Cell("SELECT outcome FROM attempts"), "lost");
}

TEST_F(ResultsStoreTest, FailureRecordHasNoFiguresAndGivesWayToALaterOkResult) {
  ASSERT_TRUE(store_->MarkRunning(run0_, 1, "a").ok());
  capnp::MallocMessageBuilder failed;
  BuildResult(failed, 1);
  failed.getRoot<schema::RunResult>().setStatus(schema::RunStatus::FAILED);
  bool duplicate = true;
  ASSERT_TRUE(store_->CommitResult(failed.getRoot<schema::RunResult>(), false, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  EXPECT_EQ(Cell("SELECT status FROM runs WHERE run_id='" + run0_ + "'"), "failed");
  // Figures of a failed result are NULL ("n/a"), conditions stay.
  EXPECT_EQ(Cell("SELECT output_throughput IS NULL AND completed IS NULL FROM results"), "1");
  EXPECT_EQ(Cell("SELECT result_status FROM results"), "failed");

  // Another failure does not replace it; an ok result of an earlier attempt does.
  capnp::MallocMessageBuilder failed_again;
  BuildResult(failed_again, 2);
  failed_again.getRoot<schema::RunResult>().setStatus(schema::RunStatus::FAILED);
  ASSERT_TRUE(
      store_->CommitResult(failed_again.getRoot<schema::RunResult>(), false, &duplicate).ok());
  EXPECT_TRUE(duplicate);
  capnp::MallocMessageBuilder ok;
  BuildResult(ok, 1);
  ASSERT_TRUE(store_->CommitResult(ok.getRoot<schema::RunResult>(), true, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  EXPECT_EQ(Cell("SELECT COUNT(*) || ':' || MAX(result_status) || ':' || MAX(output_throughput) "
                 "FROM results"),
            "1:ok:123.5");
  EXPECT_EQ(Cell("SELECT COUNT(*) FROM requests"), "3");
  EXPECT_EQ(Cell("SELECT status FROM runs WHERE run_id='" + run0_ + "'"), "done");
}

TEST_F(ResultsStoreTest, SummaryHasOneRowPerRunWithEveryRecordColumn) {
  Table summary;
  ASSERT_TRUE(store_->QuerySummary(&summary).ok());
  EXPECT_EQ(summary.rows.size(), 3u);
  EXPECT_EQ(summary.columns.size(), 6 + RecordColumns().size());
  EXPECT_TRUE(summary.is_null[0].back());  // nothing measured yet
}

}  // namespace
}  // namespace servesweep::results

namespace servesweep::results {
namespace {

// Group commit: writes between BeginBatch and CommitBatch are invisible to another connection
// (not durable) until the one COMMIT; a write that fails inside the batch rolls back alone.
TEST_F(ResultsStoreTest, GroupCommitIsDurableOnlyAtCommitBatchAndKeepsEachWriteAtomic) {
  std::unique_ptr<ResultsStore> reader;
  ASSERT_TRUE(ResultsStore::Open(path_, &reader).ok());
  auto reader_cell = [&](const std::string& sql) {
    Table t;
    EXPECT_TRUE(reader->Query(sql, &t).ok()) << sql;
    return t.rows.empty() ? "<none>" : t.rows[0][0];
  };
  store_->BeginBatch();
  ASSERT_TRUE(store_->MarkRunning(run0_, 1, "a").ok());
  capnp::MallocMessageBuilder message;
  BuildResult(message, 1);
  bool duplicate = true;
  ASSERT_TRUE(
      store_->CommitResult(message.getRoot<schema::RunResult>().asReader(), true, &duplicate).ok());
  EXPECT_FALSE(duplicate);
  // A write that fails inside the batch (the sweep's runs again: their ids are taken) rolls back
  // alone: its meta rows with it, the batch's other writes stay.
  const std::string created = Cell("SELECT value FROM meta WHERE key='created_unix_ms'");
  EXPECT_FALSE(store_->InitSweep(matrix_->matrix(), "changed text").ok());
  EXPECT_EQ(Cell("SELECT value FROM meta WHERE key='created_unix_ms'"), created);
  EXPECT_NE(Cell("SELECT value FROM meta WHERE key='matrix_text'"), "changed text");
  // The writer sees its batch; another connection does not, yet.
  EXPECT_EQ(Cell("SELECT status FROM runs WHERE run_id='" + run0_ + "'"), "done");
  EXPECT_EQ(reader_cell("SELECT COUNT(*) FROM results"), "0");
  EXPECT_EQ(reader_cell("SELECT status FROM runs WHERE run_id='" + run0_ + "'"), "pending");
  ASSERT_TRUE(store_->CommitBatch().ok());
  EXPECT_EQ(reader_cell("SELECT COUNT(*) FROM results WHERE run_id='" + run0_ + "'"), "1");
  EXPECT_EQ(reader_cell("SELECT COUNT(*) FROM requests WHERE run_id='" + run0_ + "'"), "3");
  EXPECT_EQ(reader_cell("SELECT status FROM runs WHERE run_id='" + run0_ + "'"), "done");
  EXPECT_EQ(reader_cell("SELECT outcome FROM attempts WHERE run_id='" + run0_ + "'"), "committed");
  // After the batch, writes commit one by one again.
  ASSERT_TRUE(store_->MarkRunning(matrix_->matrix().getRuns()[1].getRunId(), 1, "b").ok());
  EXPECT_EQ(reader_cell("SELECT COUNT(*) FROM runs WHERE status='running'"), "1");
  // An empty batch commits nothing and is fine.
  store_->BeginBatch();
  EXPECT_TRUE(store_->CommitBatch().ok());
}

TEST(ValidityNames, RoundTripAndAnUnknownNameIsRefusedWithWhatWasExpected) {
  for (const auto v : {schema::Validity::NOT_JUDGED, schema::Validity::VALID,
                       schema::Validity::INVALID, schema::Validity::NOT_RECONCILED}) {
    schema::Validity back = schema::Validity::VALID;
    ASSERT_TRUE(ParseValidity(ValidityName(v), &back).ok());
    EXPECT_EQ(back, v);
  }
  EXPECT_EQ(ValidityName(schema::Validity::NOT_RECONCILED), "not reconciled");
  schema::Validity v;
  const Status s = ParseValidity("Valid", &v);
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("found \"Valid\""), std::string::npos) << s.message();
}

TEST_F(ResultsStoreTest, TypedReadsGiveTheCommittedFieldsVerdictsAndNulls) {
  capnp::MallocMessageBuilder message;
  BuildResult(message, 1);
  auto record = message.getRoot<schema::RunResult>().getRecord();
  record.setValidity(schema::Validity::INVALID);
  record.setValidityReasons("requests: the client counted 3, the engine 2 (tolerance 0)");
  record.setClientBound(true);
  record.setClientBoundReasons("busy load thread");
  record.setGpuModel("H200");
  bool duplicate = false;
  ASSERT_TRUE(store_->CommitResult(message.getRoot<schema::RunResult>(), true, &duplicate).ok());

  std::vector<UncertifiedRun> uncertified;
  ASSERT_TRUE(LoadUncertifiedRuns(*store_, &uncertified).ok());
  ASSERT_EQ(uncertified.size(), 1u);
  EXPECT_EQ(uncertified[0].label, "concurrency=1");
  EXPECT_EQ(uncertified[0].completed, 3);
  EXPECT_EQ(uncertified[0].validity, schema::Validity::INVALID);
  EXPECT_TRUE(uncertified[0].client_bound);
  EXPECT_EQ(uncertified[0].client_bound_reasons, "busy load thread");

  std::map<std::string, ResultFigures> figures;
  ASSERT_TRUE(LoadOkResultFigures(*store_, {"output_throughput", "goodput"}, &figures).ok());
  ASSERT_EQ(figures.count(run0_), 1u);
  ASSERT_TRUE(figures[run0_].values[0].has_value());
  EXPECT_DOUBLE_EQ(*figures[run0_].values[0], 123.5);
  EXPECT_FALSE(figures[run0_].values[1].has_value());  // NaN is stored as NULL
  EXPECT_EQ(LoadOkResultFigures(*store_, {"output_throughput\"; DROP TABLE results; --"}, &figures)
                .code(),
            StatusCode::kInvalidArgument);

  std::map<std::string, std::string> gpu_models;
  ASSERT_TRUE(LoadGpuModels(*store_, &gpu_models).ok());
  EXPECT_EQ(gpu_models[run0_], "H200");
}

}  // namespace
}  // namespace servesweep::results
