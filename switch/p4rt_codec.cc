// SPDX-License-Identifier: Apache-2.0
// P4Runtime bit strings (p4rt_codec.h).
#include "p4rt_codec.h"

#include <cstring>

namespace p4rt_server
{

bool decode_bits(const std::string &bytes, int bitwidth, Bits *out,
		 std::string *why)
{
	size_t first = 0;
	while (first < bytes.size() && bytes[first] == 0)
		first++;
	size_t significant = bytes.size() - first;
	if (bytes.empty()) {
		*why = "empty bytestring";
		return false;
	}
	if (significant > 16 ||
	    (significant > 0 &&
	     (int)(8 * (significant - 1) +
		   (32 - __builtin_clz((unsigned char)bytes[first]))) >
		     bitwidth)) {
		*why = "value does not fit in " + std::to_string(bitwidth) +
		       " bits";
		return false;
	}
	*out = Bits();
	std::memcpy(out->b + 16 - significant, bytes.data() + first,
		    significant);
	return true;
}

std::string canonical(const Bits &bits)
{
	int first = 0;
	while (first < 15 && bits.b[first] == 0)
		first++;
	return std::string(reinterpret_cast<const char *>(bits.b + first),
			   16 - first);
}

std::string canonical_u64(uint64_t v)
{
	Bits bits;
	for (int i = 15; i >= 8; i--, v >>= 8)
		bits.b[i] = (uint8_t)v;
	return canonical(bits);
}

Bits prefix_mask(int bitwidth, int prefix_len)
{
	Bits mask;
	for (int bit = 0; bit < prefix_len; bit++) {
		int position = bitwidth - 1 - bit; // from the least significant
		mask.b[15 - position / 8] |= (uint8_t)(1u << (position % 8));
	}
	return mask;
}

Bits width_mask(int bitwidth)
{
	return prefix_mask(bitwidth, bitwidth);
}

} // namespace p4rt_server
