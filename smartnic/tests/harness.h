/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A small test harness: each test binary lists its cases, runs them all
 * (a failing check does not stop the others) and prints one summary line.
 * The exit status is non-zero when any check failed, which is what
 * meson test looks at.
 */
#ifndef JUMBOGATE_TEST_HARNESS_H
#define JUMBOGATE_TEST_HARNESS_H

#include <stdbool.h>
#include <stdio.h>

extern unsigned int harness_checks;
extern unsigned int harness_failures;
extern const char *harness_current_test;

#define CHECK(condition)                                                       \
	do {                                                                   \
		harness_checks++;                                              \
		if (!(condition)) {                                            \
			harness_failures++;                                    \
			fprintf(stderr, "FAIL %s: %s:%d: %s\n",                \
				harness_current_test, __FILE__, __LINE__,      \
				#condition);                                   \
		}                                                              \
	} while (0)

#define CHECK_EQ(actual, expected)                                             \
	do {                                                                   \
		long long actual_value = (long long)(actual);                  \
		long long expected_value = (long long)(expected);              \
		harness_checks++;                                              \
		if (actual_value != expected_value) {                          \
			harness_failures++;                                    \
			fprintf(stderr,                                        \
				"FAIL %s: %s:%d: %s == %lld, "                 \
				"expected %s == %lld\n",                       \
				harness_current_test, __FILE__, __LINE__,      \
				#actual, actual_value, #expected,              \
				expected_value);                               \
		}                                                              \
	} while (0)

struct harness_case {
	const char *name;
	void (*run)(void);
};

#define HARNESS_CASE(function)                                                 \
	{                                                                      \
#function, function                                            \
	}

/* Initialise DPDK for tests (no hugepages, no PCI, one core) and run the
 * cases; returns the process exit status. */
int harness_main(int argc, char **argv, const char *file_prefix,
		 const struct harness_case *cases, unsigned int count);

/* A test binary's main: its DPDK file prefix, then its cases
 * (HARNESS_CASE(name), ...). */
#define HARNESS_MAIN(file_prefix, ...)                                         \
	int main(int argc, char **argv)                                        \
	{                                                                      \
		static const struct harness_case cases[] = {__VA_ARGS__};      \
		return harness_main(argc, argv, (file_prefix), cases,          \
				    sizeof(cases) / sizeof(cases[0]));         \
	}

#endif /* JUMBOGATE_TEST_HARNESS_H */
