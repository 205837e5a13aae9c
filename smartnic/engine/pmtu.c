/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Path MTU per destination prefix, for the split path. The MTU itself is
 * the LPM next hop, so a lookup is one DPDK LPM lookup and nothing else.
 */
#include <stdio.h>
#include <string.h>

#include <rte_errno.h>
#include <rte_lpm.h>
#include <rte_lpm6.h>

#include "internal.h"

#define MIN_PATH_MTU 576u
/* A /48 needs three tbl8 groups beyond the first 24 bits. */
#define TBL8_PER_V6_RULE 4u

int jg_pmtu_init(struct jg_engine *e)
{
	static unsigned int instance;
	char name[RTE_LPM_NAMESIZE];
	struct rte_lpm_config v4 = {
		.max_rules = e->config.pmtu_max_rules_v4,
		.number_tbl8s = 256,
	};
	struct rte_lpm6_config v6 = {
		.max_rules = e->config.pmtu_max_rules_v6,
		.number_tbl8s = e->config.pmtu_max_rules_v6 * TBL8_PER_V6_RULE,
	};

	/* LPM names are process-wide; a counter keeps them unique (atomic:
	 * engines may be created on several lcores at once). */
	unsigned int id = __atomic_add_fetch(&instance, 1, __ATOMIC_RELAXED);

	snprintf(name, sizeof(name), "jg4_%.12s_%u", e->config.name, id);
	e->pmtu_v4 = rte_lpm_create(name, e->config.socket_id, &v4);
	snprintf(name, sizeof(name), "jg6_%.12s_%u", e->config.name, id);
	e->pmtu_v6 = rte_lpm6_create(name, e->config.socket_id, &v6);
	if (e->pmtu_v4 == NULL || e->pmtu_v6 == NULL)
		return -rte_errno;
	return 0;
}

void jg_pmtu_free(struct jg_engine *e)
{
	rte_lpm_free(e->pmtu_v4);
	rte_lpm6_free(e->pmtu_v6);
	e->pmtu_v4 = NULL;
	e->pmtu_v6 = NULL;
}

int jg_pmtu_set(struct jg_engine *e, const struct jg_prefix *prefix,
		uint16_t mtu)
{
	if (mtu < MIN_PATH_MTU)
		return -EINVAL;
	if (prefix->ip_version == 4 && prefix->depth >= 1 &&
	    prefix->depth <= 32)
		return rte_lpm_add(e->pmtu_v4,
				   rte_be_to_cpu_32(prefix->addr.v4),
				   prefix->depth, mtu);
	if (prefix->ip_version == 6 && prefix->depth >= 1 &&
	    prefix->depth <= 128)
		return rte_lpm6_add(e->pmtu_v6, prefix->addr.v6, prefix->depth,
				    mtu);
	return -EINVAL;
}

int jg_pmtu_delete(struct jg_engine *e, const struct jg_prefix *prefix)
{
	int rc;

	if (prefix->ip_version == 4 && prefix->depth >= 1 &&
	    prefix->depth <= 32)
		rc = rte_lpm_delete(e->pmtu_v4,
				    rte_be_to_cpu_32(prefix->addr.v4),
				    prefix->depth);
	else if (prefix->ip_version == 6 && prefix->depth >= 1 &&
		 prefix->depth <= 128)
		rc = rte_lpm6_delete(e->pmtu_v6, prefix->addr.v6,
				     prefix->depth);
	else
		return -EINVAL;
	/* LPM reports a missing rule as a generic failure. */
	return rc < 0 ? -ENOENT : 0;
}

uint16_t jg_pmtu_lookup_v4(const struct jg_engine *e, uint32_t dst_be)
{
	uint32_t mtu;

	if (e->config.learned_path_mtu != NULL) {
		uint16_t learned = e->config.learned_path_mtu(
			e->config.learned_path_mtu_context, 4,
			(const uint8_t *)&dst_be);
		if (learned != 0)
			return learned;
	}
	if (rte_lpm_lookup(e->pmtu_v4, rte_be_to_cpu_32(dst_be), &mtu) == 0)
		return (uint16_t)mtu;
	return e->config.default_path_mtu_v4;
}

uint16_t jg_pmtu_lookup_v6(const struct jg_engine *e, const uint8_t dst[16])
{
	uint32_t mtu;

	if (e->config.learned_path_mtu != NULL) {
		uint16_t learned = e->config.learned_path_mtu(
			e->config.learned_path_mtu_context, 6, dst);
		if (learned != 0)
			return learned;
	}
	if (rte_lpm6_lookup(e->pmtu_v6, dst, &mtu) == 0)
		return (uint16_t)mtu;
	return e->config.default_path_mtu_v6;
}
