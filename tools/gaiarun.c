/* gaiarun: run a program under libgaia.so, with GAIA's knobs given as
 * options instead of GAIA_* variables (DESIGN §4).
 *
 *   gaiarun [OPTIONS] -- PROGRAM [ARGS...]
 *
 * Each knob option sets one GAIA_* variable and is validated against that
 * knob's descriptor in gaia_env_knobs[] (include/gaia_env.h), so a bad value
 * stops here with a message instead of being replaced by the default in the
 * preloaded library. libgaia.so is put first in LD_PRELOAD (existing entries
 * are kept) and PROGRAM is execvp()ed; --dry-run prints the changes instead.
 *
 * Exit status: that of PROGRAM; 0 for --help and --dry-run; 2 for a usage
 * error or a bad option value; 126 when PROGRAM cannot be executed
 * (EACCES); 127 when libgaia.so is not found or PROGRAM cannot be run.
 */
#include "gaia_env.h"

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define EXIT_USAGE 2
#define EXIT_CANNOT_EXECUTE 126
#define EXIT_NOT_FOUND 127

/* How an option's text becomes its variable's value. */
enum value_kind {
	VALUE_SIZE_KB, /* SIZE in bytes or K..GiB, converted to KiB, in [min, max] */
	VALUE_WORD,    /* one of the enum knob's words, any case */
	VALUE_STRING,  /* verbatim, accepted by the knob's check() */
	VALUE_FLAG,    /* no argument: the variable is set to `bare` */
};

/* One option that sets one knob. An option with an optional argument takes
 * `bare` as its value when given without one (--stats = GAIA_STATS=1). */
struct knob_option {
	const char *name;
	int has_arg;
	enum gaia_env_knob_id knob;
	enum value_kind kind;
	const char *arg_name;
	const char *bare;
};

static const struct knob_option knob_options[] = {
	{ "readahead", required_argument, GAIA_KNOB_READAHEAD_KB, VALUE_SIZE_KB, "SIZE", NULL },
	{ "gpu-readahead", required_argument, GAIA_KNOB_GPU_READAHEAD_KB, VALUE_SIZE_KB, "SIZE",
	  NULL },
	{ "stats", optional_argument, GAIA_KNOB_STATS, VALUE_STRING, "PATH", "1" },
	{ "log", required_argument, GAIA_KNOB_LOG, VALUE_WORD, "LEVEL", NULL },
	{ "paths", required_argument, GAIA_KNOB_PATHS, VALUE_STRING, "GLOBS", NULL },
	{ "backing", required_argument, GAIA_KNOB_BACKING, VALUE_WORD, "MODE", NULL },
	{ "disable", no_argument, GAIA_KNOB_DISABLE, VALUE_FLAG, NULL, "1" },
};
#define N_KNOB_OPTIONS (sizeof knob_options / sizeof *knob_options)

/* getopt_long values: knob options are OPT_KNOB + their index. */
enum { OPT_KNOB = 256, OPT_LIB = 512, OPT_DRY_RUN, OPT_HELP = 'h' };

#define SYNOPSIS                                                                         \
	"usage: gaiarun [--readahead=SIZE] [--gpu-readahead=SIZE] [--stats[=PATH]]\n"    \
	"               [--log=LEVEL] [--paths=GLOBS] [--backing=auto|vmm|managed]\n"   \
	"               [--disable] [--lib=PATH] [--dry-run] [--help]\n"                \
	"               -- PROGRAM [ARGS...]\n"

/* A KiB count as the shortest exact SIZE: 4 -> "4K", 1048576 -> "1G". */
static void format_kib(char *buf, size_t size, long long kib)
{
	if (kib != 0 && kib % (1024 * 1024) == 0)
		snprintf(buf, size, "%lldG", kib / (1024 * 1024));
	else if (kib != 0 && kib % 1024 == 0)
		snprintf(buf, size, "%lldM", kib / 1024);
	else
		snprintf(buf, size, "%lldK", kib);
}

