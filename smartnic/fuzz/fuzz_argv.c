/* SPDX-License-Identifier: Apache-2.0 */
#include "fuzz_argv.h"

#include <stdlib.h>
#include <string.h>

static char *copy(const void *bytes, size_t length)
{
	char *token = malloc(length + 1);

	if (token == NULL)
		abort();
	memcpy(token, bytes, length);
	token[length] = '\0';
	return token;
}

void fuzz_argv_split(struct fuzz_argv *args, const char *program,
		     const uint8_t *data, size_t size)
{
	args->argc = 0;
	args->argv[args->argc++] = copy(program, strlen(program));
	while (size > 0 && args->argc <= FUZZ_ARGV_MAX) {
		const uint8_t *end = memchr(data, '\n', size);
		size_t length = end ? (size_t)(end - data) : size;

		args->argv[args->argc++] = copy(data, length);
		data += end ? length + 1 : length;
		size -= end ? length + 1 : length;
	}
	args->argv[args->argc] = NULL;
	memcpy(args->tokens, args->argv, args->argc * sizeof(args->argv[0]));
}

void fuzz_argv_free(struct fuzz_argv *args)
{
	for (int i = 0; i < args->argc; i++)
		free(args->tokens[i]);
	args->argc = 0;
}
