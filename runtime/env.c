/* The environment knobs (DESIGN §4): descriptors generated from
 * GAIA_ENV_TABLE, their parser, and the README table made from them.
 *
 * This runs inside the preloaded library, possibly before main and from
 * inside interposed calls, so it never allocates, never touches stdio and
 * leaves errno as it found it (CONVENTIONS "Errors and logging"): messages
 * are formatted into a stack buffer and written with one write(2).
 */
#include "gaia_env.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Longest glob or stats path accepted: PATH_MAX including its NUL. */
#define ENV_PATH_MAX 4096
/* How much of a bad value a message quotes. */
#define ENV_QUOTE_MAX 64

static int is_control(unsigned char c)
{
	return c < 0x20 || c == 0x7f;
}

/* GAIA_PATHS: ':'-separated globs, each optionally prefixed by '!'. An
 * empty element (":a", "a::b", "!") is almost surely a typo, so it is
 * rejected rather than guessed at. */
static const char *check_paths(const char *value)
{
	const char *p = value;

	if (*p == '\0')
		return NULL;
	for (;;) {
		const char *colon = strchr(p, ':');
		size_t n = colon ? (size_t)(colon - p) : strlen(p);
		const char *glob = p;

		if (n > 0 && *glob == '!') {
			glob++;
			n--;
		}
		if (n == 0)
			return "empty glob";
		if (n >= ENV_PATH_MAX)
			return "glob longer than 4095 bytes";
		for (size_t i = 0; i < n; i++)
			if (is_control((unsigned char)glob[i]))
				return "control character";
		if (!colon)
			return NULL;
		p = colon + 1;
	}
}

/* GAIA_STATS: "", "0", "1", or a path the counters are appended to. */
static const char *check_stats(const char *value)
{
	size_t n = strnlen(value, ENV_PATH_MAX);

	if (n >= ENV_PATH_MAX)
		return "path longer than 4095 bytes";
	for (size_t i = 0; i < n; i++)
		if (is_control((unsigned char)value[i]))
			return "control character";
	return NULL;
}

#define IGNORE(...)

/* The words of every enum knob: words_BACKING[] = { "auto", ... }. */
#define WORD_STR(NAME, CONST, word) word,
#define WORDS_ARRAY(NAME, field, DEF, doc)                                               \
	static const char *const words_##NAME[] = { GAIA_ENV_WORDS_##NAME(WORD_STR) };
GAIA_ENV_TABLE(IGNORE, WORDS_ARRAY, IGNORE, IGNORE)

