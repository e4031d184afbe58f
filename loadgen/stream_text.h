// The generated text of one streamed chunk, for multi-turn sessions whose next prompt carries the
// answers as received: completions `choices[0].text`, chat `delta.content`. Reasoning and tool
// calls are not part of the conversation text. A second parse of the payload, done only when a
// source asks for answers (sessions), so the measuring path of other modes is untouched.
#pragma once

#include <string>
#include <string_view>

namespace servesweep::loadgen {

// Appends the chunk's text to *out; payloads that are not such a chunk add nothing.
void AppendChunkText(std::string_view payload, std::string* out);

}  // namespace servesweep::loadgen
