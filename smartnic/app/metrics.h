/* SPDX-License-Identifier: Apache-2.0 */
#ifndef JUMBOGATE_NIC_METRICS_H
#define JUMBOGATE_NIC_METRICS_H

struct jg_metrics_text;

/* The --metrics endpoint's scrape (runtime/metrics_http.h). */
void nic_metrics_render(struct jg_metrics_text *text, void *unused);

#endif
