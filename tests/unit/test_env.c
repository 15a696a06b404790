/* The environment knob table and its parser (include/gaia_env.h, DESIGN §4):
 * defaults, valid values of every type, one line per bad value, and the
 * README's table staying in step with the header. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "gaia_env.h"

/* --- a fake environment and a pipe to catch the messages ------------------ */

struct fake_env {
	int n;
	const char *name[GAIA_KNOB_COUNT + 4];
	const char *value[GAIA_KNOB_COUNT + 4];
};

static const char *fake_lookup(const char *name, void *arg)
{
	struct fake_env *fe = arg;

	for (int i = 0; i < fe->n; i++)
		if (strcmp(fe->name[i], name) == 0)
			return fe->value[i];
	return NULL;
}

static void fake_set(struct fake_env *fe, const char *name, const char *value)
{
	assert_true(fe->n < (int)(sizeof fe->name / sizeof *fe->name));
	fe->name[fe->n] = name;
	fe->value[fe->n] = value;
	fe->n++;
}

/* What one gaia_env_load wrote to its err_fd. */
struct captured {
	char text[16384];
	size_t len;
	int lines;
};

static int load_capture(struct gaia_env *env, struct fake_env *fe, struct captured *c)
{
	int p[2], bad;
	ssize_t r;

	assert_int_equal(pipe(p), 0);
	bad = gaia_env_load(env, fake_lookup, fe, p[1]);
	close(p[1]);
	c->len = 0;
	while ((r = read(p[0], c->text + c->len, sizeof c->text - 1 - c->len)) > 0)
		c->len += (size_t)r;
	close(p[0]);
	c->text[c->len] = '\0';
	c->lines = 0;
	for (size_t i = 0; i < c->len; i++)
		c->lines += c->text[i] == '\n';
	return bad;
}

static const struct gaia_env_knob *knob_named(const char *name)
{
	for (int i = 0; i < GAIA_KNOB_COUNT; i++)
		if (strcmp(gaia_env_knobs[i].name, name) == 0)
			return &gaia_env_knobs[i];
	fail_msg("no knob %s", name);
	return NULL;
}

static long long field_int(const struct gaia_env *env, const struct gaia_env_knob *k)
{
	const char *f = (const char *)env + k->offset;

	if (k->type == GAIA_ENV_INT)
		return *(const long long *)f;
	return *(const int *)f;
}

static const char *field_str(const struct gaia_env *env, const struct gaia_env_knob *k)
{
	return *(const char *const *)((const char *)env + k->offset);
}

static void assert_knob_is_default(const struct gaia_env *env, const struct gaia_env_knob *k)
{
	if (k->type == GAIA_ENV_STRING)
		assert_string_equal(field_str(env, k), k->def_str);
	else
		assert_int_equal(field_int(env, k), k->def);
}

/* Loads one variable set to value and returns the parsed env. */
static int load_one(struct gaia_env *env, const char *name, const char *value, struct captured *c)
{
	struct fake_env fe = { 0 };

	fake_set(&fe, name, value);
	return load_capture(env, &fe, c);
}

static void assert_loads_int(const char *name, const char *value, long long want)
{
	struct gaia_env env;
	struct captured c;

	assert_int_equal(load_one(&env, name, value, &c), 0);
	assert_int_equal(c.len, 0);
	assert_int_equal(field_int(&env, knob_named(name)), want);
}

/* --- defaults ---------------------------------------------------------------- */

static void test_unset_variables_take_their_defaults_silently(void **state)
{
	struct fake_env fe = { 0 };
	struct gaia_env env;
	struct captured c;

	memset(&env, 0xa5, sizeof env);
	assert_int_equal(load_capture(&env, &fe, &c), 0);
	assert_int_equal(c.len, 0);
	assert_int_equal(env.readahead_kb, 512);
	assert_int_equal(env.gpu_readahead_kb, 2048);
	assert_string_equal(env.paths, "");
	assert_int_equal(env.min_map_kb, 64);
	assert_int_equal(env.backing, GAIA_BACKING_AUTO);
	assert_int_equal(env.dirty_tracking, GAIA_DIRTY_TRACKING_AUTO);
	assert_int_equal(env.release_ms, 100);
	assert_int_equal(env.log, GAIA_LOG_WARN);
	assert_string_equal(env.stats, "");
	assert_int_equal(env.disable, 0);
	assert_int_equal(gaia_env_stats_dest(&env), GAIA_ENV_STATS_OFF);

	struct gaia_env defaults;
	memset(&defaults, 0x5a, sizeof defaults);
	gaia_env_defaults(&defaults);
	for (int i = 0; i < GAIA_KNOB_COUNT; i++)
		assert_knob_is_default(&defaults, &gaia_env_knobs[i]);
}

