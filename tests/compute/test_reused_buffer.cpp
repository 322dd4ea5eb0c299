// A reused buffer (compute/reused_buffer.hpp): the same memory again once nothing else holds it,
// new memory while a holder (a transfer still in flight) keeps the last one or when it is too
// small, and new memory after it is dropped.

#include <catch2/catch.hpp>

#include <cstring>

#include "compute/reused_buffer.hpp"

using namespace troupe::compute;

TEST_CASE("a reused buffer hands its memory out again only once nobody else holds it", "[reused]") {
  ReusedBuffer buffer;
  void* first = nullptr;
  {
    const Tensor taken = buffer.take(1024);
    REQUIRE(taken.nbytes() == 1024);
    first = taken.data();
    std::memset(first, 7, 1024);
  }
  SECTION("released: the same memory, as the last use left it") {
    const Tensor again = buffer.take(1024);
    CHECK(again.data() == first);
    CHECK(static_cast<const unsigned char*>(again.data())[1023] == 7);
  }
  SECTION("smaller once released: the same memory, the size asked") {
    const Tensor smaller = buffer.take(256);
    CHECK(smaller.data() == first);
    CHECK(smaller.nbytes() == 256);
  }
  SECTION("still held elsewhere: new memory, and the held one untouched") {
    const Tensor held = buffer.take(1024);
    const Tensor next = buffer.take(1024);
    CHECK(next.data() != held.data());
    std::memset(next.data(), 1, 1024);
    CHECK(static_cast<const unsigned char*>(held.data())[0] == 7);
  }
  SECTION("larger than the kept one: new memory, zero-filled") {
    const Tensor larger = buffer.take(4096);
    CHECK(larger.nbytes() == 4096);
    CHECK(static_cast<const unsigned char*>(larger.data())[4095] == 0);
  }
  SECTION("dropped: new memory, while a holder keeps the old alive") {
    const Tensor held = buffer.take(1024);
    buffer.drop();
    const Tensor next = buffer.take(1024);
    CHECK(next.data() != held.data());
    CHECK(static_cast<const unsigned char*>(held.data())[0] == 7);
  }
}
