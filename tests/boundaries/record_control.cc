// Must compile: the record sees the load generator's summary and the engine's signals.
#include "loadgen/bench_metrics.h"
#include "record/record_builder.h"
#include "scraper/metrics_scraper.h"
