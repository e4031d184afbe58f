// Sorting the figures a run's percentiles come from (per-token ITLs: tens of thousands per run,
// summarised once per virtual run, so hundreds of times per calibration fit): a radix sort on the
// values' bits, exactly the order std::sort gives, a few times faster on large inputs.
#pragma once

#include <vector>

namespace servesweep {

// Sorts ascending, as std::sort with operator< does for numbers (-inf .. +inf; -0 before +0,
// which compare equal). NaNs go to the ends (negative ones first, positive ones last) rather
// than anywhere, as std::sort may put them.
void SortDoubles(std::vector<double>* values);

}  // namespace servesweep