/* "4K..1G (GAIA_READAHEAD_KB 4..1048576 KiB)": the range in both units. */
static void format_size_range(char *buf, size_t size, const struct gaia_env_knob *k)
{
	char lo[32], hi[32];

	format_kib(lo, sizeof lo, k->min);
	format_kib(hi, sizeof hi, k->max);
	snprintf(buf, size, "%s..%s (%s %s KiB)", lo, hi, k->name, k->accepted);
}

#define HELP_LEFT 23  /* column where an option's description starts */
#define HELP_WIDTH 79

/* Prints "  LEFT  text" with text wrapped at spaces to HELP_WIDTH columns,
 * continuation lines indented to HELP_LEFT. */
static void print_wrapped(const char *left, const char *text)
{
	int col = printf("  %-*s", HELP_LEFT - 3, left);

	while (*text) {
		size_t word = strcspn(text, " ");

		if (col > HELP_LEFT && col + 1 + (int)word > HELP_WIDTH)
			col = printf("\n%*s", HELP_LEFT, "") - 1;
		else if (col > HELP_LEFT - 1)
			col += printf(" ");
		else
			col += printf("%*s", HELP_LEFT - col, "");
		col += printf("%.*s", (int)word, text);
		text += word;
		while (*text == ' ')
			text++;
	}
	putchar('\n');
}

static void print_help(void)
{
	char left[64], range[128], text[1024];

	fputs(SYNOPSIS, stdout);
	fputs("\nRuns PROGRAM with libgaia.so first in LD_PRELOAD and the GAIA_* variables\n"
	      "the options below set; variables already in the environment are kept unless\n"
	      "an option sets them.\n\nKnobs:\n",
	      stdout);
	for (size_t i = 0; i < N_KNOB_OPTIONS; i++) {
		const struct knob_option *o = &knob_options[i];
		const struct gaia_env_knob *k = &gaia_env_knobs[o->knob];
		int len;

		if (o->has_arg == no_argument)
			snprintf(left, sizeof left, "--%s", o->name);
		else if (o->has_arg == optional_argument)
			snprintf(left, sizeof left, "--%s[=%s]", o->name, o->arg_name);
		else
			snprintf(left, sizeof left, "--%s=%s", o->name, o->arg_name);
		len = snprintf(text, sizeof text, "sets %s: %s.", k->name, k->doc);
		if (len < 0 || (size_t)len >= sizeof text)
			len = (int)strlen(text);
		switch (o->kind) {
		case VALUE_SIZE_KB:
			format_size_range(range, sizeof range, k);
			snprintf(text + len, sizeof text - (size_t)len,
				 " %s is bytes, or a number with K, KiB, M, MiB, G or GiB; "
				 "accepted %s.",
				 o->arg_name, range);
			break;
		case VALUE_WORD:
			snprintf(text + len, sizeof text - (size_t)len, " %s is one of %s.",
				 o->arg_name, k->accepted);
			break;
		case VALUE_STRING:
			if (o->bare)
				snprintf(text + len, sizeof text - (size_t)len,
					 " Without %s: %s=%s. %s: %s.", o->arg_name, k->name,
					 o->bare, o->arg_name, k->accepted);
			else
				snprintf(text + len, sizeof text - (size_t)len, " %s: %s.",
					 o->arg_name, k->accepted);
			break;
		case VALUE_FLAG:
			snprintf(text + len, sizeof text - (size_t)len, " (%s=%s)", k->name,
				 o->bare);
			break;
		}
		print_wrapped(left, text);
	}
	fputs("\nLauncher:\n"
	      "  --lib=PATH           the libgaia.so to preload. Without it: $GAIA_LIB, then\n"
	      "                       <dir of gaiarun>/../libgaia.so (a build tree), then\n"
	      "                       <dir of gaiarun>/../lib/libgaia.so (an installed tree).\n"
	      "                       A --lib or $GAIA_LIB that does not exist is an error.\n"
	      "  --dry-run            print the variables set (NAME=value, one a line) and the\n"
	      "                       command, shell-quoted, instead of running it.\n"
	      "  -h, --help           print this help and exit.\n"
	      "  --                   ends the options; PROGRAM is looked up in $PATH.\n"
	      "\nExit status: PROGRAM's; 2 usage error or bad value; 126 PROGRAM not\n"
	      "executable; 127 libgaia.so not found or PROGRAM cannot be run.\n",
	      stdout);
}

