# Generates a C++ source with the text of each template, so the binary needs no source tree.
# Inputs: SOURCE_DIR, OUTPUT, TEMPLATES (paths relative to SOURCE_DIR, ';'-separated).
set(entries "")
foreach(path IN LISTS TEMPLATES)
  file(READ "${SOURCE_DIR}/${path}" text)
  string(APPEND entries "    {\"${path}\", R\"tmpl_(${text})tmpl_\"},\n")
endforeach()
file(WRITE "${OUTPUT}.tmp" "// Generated from the templates in the source tree; do not edit.
#include <map>
#include <string_view>

#include \"submit/template_renderer.h\"

namespace servesweep::submit {

std::string_view EmbeddedTemplate(std::string_view path) {
  static const std::map<std::string_view, std::string_view> kTemplates = {
${entries}  };
  auto it = kTemplates.find(path);
  return it == kTemplates.end() ? std::string_view() : it->second;
}

}  // namespace servesweep::submit
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
