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