static void usage_error(void)
{
	fputs(SYNOPSIS "Try 'gaiarun --help' for more information.\n", stderr);
	exit(EXIT_USAGE);
}

/* SIZE: decimal digits, then nothing (bytes) or one of K, KiB, M, MiB, G,
 * GiB in any case. Stores the size in KiB. Returns 0, -EINVAL (syntax),
 * -ERANGE (does not fit in 64 bits of bytes) or -EDOM (not whole KiB). */
static int parse_size_kib(const char *s, unsigned long long *kib)
{
	static const struct {
		const char *suffix;
		unsigned long long bytes;
	} units[] = {
		{ "", 1ULL },           { "K", 1ULL << 10 }, { "KiB", 1ULL << 10 },
		{ "M", 1ULL << 20 },    { "MiB", 1ULL << 20 }, { "G", 1ULL << 30 },
		{ "GiB", 1ULL << 30 },
	};
	unsigned long long n = 0;
	const char *p = s;

	if (*p < '0' || *p > '9')
		return -EINVAL;
	for (; *p >= '0' && *p <= '9'; p++) {
		unsigned d = (unsigned)(*p - '0');

		if (n > (ULLONG_MAX - d) / 10)
			return -ERANGE;
		n = n * 10 + d;
	}
	for (size_t i = 0; i < sizeof units / sizeof *units; i++) {
		if (strcasecmp(p, units[i].suffix) != 0)
			continue;
		if (n > ULLONG_MAX / units[i].bytes)
			return -ERANGE;
		n *= units[i].bytes;
		if (n % 1024 != 0)
			return -EDOM;
		*kib = n / 1024;
		return 0;
	}
	return -EINVAL;
}

/* The value option o's text gives its variable: validated, normalised
 * (sizes in KiB, words in their canonical case) into buf where needed.
 * Exits with a message naming the option, the value and what is accepted
 * when the value is bad. */
static const char *option_value(const struct knob_option *o, const char *arg, char *buf,
				size_t size)
{
	const struct gaia_env_knob *k = &gaia_env_knobs[o->knob];
	char range[128];
	unsigned long long kib;
	const char *why;
	int rc;

	if (!arg)
		return o->bare;
	switch (o->kind) {
	case VALUE_SIZE_KB:
		format_size_range(range, sizeof range, k);
		rc = parse_size_kib(arg, &kib);
		if (rc == -EINVAL) {
			fprintf(stderr,
				"gaiarun: --%s=%s: not a size (bytes, or a number with K, KiB, "
				"M, MiB, G or GiB); accepted %s\n",
				o->name, arg, range);
			exit(EXIT_USAGE);
		}
		if (rc == -EDOM) {
			fprintf(stderr,
				"gaiarun: --%s=%s: not a whole number of KiB; accepted %s\n",
				o->name, arg, range);
			exit(EXIT_USAGE);
		}
		if (rc == -ERANGE || kib < (unsigned long long)k->min ||
		    kib > (unsigned long long)k->max) {
			fprintf(stderr, "gaiarun: --%s=%s: out of range; accepted %s\n",
				o->name, arg, range);
			exit(EXIT_USAGE);
		}
		snprintf(buf, size, "%llu", kib);
		return buf;
	case VALUE_WORD:
		for (int i = 0; i < k->nwords; i++)
			if (strcasecmp(arg, k->words[i]) == 0)
				return k->words[i];
		fprintf(stderr, "gaiarun: --%s=%s: not one of %s\n", o->name, arg,
			k->accepted);
		exit(EXIT_USAGE);
	case VALUE_STRING:
		why = k->check ? k->check(arg) : NULL;
		if (why) {
			fprintf(stderr, "gaiarun: --%s=%s: %s; accepted %s\n", o->name, arg, why,
				k->accepted);
			exit(EXIT_USAGE);
		}
		return arg;
	case VALUE_FLAG:
		break;
	}
	return o->bare;
}