static void test_null_lookup_reads_the_process_environment(void **state)
{
	struct gaia_env env;

	assert_int_equal(setenv("GAIA_READAHEAD_KB", "1024", 1), 0);
	assert_int_equal(setenv("GAIA_LOG", "debug", 1), 0);
	assert_int_equal(gaia_env_load(&env, NULL, NULL, -1), 0);
	unsetenv("GAIA_READAHEAD_KB");
	unsetenv("GAIA_LOG");
	assert_int_equal(env.readahead_kb, 1024);
	assert_int_equal(env.log, GAIA_LOG_DEBUG);
}

static void test_every_default_is_an_accepted_value(void **state)
{
	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		const struct gaia_env_knob *k = &gaia_env_knobs[i];
		const char *def = gaia_env_default_text(k);
		struct gaia_env env;
		struct captured c;

		assert_non_null(def);
		if (k->type == GAIA_ENV_INT) {
			char *end;
			char range[64];

			assert_int_equal(strtoll(def, &end, 10), k->def);
			assert_int_equal(*end, '\0');
			snprintf(range, sizeof range, "%lld..%lld", k->min, k->max);
			assert_string_equal(k->accepted, range);
		}
		assert_int_equal(load_one(&env, k->name, def, &c), 0);
		assert_int_equal(c.len, 0);
		assert_knob_is_default(&env, k);
	}
}

/* --- good values --------------------------------------------------------------- */

static void test_ints_accept_decimal_in_range_with_surrounding_space(void **state)
{
	assert_loads_int("GAIA_READAHEAD_KB", "4", 4);
	assert_loads_int("GAIA_READAHEAD_KB", "1048576", 1048576);
	assert_loads_int("GAIA_READAHEAD_KB", " 256\t", 256);
	assert_loads_int("GAIA_READAHEAD_KB", "+8", 8);
	assert_loads_int("GAIA_READAHEAD_KB", "0000016", 16);
	assert_loads_int("GAIA_GPU_READAHEAD_KB", "64", 64);
	assert_loads_int("GAIA_MIN_MAP_KB", "1073741824", 1073741824LL);
	assert_loads_int("GAIA_RELEASE_MS", "0", 0);
	assert_loads_int("GAIA_RELEASE_MS", "-0", 0);
	assert_loads_int("GAIA_RELEASE_MS", "3600000", 3600000);
}

static void test_bools_accept_every_spelling_in_any_case(void **state)
{
	static const char *const yes[] = { "1", "yes", "YES", "true", "True", "on", " On\n" };
	static const char *const no[] = { "0", "no", "No", "false", "FALSE", "off", "\toff " };

	for (size_t i = 0; i < sizeof yes / sizeof *yes; i++)
		assert_loads_int("GAIA_DISABLE", yes[i], 1);
	for (size_t i = 0; i < sizeof no / sizeof *no; i++)
		assert_loads_int("GAIA_DISABLE", no[i], 0);
}

static void test_enums_accept_their_words_in_any_case(void **state)
{
	assert_loads_int("GAIA_BACKING", "vmm", GAIA_BACKING_VMM);
	assert_loads_int("GAIA_BACKING", "MANAGED", GAIA_BACKING_MANAGED);
	assert_loads_int("GAIA_BACKING", " Auto ", GAIA_BACKING_AUTO);
	assert_loads_int("GAIA_DIRTY_TRACKING", "uffd", GAIA_DIRTY_TRACKING_UFFD);
	assert_loads_int("GAIA_DIRTY_TRACKING", "SoftDirty", GAIA_DIRTY_TRACKING_SOFTDIRTY);
	assert_loads_int("GAIA_LOG", "error", GAIA_LOG_ERROR);
	assert_loads_int("GAIA_LOG", "INFO", GAIA_LOG_INFO);
	assert_loads_int("GAIA_LOG", "debug", GAIA_LOG_DEBUG);

	assert_string_equal(gaia_env_enum_word(GAIA_KNOB_BACKING, GAIA_BACKING_MANAGED), "managed");
	assert_string_equal(gaia_env_enum_word(GAIA_KNOB_LOG, GAIA_LOG_WARN), "warn");
	assert_null(gaia_env_enum_word(GAIA_KNOB_LOG, 4));
	assert_null(gaia_env_enum_word(GAIA_KNOB_LOG, -1));
	assert_null(gaia_env_enum_word(GAIA_KNOB_READAHEAD_KB, 0));
	assert_true(GAIA_LOG_ERROR < GAIA_LOG_WARN && GAIA_LOG_WARN < GAIA_LOG_INFO &&
		    GAIA_LOG_INFO < GAIA_LOG_DEBUG);
}

