/* SPDX-License-Identifier: Apache-2.0 */
#include "prefix.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool nic_address_parse(const char *text, uint8_t *ip_version, void *address16)
{
	uint8_t buffer[16];

	if (text == NULL)
		return false;
	if (inet_pton(AF_INET, text, buffer) == 1) {
		memset(address16, 0, 16);
		memcpy(address16, buffer, 4);
		*ip_version = 4;
		return true;
	}
	if (inet_pton(AF_INET6, text, buffer) == 1) {
		memcpy(address16, buffer, 16);
		*ip_version = 6;
		return true;
	}
	return false;
}

/* Bits of an address (network byte order) beyond depth, as a yes/no. */
static bool has_bits_after(const uint8_t *address, unsigned int length,
			   unsigned int depth)
{
	for (unsigned int bit = depth; bit < length * 8; bit++)
		if (address[bit / 8] & (0x80u >> (bit % 8)))
			return true;
	return false;
}

bool nic_prefix_parse(const char *text, struct jg_prefix *prefix, char *error,
		      size_t error_len)
{
	char address_text[NIC_PREFIX_TEXT_LEN];
	const char *slash = text ? strchr(text, '/') : NULL;
	uint8_t address[16];
	uint8_t version;
	unsigned long depth;
	char *end;

	if (text == NULL || *text == '\0') {
		snprintf(error, error_len, "prefix is empty");
		return false;
	}
	if (slash == NULL) {
		snprintf(error, error_len,
			 "prefix '%s' has no length (write e.g. "
			 "203.0.113.0/24)",
			 text);
		return false;
	}
	if ((size_t)(slash - text) >= sizeof(address_text)) {
		snprintf(error, error_len, "prefix '%s' is too long", text);
		return false;
	}
	memcpy(address_text, text, slash - text);
	address_text[slash - text] = '\0';
	if (!nic_address_parse(address_text, &version, address)) {
		snprintf(error, error_len,
			 "prefix '%s': '%s' is not an IPv4 or IPv6 address",
			 text, address_text);
		return false;
	}
	errno = 0;
	depth = strtoul(slash + 1, &end, 10);
	if (slash[1] == '\0' || *end != '\0' || errno != 0 ||
	    depth > (version == 4 ? 32u : 128u)) {
		snprintf(error, error_len, "prefix '%s': length must be 0..%u",
			 text, version == 4 ? 32u : 128u);
		return false;
	}
	if (has_bits_after(address, version == 4 ? 4 : 16, depth)) {
		snprintf(error, error_len,
			 "prefix '%s' has host bits set after /%lu", text,
			 depth);
		return false;
	}
	memset(prefix, 0, sizeof(*prefix));
	prefix->ip_version = version;
	prefix->depth = (uint8_t)depth;
	if (version == 4)
		memcpy(&prefix->addr.v4, address, 4);
	else
		memcpy(prefix->addr.v6, address, 16);
	return true;
}

void nic_prefix_format(const struct jg_prefix *prefix, char *text,
		       size_t text_len)
{
	char address[INET6_ADDRSTRLEN];

	if (prefix->ip_version == 4)
		inet_ntop(AF_INET, &prefix->addr.v4, address, sizeof(address));
	else
		inet_ntop(AF_INET6, prefix->addr.v6, address, sizeof(address));
	snprintf(text, text_len, "%s/%u", address, prefix->depth);
}

bool nic_prefix_equal(const struct jg_prefix *a, const struct jg_prefix *b)
{
	if (a->ip_version != b->ip_version || a->depth != b->depth)
		return false;
	if (a->ip_version == 4)
		return a->addr.v4 == b->addr.v4;
	return memcmp(a->addr.v6, b->addr.v6, 16) == 0;
}

bool nic_prefix_contains(const struct jg_prefix *prefix, uint8_t ip_version,
			 const void *address)
{
	const uint8_t *net = prefix->ip_version == 4
				     ? (const uint8_t *)&prefix->addr.v4
				     : prefix->addr.v6;
	const uint8_t *bytes = address;
	unsigned int full = prefix->depth / 8;
	unsigned int rest = prefix->depth % 8;

	if (prefix->ip_version != ip_version)
		return false;
	if (memcmp(net, bytes, full) != 0)
		return false;
	if (rest == 0)
		return true;
	return ((net[full] ^ bytes[full]) & (uint8_t)(0xff00u >> rest)) == 0;
}

bool nic_flow_key_parse(const char *src_ip, const char *dst_ip,
			uint32_t protocol, uint32_t src_port, uint32_t dst_port,
			struct jg_flow_key *key, char *error, size_t error_len)
{
	uint8_t src[16], dst[16];
	uint8_t src_version, dst_version;

	if (!nic_address_parse(src_ip, &src_version, src)) {
		snprintf(error, error_len,
			 "flow.src_ip '%s' is not an IPv4 or IPv6 address",
			 src_ip ? src_ip : "");
		return false;
	}
	if (!nic_address_parse(dst_ip, &dst_version, dst)) {
		snprintf(error, error_len,
			 "flow.dst_ip '%s' is not an IPv4 or IPv6 address",
			 dst_ip ? dst_ip : "");
		return false;
	}
	if (src_version != dst_version) {
		snprintf(error, error_len,
			 "flow.src_ip '%s' and flow.dst_ip '%s' are of "
			 "different address families",
			 src_ip, dst_ip);
		return false;
	}
	if (protocol != IPPROTO_TCP && protocol != IPPROTO_UDP) {
		snprintf(error, error_len,
			 "flow.protocol %u is neither TCP (6) nor UDP (17)",
			 protocol);
		return false;
	}
	if (src_port == 0 || src_port > 65535) {
		snprintf(error, error_len, "flow.src_port %u is not 1..65535",
			 src_port);
		return false;
	}
	if (dst_port == 0 || dst_port > 65535) {
		snprintf(error, error_len, "flow.dst_port %u is not 1..65535",
			 dst_port);
		return false;
	}
	memset(key, 0, sizeof(*key));
	key->ip_version = src_version;
	key->protocol = (uint8_t)protocol;
	key->src_port = htons((uint16_t)src_port);
	key->dst_port = htons((uint16_t)dst_port);
	if (src_version == 4) {
		memcpy(&key->src.v4, src, 4);
		memcpy(&key->dst.v4, dst, 4);
	} else {
		memcpy(key->src.v6, src, 16);
		memcpy(key->dst.v6, dst, 16);
	}
	return true;
}

bool nic_flow_key_equal(const struct jg_flow_key *a,
			const struct jg_flow_key *b)
{
	size_t length = a->ip_version == 4 ? 4 : 16;

	return a->ip_version == b->ip_version && a->protocol == b->protocol &&
	       a->src_port == b->src_port && a->dst_port == b->dst_port &&
	       memcmp(&a->src, &b->src, length) == 0 &&
	       memcmp(&a->dst, &b->dst, length) == 0;
}

void nic_flow_key_address(const struct jg_flow_key *key, bool source,
			  char *text, size_t text_len)
{
	const void *address =
		source ? (const void *)&key->src : (const void *)&key->dst;

	inet_ntop(key->ip_version == 4 ? AF_INET : AF_INET6, address, text,
		  (socklen_t)text_len);
}
