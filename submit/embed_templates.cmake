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
#include <vector>

#include \"submit/template_renderer.h\"

namespace servesweep::submit {

namespace {
const std::map<std::string_view, std::string_view>& Templates() {
  static const std::map<std::string_view, std::string_view> templates = {
${entries}  };
  return templates;
}
}  // namespace

std::string_view EmbeddedTemplate(std::string_view path) {
  auto it = Templates().find(path);
  return it == Templates().end() ? std::string_view() : it->second;
}

std::vector<std::string_view> EmbeddedTemplatePaths() {
  std::vector<std::string_view> paths;
  for (const auto& entry : Templates()) paths.push_back(entry.first);
  return paths;
}

}  // namespace servesweep::submit
")
execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