static void test_strings_point_into_the_environment(void **state)
{
	static const char paths[] = "/data/*.bin:!/data/tmp/*:*.graph";
	static const char file[] = "/tmp/gaia stats.txt";
	struct fake_env fe = { 0 };
	struct gaia_env env;
	struct captured c;

	fake_set(&fe, "GAIA_PATHS", paths);
	fake_set(&fe, "GAIA_STATS", file);
	assert_int_equal(load_capture(&env, &fe, &c), 0);
	assert_int_equal(c.len, 0);
	assert_ptr_equal(env.paths, paths);
	assert_ptr_equal(env.stats, file);
	assert_int_equal(gaia_env_stats_dest(&env), GAIA_ENV_STATS_FILE);

	assert_int_equal(load_one(&env, "GAIA_STATS", "1", &c), 0);
	assert_int_equal(gaia_env_stats_dest(&env), GAIA_ENV_STATS_STDERR);
	assert_int_equal(load_one(&env, "GAIA_STATS", "0", &c), 0);
	assert_int_equal(gaia_env_stats_dest(&env), GAIA_ENV_STATS_OFF);
	assert_int_equal(load_one(&env, "GAIA_PATHS", "", &c), 0);
	assert_string_equal(env.paths, "");
	/* Strings are verbatim: what is garbage for a number is a file name. */
	assert_int_equal(load_one(&env, "GAIA_STATS", "99999999999999999999999", &c), 0);
	assert_string_equal(env.stats, "99999999999999999999999");
	assert_int_equal(load_one(&env, "GAIA_PATHS", " -1 ", &c), 0);
	assert_string_equal(env.paths, " -1 ");
}

/* --- bad values ---------------------------------------------------------------- */

/* Checks one bad value's single line: it names the variable, quotes the
 * value safely, says what is accepted and which default is used. */
static void assert_one_clean_line(const struct gaia_env_knob *k, const char *value,
				  const struct captured *c)
{
	char want[512];
	const char *def = gaia_env_default_text(k);

	assert_int_equal(c->lines, 1);
	assert_true(c->len > 0 && c->text[c->len - 1] == '\n');
	assert_int_equal(strlen(c->text), c->len); /* no NUL inside */
	assert_true(c->len < 512);
	for (size_t i = 0; i + 1 < c->len; i++)
		assert_true((unsigned char)c->text[i] >= 0x20 && (unsigned char)c->text[i] < 0x7f);

	snprintf(want, sizeof want, "gaia: %s=\"", k->name);
	assert_ptr_equal(strstr(c->text, want), c->text);
	assert_non_null(strstr(c->text, k->accepted));
	if (k->type == GAIA_ENV_STRING)
		snprintf(want, sizeof want, "; using \"%s\"\n", def);
	else
		snprintf(want, sizeof want, "; using %s\n", def);
	assert_true(c->len >= strlen(want));
	assert_string_equal(c->text + c->len - strlen(want), want);
	if (strlen(value) > 64)
		assert_non_null(strstr(c->text, "...\""));
}

static void assert_rejected(const struct gaia_env_knob *k, const char *value)
{
	struct gaia_env env;
	struct captured c;
	int bad;

	memset(&env, 0xa5, sizeof env);
	bad = load_one(&env, k->name, value, &c);
	if (bad != 1 || c.lines != 1)
		fail_msg("%s=\"%.80s\": %d bad, output \"%s\"", k->name, value, bad, c.text);
	assert_knob_is_default(&env, k);
	assert_one_clean_line(k, value, &c);
	for (int i = 0; i < GAIA_KNOB_COUNT; i++)
		assert_knob_is_default(&env, &gaia_env_knobs[i]);
}

