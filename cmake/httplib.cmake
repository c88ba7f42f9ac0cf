# cpp-httplib (Debian libcpp-httplib-dev, through pkg-config) for the HTTP examples and the
# end-to-end tests. Include it from any directory: it defines the global imported target
# PkgConfig::HOLDBACK_CPPHTTPLIB once, when the library is found (HOLDBACK_CPPHTTPLIB_FOUND).
# The pkg-config flags matter: the Debian library is built with CPPHTTPLIB_OPENSSL_SUPPORT etc.,
# which change the layout of httplib's classes.
if(NOT TARGET PkgConfig::HOLDBACK_CPPHTTPLIB)
  find_package(PkgConfig QUIET)
  if(PkgConfig_FOUND)
    pkg_check_modules(HOLDBACK_CPPHTTPLIB QUIET IMPORTED_TARGET GLOBAL cpp-httplib)
  endif()
endif()
