/* SPDX-License-Identifier: Apache-2.0 */
/*
 * sw_crc16 is BMv2's crc16 (CRC-16/ARC), eight bytes at a time: it must
 * give the catalogue's check value and agree with the CRC computed a bit
 * at a time, at every length and alignment the tables are walked with. A
 * flow that hashed otherwise would take another ECMP member than on BMv2.
 */
#include <stdio.h>
#include <string.h>

#include "pipeline_internal.h"

/* CRC-16/ARC from its definition: reflected polynomial 0x8005, init 0, no
 * final xor. */
static uint16_t crc16_bitwise(const uint8_t *data, uint32_t length)
{
	uint16_t crc = 0;

	for (uint32_t i = 0; i < length; i++) {
		crc ^= data[i];
		for (int bit = 0; bit < 8; bit++)
			crc = (crc & 1) ? (uint16_t)((crc >> 1) ^ 0xa001)
					: (uint16_t)(crc >> 1);
	}
	return crc;
}

int main(void)
{
	static struct sw_pipeline pipeline; /* its set-up fills the tables */
	uint8_t data[96 + 8];
	uint64_t state = 0x853c49e6748fea9bull;
	int failures = 0;

	if (sw_pipeline_init(&pipeline, 512, 255, 0) != 0)
		return 1;
	/* The catalogue's check value of CRC-16/ARC. */
	if (sw_crc16((const uint8_t *)"123456789", 9) != 0xbb3d) {
		fprintf(stderr, "test_crc16: check value %#x, not 0xbb3d\n",
			sw_crc16((const uint8_t *)"123456789", 9));
		failures++;
	}
	for (int round = 0; round < 200; round++) {
		for (size_t i = 0; i < sizeof(data); i++) {
			state ^= state << 13;
			state ^= state >> 7;
			state ^= state << 17;
			data[i] = (uint8_t)state;
		}
		for (uint32_t offset = 0; offset < 8; offset++)
			for (uint32_t length = 0; length <= 96; length++) {
				uint16_t fast = sw_crc16(data + offset, length);
				uint16_t slow =
					crc16_bitwise(data + offset, length);

				if (fast != slow && failures++ < 10)
					fprintf(stderr,
						"test_crc16: %u bytes at %u: "
						"%#x, not %#x\n",
						length, offset, fast, slow);
			}
	}
	sw_pipeline_free(&pipeline);
	if (failures > 0)
		return 1;
	printf("test_crc16: the check value, and 155,200 inputs of 0 to 96 "
	       "bytes agree with the bitwise CRC\n");
	return 0;
}
