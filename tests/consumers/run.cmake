# Builds and runs one consumer project: cmake -DKIND=find_package|add_subdirectory|fetch_content
#   -DSOURCE=<holdback source> -DBUILD=<holdback build dir> -DWORK=<scratch dir> -P run.cmake
#
# find_package: installs holdback, checks the exported targets name no absolute path and that no
# simulator header is installed, then moves the installed tree to another prefix (the original is
# deleted) and builds against the moved copy, with CMake and with pkg-config. add_subdirectory and
# FetchContent: checks the simulator is not built. The consumers compile with -Wall -Werror.
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}\n${out}\n${err}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

cmake_minimum_required(VERSION 3.20)
file(REMOVE_RECURSE ${WORK})
# The program of docs/guide/getting-started.md, extracted as CI's doc check does (cmake/doc_snippets.cmake).
set(PROJECT_SOURCE_DIR ${SOURCE})
include(${SOURCE}/cmake/doc_snippets.cmake)
set(unused_snippets)
set(getting_started)
holdback_extract_doc_snippets(${SOURCE}/docs/guide/getting-started.md ${WORK}/doc unused_snippets
                              getting_started)
if(NOT getting_started)
  message(FATAL_ERROR "docs/guide/getting-started.md has no program")
endif()
set(args -DHOLDBACK_SOURCE_DIR=${SOURCE} -DHOLDBACK_GETTING_STARTED=${getting_started})
if(KIND STREQUAL "find_package")
  run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${WORK}/installed --component Unspecified)
  file(GLOB_RECURSE exported ${WORK}/installed/*holdbackTargets*.cmake)
  if(NOT exported)
    message(FATAL_ERROR "no holdbackTargets*.cmake was installed")
  endif()
  foreach(file IN LISTS exported)
    file(READ ${file} text)
    # Absolute paths outside the installed tree (its own prefix is computed from the file's
    # location, _IMPORT_PREFIX): a library, a header directory, the build or source tree.
    string(REPLACE "\${_IMPORT_PREFIX}" "IMPORT_PREFIX" text "${text}")
    if(text MATCHES "[ ;:\"](/[A-Za-z][^ ;>\"]*)")
      message(FATAL_ERROR "${file} names an absolute path (${CMAKE_MATCH_1}): not relocatable")
    endif()
  endforeach()
  if(EXISTS ${WORK}/installed/include/holdback/sim)
    message(FATAL_ERROR "the simulator's headers were installed (include/holdback/sim)")
  endif()
  # Relocation: the tree copied to another prefix, the original removed.
  file(COPY ${WORK}/installed/ DESTINATION ${WORK}/prefix)
  file(REMOVE_RECURSE ${WORK}/installed)
  list(APPEND args -DCMAKE_PREFIX_PATH=${WORK}/prefix)
  # Every installed public header (but the GoogleTest suites) compiles under the strictest
  # warnings a host may use, as a plain -I include (CMake would make them SYSTEM, hiding
  # warnings), in both modes.
  file(GLOB_RECURSE headers RELATIVE ${WORK}/prefix/include ${WORK}/prefix/include/holdback/*.hpp)
  list(FILTER headers EXCLUDE REGEX "-inl\\.hpp$|/detail/|^holdback/testing/")
  set(all_headers "")
  foreach(header IN LISTS headers)
    string(APPEND all_headers "#include \"${header}\"\n")
  endforeach()
  file(WRITE ${WORK}/all_headers.cpp "${all_headers}int main() { return 0; }\n")
  foreach(mode_flag -DHOLDBACK_COMPILED_MODE -DHOLDBACK_HEADER_ONLY)
    run(c++ -std=c++20 -fsyntax-only -Wall -Wextra -Wpedantic -Werror ${mode_flag}
        -I${WORK}/prefix/include ${WORK}/all_headers.cpp)
  endforeach()
  # The pkg-config file: build the same consumer with nothing but its flags.
  file(GLOB_RECURSE pc ${WORK}/prefix/*holdback.pc)
  if(NOT pc)
    message(FATAL_ERROR "holdback.pc was not installed")
  endif()
  get_filename_component(pc_dir ${pc} DIRECTORY)
  set(ENV{PKG_CONFIG_PATH} ${pc_dir})
  run(pkg-config --cflags --libs holdback)
  string(STRIP "${last_output}" pc_flags)
  separate_arguments(pc_flags UNIX_COMMAND "${pc_flags}")
  file(MAKE_DIRECTORY ${WORK}/pkgconfig)
  run(c++ -std=c++20 -Wall -Werror ${SOURCE}/tests/consumers/main.cpp -o ${WORK}/pkgconfig/consumer ${pc_flags})
  run(${WORK}/pkgconfig/consumer)
  if(NOT last_output MATCHES "^holdback [0-9]+\\.[0-9]+\\.[0-9]+: 0.90 0.65 0.40")
    message(FATAL_ERROR "pkg-config consumer printed: ${last_output}")
  endif()
endif()
# Build type None (no optimization flags): the add_subdirectory and FetchContent consumers compile
# holdback from source, and this is about packaging, not speed (Release took ~100 s each in CI).
# They also build it as a consumer with CMAKE_UNITY_BUILD does (the library's layers in one
# batch): that must work too, and it takes about 40 % less compile time (68 -> 40 CPU seconds).
if(NOT KIND STREQUAL "find_package")
  list(APPEND args -DCMAKE_UNITY_BUILD=ON)
endif()
run(${CMAKE_COMMAND} -S ${SOURCE}/tests/consumers/${KIND} -B ${WORK}/build ${args}
    -DCMAKE_BUILD_TYPE=None)
run(${CMAKE_COMMAND} --build ${WORK}/build -j 2)
if(NOT KIND STREQUAL "find_package")
  file(GLOB_RECURSE sim_built ${WORK}/build/*holdback_sim*)
  if(sim_built)
    message(FATAL_ERROR "the simulator was built for a ${KIND} consumer: ${sim_built}")
  endif()
endif()
run(${WORK}/build/consumer)
message(STATUS "${last_output}")
if(NOT last_output MATCHES "^holdback [0-9]+\\.[0-9]+\\.[0-9]+: 0.90 0.65 0.40")
  message(FATAL_ERROR "unexpected consumer output: ${last_output}")
endif()
if(KIND STREQUAL "find_package")
  run(${WORK}/build/consumer_header_only)
  message(STATUS "header-only: ${last_output}")
  if(NOT last_output MATCHES "^holdback [0-9]+\\.[0-9]+\\.[0-9]+: 0.90 0.65 0.40")
    message(FATAL_ERROR "unexpected header-only consumer output: ${last_output}")
  endif()
endif()
# The getting-started page's program, built with -Wall -Werror: dispatches every request with code
# options, and runs with the reservation-eviction example config (eviction on: the page's evict).
run(${WORK}/build/getting_started)
message(STATUS "getting started: ${last_output}")
if(NOT last_output MATCHES "dispatched 6 of 6; cycles [0-9]+, gated with every endpoint stale 0")
  message(FATAL_ERROR "unexpected getting-started output: ${last_output}")
endif()
run(${WORK}/build/getting_started ${SOURCE}/examples/configs/reservation-eviction.yaml)
message(STATUS "getting started with reservation-eviction.yaml: ${last_output}")
