// ABI and build-mode switches shared by every public header.
//
// Inline ABI namespace: every public declaration lives in `holdback::HOLDBACK_ABI_NAMESPACE`
// (`holdback::v0_1` for version 0.1.x), an inline namespace, so code keeps writing
// `holdback::FlowController` while the mangled names carry the ABI version: two holdback versions
// with different ABIs linked into one program fail to link instead of mixing silently. The name
// comes from project(VERSION) through the generated holdback/version.hpp, the one source of truth:
// `v<major>_<minor>` while the major version is 0 (each minor release may break the ABI), then
// `v<major>`.
#pragma once

#include "holdback/version.hpp"

// HOLDBACK_API marks what a host calls: the public classes and functions. The library is built
// with hidden visibility (CMake CXX_VISIBILITY_PRESET hidden, VISIBILITY_INLINES_HIDDEN), so a
// shared libholdback exports exactly these, all in the ABI namespace, and nothing internal.
// HOLDBACK_SHARED is set by the CMake target when it is a shared library (BUILD_SHARED_LIBS=ON);
// a static or header-only build needs no marking.
#if !defined(HOLDBACK_SHARED) || defined(HOLDBACK_HEADER_ONLY)
#define HOLDBACK_API
#elif defined(_WIN32)
#ifdef HOLDBACK_EXPORTS
#define HOLDBACK_API __declspec(dllexport)
#else
#define HOLDBACK_API __declspec(dllimport)
#endif
#else
#define HOLDBACK_API [[gnu::visibility("default")]]
#endif

// HOLDBACK_LOCAL marks a member of a HOLDBACK_API class that only the library itself calls and
// whose signature names an internal (detail) type: it stays out of a shared library's exports.
#if defined(HOLDBACK_SHARED) && !defined(HOLDBACK_HEADER_ONLY) && !defined(_WIN32)
#define HOLDBACK_LOCAL [[gnu::visibility("hidden")]]
#else
#define HOLDBACK_LOCAL
#endif

// Exceptions. The library never throws into the host. Built as usual it catches, at a handful of
// places, what it cannot rule out: an allocation failure while growing a scratch buffer (it then
// fails closed) and a host callback that throws (swallowed: the outcome counts as delivered).
// Built with -fno-exceptions (CMake option HOLDBACK_NO_EXCEPTIONS, or a header-only host compiled
// that way) those blocks compile to plain code: there is nothing to catch, and an allocation
// failure or a throwing host callback ends the process through std::terminate/std::abort, as
// anywhere in a -fno-exceptions program. HOLDBACK_TRY { ... } HOLDBACK_CATCH_ALL { ... } is the
// only form used; the catch block must not name the exception.
#if defined(__cpp_exceptions) || defined(__EXCEPTIONS) || defined(_CPPUNWIND)
#define HOLDBACK_HAS_EXCEPTIONS 1
#define HOLDBACK_TRY try
#define HOLDBACK_CATCH_ALL catch (...)
#else
#define HOLDBACK_HAS_EXCEPTIONS 0
#define HOLDBACK_TRY if (true)
#define HOLDBACK_CATCH_ALL if (false)
#endif

// Header-only mode (the holdback::header_only CMake target defines HOLDBACK_HEADER_ONLY): every
// header includes its implementation (<name>-inl.hpp) and HOLDBACK_INLINE makes those definitions
// inline. In the compiled library (holdback::holdback) src/<name>.cpp includes the same file once.
#ifdef HOLDBACK_HEADER_ONLY
#define HOLDBACK_INLINE inline
#else
#define HOLDBACK_INLINE
#endif
