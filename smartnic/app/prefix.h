/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Addresses, prefixes and flow keys as text: the one parser that the
 * command line, the config file and the control API share, so a prefix
 * is accepted or refused for the same reason everywhere.
 */
#ifndef JUMBOGATE_NIC_PREFIX_H
#define JUMBOGATE_NIC_PREFIX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jumbogate/engine.h>

/* Longest text form of a prefix: IPv6 address, '/', three digits. */
#define NIC_PREFIX_TEXT_LEN 64
/* Room for a reason, e.g. "prefix '10.0.0.1/8' has host bits set". */
#define NIC_ERROR_LEN 256

/*
 * Parse "a.b.c.d/len" or "x::y/len". Host bits must be zero: a prefix
 * with host bits set is almost always a typo for a different prefix.
 * Returns true, or false with a reason in error.
 */
bool nic_prefix_parse(const char *text, struct jg_prefix *prefix, char *error,
		      size_t error_len);

void nic_prefix_format(const struct jg_prefix *prefix, char *text,
		       size_t text_len);

bool nic_prefix_equal(const struct jg_prefix *a, const struct jg_prefix *b);

/* Whether an address (network byte order; 4 or 16 bytes by version) lies
 * inside the prefix. */
bool nic_prefix_contains(const struct jg_prefix *prefix, uint8_t ip_version,
			 const void *address);

/* Parse a textual address of either family into a flow-key address. */
bool nic_address_parse(const char *text, uint8_t *ip_version, void *address16);

/*
 * Build a flow key from the five textual fields of a FiveTuple. Both
 * addresses must be of one family, the protocol TCP (6) or UDP (17), the
 * ports 1..65535.
 */
bool nic_flow_key_parse(const char *src_ip, const char *dst_ip,
			uint32_t protocol, uint32_t src_port, uint32_t dst_port,
			struct jg_flow_key *key, char *error, size_t error_len);

bool nic_flow_key_equal(const struct jg_flow_key *a,
			const struct jg_flow_key *b);

/* Text of a flow-key address (src when source is true). */
void nic_flow_key_address(const struct jg_flow_key *key, bool source,
			  char *text, size_t text_len);

#endif /* JUMBOGATE_NIC_PREFIX_H */
