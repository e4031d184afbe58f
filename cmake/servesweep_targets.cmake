# How servesweep's targets are declared: warnings, include views and test binaries.
#
# Include views: no target sees the whole source tree. A library's headers are reachable as
# "<folder>/<header>.h" through a folder of its own under <build>/include-views/<target>/, which
# holds a link to its source folder only; a target sees the views of itself and of what it
# links (transitively, through PUBLIC links). So a header of a library a target does not link
# fails to compile ("No such file or directory"): the boundaries of docs/architecture.md are
# enforced by the build (tests/boundaries/ proves it).

# Warnings are errors on our own code; generated and third-party code is compiled without them.
# GCC 12 reports a false -Wrestrict inside std::string's char_traits on short concatenations at
# -O3 (GCC bug 105329, fixed in 13): a Release build would fail on correct code, so the warning is
# off for GCC before 13 only.
set(SERVESWEEP_WARNINGS -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Werror
  $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>)
function(servesweep_warnings target)
  target_compile_options(${target} PRIVATE $<$<COMPILE_LANGUAGE:CXX>:${SERVESWEEP_WARNINGS}>)
endfunction()

# servesweep_include_view(<target> <folder>...): "<folder>/x.h" resolves for <target> and its
# users. <folder> is relative to the project root (e.g. loadgen).
function(servesweep_include_view target)
  set(view ${PROJECT_BINARY_DIR}/include-views/${target})
  foreach(folder IN LISTS ARGN)
    get_filename_component(parent ${view}/${folder} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    if(NOT IS_SYMLINK ${view}/${folder})
      file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${view}/${folder} SYMBOLIC)
    endif()
  endforeach()
  target_include_directories(${target} PUBLIC ${view})
endfunction()

# servesweep_library(<name> FOLDER <folder> SOURCES <file>... [PUBLIC <lib>...] [PRIVATE <lib>...])
# A static library of one folder: its view, its links, warnings as errors.
function(servesweep_library name)
  cmake_parse_arguments(L "" "FOLDER" "SOURCES;PUBLIC;PRIVATE" ${ARGN})
  add_library(${name} STATIC ${L_SOURCES})
  servesweep_include_view(${name} ${L_FOLDER})
  target_link_libraries(${name} PUBLIC ${L_PUBLIC} PRIVATE ${L_PRIVATE})
  servesweep_warnings(${name})
endfunction()

# servesweep_test(<name> SOURCES <file>... LIBS <lib>... [SERIAL]): one GoogleTest binary of a
# library's tests (beside its code), each test a ctest. SERIAL: timing checks, run alone so a
# parallel test does not starve them.
function(servesweep_test name)
  if(NOT SERVESWEEP_BUILD_TESTS)
    return()
  endif()
  cmake_parse_arguments(T "SERIAL" "" "SOURCES;LIBS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} GTest::gtest_main)
  target_compile_definitions(${name} PRIVATE SERVESWEEP_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  servesweep_warnings(${name})
  if(T_SERIAL)
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 30 PROPERTIES RUN_SERIAL TRUE)
  else()
    gtest_discover_tests(${name} DISCOVERY_TIMEOUT 30)
  endif()
endfunction()
