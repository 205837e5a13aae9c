// SPDX-License-Identifier: Apache-2.0
//
// P4Runtime bit strings: a value of a field or parameter decoded to a
// right-aligned 16-byte big-endian number, its canonical (shortest)
// bytestring, and masks.
#pragma once

#include <cstdint>
#include <string>

namespace p4rt_server
{

// A P4Runtime value decoded to a right-aligned 16-byte big-endian number.
struct Bits {
	uint8_t b[16] = {};

	uint64_t u64() const
	{
		uint64_t v = 0;
		for (int i = 8; i < 16; i++)
			v = v << 8 | b[i];
		return v;
	}
	// The last n bytes (an address of n bytes).
	const uint8_t *tail(int n) const
	{
		return b + 16 - n;
	}
	bool zero() const
	{
		for (uint8_t x : b)
			if (x)
				return false;
		return true;
	}
};

// Decodes a bytestring of at most `bitwidth` significant bits. The
// specification allows leading zeros; a value wider than the field is an
// error, as is an empty string.
bool decode_bits(const std::string &bytes, int bitwidth, Bits *out,
		 std::string *why);

// The shortest representation (P4Runtime 1.3's canonical form).
std::string canonical(const Bits &bits);

std::string canonical_u64(uint64_t v);

Bits prefix_mask(int bitwidth, int prefix_len);

Bits width_mask(int bitwidth);

} // namespace p4rt_server
