/* SPDX-License-Identifier: Apache-2.0 */
#include "harness.h"

#include <stdlib.h>
#include <string.h>

#include <rte_common.h>
#include <rte_eal.h>

unsigned int harness_checks;
unsigned int harness_failures;
const char *harness_current_test = "setup";

int harness_main(int argc, char **argv, const char *file_prefix,
		 const struct harness_case *cases, unsigned int count)
{
	char prefix_argument[64];
	char *eal_argv[] = {
		argv[0],       "--no-huge", "--no-pci",	     "-l",
		"0",	       "-m",	    "512",	     "--no-telemetry",
		"--log-level", "*:error",   prefix_argument,
	};
	const char *only = argc > 1 ? argv[1] : NULL;
	unsigned int ran = 0, failed_cases = 0;

	snprintf(prefix_argument, sizeof(prefix_argument), "--file-prefix=%s",
		 file_prefix);
	if (rte_eal_init((int)RTE_DIM(eal_argv), eal_argv) < 0) {
		fprintf(stderr, "cannot initialise DPDK EAL\n");
		return 1;
	}
	for (unsigned int i = 0; i < count; i++) {
		unsigned int before = harness_failures;

		if (only != NULL && strcmp(only, cases[i].name) != 0)
			continue;
		harness_current_test = cases[i].name;
		cases[i].run();
		ran++;
		if (harness_failures != before) {
			failed_cases++;
			printf("not ok %u - %s\n", ran, cases[i].name);
		} else {
			printf("ok %u - %s\n", ran, cases[i].name);
		}
	}
	printf("%s: %u cases, %u checks, %u cases failed, %u checks failed\n",
	       file_prefix, ran, harness_checks, failed_cases,
	       harness_failures);
	rte_eal_cleanup();
	return harness_failures == 0 && ran > 0 ? 0 : 1;
}
