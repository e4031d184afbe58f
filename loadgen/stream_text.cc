#include "loadgen/stream_text.h"

#include <nlohmann/json.hpp>

namespace servesweep::loadgen {

void AppendChunkText(std::string_view payload, std::string* out) {
  const nlohmann::json doc = nlohmann::json::parse(payload, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_object()) return;
  auto choices = doc.find("choices");
  if (choices == doc.end() || !choices->is_array() || choices->empty() ||
      !(*choices)[0].is_object()) {
    return;
  }
  const nlohmann::json& choice = (*choices)[0];
  if (auto text = choice.find("text"); text != choice.end() && text->is_string()) {
    *out += text->get_ref<const std::string&>();
    return;
  }
  auto delta = choice.find("delta");
  if (delta == choice.end() || !delta->is_object()) return;
  if (auto content = delta->find("content"); content != delta->end() && content->is_string()) {
    *out += content->get_ref<const std::string&>();
  }
}

}  // namespace servesweep::loadgen
