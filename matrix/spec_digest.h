// A stable digest of a run spec with some of its keys cleared: the one rule behind every
// "runs that share all keys but these" grouping (engine configurations, load ladders).
//
// Thread-safety: a pure function.
#pragma once

#include <functional>
#include <string>

#include "schema/run_spec.capnp.h"

namespace servesweep::matrix {

// 12 hex digits of a stable hash of the canonical bytes of a copy of `spec` after `clear_keys`
// has cleared (set to their defaults) the keys the grouping ignores. The canonical form makes
// the digest independent of how the spec's builder laid out its segments.
std::string SpecDigestWithout(schema::RunSpec::Reader spec,
                              const std::function<void(schema::RunSpec::Builder)>& clear_keys);

}  // namespace servesweep::matrix