/* Defaults must be acceptable values: checked at compile time. */
#define ASSERT_INT(NAME, field, def_, min_, max_, doc)                                   \
	_Static_assert((min_) <= (def_) && (def_) <= (max_),                              \
		       "GAIA_" #NAME ": default outside [min, max]");
#define ASSERT_BOOL(NAME, field, def_, doc)                                              \
	_Static_assert((def_) == 0 || (def_) == 1, "GAIA_" #NAME ": default not 0 or 1");
GAIA_ENV_TABLE(ASSERT_INT, IGNORE, ASSERT_BOOL, IGNORE)

#define BOOL_ACCEPTED "0/1, yes/no, true/false, on/off"

#define WORD_PIPE(NAME, CONST, word) "|" word
#define KNOB_INT(NAME, field, def_, min_, max_, doc_)                                    \
	[GAIA_KNOB_##NAME] = { .name = "GAIA_" #NAME,                                    \
			       .type = GAIA_ENV_INT,                                     \
			       .type_name = "int",                                       \
			       .offset = offsetof(struct gaia_env, field),               \
			       .min = (min_),                                            \
			       .max = (max_),                                            \
			       .def = (def_),                                            \
			       .def_str = #def_,                                         \
			       .accepted = #min_ ".." #max_,                             \
			       .doc = doc_ },
#define KNOB_ENUM(NAME, field, DEF, doc_)                                                \
	[GAIA_KNOB_##NAME] = { .name = "GAIA_" #NAME,                                    \
			       .type = GAIA_ENV_ENUM,                                    \
			       .type_name = "enum",                                      \
			       .offset = offsetof(struct gaia_env, field),               \
			       .def = GAIA_##NAME##_##DEF,                               \
			       .words = words_##NAME,                                    \
			       .nwords = (int)(sizeof words_##NAME / sizeof *words_##NAME), \
			       .accepted = (GAIA_ENV_WORDS_##NAME(WORD_PIPE)) + 1,       \
			       .doc = doc_ },
#define KNOB_BOOL(NAME, field, def_, doc_)                                               \
	[GAIA_KNOB_##NAME] = { .name = "GAIA_" #NAME,                                    \
			       .type = GAIA_ENV_BOOL,                                    \
			       .type_name = "bool",                                      \
			       .offset = offsetof(struct gaia_env, field),               \
			       .min = 0,                                                 \
			       .max = 1,                                                 \
			       .def = (def_),                                            \
			       .def_str = #def_,                                         \
			       .accepted = BOOL_ACCEPTED,                                \
			       .doc = doc_ },
#define KNOB_STR(NAME, field, def_, accepted_, check_, doc_)                             \
	[GAIA_KNOB_##NAME] = { .name = "GAIA_" #NAME,                                    \
			       .type = GAIA_ENV_STRING,                                  \
			       .type_name = "string",                                    \
			       .offset = offsetof(struct gaia_env, field),               \
			       .def_str = def_,                                          \
			       .accepted = accepted_,                                    \
			       .doc = doc_,                                              \
			       .check = check_ },

const struct gaia_env_knob gaia_env_knobs[GAIA_KNOB_COUNT] = {
	GAIA_ENV_TABLE(KNOB_INT, KNOB_ENUM, KNOB_BOOL, KNOB_STR)
};

/* --- parsing ------------------------------------------------------------- */

/* ASCII only: the C locale's isspace, whatever the process's locale. */
static int is_space(char c)
{
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r';
}

static char ascii_lower(char c)
{
	return c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c;
}

/* Base-10 strtoll syntax, surrounded by optional ASCII whitespace, with
 * the whole string consumed. Returns 0, -EINVAL (syntax) or -ERANGE
 * (does not fit in long long). */
static int parse_ll(const char *s, long long *out)
{
	const char *p = s;
	unsigned long long limit = (unsigned long long)LLONG_MAX, v = 0;
	int neg = 0;

	while (is_space(*p))
		p++;
	if (*p == '+' || *p == '-') {
		neg = *p == '-';
		p++;
	}
	if (neg)
		limit++;
	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (v > (limit - d) / 10)
			return -ERANGE;
		v = v * 10 + d;
	}
	while (is_space(*p))
		p++;
	if (*p != '\0')
		return -EINVAL;
	if (neg && v > 0)
		*out = -(long long)(v - 1) - 1;
	else
		*out = (long long)v;
	return 0;
}

/* Index of the word that s (trimmed of ASCII whitespace) equals ignoring
 * ASCII case, or -1. */
static int match_word(const char *s, const char *const *words, int nwords)
{
	size_t n;

	while (is_space(*s))
		s++;
	n = strlen(s);
	while (n > 0 && is_space(s[n - 1]))
		n--;
	for (int i = 0; i < nwords; i++) {
		size_t j = 0;

		if (strlen(words[i]) != n)
			continue;
		while (j < n && ascii_lower(s[j]) == words[i][j])
			j++;
		if (j == n)
			return i;
	}
	return -1;
}

static const char *const bool_words[] = { "0", "1", "no", "yes", "false", "true", "off", "on" };

/* --- messages -------------------------------------------------------------- */

/* A bounded, never-allocating string builder; `overflow` records that
 * something did not fit. */
struct text {
	char *buf;
	size_t len, cap;
	int overflow;
};

static void put_mem(struct text *t, const char *s, size_t n)
{
	if (n > t->cap - t->len) {
		n = t->cap - t->len;
		t->overflow = 1;
	}
	memcpy(t->buf + t->len, s, n);
	t->len += n;
}

static void put_str(struct text *t, const char *s)
{
	put_mem(t, s, strlen(s));
}

static void put_char(struct text *t, char c)
{
	put_mem(t, &c, 1);
}

/* A value quoted for a log line: at most ENV_QUOTE_MAX bytes of it, then
 * "..." if it was longer; '"' and '\' backslash-escaped, bytes outside
 * printable ASCII as \xHH, so a hostile value cannot forge log lines or
 * drive the terminal. */
static void put_quoted(struct text *t, const char *v)
{
	static const char hex[] = "0123456789abcdef";
	size_t n = strnlen(v, ENV_QUOTE_MAX + 1);

	put_char(t, '"');
	for (size_t i = 0; i < n && i < ENV_QUOTE_MAX; i++) {
		unsigned char c = (unsigned char)v[i];

		if (c == '"' || c == '\\') {
			put_char(t, '\\');
			put_char(t, (char)c);
		} else if (c < 0x20 || c >= 0x7f) {
			char esc[4] = { '\\', 'x', hex[c >> 4], hex[c & 15] };
			put_mem(t, esc, sizeof esc);
		} else {
			put_char(t, (char)c);
		}
	}
	if (n > ENV_QUOTE_MAX)
		put_str(t, "...");
	put_char(t, '"');
}

static void write_all(int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);

		if (w < 0) {
			if (errno == EINTR)
				continue;
			return;
		}
		p += w;
		n -= (size_t)w;
	}
}

const char *gaia_env_default_text(const struct gaia_env_knob *k)
{
	if (k->type == GAIA_ENV_ENUM)
		return k->words[k->def];
	return k->def_str;
}

/* One line per bad value, e.g.
 *   gaia: GAIA_READAHEAD_KB="abc" is not an integer in 4..1048576; using 512
 * why: for strings, the reason their check gave. */
static void report_bad(int fd, const struct gaia_env_knob *k, const char *value, const char *why)
{
	char line[512];
	struct text t = { line, 0, sizeof line - 1, 0 }; /* room for '\n' */

	if (fd < 0)
		return;
	put_str(&t, "gaia: ");
	put_str(&t, k->name);
	put_char(&t, '=');
	put_quoted(&t, value);
	switch (k->type) {
	case GAIA_ENV_INT:
		put_str(&t, " is not an integer in ");
		break;
	case GAIA_ENV_ENUM:
		put_str(&t, " is not one of ");
		break;
	case GAIA_ENV_BOOL:
		put_str(&t, " is not a boolean: ");
		break;
	case GAIA_ENV_STRING:
		put_str(&t, " is rejected (");
		put_str(&t, why);
		put_str(&t, "); expected ");
		break;
	}
	put_str(&t, k->accepted);
	put_str(&t, "; using ");
	if (k->type == GAIA_ENV_STRING)
		put_quoted(&t, k->def_str);
	else
		put_str(&t, gaia_env_default_text(k));
	line[t.len++] = '\n';
	write_all(fd, line, t.len);
}

/* --- loading --------------------------------------------------------------- */

static void set_default(struct gaia_env *out, const struct gaia_env_knob *k)
{
	char *field = (char *)out + k->offset;

	switch (k->type) {
	case GAIA_ENV_INT:
		*(long long *)field = k->def;
		break;
	case GAIA_ENV_ENUM:
	case GAIA_ENV_BOOL:
		*(int *)field = (int)k->def;
		break;
	case GAIA_ENV_STRING:
		*(const char **)field = k->def_str;
		break;
	}
}

void gaia_env_defaults(struct gaia_env *out)
{
	for (int i = 0; i < GAIA_KNOB_COUNT; i++)
		set_default(out, &gaia_env_knobs[i]);
}

/* Parses one set value into its field. Returns NULL when it is good, else
 * the reason (only strings' reasons are shown; the other types' messages
 * say what they accept). */
static const char *parse_value(struct gaia_env *out, const struct gaia_env_knob *k,
			       const char *v)
{
	char *field = (char *)out + k->offset;
	long long n;
	int i;

	switch (k->type) {
	case GAIA_ENV_INT:
		if (parse_ll(v, &n) != 0 || n < k->min || n > k->max)
			return "bad integer";
		*(long long *)field = n;
		return NULL;
	case GAIA_ENV_ENUM:
		if ((i = match_word(v, k->words, k->nwords)) < 0)
			return "bad word";
		*(int *)field = i;
		return NULL;
	case GAIA_ENV_BOOL:
		if ((i = match_word(v, bool_words, (int)(sizeof bool_words / sizeof *bool_words))) < 0)
			return "bad boolean";
		*(int *)field = i % 2;
		return NULL;
	case GAIA_ENV_STRING: {
		const char *why = k->check ? k->check(v) : NULL;

		if (why)
			return why;
		*(const char **)field = v;
		return NULL;
	}
	}
	return "bad knob type";
}

static const char *lookup_getenv(const char *name, void *arg)
{
	return getenv(name);
}

int gaia_env_load(struct gaia_env *out, const char *(*lookup)(const char *name, void *arg),
		  void *arg, int err_fd)
{
	int saved_errno = errno, bad = 0;

	if (!lookup)
		lookup = lookup_getenv;
	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		const struct gaia_env_knob *k = &gaia_env_knobs[i];
		const char *v = lookup(k->name, arg);
		const char *why;

		set_default(out, k);
		if (!v)
			continue;
		why = parse_value(out, k, v);
		if (why) {
			set_default(out, k);
			report_bad(err_fd, k, v, why);
			bad++;
		}
	}
	errno = saved_errno;
	return bad;
}

