#include "matrix/spec_digest.h"

#include <capnp/message.h>
#include <capnp/serialize.h>

#include "common/ids.h"

namespace servesweep::matrix {

std::string SpecDigestWithout(schema::RunSpec::Reader spec,
                              const std::function<void(schema::RunSpec::Builder)>& clear_keys) {
  capnp::MallocMessageBuilder scratch;
  scratch.setRoot(spec);
  auto copy = scratch.getRoot<schema::RunSpec>();
  clear_keys(copy);
  capnp::MallocMessageBuilder canonical;
  canonical.setRoot(copy.asReader());
  const auto words = capnp::messageToFlatArray(canonical);
  const auto bytes = words.asChars();
  return StableHashHex(std::string_view(bytes.begin(), bytes.size())).substr(0, 12);
}

}  // namespace servesweep::matrix
