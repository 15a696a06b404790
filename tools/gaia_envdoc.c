/* gaia-envdoc: the README's table of environment knobs, generated from
 * include/gaia_env.h (DESIGN §4).
 *
 *   gaia-envdoc                    print the markdown table
 *   gaia-envdoc --check README.md  exit 1, showing the difference, unless the
 *                                  section between the knobs markers is exactly
 *                                  the generated table
 *   gaia-envdoc --write README.md  replace that section (nothing else changes)
 *
 * Exit status: 0 success; 1 the README's table differs or is missing (--check);
 * 2 usage or I/O error, or no markers to write between (--write).
 */
#include "gaia_env.h"

#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* The generated table in a malloc'd buffer; exits on failure. */
static char *generate_table(size_t *len)
{
	size_t size = 4096;

	for (;;) {
		char *buf = malloc(size);
		int n;

		if (!buf) {
			fprintf(stderr, "gaia-envdoc: out of memory\n");
			exit(2);
		}
		n = gaia_env_format_table(buf, size);
		if (n >= 0) {
			*len = (size_t)n;
			return buf;
		}
		free(buf);
		size *= 2;
	}
}

/* The whole file in a malloc'd, NUL-terminated buffer, or NULL (errno set). */
static char *read_file(const char *path, size_t *len)
{
	FILE *f = fopen(path, "rb");
	char *buf = NULL;
	size_t cap = 0, n = 0;

	if (!f)
		return NULL;
	for (;;) {
		if (cap - n < 4096) {
			char *bigger = realloc(buf, cap ? cap * 2 : 65536);

			if (!bigger) {
				free(buf);
				fclose(f);
				errno = ENOMEM;
				return NULL;
			}
			buf = bigger;
			cap = cap ? cap * 2 : 65536;
		}
		size_t got = fread(buf + n, 1, cap - n - 1, f);

		n += got;
		if (got == 0)
			break;
	}
	if (ferror(f)) {
		int e = errno ? errno : EIO;

		free(buf);
		fclose(f);
		errno = e;
		return NULL;
	}
	fclose(f);
	buf[n] = '\0';
	*len = n;
	return buf;
}

/* Prints the lines of a that are not the lines of b at the same position:
 * enough to see which row changed, which is all a table needs. */
static void print_difference(const char *path, size_t first_line, const char *readme,
			     size_t readme_len, const char *gen, size_t gen_len)
{
	size_t i = 0, j = 0, line = first_line;

	fprintf(stderr,
		"%s: the knob table differs from include/gaia_env.h "
		"(- README, + generated); run gaia-envdoc --write %s\n",
		path, path);
	while (i < readme_len || j < gen_len) {
		const char *a = readme + i, *b = gen + j;
		const char *anl = memchr(a, '\n', readme_len - i);
		const char *bnl = memchr(b, '\n', gen_len - j);
		size_t alen = anl ? (size_t)(anl - a) : readme_len - i;
		size_t blen = bnl ? (size_t)(bnl - b) : gen_len - j;
		int have_a = i < readme_len, have_b = j < gen_len;

		if (!have_a || !have_b || alen != blen || memcmp(a, b, alen) != 0) {
			fprintf(stderr, "@@ line %zu\n", line);
			if (have_a)
				fprintf(stderr, "-%.*s\n", (int)alen, a);
			if (have_b)
				fprintf(stderr, "+%.*s\n", (int)blen, b);
		}
		if (have_a)
			i += alen + (anl != NULL);
		if (have_b)
			j += blen + (bnl != NULL);
		line++;
	}
}

static size_t line_number(const char *text, size_t offset)
{
	size_t line = 1;

	for (size_t i = 0; i < offset; i++)
		line += text[i] == '\n';
	return line;
}

/* Writes the new contents next to path and renames it over path, keeping
 * the file's mode, so a crash leaves either the old or the new README. */
static int replace_file(const char *path, const char *parts[3], const size_t lens[3])
{
	struct stat st;
	size_t plen = strlen(path);
	char *tmp = malloc(plen + 16);
	FILE *f;
	int ok = 1;

	if (!tmp || stat(path, &st) != 0) {
		free(tmp);
		return -1;
	}
	snprintf(tmp, plen + 16, "%s.envdoc.tmp", path);
	f = fopen(tmp, "wb");
	if (!f) {
		free(tmp);
		return -1;
	}
	for (int i = 0; i < 3; i++)
		if (fwrite(parts[i], 1, lens[i], f) != lens[i])
			ok = 0;
	if (fflush(f) != 0 || fsync(fileno(f)) != 0)
		ok = 0;
	if (fchmod(fileno(f), st.st_mode & 07777) != 0)
		ok = 0;
	if (fclose(f) != 0)
		ok = 0;
	if (!ok || rename(tmp, path) != 0) {
		int e = errno;

		unlink(tmp);
		free(tmp);
		errno = e;
		return -1;
	}
	free(tmp);
	return 0;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: gaia-envdoc [--check README.md | --write README.md]\n"
		     "Prints the table of GAIA_* environment knobs from include/gaia_env.h;\n"
		     "--check exits 1 if the README's section between " GAIA_ENV_README_BEGIN
		     " and " GAIA_ENV_README_END " differs from it, --write replaces that "
		     "section.\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "check", required_argument, NULL, 'c' },
		{ "write", required_argument, NULL, 'w' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *check_path = NULL, *write_path = NULL, *path;
	char *table, *readme;
	size_t table_len, readme_len, begin, end;
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "c:w:h", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			check_path = optarg;
			break;
		case 'w':
			write_path = optarg;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (check_path && write_path)) {
		usage(stderr);
		return 2;
	}

	table = generate_table(&table_len);
	if (!check_path && !write_path) {
		rc = fwrite(table, 1, table_len, stdout) == table_len && fflush(stdout) == 0 ? 0 : 2;
		free(table);
		return rc;
	}

	path = check_path ? check_path : write_path;
	readme = read_file(path, &readme_len);
	if (!readme) {
		fprintf(stderr, "gaia-envdoc: %s: %s\n", path, strerror(errno));
		free(table);
		return 2;
	}
	if (gaia_env_readme_section(readme, readme_len, &begin, &end) != 0) {
		fprintf(stderr, "gaia-envdoc: %s: no line '%s' followed by a line '%s'\n", path,
			GAIA_ENV_README_BEGIN, GAIA_ENV_README_END);
		rc = check_path ? 1 : 2; /* for --check, a missing table is a stale one */
	} else if (end - begin == table_len && memcmp(readme + begin, table, table_len) == 0) {
		rc = 0; /* already current: --write leaves the file untouched */
	} else if (check_path) {
		print_difference(path, line_number(readme, begin), readme + begin, end - begin,
				 table, table_len);
		rc = 1;
	} else {
		const char *parts[3] = { readme, table, readme + end };
		const size_t lens[3] = { begin, table_len, readme_len - end };

		if (replace_file(path, parts, lens) != 0) {
			fprintf(stderr, "gaia-envdoc: %s: %s\n", path, strerror(errno));
			rc = 2;
		}
	}
	free(readme);
	free(table);
	return rc;
}
