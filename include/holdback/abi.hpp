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
