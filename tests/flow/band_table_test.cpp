// detail::BandTable internals (issue 19): the flow-id order of the active set compares an 8-byte
// prefix first; it must order exactly as the string comparison it replaced, for every input.
// detail/ headers are not self-contained in header-only mode (band_table.hpp reaches
// flow_controller.hpp, whose -inl includes band_table-inl.hpp): enter through the public header.
#include "holdback/flow/flow_controller.hpp"
// (a separate block, so that include sorting keeps the order)
#include "holdback/flow/detail/band_table.hpp"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <string_view>

namespace holdback {
namespace {

TEST(BandTableTest, IdPrefixOrderMatchesStringOrderOnFuzzedIds) {
  std::mt19937_64 rng(1919);
  // A small alphabet with NUL and a high byte, so prefixes collide, ids share prefixes and
  // unsigned/signed char order would differ.
  const char alphabet[] = {'\0', 'a', 'b', 'f', '-', '1', static_cast<char>(0xff)};
  std::uniform_int_distribution<int> length(0, 12);
  std::uniform_int_distribution<int> letter(0, static_cast<int>(sizeof(alphabet)) - 1);
  const auto randomId = [&] {
    std::string s(static_cast<std::size_t>(length(rng)), 'a');
    for (char& c : s) c = alphabet[letter(rng)];
    return s;
  };
  const detail::IdLess less;
  for (int round = 0; round < 200000; ++round) {
    const std::string a = randomId();
    const std::string b = round % 3 == 0 ? a + randomId() : randomId();
    const std::string_view va = a;
    const std::string_view vb = b;
    ASSERT_EQ(less(va, vb), va < vb) << round;
    ASSERT_EQ(less(vb, va), vb < va) << round;
  }
}

}  // namespace
}  // namespace holdback