static void test_every_knob_rejects_garbage_with_one_line(void **state)
{
	static char long_digits[10001], long_letters[10001], long_glob[5001];
	static const char *const not_numbers_or_words[] = {
		"", " ", "abc", "99999999999999999999999", "-99999999999999999999999",
		"9223372036854775808", "-9223372036854775809", "18446744073709552128" /* 2^64+512 */,
		"-1", "-5", "12abc", "5 5",
		"0x10", "1e3", "1.5", "+", "-", "--1", "auto,vmm", "yess", "-2", "\x01\xff\x7f\n",
		"\x1b[31mred", "a\"b\\c", long_digits, long_letters,
	};
	static const char *const bad_paths[] = { "a::b", ":", "a:", "!", "!:/x", "/x\n", "\x01",
						 long_glob, long_letters };
	static const char *const bad_stats[] = { "\n", "/tmp/a\tb", "\x7f", "\xff\x01",
						 long_letters };

	memset(long_digits, '9', sizeof long_digits - 1);
	memset(long_letters, 'z', sizeof long_letters - 1);
	memset(long_glob, '*', sizeof long_glob - 1);
	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		const struct gaia_env_knob *k = &gaia_env_knobs[i];

		switch (k->type) {
		case GAIA_ENV_INT: {
			char below[32], above[32];

			snprintf(below, sizeof below, "%lld", k->min - 1);
			snprintf(above, sizeof above, "%lld", k->max + 1);
			assert_rejected(k, below);
			assert_rejected(k, above);
		}
			/* fall through */
		case GAIA_ENV_ENUM:
		case GAIA_ENV_BOOL:
			for (size_t j = 0; j < sizeof not_numbers_or_words / sizeof *not_numbers_or_words; j++)
				assert_rejected(k, not_numbers_or_words[j]);
			if (k->type == GAIA_ENV_ENUM) {
				char word[64];

				snprintf(word, sizeof word, "%sx", k->words[0]);
				assert_rejected(k, word);
				snprintf(word, sizeof word, "%s %s", k->words[0], k->words[1]);
				assert_rejected(k, word);
			}
			break;
		case GAIA_ENV_STRING:
			if (i == GAIA_KNOB_PATHS)
				for (size_t j = 0; j < sizeof bad_paths / sizeof *bad_paths; j++)
					assert_rejected(k, bad_paths[j]);
			else
				for (size_t j = 0; j < sizeof bad_stats / sizeof *bad_stats; j++)
					assert_rejected(k, bad_stats[j]);
			break;
		}
	}
}

static void test_bad_value_message_reads_as_documented(void **state)
{
	struct gaia_env env;
	struct captured c;

	assert_int_equal(load_one(&env, "GAIA_READAHEAD_KB", "abc", &c), 1);
	assert_string_equal(c.text,
			    "gaia: GAIA_READAHEAD_KB=\"abc\" is not an integer in 4..1048576; using 512\n");
	assert_int_equal(load_one(&env, "GAIA_BACKING", "cuda", &c), 1);
	assert_string_equal(c.text,
			    "gaia: GAIA_BACKING=\"cuda\" is not one of auto|vmm|managed|pinned|paged|host; using auto\n");
	assert_int_equal(load_one(&env, "GAIA_DISABLE", "maybe", &c), 1);
	assert_string_equal(c.text, "gaia: GAIA_DISABLE=\"maybe\" is not a boolean: "
				    "0/1, yes/no, true/false, on/off; using 0\n");
	assert_int_equal(load_one(&env, "GAIA_PATHS", "a::b", &c), 1);
	assert_string_equal(c.text, "gaia: GAIA_PATHS=\"a::b\" is rejected (empty glob); expected "
				    "':'-separated fnmatch globs, a leading '!' excludes; using \"\"\n");
}

static void test_bad_value_is_quoted_escaped_and_truncated(void **state)
{
	char value[200];
	struct gaia_env env;
	struct captured c;

	assert_int_equal(load_one(&env, "GAIA_LOG", "\"\\\x1b\n\xc3\xa9", &c), 1);
	assert_string_equal(c.text, "gaia: GAIA_LOG=\"\\\"\\\\\\x1b\\x0a\\xc3\\xa9\" is not one of "
				    "error|warn|info|debug; using warn\n");

	memset(value, 'x', sizeof value - 1);
	value[sizeof value - 1] = '\0';
	assert_int_equal(load_one(&env, "GAIA_LOG", value, &c), 1);
	char want[256];
	snprintf(want, sizeof want, "gaia: GAIA_LOG=\"%.64s...\" is not one of", value);
	assert_ptr_equal(strstr(c.text, want), c.text);

	/* Exactly 64 bytes are quoted whole, without an ellipsis. */
	value[64] = '\0';
	assert_int_equal(load_one(&env, "GAIA_LOG", value, &c), 1);
	snprintf(want, sizeof want, "gaia: GAIA_LOG=\"%.64s\" is not one of", value);
	assert_ptr_equal(strstr(c.text, want), c.text);
}

