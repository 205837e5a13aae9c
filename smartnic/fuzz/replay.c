/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Run a fuzz target's entry point over files, without libFuzzer, so
 * the checked-in corpus (seeds and the reproducers of fixed crashes) is
 * replayed by every `make test` with the ordinary compiler. Shared by the
 * targets of the engine, path MTU discovery and the switch's pipeline;
 * each links its own seeds (fuzz_write_seeds).
 *
 *   fuzz_replay FILE|DIR...        replay (a directory: its files, sorted)
 *   fuzz_replay --write-seeds DIR  write the target's seed corpus
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replay.h"

static uint8_t input[FUZZ_INPUT_LIMIT];

static int replay_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	size_t size;

	if (f == NULL) {
		perror(path);
		return 1;
	}
	size = fread(input, 1, sizeof(input), f);
	fclose(f);
	LLVMFuzzerTestOneInput(input, size);
	return 0;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

static int replay_directory(const char *path, unsigned int *count)
{
	DIR *dir = opendir(path);
	struct dirent *entry;
	char *names[4096];
	unsigned int n = 0;
	int status = 0;

	if (dir == NULL) {
		perror(path);
		return 1;
	}
	while ((entry = readdir(dir)) != NULL &&
	       n < sizeof(names) / sizeof(names[0]))
		if (entry->d_name[0] != '.')
			names[n++] = strdup(entry->d_name);
	closedir(dir);
	qsort(names, n, sizeof(names[0]), compare_names);
	for (unsigned int i = 0; i < n; i++) {
		char file[4096];

		snprintf(file, sizeof(file), "%s/%s", path, names[i]);
		status |= replay_file(file);
		(*count)++;
		free(names[i]);
	}
	return status;
}

void fuzz_seed_record(struct fuzz_seed *seed, const uint8_t *header,
		      size_t header_size, const uint8_t *bytes, uint16_t length)
{
	memcpy(seed->bytes + seed->size, header, header_size);
	seed->size += header_size;
	seed->bytes[seed->size++] = (uint8_t)(length >> 8);
	seed->bytes[seed->size++] = (uint8_t)length;
	memcpy(seed->bytes + seed->size, bytes, length);
	seed->size += length;
}

int fuzz_seed_save(struct fuzz_seed *seed, const char *dir, const char *name)
{
	char path[4096];
	FILE *f;
	size_t size = seed->size;

	seed->size = 0;
	snprintf(path, sizeof(path), "%s/%s", dir, name);
	f = fopen(path, "wb");
	if (f == NULL || fwrite(seed->bytes, 1, size, f) != size) {
		perror(path);
		if (f != NULL)
			fclose(f);
		return 1;
	}
	fclose(f);
	return 0;
}

int main(int argc, char **argv)
{
	unsigned int count = 0;
	int status = 0;

	if (argc == 3 && strcmp(argv[1], "--write-seeds") == 0) {
		mkdir(argv[2], 0755);
		return fuzz_write_seeds(argv[2]);
	}
	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR... | --write-seeds DIR\n",
			argv[0]);
		return 2;
	}
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) == 0 && S_ISDIR(st.st_mode)) {
			status |= replay_directory(argv[i], &count);
		} else {
			status |= replay_file(argv[i]);
			count++;
		}
	}
	printf("replayed %u inputs\n", count);
	if (count == 0) {
		/* An empty or missing corpus proves nothing: fail. */
		fprintf(stderr, "replay: no input found\n");
		return 1;
	}
	return status;
}
