// Implementation of holdback/detector/saturation_detector.hpp: compiled into libholdback by
// src/saturation_detector.cpp, or included by the header itself in header-only mode
// (HOLDBACK_HEADER_ONLY, holdback::header_only).
#pragma once

#include "holdback/detector/saturation_detector.hpp"

namespace holdback {
inline namespace HOLDBACK_ABI_NAMESPACE {

HOLDBACK_INLINE EndpointRole parseEndpointRole(std::string_view label) noexcept {
  if (label.empty() || label == "decode") return EndpointRole::kDecode;
  if (label == "prefill") return EndpointRole::kPrefill;
  if (label == "encode-prefill") return EndpointRole::kEncodePrefill;
  if (label == "prefill-decode" || label == "both") return EndpointRole::kPrefillDecode;
  if (label == "encode-prefill-decode") return EndpointRole::kEncodePrefillDecode;
  if (label == "encode") return EndpointRole::kEncode;
  return EndpointRole::kUnknown;
}

HOLDBACK_INLINE std::string_view toString(EndpointRole role) noexcept {
  switch (role) {
    case EndpointRole::kDecode:
      return "decode";
    case EndpointRole::kPrefill:
      return "prefill";
    case EndpointRole::kEncodePrefill:
      return "encode-prefill";
    case EndpointRole::kPrefillDecode:
      return "prefill-decode";
    case EndpointRole::kEncodePrefillDecode:
      return "encode-prefill-decode";
    case EndpointRole::kEncode:
      return "encode";
    case EndpointRole::kUnknown:
      return "unknown";
  }
  return "unknown";
}

}  // namespace HOLDBACK_ABI_NAMESPACE
}  // namespace holdback