static void test_several_bad_knobs_give_one_line_each_in_table_order(void **state)
{
	struct fake_env fe = { 0 };
	struct gaia_env env;
	struct captured c;
	const char *line;

	/* Set in reverse order: the lines still follow the table. */
	for (int i = GAIA_KNOB_COUNT - 1; i >= 0; i--)
		fake_set(&fe, gaia_env_knobs[i].name,
			 gaia_env_knobs[i].type == GAIA_ENV_STRING ? "\x01" : "bogus");
	fake_set(&fe, "GAIA_UNKNOWN", "1");
	assert_int_equal(load_capture(&env, &fe, &c), GAIA_KNOB_COUNT);
	assert_int_equal(c.lines, GAIA_KNOB_COUNT);
	line = c.text;
	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		char prefix[64];
		const char *nl = strchr(line, '\n');

		assert_non_null(nl);
		snprintf(prefix, sizeof prefix, "gaia: %s=", gaia_env_knobs[i].name);
		assert_memory_equal(line, prefix, strlen(prefix));
		assert_knob_is_default(&env, &gaia_env_knobs[i]);
		line = nl + 1;
	}

	/* A mix: good values stick, bad ones fall back, one line per bad one. */
	fe.n = 0;
	fake_set(&fe, "GAIA_READAHEAD_KB", "2");
	fake_set(&fe, "GAIA_GPU_READAHEAD_KB", "4096");
	fake_set(&fe, "GAIA_LOG", "loud");
	fake_set(&fe, "GAIA_DISABLE", "on");
	assert_int_equal(load_capture(&env, &fe, &c), 2);
	assert_int_equal(c.lines, 2);
	assert_int_equal(env.readahead_kb, 512);
	assert_int_equal(env.gpu_readahead_kb, 4096);
	assert_int_equal(env.log, GAIA_LOG_WARN);
	assert_int_equal(env.disable, 1);
	assert_non_null(strstr(c.text, "GAIA_READAHEAD_KB=\"2\""));
	assert_non_null(strstr(c.text, "GAIA_LOG=\"loud\""));
}

static void test_negative_err_fd_counts_silently_and_errno_survives(void **state)
{
	struct fake_env fe = { 0 };
	struct gaia_env env;

	fake_set(&fe, "GAIA_MIN_MAP_KB", "x");
	fake_set(&fe, "GAIA_BACKING", "y");
	errno = ENOTTY;
	assert_int_equal(gaia_env_load(&env, fake_lookup, &fe, -1), 2);
	assert_int_equal(errno, ENOTTY);
	/* A closed descriptor is not an error the loader can report: it counts. */
	assert_int_equal(gaia_env_load(&env, fake_lookup, &fe, 1000), 2);
	assert_int_equal(errno, ENOTTY);
}

/* --- the README table ------------------------------------------------------------ */

static void test_table_lists_every_knob_once(void **state)
{
	static char buf[16384];
	int n = gaia_env_format_table(buf, sizeof buf);

	assert_true(n > 0);
	assert_int_equal((size_t)n, strlen(buf));
	assert_non_null(strstr(buf, "| Variable | Type | Default | Accepted | Meaning |\n"));
	assert_non_null(
		strstr(buf, "| `GAIA_READAHEAD_KB` | int | `512` | 4..1048576 | "));
	assert_non_null(strstr(buf, "| `GAIA_BACKING` | enum | `auto` | `auto`, `vmm`, `managed`, `pinned`, `paged`, `host` | "));
	assert_non_null(strstr(buf, "| `GAIA_PATHS` | string | (empty) | "));
	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		char cell[64];
		const char *hit;

		snprintf(cell, sizeof cell, "| `%s` |", gaia_env_knobs[i].name);
		hit = strstr(buf, cell);
		assert_non_null(hit);
		assert_null(strstr(hit + 1, cell));
	}
	/* rows = header + separator + knobs, framed by blank lines */
	int lines = 0;
	for (int i = 0; i < n; i++)
		lines += buf[i] == '\n';
	assert_int_equal(lines, 1 + 2 + GAIA_KNOB_COUNT + 1);
}

