// The record's columns as summary.csv shows them (results/record_columns.h).
#include "results/record_columns.h"

#include <capnp/message.h>
#include <gtest/gtest.h>

#include <cmath>
#include <variant>

namespace servesweep::results {
namespace {

TEST(RecordColumns, CostPerCompletedRequestUsesThePriceList) {
  capnp::MallocMessageBuilder message;
  auto result = message.initRoot<schema::RunResult>();
  auto record = result.initRecord();
  record.setCompleted(4);
  record.setTotalInputTokens(4000);
  record.setTotalOutputTokens(2000);
  auto cost_of = [&] {
    for (const auto& column : RecordColumns()) {
      if (column.name == "cost_per_completed_request") {
        return std::get<double>(column.value(result.asReader()));
      }
    }
    return -1.0;
  };
  EXPECT_TRUE(std::isnan(cost_of()));  // no price: n/a, not zero
  auto config = result.initSpec().initEngineConfig();
  config.setPriceInputPerMTok(0.5);
  config.setPriceOutputPerMTok(2.0);
  // (4000 * 0.5 + 2000 * 2.0) / 1e6 over 4 completed requests.
  EXPECT_DOUBLE_EQ(cost_of(), 0.0015);
}

}  // namespace
}  // namespace servesweep::results
