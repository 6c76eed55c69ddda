# Registers a GoogleTest binary with ctest from the tests its sources declare, so that no
# hand-written --gtest_filter list can drift from the code (one did: `PairVerifier.*` matched
# none of the PairVerifierTest/PairVerifierLoad tests, and ctest passed on zero tests run).
#
#   tidegate_add_gtest(<target> PREFIX <ctest name prefix> [PER_CASE] [PROPERTIES <ctest props>...])
#
# Default: one ctest entry per test suite, named <prefix><suite in lower case>, so ctest -j
# spreads a binary's heavy suites. PER_CASE: one entry per test, named <prefix><Case>, for tests
# that each drive real processes and deserve their own timeout. Suites of value-parameterised
# tests (TEST_P) are matched under every instantiation (*/Suite.*). The sources are read at
# configure time; CMAKE_CONFIGURE_DEPENDS re-runs the configure step when one changes.
function(tidegate_add_gtest target)
  cmake_parse_arguments(ARG "PER_CASE" "PREFIX" "PROPERTIES" ${ARGN})
  get_target_property(_sources ${target} SOURCES)
  get_target_property(_dir ${target} SOURCE_DIR)
  set(_suites "")
  set(_cases "")
  foreach(_src IN LISTS _sources)
    if(NOT IS_ABSOLUTE "${_src}")
      set(_src "${_dir}/${_src}")
    endif()
    if(NOT _src MATCHES "\\.(cc|cpp)$")
      continue()
    endif()
    set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_src}")
    file(STRINGS "${_src}" _lines REGEX "^[ \t]*TEST(_F|_P)?\\([ \t]*[A-Za-z0-9_]+[ \t]*,[ \t]*[A-Za-z0-9_]+")
    foreach(_line IN LISTS _lines)
      string(REGEX MATCH "TEST(_F|_P)?\\([ \t]*([A-Za-z0-9_]+)[ \t]*,[ \t]*([A-Za-z0-9_]+)" _m "${_line}")
      set(_suite "${CMAKE_MATCH_2}")
      set(_case "${CMAKE_MATCH_3}")
      set(_pattern "${_suite}")
      if(CMAKE_MATCH_1 STREQUAL "_P")
        set(_pattern "*/${_suite}")
      endif()
      list(APPEND _suites "${_pattern}")
      list(APPEND _cases "${_pattern}.${_case}")
    endforeach()
  endforeach()
  list(REMOVE_DUPLICATES _suites)
  if(NOT _suites)
    message(FATAL_ERROR "tidegate_add_gtest(${target}): no TEST, TEST_F or TEST_P found in its sources")
  endif()
  set(_names "")
  if(ARG_PER_CASE)
    foreach(_full IN LISTS _cases)
      string(REGEX REPLACE "^.*\\." "" _case "${_full}")
      set(_name "${ARG_PREFIX}${_case}")
      add_test(NAME ${_name} COMMAND ${target} --gtest_filter=${_full})
      list(APPEND _names ${_name})
    endforeach()
  else()
    foreach(_pattern IN LISTS _suites)
      string(REPLACE "*/" "" _suite "${_pattern}")
      string(TOLOWER "${_suite}" _lower)
      set(_name "${ARG_PREFIX}${_lower}")
      add_test(NAME ${_name} COMMAND ${target} --gtest_filter=${_pattern}.*)
      list(APPEND _names ${_name})
    endforeach()
  endif()
  if(ARG_PROPERTIES)
    set_tests_properties(${_names} PROPERTIES ${ARG_PROPERTIES})
  endif()
endfunction()

# Tests that assert how long something took (a deadline fired within its bound, a lease moved
# within lease + retries, a down dependency answered fast) measure the code only when nothing
# else competes for the CPU: under `ctest -j` on a 2-core box a neighbour's build-sized burst
# can add seconds. They run alone (RUN_SERIAL) and carry the label `timed`, so
# `ctest -L timed` reruns just them.
#
#   tidegate_timed_tests(<ctest name>...)   (in the directory that added the tests)
function(tidegate_timed_tests)
  set_tests_properties(${ARGN} PROPERTIES RUN_SERIAL TRUE)
  set_property(TEST ${ARGN} APPEND PROPERTY LABELS timed)
endfunction()

# tests/ and bench/: each area owns a subfolder with its own CMakeLists.txt, added here.
macro(tidegate_add_area_folders)
  file(GLOB _area_children LIST_DIRECTORIES true ${CMAKE_CURRENT_SOURCE_DIR}/*)
  foreach(_area_child IN LISTS _area_children)
    if(IS_DIRECTORY ${_area_child} AND EXISTS ${_area_child}/CMakeLists.txt)
      add_subdirectory(${_area_child})
    endif()
  endforeach()
endmacro()