static void test_table_reports_nospc_when_it_does_not_fit(void **state)
{
	static char buf[16384], small[16384];
	int n = gaia_env_format_table(buf, sizeof buf);

	assert_true(n > 0);
	assert_int_equal(gaia_env_format_table(small, (size_t)n + 1), n);
	assert_string_equal(small, buf);
	assert_int_equal(gaia_env_format_table(small, (size_t)n), -ENOSPC);
	assert_int_equal(gaia_env_format_table(small, 10), -ENOSPC);
	assert_int_equal(gaia_env_format_table(small, 0), -ENOSPC);
}

static void test_readme_section_needs_both_markers_in_order(void **state)
{
	static const char ok[] = "x\n<!-- knobs:begin -->\nT\nU\n<!-- knobs:end -->\ny\n";
	static const char empty[] = "<!-- knobs:begin -->\n<!-- knobs:end -->\n";
	static const char reversed[] = "<!-- knobs:end -->\n<!-- knobs:begin -->\n";
	static const char indented[] = " <!-- knobs:begin -->\n<!-- knobs:end -->\n";
	static const char no_end[] = "<!-- knobs:begin -->\nT\n";
	size_t b, e;

	assert_int_equal(gaia_env_readme_section(ok, strlen(ok), &b, &e), 0);
	assert_int_equal(e - b, 4);
	assert_memory_equal(ok + b, "T\nU\n", 4);
	assert_int_equal(gaia_env_readme_section(empty, strlen(empty), &b, &e), 0);
	assert_int_equal(e, b);
	assert_int_equal(gaia_env_readme_section(reversed, strlen(reversed), &b, &e), -ENOENT);
	assert_int_equal(gaia_env_readme_section(indented, strlen(indented), &b, &e), -ENOENT);
	assert_int_equal(gaia_env_readme_section(no_end, strlen(no_end), &b, &e), -ENOENT);
	assert_int_equal(gaia_env_readme_section("", 0, &b, &e), -ENOENT);
}

static void test_readme_knob_table_is_the_generated_one(void **state)
{
	static char table[16384], readme[1 << 20];
	const char *dir = getenv("GAIA_SOURCE_DIR");
	char path[4096];
	FILE *f;
	size_t len, b, e;
	int n;

	snprintf(path, sizeof path, "%s/README.md", dir && *dir ? dir : ".");
	f = fopen(path, "rb");
	if (!f)
		fail_msg("cannot open %s (set GAIA_SOURCE_DIR to the source tree)", path);
	len = fread(readme, 1, sizeof readme, f);
	fclose(f);
	assert_true(len < sizeof readme);
	n = gaia_env_format_table(table, sizeof table);
	assert_true(n > 0);
	if (gaia_env_readme_section(readme, len, &b, &e) != 0)
		fail_msg("%s: no %s ... %s section", path, GAIA_ENV_README_BEGIN, GAIA_ENV_README_END);
	if (e - b != (size_t)n || memcmp(readme + b, table, (size_t)n) != 0)
		fail_msg("%s: the knob table is stale; run build/tools/gaia-envdoc --write README.md\n"
			 "README has:\n%.*s\ngenerated:\n%s",
			 path, (int)(e - b), readme + b, table);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_unset_variables_take_their_defaults_silently),
		cmocka_unit_test(test_null_lookup_reads_the_process_environment),
		cmocka_unit_test(test_every_default_is_an_accepted_value),
		cmocka_unit_test(test_ints_accept_decimal_in_range_with_surrounding_space),
		cmocka_unit_test(test_bools_accept_every_spelling_in_any_case),
		cmocka_unit_test(test_enums_accept_their_words_in_any_case),
		cmocka_unit_test(test_strings_point_into_the_environment),
		cmocka_unit_test(test_every_knob_rejects_garbage_with_one_line),
		cmocka_unit_test(test_bad_value_message_reads_as_documented),
		cmocka_unit_test(test_bad_value_is_quoted_escaped_and_truncated),
		cmocka_unit_test(test_several_bad_knobs_give_one_line_each_in_table_order),
		cmocka_unit_test(test_negative_err_fd_counts_silently_and_errno_survives),
		cmocka_unit_test(test_table_lists_every_knob_once),
		cmocka_unit_test(test_table_reports_nospc_when_it_does_not_fit),
		cmocka_unit_test(test_readme_section_needs_both_markers_in_order),
		cmocka_unit_test(test_readme_knob_table_is_the_generated_one),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