const char *gaia_env_enum_word(enum gaia_env_knob_id knob, int value)
{
	const struct gaia_env_knob *k;

	if ((int)knob < 0 || knob >= GAIA_KNOB_COUNT)
		return NULL;
	k = &gaia_env_knobs[knob];
	if (k->type != GAIA_ENV_ENUM || value < 0 || value >= k->nwords)
		return NULL;
	return k->words[value];
}

enum gaia_env_stats_dest gaia_env_stats_dest(const struct gaia_env *env)
{
	const char *s = env->stats;

	if (!s || strcmp(s, "") == 0 || strcmp(s, "0") == 0)
		return GAIA_ENV_STATS_OFF;
	if (strcmp(s, "1") == 0)
		return GAIA_ENV_STATS_STDERR;
	return GAIA_ENV_STATS_FILE;
}

/* --- documentation --------------------------------------------------------- */

/* A table cell's text: '|' would end the cell, so it is escaped. */
static void put_cell(struct text *t, const char *s)
{
	for (; *s; s++) {
		if (*s == '|')
			put_char(t, '\\');
		put_char(t, *s);
	}
}

static void put_code(struct text *t, const char *s)
{
	put_char(t, '`');
	put_cell(t, s);
	put_char(t, '`');
}

static void put_accepted_cell(struct text *t, const struct gaia_env_knob *k)
{
	switch (k->type) {
	case GAIA_ENV_INT:
		put_cell(t, k->accepted);
		break;
	case GAIA_ENV_ENUM:
		for (int i = 0; i < k->nwords; i++) {
			if (i > 0)
				put_str(t, ", ");
			put_code(t, k->words[i]);
		}
		break;
	case GAIA_ENV_BOOL:
		put_str(t, "`0`/`1`, `yes`/`no`, `true`/`false`, `on`/`off`");
		break;
	case GAIA_ENV_STRING:
		put_cell(t, k->accepted);
		break;
	}
}

