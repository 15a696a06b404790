/* gaiarun's option for each environment knob, derived from the knob table
 * (include/gaia_env.h), so that gaiarun's options, its --help and the
 * option list of gaiarun(1) (gaia-envdoc --man-options) name every knob and
 * cannot disagree: a knob added to the table is an option at once.
 *
 * GAIA_NAME becomes --name: lower case, '_' -> '-'. An int knob whose name
 * ends in _KB drops that suffix and takes a SIZE (bytes or K..GiB, stored
 * in KiB: --readahead=1M sets GAIA_READAHEAD_KB=1024); other ints take a
 * decimal N, enums one of their words, strings their text, and a bool is a
 * flag that sets it to 1 (--disable). knob_option_hints[] adds only what the
 * table cannot say: a better name for the argument than the type's, and the
 * value of an option given without its argument (--stats = GAIA_STATS=1).
 *
 * A header of static functions rather than a .c file: each .c file in tools/
 * is a program of its own (CMakeLists.txt), and two of them share this.
 */
#ifndef GAIA_TOOLS_KNOB_OPTION_H
#define GAIA_TOOLS_KNOB_OPTION_H

#include "gaia_env.h"

#include <getopt.h>
#include <stdio.h>
#include <string.h>

/* How an option's text becomes its variable's value. */
enum value_kind {
	VALUE_SIZE_KB, /* SIZE in bytes or K..GiB, converted to KiB, in [min, max] */
	VALUE_INT,     /* a decimal integer in [min, max] */
	VALUE_WORD,    /* one of the enum knob's words, any case */
	VALUE_STRING,  /* verbatim, accepted by the knob's check() */
	VALUE_FLAG,    /* no argument: the variable is set to `bare` */
};

/* One option that sets one knob. An option with an optional argument takes
 * `bare` as its value when given without one. */
struct knob_option {
	char name[64];
	int has_arg; /* getopt_long's no_argument, required_argument, optional_argument */
	enum gaia_env_knob_id knob;
	enum value_kind kind;
	const char *arg_name;
	const char *bare;
};

static const struct knob_option_hint {
	const char *arg_name;
	const char *bare;
} knob_option_hints[GAIA_KNOB_COUNT] = {
	[GAIA_KNOB_PATHS] = { "GLOBS", NULL },
	[GAIA_KNOB_BACKING] = { "MODE", NULL },
	[GAIA_KNOB_DIRTY_TRACKING] = { "MODE", NULL },
	[GAIA_KNOB_RUNNING_KERNELS] = { "MODE", NULL },
	[GAIA_KNOB_RELEASE_MS] = { "MS", NULL },
	[GAIA_KNOB_LOG] = { "LEVEL", NULL },
	[GAIA_KNOB_STATS] = { "PATH", "1" },
};

static inline int knob_name_ends_with(const char *name, const char *suffix)
{
	size_t n = strlen(name), s = strlen(suffix);

	return n > s && strcmp(name + n - s, suffix) == 0;
}

/* Fills *o with the option of knob id. */
static inline void knob_option_of(enum gaia_env_knob_id id, struct knob_option *o)
{
	const struct gaia_env_knob *k = &gaia_env_knobs[id];
	const struct knob_option_hint *h = &knob_option_hints[id];
	const char *var = k->name + strlen("GAIA_");
	size_t len = strlen(var), i;

	o->knob = id;
	o->bare = h->bare;
	o->has_arg = h->bare ? optional_argument : required_argument;
	o->kind = VALUE_STRING;
	o->arg_name = "VALUE";
	switch (k->type) {
	case GAIA_ENV_INT:
		if (knob_name_ends_with(var, "_KB")) {
			o->kind = VALUE_SIZE_KB;
			o->arg_name = "SIZE";
			len -= strlen("_KB");
		} else {
			o->kind = VALUE_INT;
			o->arg_name = "N";
		}
		break;
	case GAIA_ENV_ENUM:
		o->kind = VALUE_WORD;
		o->arg_name = "WORD";
		break;
	case GAIA_ENV_STRING:
		break;
	case GAIA_ENV_BOOL:
		o->kind = VALUE_FLAG;
		o->arg_name = NULL;
		o->bare = "1";
		o->has_arg = no_argument;
		break;
	}
	if (h->arg_name && o->kind != VALUE_FLAG)
		o->arg_name = h->arg_name;
	if (len >= sizeof o->name)
		len = sizeof o->name - 1;
	for (i = 0; i < len; i++)
		o->name[i] = var[i] == '_' ? '-' : (char)(var[i] >= 'A' && var[i] <= 'Z'
							  ? var[i] - 'A' + 'a'
							  : var[i]);
	o->name[len] = '\0';
}

