/* gaia-envdoc: the documentation of the environment knobs, generated from
 * include/gaia_env.h (DESIGN §4): the README's table and the man pages'
 * lists.
 *
 *   gaia-envdoc                    print the markdown table
 *   gaia-envdoc --check README.md  exit 1, showing the difference, unless the
 *                                  section between the knobs markers is exactly
 *                                  the generated table
 *   gaia-envdoc --write README.md  replace that section (nothing else changes)
 *   gaia-envdoc --man              print the variables as a roff list, for the
 *                                  ENVIRONMENT section of libgaia(7)
 *   gaia-envdoc --man-options      print gaiarun's option of each knob as a roff
 *                                  list, for the OPTIONS of gaiarun(1)
 *
 * The build makes both man pages with the last two (man/generate.cmake).
 *
 * Exit status: 0 success; 1 the README's table differs or is missing (--check);
 * 2 usage or I/O error, or no markers to write between (--write).
 */
#include "gaia_env.h"
#include "knob_option.h"

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

/* --- man pages ---------------------------------------------------------------- */

/* Writes text as roff input: a backslash is \e, and a line that would begin
 * with '.' or '\'' (a request, as in "':'-separated") starts with \& so that
 * it stays text. at_line_start: whether text begins a line. A '-' stays a
 * hyphen unless minus: in option names it must be \- to be typed as shown.
 */
static void put_roff(FILE *out, const char *text, int at_line_start, int minus)
{
	for (const char *p = text; *p; p++) {
		if (at_line_start && (*p == '.' || *p == '\''))
			fputs("\\&", out);
		if (*p == '\\')
			fputs("\\e", out);
		else if (*p == '-' && minus)
			fputs("\\-", out);
		else
			fputc(*p, out);
		at_line_start = *p == '\n';
	}
}

/* libgaia(7)'s ENVIRONMENT: one tagged paragraph per knob, in table order:
 *   .TP
 *   .B GAIA_READAHEAD_KB
 *   CPU populate-ahead window ..., in KiB.
 *   .br
 *   int; default \fB512\fP; accepted 4..1048576.
 */
static int print_man_variables(FILE *out)
{
	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		const struct gaia_env_knob *k = &gaia_env_knobs[i];
		const char *def = gaia_env_default_text(k);

		fprintf(out, ".TP\n.B %s\n", k->name);
		put_roff(out, k->doc, 1, 0);
		fputs(".\n.br\n", out);
		put_roff(out, k->type_name, 1, 0);
		fputs("; default ", out);
		if (*def) {
			fputs("\\fB", out);
			put_roff(out, def, 0, 1);
			fputs("\\fP", out);
		} else {
			fputs("empty", out);
		}
		fputs("; accepted ", out);
		put_roff(out, k->accepted, 0, 0);
		fputs(".\n", out);
	}
	return fflush(out) == 0 && !ferror(out) ? 0 : 2;
}

/* gaiarun(1)'s knob options: one tagged paragraph per knob, the text of
 * gaiarun --help (tools/knob_option.h):
 *   .TP
 *   \fB\-\-readahead\fP=\fISIZE\fP
 *   sets GAIA_READAHEAD_KB: ...
 */
static int print_man_options(FILE *out)
{
	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		struct knob_option o;
		char text[4096];

		knob_option_of((enum gaia_env_knob_id)i, &o);
		knob_option_describe(&o, text, sizeof text);
		fputs(".TP\n\\fB\\-\\-", out);
		put_roff(out, o.name, 0, 1);
		fputs("\\fP", out);
		if (o.has_arg == required_argument)
			fprintf(out, "=\\fI%s\\fP", o.arg_name);
		else if (o.has_arg == optional_argument)
			fprintf(out, "[=\\fI%s\\fP]", o.arg_name);
		fputc('\n', out);
		put_roff(out, text, 1, 0);
		fputc('\n', out);
	}
	return fflush(out) == 0 && !ferror(out) ? 0 : 2;
}

static void usage(FILE *out)
{
	fprintf(out, "usage: gaia-envdoc [--check README.md | --write README.md | --man |\n"
		     "                   --man-options]\n"
		     "Prints the table of GAIA_* environment knobs from include/gaia_env.h;\n"
		     "--check exits 1 if the README's section between " GAIA_ENV_README_BEGIN
		     " and " GAIA_ENV_README_END " differs from it, --write replaces that "
		     "section.\n"
		     "--man prints the knobs as roff for libgaia(7), --man-options gaiarun's\n"
		     "option of each knob as roff for gaiarun(1).\n");
}

int main(int argc, char **argv)
{
	static const struct option options[] = {
		{ "check", required_argument, NULL, 'c' },
		{ "write", required_argument, NULL, 'w' },
		{ "man", no_argument, NULL, 'm' },
		{ "man-options", no_argument, NULL, 'o' },
		{ "help", no_argument, NULL, 'h' },
		{ NULL, 0, NULL, 0 },
	};
	const char *check_path = NULL, *write_path = NULL, *path;
	char *table, *readme;
	size_t table_len, readme_len, begin, end;
	int c, rc = 0, man = 0, man_options = 0;

	while ((c = getopt_long(argc, argv, "c:w:h", options, NULL)) != -1) {
		switch (c) {
		case 'c':
			check_path = optarg;
			break;
		case 'w':
			write_path = optarg;
			break;
		case 'm':
			man = 1;
			break;
		case 'o':
			man_options = 1;
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (optind != argc || (!!check_path + !!write_path + man + man_options) > 1) {
		usage(stderr);
		return 2;
	}
	if (man)
		return print_man_variables(stdout);
	if (man_options)
		return print_man_options(stdout);

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
