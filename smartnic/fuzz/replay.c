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
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "replay.h"

static uint8_t input[FUZZ_INPUT_LIMIT];

/* Replays one file; 0 when it was replayed (counted in *count), 1 after a
 * message when it could not be. */
static int replay_file(const char *path, unsigned int *count)
{
	FILE *f = fopen(path, "rb");
	size_t size;
	int status = 0;

	if (f == NULL) {
		perror(path);
		return 1;
	}
	size = fread(input, 1, sizeof(input), f);
	if (ferror(f)) {
		perror(path);
		status = 1;
	} else if (size == sizeof(input) && fgetc(f) != EOF) {
		/* Replaying its first megabyte would pass an input that
		 * libFuzzer never ran: say so and fail instead. */
		fprintf(stderr, "%s: longer than the %u bytes a replay takes\n",
			path, FUZZ_INPUT_LIMIT);
		status = 1;
	}
	fclose(f);
	if (status == 0) {
		LLVMFuzzerTestOneInput(input, size);
		(*count)++;
	}
	return status;
}

static int compare_names(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Every file of the directory (dot files aside), in name order: a learned
 * corpus can hold tens of thousands. */
static int replay_directory(const char *path, unsigned int *count)
{
	DIR *dir = opendir(path);
	struct dirent *entry;
	char **names = NULL;
	size_t n = 0, capacity = 0;
	int status = 0;

	if (dir == NULL) {
		perror(path);
		return 1;
	}
	for (;;) {
		/* readdir says "no more" and "failed" both with NULL; only
		 * errno tells them apart, and a failure must not pass for the
		 * end of the list. */
		errno = 0;
		entry = readdir(dir);
		if (entry == NULL)
			break;
		if (entry->d_name[0] == '.')
			continue;
		if (n == capacity) {
			capacity = capacity ? capacity * 2 : 256;
			names = realloc(names, capacity * sizeof(*names));
		}
		if (names == NULL ||
		    (names[n++] = strdup(entry->d_name)) == NULL) {
			fprintf(stderr, "%s: out of memory listing it\n", path);
			exit(1);
		}
	}
	if (errno != 0) {
		perror(path);
		status = 1;
	}
	closedir(dir);
	if (n > 0) /* an empty directory has no list to sort */
		qsort(names, n, sizeof(names[0]), compare_names);
	for (size_t i = 0; i < n; i++) {
		char file[4096];

		snprintf(file, sizeof(file), "%s/%s", path, names[i]);
		status |= replay_file(file, count);
		free(names[i]);
	}
	free(names);
	return status;
}

void fuzz_seed_record(struct fuzz_seed *seed, const uint8_t *header,
		      size_t header_size, const uint8_t *bytes, uint16_t length)
{
	if (header_size + 2 + length > sizeof(seed->bytes) - seed->size) {
		/* A seed is written by the project's own code: a record that
		 * does not fit is a bug there, not an input to trim. */
		fprintf(stderr,
			"fuzz_seed_record: a %zu-byte record does not fit "
			"after %zu bytes of a %u-byte seed\n",
			header_size + 2 + length, seed->size, FUZZ_INPUT_LIMIT);
		abort();
	}
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
			status |= replay_file(argv[i], &count);
		}
	}
	printf("replayed %u inputs\n", count);
	if (count == 0 && status == 0) {
		/* An empty corpus proves nothing: fail. */
		fprintf(stderr, "replay: no input found\n");
		return 1;
	}
	return status;
}