/* The option as a synopsis or help line shows it: "--disable",
 * "--stats[=PATH]", "--readahead=SIZE". */
static inline void knob_option_usage(const struct knob_option *o, char *buf, size_t size)
{
	int n = (int)sizeof o->name - 1;

	if (o->has_arg == no_argument)
		snprintf(buf, size, "--%.*s", n, o->name);
	else if (o->has_arg == optional_argument)
		snprintf(buf, size, "--%.*s[=%s]", n, o->name, o->arg_name);
	else
		snprintf(buf, size, "--%.*s=%s", n, o->name, o->arg_name);
}

/* A KiB count as the shortest exact SIZE: 4 -> "4K", 1048576 -> "1G". */
static inline void format_kib(char *buf, size_t size, long long kib)
{
	if (kib != 0 && kib % (1024 * 1024) == 0)
		snprintf(buf, size, "%lldG", kib / (1024 * 1024));
	else if (kib != 0 && kib % 1024 == 0)
		snprintf(buf, size, "%lldM", kib / 1024);
	else
		snprintf(buf, size, "%lldK", kib);
}

/* "4K..1G (GAIA_READAHEAD_KB 4..1048576 KiB)": the range in both units. */
static inline void format_size_range(char *buf, size_t size, const struct gaia_env_knob *k)
{
	char lo[32], hi[32];

	format_kib(lo, sizeof lo, k->min);
	format_kib(hi, sizeof hi, k->max);
	snprintf(buf, size, "%s..%s (%s %s KiB)", lo, hi, k->name, k->accepted);
}

/* What the option does and accepts, as one paragraph of plain text: the
 * knob's own documentation, then how the argument is read. */
static inline void knob_option_describe(const struct knob_option *o, char *buf, size_t size)
{
	const struct gaia_env_knob *k = &gaia_env_knobs[o->knob];
	char range[128];
	int len = snprintf(buf, size, "sets %s: %s.", k->name, k->doc);

	if (len < 0 || (size_t)len >= size)
		return;
	buf += len;
	size -= (size_t)len;
	switch (o->kind) {
	case VALUE_SIZE_KB:
		format_size_range(range, sizeof range, k);
		snprintf(buf, size,
			 " %s is bytes, or a number with K, KiB, M, MiB, G or GiB; accepted %s.",
			 o->arg_name, range);
		break;
	case VALUE_INT:
		snprintf(buf, size, " %s is a decimal integer; accepted %s.", o->arg_name,
			 k->accepted);
		break;
	case VALUE_WORD:
		snprintf(buf, size, " %s is one of %s.", o->arg_name, k->accepted);
		break;
	case VALUE_STRING:
		if (o->bare)
			snprintf(buf, size, " Without %s: %s=%s. %s: %s.", o->arg_name, k->name,
				 o->bare, o->arg_name, k->accepted);
		else
			snprintf(buf, size, " %s: %s.", o->arg_name, k->accepted);
		break;
	case VALUE_FLAG:
		snprintf(buf, size, " (%s=%s)", k->name, o->bare);
		break;
	}
}

#endif
