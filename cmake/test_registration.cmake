# holdback_add_gtests(TARGET [LABELS label...] [COST n]): registers a GoogleTest binary with CTest.
# COST (CTest's property; shards only) starts the shards before cheaper tests under ctest -j, so
# a long shard does not run alone at the end (CTest has no timings of its own on a fresh clone).
#
# By default (HOLDBACK_TEST_SHARDS 0) every test of the binary is its own CTest test
# (gtest_discover_tests), so a failure names the test and one test's crash cannot hide another's.
# With HOLDBACK_TEST_SHARDS N > 0 the binary is registered as N CTest tests `TARGET.shard-i-of-N`,
# each running one GoogleTest shard (GTEST_TOTAL_SHARDS / GTEST_SHARD_INDEX) in one process: the
# failing test is still named in the output, and the process start is paid N times instead of
# once per test. scripts/test.sh uses it for the AddressSanitizer stage, where starting the
# Debug + ASan test binaries costs about 0.75 s a process (about two thirds of that stage's test
# time with one process per test).
set(HOLDBACK_TEST_SHARDS 0 CACHE STRING
    "0: one CTest test per GoogleTest test; N > 0: N CTest tests (shards) per test binary")

include(GoogleTest)

function(holdback_add_gtests target)
  cmake_parse_arguments(arg "" "COST" "LABELS" ${ARGN})
  # The test binary's own code is compiled without optimization in every build type: the library
  # it tests keeps the build's optimization (RelWithDebInfo: -O2), and the tests' code compiles in
  # about two thirds of the time (the sanitizer stage runs the same tests at -O0 already).
  target_compile_options(${target} PRIVATE $<$<NOT:$<CONFIG:Debug>>:-O0>)
  # HOLDBACK_UNITY (scripts/test.sh sets it): the binary's files are compiled in unity batches
  # of 16 (holdback_unity_batches), so GoogleTest's, nlohmann_json's and holdback's headers are
  # parsed once per batch instead of once per file, which is most of a test file's compile time
  # at -O0.
  holdback_unity_batches(${target} 16)
  if(HOLDBACK_TEST_SHARDS GREATER 0)
    math(EXPR last "${HOLDBACK_TEST_SHARDS} - 1")
    foreach(i RANGE ${last})
      set(name ${target}.shard-${i}-of-${HOLDBACK_TEST_SHARDS})
      add_test(NAME ${name} COMMAND ${target})
      set_tests_properties(${name} PROPERTIES ENVIRONMENT
                           "GTEST_TOTAL_SHARDS=${HOLDBACK_TEST_SHARDS};GTEST_SHARD_INDEX=${i}")
      if(arg_LABELS)
        set_tests_properties(${name} PROPERTIES LABELS "${arg_LABELS}")
      endif()
      if(arg_COST)
        set_tests_properties(${name} PROPERTIES COST ${arg_COST})
      endif()
    endforeach()
  elseif(arg_LABELS)
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60 PROPERTIES LABELS "${arg_LABELS}")
  else()
    gtest_discover_tests(${target} DISCOVERY_TIMEOUT 60)
  endif()
endfunction()
