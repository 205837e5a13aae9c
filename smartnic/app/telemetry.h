/* SPDX-License-Identifier: Apache-2.0 */
#ifndef JUMBOGATE_NIC_TELEMETRY_H
#define JUMBOGATE_NIC_TELEMETRY_H

/* Register the /jumbogate/... commands on the EAL's telemetry socket. */
void nic_telemetry_register(void);

#endif /* JUMBOGATE_NIC_TELEMETRY_H */
