# Embeds text files from the source tree into a generated C++ source, so a binary needs no source
# tree at run time. Used for the Slurm/k8s templates (submit/) and the performance-model profiles
# (perfmodel/). Two halves:
#   - include(embed_files) from a CMakeLists.txt, then
#       servesweep_embed_files(OUTPUT <file.cc> NAMESPACE <ns> HEADER <header.h> NAME <Name>
#                              FILES <paths relative to the project root>...)
#     adds a custom command generating <file.cc>, which defines, in namespace <ns>:
#       std::string_view Embedded<Name>(std::string_view path);      // "" if not embedded
#       std::vector<std::string_view> Embedded<Name>Paths();         // sorted
#     (declare both in <header.h>);
#   - run as a script (cmake -P) by that command, with SOURCE_DIR, OUTPUT, FILES, NAMESPACE,
#     HEADER and NAME defined.
if(CMAKE_SCRIPT_MODE_FILE)
  set(entries "")
  foreach(path IN LISTS FILES)
    file(READ "${SOURCE_DIR}/${path}" text)
    string(APPEND entries "    {\"${path}\", R\"embed_(${text})embed_\"},\n")
  endforeach()
  file(WRITE "${OUTPUT}.tmp" "// Generated from files in the source tree by cmake/embed_files.cmake; do not edit.
#include <map>
#include <string_view>
#include <vector>

#include \"${HEADER}\"

namespace ${NAMESPACE} {

namespace {
const std::map<std::string_view, std::string_view>& Embedded${NAME}Map() {
  static const std::map<std::string_view, std::string_view> files = {
${entries}  };
  return files;
}
}  // namespace

std::string_view Embedded${NAME}(std::string_view path) {
  auto it = Embedded${NAME}Map().find(path);
  return it == Embedded${NAME}Map().end() ? std::string_view() : it->second;
}

std::vector<std::string_view> Embedded${NAME}Paths() {
  std::vector<std::string_view> paths;
  for (const auto& entry : Embedded${NAME}Map()) paths.push_back(entry.first);
  return paths;
}

}  // namespace ${NAMESPACE}
")
  execute_process(COMMAND ${CMAKE_COMMAND} -E copy_if_different "${OUTPUT}.tmp" "${OUTPUT}")
  return()
endif()

set(SERVESWEEP_EMBED_SCRIPT ${CMAKE_CURRENT_LIST_FILE})
function(servesweep_embed_files)
  cmake_parse_arguments(ARG "" "OUTPUT;NAMESPACE;HEADER;NAME" "FILES" ${ARGN})
  set(inputs "")
  foreach(path IN LISTS ARG_FILES)
    list(APPEND inputs ${PROJECT_SOURCE_DIR}/${path})
  endforeach()
  string(REPLACE ";" "\\;" files_arg "${ARG_FILES}")
  add_custom_command(OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR} -DOUTPUT=${ARG_OUTPUT}
            "-DFILES=${files_arg}" -DNAMESPACE=${ARG_NAMESPACE} -DHEADER=${ARG_HEADER}
            -DNAME=${ARG_NAME} -P ${SERVESWEEP_EMBED_SCRIPT}
    DEPENDS ${inputs} ${SERVESWEEP_EMBED_SCRIPT}
    COMMENT "Embedding ${ARG_NAME} files")
endfunction()
