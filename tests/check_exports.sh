#!/bin/sh
# Checks what a shared libholdback exports: check_exports.sh LIBRARY ABI_TAG
# Every other defined dynamic symbol must belong to the inline ABI namespace (holdback::<ABI_TAG>::,
# including its vtables and typeinfo): no nlohmann_json or standard-library instantiations, no
# inline helpers, nothing from holdback's internal detail namespaces.
set -eu
lib=$1
abi=$2
# Weak instantiations of standard-library templates (members of std::map<std::string, ...>,
# std::__detail helpers of <charconv>) are emitted with default visibility by every user of the
# template; they are not holdback's API and are left out, recognized by their mangled names
# (_ZNSt..., _ZSt..., _ZTISt..., _ZZNSt...: entities of namespace std and their statics).
symbols=$(nm -D --defined-only "$lib" | sed -E 's/^[0-9a-f]* +//' |
  grep -Ev '^[WVu] _Z(Z|T[ISV])?N?K?St' | sed -E 's/^[A-Za-z] //' | c++filt)
total=$(printf '%s\n' "$symbols" | grep -c . || true)
pattern="^((typeinfo|typeinfo name|vtable|VTT|guard variable) for |(non-)?virtual thunk to )?holdback::$abi::"
outside=$(printf '%s\n' "$symbols" | grep -Ev "$pattern" || true)
internal=$(printf '%s\n' "$symbols" | grep -E '::detail::|anonymous namespace' || true)
status=0
if [ -n "$outside" ]; then
  echo "exported outside holdback::$abi::"
  printf '%s\n' "$outside" | head -20
  status=1
fi
if [ -n "$internal" ]; then
  echo "internal helpers exported:"
  printf '%s\n' "$internal" | head -20
  status=1
fi
for needed in "holdback::$abi::FlowController::create" "holdback::$abi::config::loadEndpointPickerConfigText" \
  "typeinfo for holdback::$abi::UsageLimitPolicy"; do
  if ! printf '%s\n' "$symbols" | grep -qF "$needed"; then
    echo "missing export: $needed"
    status=1
  fi
done
echo "$total symbols exported from $lib"
exit $status