static int is_regular_file(const char *path)
{
	struct stat st;

	return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* The libgaia.so to preload, as an absolute path in a malloc'd string.
 * An explicit choice (--lib, else $GAIA_LIB) is the only candidate: running
 * with some other library than the one asked for would hide the mistake.
 * Otherwise the build layout (<exe dir>/../libgaia.so) comes before the
 * installed one (<exe dir>/../lib/libgaia.so). Exits 127 naming every path
 * tried when none exists. */
static char *find_library(const char *lib_option)
{
	const char *explicit_lib = lib_option;
	const char *source = "--lib";
	char candidates[2][PATH_MAX + 32];
	const char *tried[2];
	int ntried = 0;
	char *resolved;

	if (!explicit_lib) {
		explicit_lib = getenv("GAIA_LIB");
		source = "GAIA_LIB";
		if (explicit_lib && *explicit_lib == '\0')
			explicit_lib = NULL;
	}
	if (explicit_lib) {
		struct stat st;
		const char *why = NULL;

		if (stat(explicit_lib, &st) != 0)
			why = strerror(errno);
		else if (!S_ISREG(st.st_mode))
			why = "not a regular file";
		if (why) {
			fprintf(stderr, "gaiarun: libgaia.so not found; tried: %s (from %s): %s\n",
				explicit_lib, source, why);
			exit(EXIT_NOT_FOUND);
		}
		tried[ntried++] = explicit_lib;
	} else {
		char exe[PATH_MAX];
		ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
		char *slash;

		if (n < 0) {
			fprintf(stderr,
				"gaiarun: libgaia.so not found: cannot read /proc/self/exe (%s); "
				"give --lib or GAIA_LIB\n",
				strerror(errno));
			exit(EXIT_NOT_FOUND);
		}
		exe[n] = '\0';
		slash = strrchr(exe, '/');
		if (slash)
			*slash = '\0';
		snprintf(candidates[0], sizeof candidates[0], "%s/../libgaia.so", exe);
		snprintf(candidates[1], sizeof candidates[1], "%s/../lib/libgaia.so", exe);
		tried[ntried++] = candidates[0];
		tried[ntried++] = candidates[1];
	}
	for (int i = 0; i < ntried; i++) {
		if (!is_regular_file(tried[i]))
			continue;
		resolved = realpath(tried[i], NULL);
		if (!resolved)
			resolved = strdup(tried[i]);
		if (!resolved) {
			fprintf(stderr, "gaiarun: out of memory\n");
			exit(EXIT_NOT_FOUND);
		}
		/* ld.so splits LD_PRELOAD at ':' and ' ' (ld.so(8)). */
		if (strpbrk(resolved, ": ")) {
			fprintf(stderr,
				"gaiarun: %s: LD_PRELOAD cannot carry a path with ':' or ' '\n",
				resolved);
			exit(EXIT_USAGE);
		}
		return resolved;
	}
	fprintf(stderr, "gaiarun: libgaia.so not found; tried:");
	for (int i = 0; i < ntried; i++)
		fprintf(stderr, " %s", tried[i]);
	fprintf(stderr, " (give --lib=PATH or set GAIA_LIB)\n");
	exit(EXIT_NOT_FOUND);
}

/* Prints s as one shell word: unquoted when it is only safe characters,
 * else in single quotes with each ' written as '\''. */
static void print_shell_word(const char *s)
{
	static const char safe[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
				   "0123456789_@%+=:,./-";

	if (*s != '\0' && s[strspn(s, safe)] == '\0') {
		fputs(s, stdout);
		return;
	}
	putchar('\'');
	for (; *s; s++) {
		if (*s == '\'')
			fputs("'\\''", stdout);
		else
			putchar(*s);
	}
	putchar('\'');
}

static void print_assignment(const char *name, const char *value)
{
	printf("%s=", name);
	print_shell_word(value);
	putchar('\n');
}

int main(int argc, char **argv)
{
	struct option longopts[N_KNOB_OPTIONS + 4];
	const char *values[GAIA_KNOB_COUNT] = { 0 };
	char size_buf[N_KNOB_OPTIONS][32];
	const char *lib_option = NULL;
	int dry_run = 0, dashdash = 0, optarg_index = -1;
	const char *old_preload;
	char *lib, *preload;
	size_t n = 0;
	int c;

	for (size_t i = 0; i < N_KNOB_OPTIONS; i++)
		longopts[n++] = (struct option){ knob_options[i].name, knob_options[i].has_arg,
						 NULL, OPT_KNOB + (int)i };
	longopts[n++] = (struct option){ "lib", required_argument, NULL, OPT_LIB };
	longopts[n++] = (struct option){ "dry-run", no_argument, NULL, OPT_DRY_RUN };
	longopts[n++] = (struct option){ "help", no_argument, NULL, OPT_HELP };
	longopts[n] = (struct option){ 0 };

	/* getopt's own messages are prefixed with argv[0]. */
	argv[0] = (char *)"gaiarun";
	/* '+': stop at the first non-option, so PROGRAM's options stay its own. */
	while ((c = getopt_long(argc, argv, "+h", longopts, NULL)) != -1) {
		/* An argument taken from the next word ("--lib X") is not the "--". */
		if (optarg && optarg == argv[optind - 1])
			optarg_index = optind - 1;
		if (c >= OPT_KNOB && c < OPT_KNOB + (int)N_KNOB_OPTIONS) {
			const struct knob_option *o = &knob_options[c - OPT_KNOB];

			values[o->knob] = option_value(o, optarg, size_buf[c - OPT_KNOB],
						       sizeof size_buf[0]);
		} else if (c == OPT_LIB) {
			lib_option = optarg;
		} else if (c == OPT_DRY_RUN) {
			dry_run = 1;
		} else if (c == OPT_HELP) {
			print_help();
			return 0;
		} else {
			usage_error();
		}
	}
	dashdash = optind > 1 && optind - 1 != optarg_index &&
		   strcmp(argv[optind - 1], "--") == 0;
	if (!dashdash) {
		fprintf(stderr, "gaiarun: missing '--' before the program\n");
		usage_error();
	}
	if (optind >= argc) {
		fprintf(stderr, "gaiarun: missing the program to run after '--'\n");
		usage_error();
	}

	lib = find_library(lib_option);
	old_preload = getenv("LD_PRELOAD");
	if (old_preload && *old_preload) {
		preload = malloc(strlen(lib) + 1 + strlen(old_preload) + 1);
		if (preload)
			sprintf(preload, "%s:%s", lib, old_preload);
	} else {
		preload = strdup(lib);
	}
	if (!preload) {
		fprintf(stderr, "gaiarun: out of memory\n");
		return EXIT_NOT_FOUND;
	}

	for (int k = 0; k < GAIA_KNOB_COUNT; k++) {
		if (!values[k])
			continue;
		if (dry_run) {
			print_assignment(gaia_env_knobs[k].name, values[k]);
		} else if (setenv(gaia_env_knobs[k].name, values[k], 1) != 0) {
			fprintf(stderr, "gaiarun: cannot set %s: %s\n", gaia_env_knobs[k].name,
				strerror(errno));
			return EXIT_NOT_FOUND;
		}
	}
	if (dry_run) {
		print_assignment("LD_PRELOAD", preload);
		for (int i = optind; i < argc; i++) {
			if (i > optind)
				putchar(' ');
			print_shell_word(argv[i]);
		}
		putchar('\n');
		free(preload);
		free(lib);
		return fflush(stdout) == 0 ? 0 : 1;
	}
	if (setenv("LD_PRELOAD", preload, 1) != 0) {
		fprintf(stderr, "gaiarun: cannot set LD_PRELOAD: %s\n", strerror(errno));
		return EXIT_NOT_FOUND;
	}
	free(preload); /* setenv copied it */
	execvp(argv[optind], argv + optind);
	c = errno;
	free(lib);
	fprintf(stderr, "gaiarun: cannot run %s: %s\n", argv[optind], strerror(c));
	return c == EACCES ? EXIT_CANNOT_EXECUTE : EXIT_NOT_FOUND;
}
