# Finds libyaml (Debian libyaml-dev) and defines the imported target holdback::libyaml. Included by
# the build and, installed beside holdbackConfig.cmake, by find_package(holdback): the exported
# targets name holdback::libyaml, never a path, so an installed holdback works wherever it is
# copied and wherever the consumer's libyaml is.
#
# pkg-config (yaml-0.1) is asked first when it is available; find_path/find_library (with
# pkg-config's directories as hints) decide. Set HOLDBACK_LIBYAML_LIBRARY and
# HOLDBACK_LIBYAML_INCLUDE_DIR to point at another libyaml.
if(TARGET holdback::libyaml)
  return()
endif()
find_package(PkgConfig QUIET)
if(PKG_CONFIG_FOUND)
  pkg_check_modules(HOLDBACK_PC_LIBYAML QUIET yaml-0.1)
endif()
find_path(HOLDBACK_LIBYAML_INCLUDE_DIR yaml.h HINTS ${HOLDBACK_PC_LIBYAML_INCLUDE_DIRS})
find_library(HOLDBACK_LIBYAML_LIBRARY yaml HINTS ${HOLDBACK_PC_LIBYAML_LIBRARY_DIRS})
if(NOT HOLDBACK_LIBYAML_INCLUDE_DIR OR NOT HOLDBACK_LIBYAML_LIBRARY)
  set(holdback_libyaml_message
      "holdback needs libyaml (yaml.h and libyaml): install libyaml-dev, or set "
      "HOLDBACK_LIBYAML_INCLUDE_DIR and HOLDBACK_LIBYAML_LIBRARY")
  if(CMAKE_FIND_PACKAGE_NAME STREQUAL "holdback")
    # find_package(holdback): report "not found" instead of stopping the consumer's configure.
    set(holdback_FOUND FALSE)
    string(CONCAT holdback_NOT_FOUND_MESSAGE ${holdback_libyaml_message})
    return()
  endif()
  message(FATAL_ERROR ${holdback_libyaml_message})
endif()
if(CMAKE_FIND_PACKAGE_NAME STREQUAL "holdback")
  add_library(holdback::libyaml UNKNOWN IMPORTED)
else()
  # A build of holdback itself, top-level or under add_subdirectory/FetchContent: global, so that
  # the consumer's targets linking a static holdback see it from their own directories.
  add_library(holdback::libyaml UNKNOWN IMPORTED GLOBAL)
endif()
set_target_properties(holdback::libyaml PROPERTIES
  IMPORTED_LOCATION "${HOLDBACK_LIBYAML_LIBRARY}"
  INTERFACE_INCLUDE_DIRECTORIES "${HOLDBACK_LIBYAML_INCLUDE_DIR}")