int gaia_env_format_table(char *buf, size_t size)
{
	struct text t = { buf, 0, size > 0 ? size - 1 : 0, size == 0 };

	put_str(&t, "\n| Variable | Type | Default | Accepted | Meaning |\n"
		    "|---|---|---|---|---|\n");
	for (int i = 0; i < GAIA_KNOB_COUNT; i++) {
		const struct gaia_env_knob *k = &gaia_env_knobs[i];
		const char *def = gaia_env_default_text(k);

		put_str(&t, "| ");
		put_code(&t, k->name);
		put_str(&t, " | ");
		put_str(&t, k->type_name);
		put_str(&t, " | ");
		if (*def)
			put_code(&t, def);
		else
			put_str(&t, "(empty)");
		put_str(&t, " | ");
		put_accepted_cell(&t, k);
		put_str(&t, " | ");
		put_cell(&t, k->doc);
		put_str(&t, " |\n");
	}
	put_char(&t, '\n');
	if (t.overflow || t.len > INT_MAX)
		return -ENOSPC;
	buf[t.len] = '\0';
	return (int)t.len;
}

/* Offset of the line after the first line at or past `from` whose text is
 * exactly `marker`, or (size_t)-1. *line_start gets that line's start. */
static size_t find_line(const char *text, size_t len, size_t from, const char *marker,
			size_t *line_start)
{
	size_t mlen = strlen(marker);

	while (from < len) {
		const char *nl = memchr(text + from, '\n', len - from);
		size_t end = nl ? (size_t)(nl - text) : len;

		if (end - from == mlen && memcmp(text + from, marker, mlen) == 0) {
			*line_start = from;
			return nl ? end + 1 : len;
		}
		from = nl ? end + 1 : len;
	}
	return (size_t)-1;
}

int gaia_env_readme_section(const char *text, size_t len, size_t *begin, size_t *end)
{
	size_t start, after_begin, end_line;

	after_begin = find_line(text, len, 0, GAIA_ENV_README_BEGIN, &start);
	if (after_begin == (size_t)-1 || after_begin == len ||
	    text[after_begin - 1] != '\n')
		return -ENOENT;
	if (find_line(text, len, after_begin, GAIA_ENV_README_END, &end_line) == (size_t)-1)
		return -ENOENT;
	*begin = after_begin;
	*end = end_line;
	return 0;
}
