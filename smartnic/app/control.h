/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control operations behind nic.proto and the telemetry commands.
 *
 * Every operation validates its whole request first and changes nothing
 * when it is refused. Operations are serialized by one lock; each reaches
 * the workers only through their command rings (see nic.h).
 */
#ifndef JUMBOGATE_NIC_CONTROL_H
#define JUMBOGATE_NIC_CONTROL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "counters.h"
#include "options.h"
#include "prefix.h"

#ifdef __cplusplus
extern "C" {
#endif

struct nic;

/* Mirrors the gRPC status codes the control API uses. */
enum nic_status {
	NIC_STATUS_OK = 0,
	NIC_STATUS_NOT_FOUND = 5,
	NIC_STATUS_RESOURCE_EXHAUSTED = 8,
	NIC_STATUS_INVALID_ARGUMENT = 3,
	NIC_STATUS_FAILED_PRECONDITION = 9,
	NIC_STATUS_INTERNAL = 13,
	NIC_STATUS_UNAVAILABLE = 14,
};

struct nic_result {
	enum nic_status status;
	char message[NIC_ERROR_LEN];
};

struct nic_config_view {
	uint32_t internal_mtu;
	uint32_t max_flows;
	uint32_t max_segments;
	uint64_t rate_threshold_bps;
	double yield_threshold;
	double quantile;
	uint32_t max_delay_us;
	uint32_t default_path_mtu_v4;
	uint32_t default_path_mtu_v6;
	bool merge_unknown_flows;
	unsigned int internal_prefix_count;
	char internal_prefixes[NIC_MAX_INTERNAL_PREFIXES][NIC_PREFIX_TEXT_LEN];
};

/* A Configure request: zero fields keep their value. */
struct nic_config_request {
	struct nic_config_view values;
	bool set_merge_unknown_flows;
	/* With set_internal_prefixes, the prefixes replace the running ones;
	 * the strings belong to the caller. A count above
	 * NIC_MAX_INTERNAL_PREFIXES is refused. */
	bool set_internal_prefixes;
	unsigned int internal_prefix_count;
	const char *internal_prefixes[NIC_MAX_INTERNAL_PREFIXES];
};

struct nic_info_view {
	uint64_t boot_id;
	double uptime_s;
	unsigned int workers;
	unsigned int port_count;
	const char *ports[NIC_MAX_PORTS];
};

struct nic_path_mtu_entry {
	char cidr[NIC_PREFIX_TEXT_LEN];
	uint32_t mtu;
};

/* A destination of path MTU discovery. */
struct nic_learned_path {
	char address[NIC_PREFIX_TEXT_LEN];
	uint32_t mtu; /* 0: none learned, the configured path MTU applies */
	const char *method;
	bool exact; /* refined to the byte on request */
	bool probing;
	double age_s;
	double rtt_ms;
};

struct nic_flow_entry {
	char src_ip[NIC_PREFIX_TEXT_LEN];
	char dst_ip[NIC_PREFIX_TEXT_LEN];
	uint32_t protocol;
	uint32_t src_port;
	uint32_t dst_port;
	uint64_t packets_in;
	uint64_t merged_packets;
};

/* Set up the control state from the options (startup path MTUs are
 * already in the engines). */
void nic_control_init(struct nic *nic);
void nic_control_fini(void);

void nic_control_info(struct nic_info_view *info);
void nic_control_get_config(struct nic_config_view *config);
struct nic_result nic_control_configure(const struct nic_config_request *req,
					struct nic_config_view *config);

struct nic_result nic_control_set_path_mtu(const char *cidr, uint32_t mtu);
struct nic_result nic_control_delete_path_mtu(const char *cidr);
/* Returns a malloc'ed array the caller frees. */
struct nic_path_mtu_entry *nic_control_list_path_mtus(size_t *count);

struct nic_result nic_control_onload(const char *src_ip, const char *dst_ip,
				     uint32_t protocol, uint32_t src_port,
				     uint32_t dst_port);
struct nic_result nic_control_offload(const char *src_ip, const char *dst_ip,
				      uint32_t protocol, uint32_t src_port,
				      uint32_t dst_port, uint64_t *flushed);
/* Returns a malloc'ed array the caller frees (NULL with count 0 on an
 * error, which is then in *result). */
struct nic_flow_entry *nic_control_list_flows(size_t *count,
					      struct nic_result *result);

struct nic_result nic_control_stats(struct nic_totals *totals);

/* Path MTU discovery. With it off, *enabled is false and nothing is
 * listed; the caller frees the array. */
struct nic_learned_path *nic_control_learned_paths(size_t *count,
						   bool *enabled);
/* A round to address now (then refinements until the value is exact to
 * the byte, with exact); waits for its end and describes the result. */
struct nic_result nic_control_probe_path(const char *address, bool exact,
					 struct nic_learned_path *path);
/* Its counters: name -> value through visit; false when it is off. */
bool nic_control_pmtu_counters(void (*visit)(void *context, const char *name,
					     uint64_t value),
			       void *context);

/* Name of a drop reason by index over the engine's reasons followed by
 * the program's; NULL past the end. */
const char *nic_drop_reason_name(unsigned int index);
uint64_t nic_drop_count(const struct nic_totals *totals, unsigned int index);

#ifdef __cplusplus
}
#endif

#endif /* JUMBOGATE_NIC_CONTROL_H */
